// copy: strided copy of elements of 1 or 2 words (4- or 8-byte dtypes), one
// invocation per output element; transpose, slice, concat, split, expand and
// depth/space rearrangements are all this kernel with different strides.
// Params after operands (x, y): n, size (bytes per element: 1, 2, 4 or 8), rank,
// x_start (elements), y_start, dims[8], x strides[8] (i32), y strides[8]. Elements of
// 1 or 2 bytes need a dense output from y_start 0: each invocation packs one word.

fn cp_src(e: u32) -> u32 {
    var rem = e;
    var xo = i32(P[5]);
    for (var d = 0u; d < P[4]; d++) {
        let a = P[4] - 1u - d;
        let c = rem % P[7u + a];
        rem = rem / P[7u + a];
        xo += i32(c) * pi(15u + a);
    }
    return u32(xo);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    let size = P[3];
    if (size < 4u) {
        let per = 4u / size;
        let bits = size * 8u;
        let mask = (1u << bits) - 1u;
        if (t * per >= P[2]) {
            return;
        }
        var w = 0u;
        for (var j = 0u; j < per; j++) {
            let e = t * per + j;
            if (e < P[2]) {
                let o = (P[0] & 0x3fffffffu) + cp_src(e) * size;
                let v = (rd(P[0] & 0xc0000000u, o >> 2u) >> ((o & 3u) * 8u)) & mask;
                w |= v << (j * bits);
            }
        }
        wr(P[1], t, w);
        return;
    }
    if (t >= P[2]) {
        return;
    }
    var rem = t;
    var yo = P[6];
    for (var d = 0u; d < P[4]; d++) {
        let a = P[4] - 1u - d;
        let c = rem % P[7u + a];
        rem = rem / P[7u + a];
        yo += c * P[23u + a];
    }
    let w = size / 4u;
    let xb = cp_src(t) * w;
    let yb = yo * w;
    wr(P[1], yb, rd(P[0], xb));
    if (w == 2u) {
        wr(P[1], yb + 1u, rd(P[0], xb + 1u));
    }
}
