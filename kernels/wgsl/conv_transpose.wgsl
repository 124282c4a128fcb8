// conv_transpose: the gather form, one invocation per output element: y[n, m,
// o] = bias[m] + sum over the group's input channels c and kernel taps k of
// x[n, c, i] * w[c, m % mg, k], where o = i * stride + k * dilation - pad
// (taps whose i is not a whole in-range index contribute nothing). Up to 3
// spatial dims (missing ones are size 1). f32.
//
// Params after the handles (y, x, w, bias; bias repeats y when absent): total,
// c, m, groups, has bias, then per spatial dim d (3 each): input size, output
// size, kernel size, stride, dilation, begin pad (i32 bits).

fn ct_dim(d: u32, f: u32) -> u32 {
    return P[9u + d * 6u + f];
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let e = wg_linear(wid, nwg) * 64u + li;
    if (e >= P[4]) {
        return;
    }
    let c = P[5];
    let m = P[6];
    let groups = P[7];
    let cg = c / groups;
    let mg = m / groups;
    // Output coordinates (n, m, o0, o1, o2).
    var rem = e;
    var o: array<u32, 3>;
    for (var d = 0u; d < 3u; d++) {
        let dd = 2u - d;
        let size = ct_dim(dd, 1u);
        o[dd] = rem % size;
        rem = rem / size;
    }
    let mo = rem % m;
    let n = rem / m;
    let grp = mo / mg;
    let mi = mo % mg;
    let sin = ct_dim(0u, 0u) * ct_dim(1u, 0u) * ct_dim(2u, 0u);
    let ks = ct_dim(0u, 2u) * ct_dim(1u, 2u) * ct_dim(2u, 2u);
    var acc = 0.0;
    if (P[8] != 0u) {
        acc = ldf(P[3], mo);
    }
    for (var kf = 0u; kf < ks; kf++) {
        // Kernel tap (k0, k1, k2) and the input position it reads, if any.
        var kr = kf;
        var at = 0u;
        var inside = true;
        for (var d = 0u; d < 3u; d++) {
            let dd = 2u - d;
            let ksz = ct_dim(dd, 2u);
            let k = kr % ksz;
            kr = kr / ksz;
            let p = i32(o[dd]) + i32(ct_dim(dd, 5u)) - i32(k * ct_dim(dd, 4u));
            let s = i32(ct_dim(dd, 3u));
            if (p < 0 || p % s != 0 || p / s >= i32(ct_dim(dd, 0u))) {
                inside = false;
            }
            var stride_in = 1u;
            for (var q = dd + 1u; q < 3u; q++) {
                stride_in *= ct_dim(q, 0u);
            }
            at += u32(max(p, 0) / s) * stride_in;
        }
        if (!inside) {
            continue;
        }
        for (var ci = 0u; ci < cg; ci++) {
            let cc = grp * cg + ci;
            let xv = ldf(P[1], (n * c + cc) * sin + at);
            let wv = ldf(P[2], (cc * mg + mi) * ks + kf);
            acc += xv * wv;
        }
    }
    stf(P[0], e, acc);
}
