// matmul_narrow: the GEMM of matmul.wgsl for outputs of few tiles (a product of
// a few hundred rows, as a transformer's at short sequences): the same 64x64
// output tile and K steps of 16, computed by 128 invocations of an 8x4 block each
// (8 vec4 accumulators), so a multiprocessor holding the few workgroups such a
// product makes has twice the warps to hide its loads' latency behind. Per step
// an invocation reads 3 vec4 from workgroup memory for every 32 fma. Follows
// matmul_tile.wgsl (the loads, staging and epilogue, and the parameters).

const INV: u32 = 128u;

// Stores rows m..m+3, columns n..n+3 of an invocation's block from the
// accumulators c0..c3 (row i being component i of each), the addends of the
// four rows loaded before the first store.
fn put_rows(e: Epi, m: u32, n: u32, c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>) {
    let x0 = addend(e, m, n);
    let x1 = addend(e, m + 1u, n);
    let x2 = addend(e, m + 2u, n);
    let x3 = addend(e, m + 3u, n);
    put(e, m, n, vec4<f32>(c0.x, c1.x, c2.x, c3.x) + x0);
    put(e, m + 1u, n, vec4<f32>(c0.y, c1.y, c2.y, c3.y) + x1);
    put(e, m + 2u, n, vec4<f32>(c0.z, c1.z, c2.z, c3.z) + x2);
    put(e, m + 3u, n, vec4<f32>(c0.w, c1.w, c2.w, c3.w) + x3);
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = tile_of(wg_linear(wid, nwg));
    if (!t.inside) {
        return;
    }
    let M = p.m; let N = p.n; let K = p.k;
    let ao = t.a; let bo = t.b; let co = t.c; let biaso = t.bias;
    let a_sm = p.a_sm; let a_sk = p.a_sk; let b_sk = p.b_sk; let b_sn = p.b_sn;
    let a_along_k = A_ALONG_K;
    let b_along_k = B_ALONG_K;
    let m0 = t.m0;
    let n0 = t.n0;
    let tx = li % 16u;
    let ty = li / 16u;

    // Rows ty*4.. (lo) and 32+ty*4.. (hi) of output column tx*4+j.
    var lo0 = vec4<f32>(0.0); var lo1 = vec4<f32>(0.0); var lo2 = vec4<f32>(0.0); var lo3 = vec4<f32>(0.0);
    var hi0 = vec4<f32>(0.0); var hi1 = vec4<f32>(0.0); var hi2 = vec4<f32>(0.0); var hi3 = vec4<f32>(0.0);

    var a0 = load(p.a, ao, a_along_k, li, 0u, m0, M, 0u, K, a_sm, a_sk);
    var a1 = load(p.a, ao, a_along_k, li, 1u, m0, M, 0u, K, a_sm, a_sk);
    var b0 = load(p.b, bo, b_along_k, li, 0u, n0, N, 0u, K, b_sn, b_sk);
    var b1 = load(p.b, bo, b_along_k, li, 1u, n0, N, 0u, K, b_sn, b_sk);
    for (var k0 = 0u; k0 < K; k0 += 16u) {
        stage(false, a_along_k, li, 0u, a0);
        stage(false, a_along_k, li, 1u, a1);
        stage(true, b_along_k, li, 0u, b0);
        stage(true, b_along_k, li, 1u, b1);
        workgroupBarrier();
        let k1 = k0 + 16u;
        if (k1 < K) {
            a0 = load(p.a, ao, a_along_k, li, 0u, m0, M, k1, K, a_sm, a_sk);
            a1 = load(p.a, ao, a_along_k, li, 1u, m0, M, k1, K, a_sm, a_sk);
            b0 = load(p.b, bo, b_along_k, li, 0u, n0, N, k1, K, b_sn, b_sk);
            b1 = load(p.b, bo, b_along_k, li, 1u, n0, N, k1, K, b_sn, b_sk);
        }
        for (var kk = 0u; kk < 16u; kk++) {
            let al = As[kk * 16u + ty];
            let ah = As[kk * 16u + 8u + ty];
            let b = Bs[kk * 16u + tx];
            lo0 = fma(al, vec4<f32>(b.x), lo0); hi0 = fma(ah, vec4<f32>(b.x), hi0);
            lo1 = fma(al, vec4<f32>(b.y), lo1); hi1 = fma(ah, vec4<f32>(b.y), hi1);
            lo2 = fma(al, vec4<f32>(b.z), lo2); hi2 = fma(ah, vec4<f32>(b.z), hi2);
            lo3 = fma(al, vec4<f32>(b.w), lo3); hi3 = fma(ah, vec4<f32>(b.w), hi3);
        }
        workgroupBarrier();
    }

    let e = Epi(M, N, p.c_sm, p.c_sn, p.bias_sm, p.bias_sn, p.flags, p.c, p.bias, co, biaso);
    let nl = n0 + tx * 4u;
    let ml = m0 + ty * 4u;
    put_rows(e, ml, nl, lo0, lo1, lo2, lo3);
    put_rows(e, ml + 32u, nl, hi0, hi1, hi2, hi3);
}
