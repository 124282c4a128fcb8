// copy: strided copy of elements of 1 or 2 words (4- or 8-byte dtypes), one
// invocation per output element; transpose, slice, concat, split, expand and
// depth/space rearrangements are all this kernel with different strides.
// Params: CopyParams (rlx-gpu kernels/movement.rs) with the handles x, y: n, size
// (bytes per element: 1, 2, 4 or 8), rank, x_start (elements), y_start, dims,
// x_strides (i32), y_strides. Elements of 1 or 2 bytes need a dense output from
// y_start 0: each invocation packs one word.

fn cp_src(e: u32) -> u32 {
    var rem = e;
    var xo = i32(p.x_start);
    for (var d = 0u; d < p.rank; d++) {
        let a = p.rank - 1u - d;
        let c = rem % p.dims[a];
        rem = rem / p.dims[a];
        xo += i32(c) * p.x_strides[a];
    }
    return u32(xo);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    let size = p.size;
    if (size < 4u) {
        let per = 4u / size;
        let bits = size * 8u;
        let mask = (1u << bits) - 1u;
        if (t * per >= p.n) {
            return;
        }
        var w = 0u;
        for (var j = 0u; j < per; j++) {
            let e = t * per + j;
            if (e < p.n) {
                let o = (p.x & 0x3fffffffu) + cp_src(e) * size;
                let v = (rd(p.x & 0xc0000000u, o >> 2u) >> ((o & 3u) * 8u)) & mask;
                w |= v << (j * bits);
            }
        }
        wr(p.y, t, w);
        return;
    }
    if (t >= p.n) {
        return;
    }
    var rem = t;
    var yo = p.y_start;
    for (var d = 0u; d < p.rank; d++) {
        let a = p.rank - 1u - d;
        let c = rem % p.dims[a];
        rem = rem / p.dims[a];
        yo += c * p.y_strides[a];
    }
    let w = size / 4u;
    let xb = cp_src(t) * w;
    let yb = yo * w;
    wr(p.y, yb, rd(p.x, xb));
    if (w == 2u) {
        wr(p.y, yb + 1u, rd(p.x, xb + 1u));
    }
}
