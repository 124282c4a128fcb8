// copy: strided copy of elements of 1 or 2 words (4- or 8-byte dtypes), one
// invocation per output element; transpose, slice, concat, split, expand and
// depth/space rearrangements are all this kernel with different strides.
// Params after operands (x, y): n, words, rank, x_start (elements), y_start,
// dims[8], x strides[8] (i32), y strides[8].

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    var rem = t;
    var xo = i32(P[5]);
    var yo = P[6];
    for (var d = 0u; d < P[4]; d++) {
        let a = P[4] - 1u - d;
        let c = rem % P[7u + a];
        rem = rem / P[7u + a];
        xo += i32(c) * pi(15u + a);
        yo += c * P[23u + a];
    }
    let w = P[3];
    let xb = u32(xo) * w;
    let yb = yo * w;
    wr(P[1], yb, rd(P[0], xb));
    if (w == 2u) {
        wr(P[1], yb + 1u, rd(P[0], xb + 1u));
    }
}
