// matmul: batched, strided C = act(A * B + bias), for outputs of many tiles.
// A workgroup of 64 invocations computes a 64x64 output tile, each invocation an
// 8x8 block of it held in registers (16 vec4 accumulators), K in steps of 16
// through workgroup memory. Per step an invocation reads 4 vec4 of A and B from
// workgroup memory for every 64 fma; the next step's operands are loaded from the
// buffer into registers while this one computes. Follows matmul_tile.wgsl (the
// loads, staging and epilogue, and the parameters).

const INV: u32 = 64u;

// Stores rows m..m+3 of an invocation's block: columns n.. from the
// accumulators c0..c3 and n+32.. from c4..c7, row i being component i of
// each. The addends of all four rows are loaded before the first store.
fn put_rows(e: Epi, m: u32, n: u32, c0: vec4<f32>, c1: vec4<f32>, c2: vec4<f32>, c3: vec4<f32>, c4: vec4<f32>, c5: vec4<f32>, c6: vec4<f32>, c7: vec4<f32>) {
    let nh = n + 32u;
    let x0 = addend(e, m, n);
    let x1 = addend(e, m, nh);
    let x2 = addend(e, m + 1u, n);
    let x3 = addend(e, m + 1u, nh);
    let x4 = addend(e, m + 2u, n);
    let x5 = addend(e, m + 2u, nh);
    let x6 = addend(e, m + 3u, n);
    let x7 = addend(e, m + 3u, nh);
    put(e, m, n, vec4<f32>(c0.x, c1.x, c2.x, c3.x) + x0);
    put(e, m, nh, vec4<f32>(c4.x, c5.x, c6.x, c7.x) + x1);
    put(e, m + 1u, n, vec4<f32>(c0.y, c1.y, c2.y, c3.y) + x2);
    put(e, m + 1u, nh, vec4<f32>(c4.y, c5.y, c6.y, c7.y) + x3);
    put(e, m + 2u, n, vec4<f32>(c0.z, c1.z, c2.z, c3.z) + x4);
    put(e, m + 2u, nh, vec4<f32>(c4.z, c5.z, c6.z, c7.z) + x5);
    put(e, m + 3u, n, vec4<f32>(c0.w, c1.w, c2.w, c3.w) + x6);
    put(e, m + 3u, nh, vec4<f32>(c4.w, c5.w, c6.w, c7.w) + x7);
}

@compute @workgroup_size(64)
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
    let tx = li % 8u;
    let ty = li / 8u;

    // Rows ty*4.. (lo) and 32+ty*4.. (hi) of output column j of this
    // invocation's block (columns tx*4.. then 32+tx*4..).
    var lo0 = vec4<f32>(0.0); var lo1 = vec4<f32>(0.0); var lo2 = vec4<f32>(0.0); var lo3 = vec4<f32>(0.0);
    var lo4 = vec4<f32>(0.0); var lo5 = vec4<f32>(0.0); var lo6 = vec4<f32>(0.0); var lo7 = vec4<f32>(0.0);
    var hi0 = vec4<f32>(0.0); var hi1 = vec4<f32>(0.0); var hi2 = vec4<f32>(0.0); var hi3 = vec4<f32>(0.0);
    var hi4 = vec4<f32>(0.0); var hi5 = vec4<f32>(0.0); var hi6 = vec4<f32>(0.0); var hi7 = vec4<f32>(0.0);

    var a0 = load(p.a, ao, a_along_k, li, 0u, m0, M, 0u, K, a_sm, a_sk);
    var a1 = load(p.a, ao, a_along_k, li, 1u, m0, M, 0u, K, a_sm, a_sk);
    var a2 = load(p.a, ao, a_along_k, li, 2u, m0, M, 0u, K, a_sm, a_sk);
    var a3 = load(p.a, ao, a_along_k, li, 3u, m0, M, 0u, K, a_sm, a_sk);
    var b0 = load(p.b, bo, b_along_k, li, 0u, n0, N, 0u, K, b_sn, b_sk);
    var b1 = load(p.b, bo, b_along_k, li, 1u, n0, N, 0u, K, b_sn, b_sk);
    var b2 = load(p.b, bo, b_along_k, li, 2u, n0, N, 0u, K, b_sn, b_sk);
    var b3 = load(p.b, bo, b_along_k, li, 3u, n0, N, 0u, K, b_sn, b_sk);
    for (var k0 = 0u; k0 < K; k0 += 16u) {
        stage(false, a_along_k, li, 0u, a0);
        stage(false, a_along_k, li, 1u, a1);
        stage(false, a_along_k, li, 2u, a2);
        stage(false, a_along_k, li, 3u, a3);
        stage(true, b_along_k, li, 0u, b0);
        stage(true, b_along_k, li, 1u, b1);
        stage(true, b_along_k, li, 2u, b2);
        stage(true, b_along_k, li, 3u, b3);
        workgroupBarrier();
        let k1 = k0 + 16u;
        if (k1 < K) {
            a0 = load(p.a, ao, a_along_k, li, 0u, m0, M, k1, K, a_sm, a_sk);
            a1 = load(p.a, ao, a_along_k, li, 1u, m0, M, k1, K, a_sm, a_sk);
            a2 = load(p.a, ao, a_along_k, li, 2u, m0, M, k1, K, a_sm, a_sk);
            a3 = load(p.a, ao, a_along_k, li, 3u, m0, M, k1, K, a_sm, a_sk);
            b0 = load(p.b, bo, b_along_k, li, 0u, n0, N, k1, K, b_sn, b_sk);
            b1 = load(p.b, bo, b_along_k, li, 1u, n0, N, k1, K, b_sn, b_sk);
            b2 = load(p.b, bo, b_along_k, li, 2u, n0, N, k1, K, b_sn, b_sk);
            b3 = load(p.b, bo, b_along_k, li, 3u, n0, N, k1, K, b_sn, b_sk);
        }
        for (var kk = 0u; kk < 16u; kk++) {
            let al = As[kk * 16u + ty];
            let ah = As[kk * 16u + 8u + ty];
            let bl = Bs[kk * 16u + tx];
            let bh = Bs[kk * 16u + 8u + tx];
            lo0 = fma(al, vec4<f32>(bl.x), lo0); hi0 = fma(ah, vec4<f32>(bl.x), hi0);
            lo1 = fma(al, vec4<f32>(bl.y), lo1); hi1 = fma(ah, vec4<f32>(bl.y), hi1);
            lo2 = fma(al, vec4<f32>(bl.z), lo2); hi2 = fma(ah, vec4<f32>(bl.z), hi2);
            lo3 = fma(al, vec4<f32>(bl.w), lo3); hi3 = fma(ah, vec4<f32>(bl.w), hi3);
            lo4 = fma(al, vec4<f32>(bh.x), lo4); hi4 = fma(ah, vec4<f32>(bh.x), hi4);
            lo5 = fma(al, vec4<f32>(bh.y), lo5); hi5 = fma(ah, vec4<f32>(bh.y), hi5);
            lo6 = fma(al, vec4<f32>(bh.z), lo6); hi6 = fma(ah, vec4<f32>(bh.z), hi6);
            lo7 = fma(al, vec4<f32>(bh.w), lo7); hi7 = fma(ah, vec4<f32>(bh.w), hi7);
        }
        workgroupBarrier();
    }

    // Row i of the block is component i of every column's accumulator.
    let e = Epi(M, N, p.c_sm, p.c_sn, p.bias_sm, p.bias_sn, p.flags, p.c, p.bias, co, biaso);
    let nl = n0 + tx * 4u;
    let ml = m0 + ty * 4u;
    put_rows(e, ml, nl, lo0, lo1, lo2, lo3, lo4, lo5, lo6, lo7);
    put_rows(e, ml + 32u, nl, hi0, hi1, hi2, hi3, hi4, hi5, hi6, hi7);
}
