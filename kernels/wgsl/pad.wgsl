// pad: constant, edge, reflect and wrap padding (and cropping) of 1- or 2-word
// elements, one invocation per output element. Tile is wrap padding.
// Params after operands (x, y): n, words, rank, mode (0 constant, 1 edge,
// 2 reflect, 3 wrap), value lo, value hi, out dims[8], in dims[8], pad begins[8] (i32).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let mode = P[5];
    var rem = t;
    var xo = 0u;
    var stride = 1u;
    var inside = true;
    for (var d = 0u; d < P[4]; d++) {
        let a = P[4] - 1u - d;
        let n = i32(P[16u + a]);
        var c = i32(rem % P[8u + a]) - pi(24u + a);
        rem = rem / P[8u + a];
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
    let w = P[3];
    let yb = t * w;
    if (!inside) {
        wr(P[1], yb, P[6]);
        if (w == 2u) {
            wr(P[1], yb + 1u, P[7]);
        }
        return;
    }
    let xb = xo * w;
    wr(P[1], yb, rd(P[0], xb));
    if (w == 2u) {
        wr(P[1], yb + 1u, rd(P[0], xb + 1u));
    }
}
