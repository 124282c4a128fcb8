// matmul: batched, strided C = act(A * B + bias), 32x32 output tiles per
// workgroup of 64 invocations (4x4 each), K in steps of 16 through workgroup memory.
// Params `p`: rlx-gpu `MatmulParams` (sizes m, n, k, element strides, flags bit 0:
// add bias, bit 1: relu, bit 2: accumulate into C; tiles, right-aligned batch dims
// with per-operand batch strides) after the operand handles a, b, c, bias.

var<workgroup> As: array<f32, 512>;
var<workgroup> Bs: array<f32, 512>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let wg = wg_linear(wid, nwg);
    let M = p.m; let N = p.n; let K = p.k;
    let tiles_m = p.tiles_m; let tiles_n = p.tiles_n; let batches = p.batches;
    let tn = wg % tiles_n;
    let rest = wg / tiles_n;
    let tm = rest % tiles_m;
    let bi = rest / tiles_m;
    if (bi >= batches) {
        return;
    }
    var ao = 0u;
    var bo = 0u;
    var co = 0u;
    var biaso = 0u;
    var r = bi;
    for (var d = 0u; d < 4u; d++) {
        let a = 3u - d;
        let c = r % p.batch[a];
        r = r / p.batch[a];
        ao += c * p.a_sb[a];
        bo += c * p.b_sb[a];
        co += c * p.c_sb[a];
        biaso += c * p.bias_sb[a];
    }
    let a_sm = p.a_sm; let a_sk = p.a_sk; let b_sk = p.b_sk; let b_sn = p.b_sn;
    let tx = li % 8u;
    let ty = li / 8u;
    let m0 = tm * 32u;
    let n0 = tn * 32u;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        acc[i] = 0.0;
    }
    // Neighbouring invocations load neighbouring addresses: along k when
    // an operand's k stride is 1 (a row-major A, a transposed B), else
    // along its rows or columns (coalesced either way).
    let a_along_k = a_sk == 1u && a_sm != 1u;
    let b_along_k = b_sk == 1u && b_sn != 1u;
    for (var k0 = 0u; k0 < K; k0 += 16u) {
        for (var i = 0u; i < 8u; i++) {
            let idx = li + 64u * i;
            var kk = idx / 32u;
            var x = idx % 32u;
            if (a_along_k) {
                kk = idx % 16u;
                x = idx / 16u;
            }
            var k = k0 + kk;
            var av = 0.0;
            if (m0 + x < M && k < K) {
                av = ldf(p.a, ao + (m0 + x) * a_sm + k * a_sk);
            }
            As[kk * 32u + x] = av;
            kk = idx / 32u;
            x = idx % 32u;
            if (b_along_k) {
                kk = idx % 16u;
                x = idx / 16u;
            }
            k = k0 + kk;
            var bv = 0.0;
            if (n0 + x < N && k < K) {
                bv = ldf(p.b, bo + k * b_sk + (n0 + x) * b_sn);
            }
            Bs[kk * 32u + x] = bv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {
            let a4 = vec4<f32>(As[kk * 32u + ty * 4u], As[kk * 32u + ty * 4u + 1u], As[kk * 32u + ty * 4u + 2u], As[kk * 32u + ty * 4u + 3u]);
            let b4 = vec4<f32>(Bs[kk * 32u + tx * 4u], Bs[kk * 32u + tx * 4u + 1u], Bs[kk * 32u + tx * 4u + 2u], Bs[kk * 32u + tx * 4u + 3u]);
            for (var i = 0u; i < 4u; i++) {
                acc[i * 4u] += a4[i] * b4.x;
                acc[i * 4u + 1u] += a4[i] * b4.y;
                acc[i * 4u + 2u] += a4[i] * b4.z;
                acc[i * 4u + 3u] += a4[i] * b4.w;
            }
        }
        workgroupBarrier();
    }
    let flags = p.flags;
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + ty * 4u + i;
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + tx * 4u + j;
            if (m < M && n < N) {
                var v = acc[i * 4u + j];
                let ci = co + m * p.c_sm + n * p.c_sn;
                if ((flags & 4u) != 0u) {
                    v += ldf(p.c, ci);
                }
                if ((flags & 1u) != 0u) {
                    v += ldf(p.bias, biaso + m * p.bias_sm + n * p.bias_sn);
                }
                if ((flags & 2u) != 0u) {
                    v = max(v, 0.0);
                }
                stf(p.c, ci, v);
            }
        }
    }
}
