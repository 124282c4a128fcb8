// pad: constant, edge, reflect and wrap padding (and cropping) of 1- or 2-word
// elements, one invocation per output element. Tile is wrap padding.
// Params: PadParams (rlx-gpu kernels/movement.rs) with the handles x, y: n, words,
// rank, mode (0 constant, 1 edge, 2 reflect, 3 wrap), value (low and high word),
// out_dims, in_dims, pad_begin (i32).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let mode = p.mode;
    var rem = t;
    var xo = 0u;
    var stride = 1u;
    var inside = true;
    for (var d = 0u; d < p.rank; d++) {
        let a = p.rank - 1u - d;
        let n = i32(p.in_dims[a]);
        var c = i32(rem % p.out_dims[a]) - p.pad_begin[a];
        rem = rem / p.out_dims[a];
        if (c < 0 || c >= n) {
            if (mode == 0u || n == 0) {
                inside = false;
            } else if (mode == 1u) {
                c = clamp(c, 0, n - 1);
            } else if (mode == 2u) {
                let period = max(2 * (n - 1), 1);
                c = ((c % period) + period) % period;
                if (c >= n) {
                    c = period - c;
                }
            } else {
                c = ((c % n) + n) % n;
            }
        }
        xo += u32(max(c, 0)) * stride;
        stride *= u32(max(n, 1));
    }
    let w = p.words;
    let yb = t * w;
    if (!inside) {
        wr(p.y, yb, p.value[0]);
        if (w == 2u) {
            wr(p.y, yb + 1u, p.value[1]);
        }
        return;
    }
    let xb = xo * w;
    wr(p.y, yb, rd(p.x, xb));
    if (w == 2u) {
        wr(p.y, yb + 1u, rd(p.x, xb + 1u));
    }
}
