// gather_nd: y[t, e] = data[batch(t), idx[t, 0..k], e], one invocation per
// output element of WORDS words (a constant the plan prepends: 1 or 2).
// Negative indices count from the end; a tuple out of range gives a zero
// element. Params: GatherNdParams (rlx-gpu kernels/gather.rs) with the
// handles data, idx, y: n, slice, k, idx_wide, batch_tuples, batch_elems,
// dims[8], strides[8].

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let i = wg_linear(wid, nwg) * 64u + li;
    if (i >= p.n) {
        return;
    }
    let e = i % p.slice;
    let t = i / p.slice;
    let base = nd_base(t);
    let yb = i * WORDS;
    for (var w = 0u; w < WORDS; w++) {
        var v = 0u;
        if (base >= 0) {
            v = rd(p.data, (u32(base) + e) * WORDS + w);
        }
        wr(p.y, yb + w, v);
    }
}
