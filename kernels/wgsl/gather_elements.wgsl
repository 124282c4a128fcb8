// gather_elements: out[c] = data[c with c[axis] = idx[c]] for 1- or 2-word
// elements; negative indices count from the end, out-of-range ones write zeros.
// Params after operands (data, idx, y): n, words, rank, axis, idx_wide, axis_len,
// out dims[8], data strides[8].

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[3]) {
        return;
    }
    let w = P[4];
    let len = i32(P[8]);
    var k = ldidx(P[1], t, P[7]);
    if (k < 0) {
        k += len;
    }
    let ok = k >= 0 && k < len;
    var rem = t;
    var xo = 0u;
    for (var d = 0u; d < P[5]; d++) {
        let a = P[5] - 1u - d;
        var c = rem % P[9u + a];
        rem = rem / P[9u + a];
        if (a == P[6]) {
            c = u32(max(k, 0));
        }
        xo += c * P[17u + a];
    }
    for (var q = 0u; q < w; q++) {
        var v = 0u;
        if (ok) {
            v = rd(P[0], xo * w + q);
        }
        wr(P[2], t * w + q, v);
    }
}
