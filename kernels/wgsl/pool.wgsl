// pool: 3-D max, average and lp pooling (1-D and 2-D run with unit leading axes),
// one invocation per output. Params: PoolParams (rlx-gpu kernels/pool.rs) with
// the handles x, y: per axis (depth, height, width) input dims, output dims,
// kernel, strides, dilations, begin pads and padded extents (input + end pad);
// kind (0 max, 1 avg, 2 lp), count_include_pad, lp (the norm of lp pooling).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let kind = p.kind;
    var rem = t;
    var o: array<u32, 3>;
    for (var d = 0u; d < 3u; d++) {
        let a = 2u - d;
        o[a] = rem % p.out_dims[a];
        rem = rem / p.out_dims[a];
    }
    let plane = rem;
    let size = p.in_dims[0u] * p.in_dims[1u] * p.in_dims[2u];
    var best = -inf_f32();
    var sum = 0.0;
    var count = 0u;
    var padded = 0u;
    let kd = i32(p.kernel[0u]);
    let kh = i32(p.kernel[1u]);
    let kw = i32(p.kernel[2u]);
    for (var a = 0; a < kd; a++) {
        for (var b = 0; b < kh; b++) {
            for (var c = 0; c < kw; c++) {
                let k = array<i32, 3>(a, b, c);
                var inside = true;
                var in_pad = true;
                var off = 0u;
                for (var d = 0u; d < 3u; d++) {
                    let i = i32(o[d] * p.strides[d]) + k[d] * i32(p.dilations[d]) - i32(p.pad_begin[d]);
                    let n = i32(p.in_dims[d]);
                    if (i < 0 || i >= n) {
                        inside = false;
                    }
                    if (i < -i32(p.pad_begin[d]) || i >= i32(p.padded[d])) {
                        in_pad = false;
                    }
                    off = off * u32(n) + u32(clamp(i, 0, max(n - 1, 0)));
                }
                if (in_pad) {
                    padded += 1u;
                }
                if (inside) {
                    let v = ldf(p.x, plane * size + off);
                    if (v > best || (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) {
                        best = v;
                    }
                    if (kind == 2u) {
                        sum += pow(abs(v), p.lp);
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
        r = pow(sum, 1.0 / p.lp);
    } else if (kind == 1u) {
        var div = count;
        if (p.count_include_pad != 0u) {
            div = padded;
        }
        r = select(sum / f32(div), 0.0, div == 0u);
    }
    stf(p.y, t, r);
}
