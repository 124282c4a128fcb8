// pool: 3-D max, average and lp pooling (1-D and 2-D run with unit leading axes),
// one invocation per output. Params after operands (x, y): n, then per axis
// (depth, height, width) in groups of three: input dims, output dims, kernel,
// strides, dilations, begin pads, padded extents (input + end pad); then kind
// (0 max, 1 avg, 2 lp), count_include_pad, p (f32 bits, lp only).

fn pl(group: u32, axis: u32) -> u32 {
    return P[3u + group * 3u + axis];
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let kind = P[24];
    var rem = t;
    var o: array<u32, 3>;
    for (var d = 0u; d < 3u; d++) {
        let a = 2u - d;
        o[a] = rem % pl(1u, a);
        rem = rem / pl(1u, a);
    }
    let plane = rem;
    let size = pl(0u, 0u) * pl(0u, 1u) * pl(0u, 2u);
    var best = -inf_f32();
    var sum = 0.0;
    var count = 0u;
    var padded = 0u;
    let kd = i32(pl(2u, 0u));
    let kh = i32(pl(2u, 1u));
    let kw = i32(pl(2u, 2u));
    for (var a = 0; a < kd; a++) {
        for (var b = 0; b < kh; b++) {
            for (var c = 0; c < kw; c++) {
                let k = array<i32, 3>(a, b, c);
                var inside = true;
                var in_pad = true;
                var off = 0u;
                for (var d = 0u; d < 3u; d++) {
                    let i = i32(o[d] * pl(3u, d)) + k[d] * i32(pl(4u, d)) - i32(pl(5u, d));
                    let n = i32(pl(0u, d));
                    if (i < 0 || i >= n) {
                        inside = false;
                    }
                    if (i < -i32(pl(5u, d)) || i >= i32(pl(6u, d))) {
                        in_pad = false;
                    }
                    off = off * u32(n) + u32(clamp(i, 0, max(n - 1, 0)));
                }
                if (in_pad) {
                    padded += 1u;
                }
                if (inside) {
                    let v = ldf(P[0], plane * size + off);
                    if (v > best || (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) {
                        best = v;
                    }
                    if (kind == 2u) {
                        sum += pow(abs(v), pf(26u));
                    } else {
                        sum += v;
                    }
                    count += 1u;
                }
            }
        }
    }
    var r = best;
    if (kind == 2u) {
        r = pow(sum, 1.0 / pf(26u));
    } else if (kind == 1u) {
        var div = count;
        if (P[25] != 0u) {
            div = padded;
        }
        r = select(sum / f32(div), 0.0, div == 0u);
    }
    stf(P[1], t, r);
}
