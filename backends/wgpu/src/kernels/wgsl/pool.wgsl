// pool: 2-D max and average pooling (1-D as H = 1), one invocation per output.
// Params after operands (x, y): n, H, W, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL,
// EH, EW (input extents including end pads), kind (0 max, 1 avg, 2 lp), count_include_pad,
// p (f32 bits, lp only).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let H = i32(P[3]); let W = i32(P[4]); let OH = P[5]; let OW = P[6];
    let KH = i32(P[7]); let KW = i32(P[8]);
    let ox = t % OW;
    let oy = (t / OW) % OH;
    let plane = t / (OW * OH);
    let h0 = i32(oy * P[9]) - i32(P[13]);
    let w0 = i32(ox * P[10]) - i32(P[14]);
    let DH = i32(P[11]); let DW = i32(P[12]);
    let EH = i32(P[15]); let EW = i32(P[16]);
    let base = plane * u32(H * W);
    let is_max = P[17] == 0u;
    var best = -inf_f32();
    var sum = 0.0;
    var count = 0u;
    var padded = 0u;
    for (var a = 0; a < KH; a++) {
        let iy = h0 + a * DH;
        for (var b = 0; b < KW; b++) {
            let ix = w0 + b * DW;
            if (iy >= -i32(P[13]) && iy < EH && ix >= -i32(P[14]) && ix < EW) {
                padded += 1u;
            }
            if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                let v = ldf(P[0], base + u32(iy * W + ix));
                if (v > best || (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) {
                    best = v;
                }
                if (P[17] == 2u) {
                    sum += pow(abs(v), pf(19u));
                } else {
                    sum += v;
                }
                count += 1u;
            }
        }
    }
    var r = best;
    if (P[17] == 2u) {
        r = pow(sum, 1.0 / pf(19u));
    } else if (!is_max) {
        var div = count;
        if (P[18] != 0u) {
            div = padded;
        }
        r = select(sum / f32(div), 0.0, div == 0u);
    }
    stf(P[1], t, r);
}
