// matmul_sum: the sum of a split-K GEMM's partial products, part[s, m, n]
// (dense, s < splits), into C with bias and activation: one invocation per output
// element. Params: SplitKSumParams (rlx-gpu kernels/matmul.rs) with the
// handles part, c, bias: m, n, splits, c_sm, c_sn, bias_sm, bias_sn, flags
// (bit 0: add bias, bit 1: apply `epilogue`, the activation the pipeline
// prepends, as in matmul.wgsl).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    let mn = p.m * p.n;
    if (t >= mn) {
        return;
    }
    let m = t / p.n;
    let n = t % p.n;
    // Four partial products a step, loaded before they are added (a load
    // whose value the next instruction needs holds up the loads behind it);
    // splits are powers of two.
    let splits = p.splits;
    let part = p.part;
    var v = 0.0;
    var s = 0u;
    for (; s + 4u <= splits; s += 4u) {
        let a = ldf(part, s * mn + t);
        let b = ldf(part, (s + 1u) * mn + t);
        let c = ldf(part, (s + 2u) * mn + t);
        let d = ldf(part, (s + 3u) * mn + t);
        v += (a + b) + (c + d);
    }
    for (; s < splits; s++) {
        v += ldf(part, s * mn + t);
    }
    if ((p.flags & 1u) != 0u) {
        v += ldf(p.bias, m * p.bias_sm + n * p.bias_sn);
    }
    if ((p.flags & 2u) != 0u) {
        v = epilogue(v);
    }
    stf(p.c, m * p.c_sm + n * p.c_sn, v);
}
