// conv_transpose: the gather form, one invocation per output element: y[n, m,
// o] = bias[m] + sum over the group's input channels c and kernel taps k of
// x[n, c, i] * w[c, m % mg, k], where o = i * stride + k * dilation - pad
// (taps whose i is not a whole in-range index contribute nothing). Up to 3
// spatial dims (missing ones are size 1). f32.
//
// Params `p`: rlx-gpu `ConvTransposeParams` (total, c, m, groups, has_bias, then
// per spatial dim input, output and kernel sizes, stride, dilation and begin pad
// (i32), right-aligned into 3) after the operand handles y, x, w, bias (bias
// repeats y when absent).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let e = wg_linear(wid, nwg) * 64u + li;
    if (e >= p.total) {
        return;
    }
    let c = p.c;
    let m = p.m;
    let groups = p.groups;
    let cg = c / groups;
    let mg = m / groups;
    // Output coordinates (n, m, o0, o1, o2).
    var rem = e;
    var o: array<u32, 3>;
    for (var d = 0u; d < 3u; d++) {
        let dd = 2u - d;
        let size = p.output[dd];
        o[dd] = rem % size;
        rem = rem / size;
    }
    let mo = rem % m;
    let n = rem / m;
    let grp = mo / mg;
    let mi = mo % mg;
    let sin = p.input[0u] * p.input[1u] * p.input[2u];
    let ks = p.kernel[0u] * p.kernel[1u] * p.kernel[2u];
    var acc = 0.0;
    if (p.has_bias != 0u) {
        acc = ldf(p.bias, mo);
    }
    for (var kf = 0u; kf < ks; kf++) {
        // Kernel tap (k0, k1, k2) and the input position it reads, if any.
        var kr = kf;
        var at = 0u;
        var inside = true;
        for (var d = 0u; d < 3u; d++) {
            let dd = 2u - d;
            let ksz = p.kernel[dd];
            let k = kr % ksz;
            kr = kr / ksz;
            let at_in = i32(o[dd]) + p.pad[dd] - i32(k * p.dilation[dd]);
            let s = i32(p.stride[dd]);
            if (at_in < 0 || at_in % s != 0 || at_in / s >= i32(p.input[dd])) {
                inside = false;
            }
            var stride_in = 1u;
            for (var q = dd + 1u; q < 3u; q++) {
                stride_in *= p.input[q];
            }
            at += u32(max(at_in, 0) / s) * stride_in;
        }
        if (!inside) {
            continue;
        }
        for (var ci = 0u; ci < cg; ci++) {
            let cc = grp * cg + ci;
            let xv = ldf(p.x, (n * c + cc) * sin + at);
            let wv = ldf(p.w, (cc * mg + mi) * ks + kf);
            acc += xv * wv;
        }
    }
    stf(p.y, e, acc);
}
