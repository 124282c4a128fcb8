// gather_elements: out[c] = data[c with c[axis] = idx[c]] for 1- or 2-word
// elements; negative indices count from the end, out-of-range ones write zeros.
// Params: GatherElementsParams (rlx-gpu kernels/indexing.rs) with the handles
// data, idx, y: n, words, rank, axis, idx_wide, axis_len, out_dims, data_strides.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let w = p.words;
    let len = i32(p.axis_len);
    var k = ldidx(p.idx, t, p.idx_wide);
    if (k < 0) {
        k += len;
    }
    let ok = k >= 0 && k < len;
    var rem = t;
    var xo = 0u;
    for (var d = 0u; d < p.rank; d++) {
        let a = p.rank - 1u - d;
        var c = rem % p.out_dims[a];
        rem = rem / p.out_dims[a];
        if (a == p.axis) {
            c = u32(max(k, 0));
        }
        xo += c * p.data_strides[a];
    }
    for (var q = 0u; q < w; q++) {
        var v = 0u;
        if (ok) {
            v = rd(p.data, xo * w + q);
        }
        wr(p.y, t * w + q, v);
    }
}
