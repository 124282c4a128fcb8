// scatter: writes updates into y (already a copy of data). Duplicate indices
// apply in order: each invocation owns the writes that can collide with each
// other and loops over them sequentially. Out-of-range indices (after adding
// the axis size to negative ones) are skipped.
// Params after operands (idx, upd, y): mode (0 elements, 1 nd), words (1 or 2),
// reduction (0 none, 1 add, 2 mul, 3 max, 4 min; f32 only), idx_wide, items,
// then for mode 0: rank, axis, data axis size, upd dims[8], upd strides[8],
// y strides[8]; for mode 1: slice, tuples, k, data dims[8], data strides[8].

fn sc_put(ui: u32, yi: u32) {
    let w = P[4];
    if (P[5] == 0u) {
        for (var q = 0u; q < w; q++) {
            wr(P[2], yi * w + q, rd(P[1], ui * w + q));
        }
        return;
    }
    let a = ldf(P[2], yi);
    let b = ldf(P[1], ui);
    var v = b;
    switch (P[5]) {
        case 1u: { v = a + b; }
        case 2u: { v = a * b; }
        case 3u: { v = max(a, b); }
        default: { v = min(a, b); }
    }
    stf(P[2], yi, v);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[7]) {
        return;
    }
    let wide = P[6];
    if (P[3] == 0u) {
        let rank = P[8];
        let ax = P[9];
        let len = i32(P[10]);
        // Coordinates of line t over the update dims with the axis dim removed.
        var rem = t;
        var uo = 0u;
        var yo = 0u;
        for (var d = 0u; d < rank; d++) {
            let a = rank - 1u - d;
            if (a == ax) {
                continue;
            }
            let c = rem % P[11u + a];
            rem = rem / P[11u + a];
            uo += c * P[19u + a];
            yo += c * P[27u + a];
        }
        let n = P[11u + ax];
        for (var j = 0u; j < n; j++) {
            let ui = uo + j * P[19u + ax];
            var k = ldidx(P[0], ui, wide);
            if (k < 0) {
                k += len;
            }
            if (k >= 0 && k < len) {
                sc_put(ui, yo + u32(k) * P[27u + ax]);
            }
        }
        return;
    }
    let slice = P[8];
    let kd = P[10];
    for (var m = 0u; m < P[9]; m++) {
        var off = 0u;
        var ok = true;
        for (var q = 0u; q < kd; q++) {
            var c = ldidx(P[0], m * kd + q, wide);
            let len = i32(P[11u + q]);
            if (c < 0) {
                c += len;
            }
            if (c < 0 || c >= len) {
                ok = false;
            }
            off += u32(max(c, 0)) * P[19u + q];
        }
        if (ok) {
            sc_put(m * slice + t, off + t);
        }
    }
}
