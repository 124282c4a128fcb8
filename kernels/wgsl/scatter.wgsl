// scatter: writes updates into y (already a copy of data). Duplicate indices
// apply in order: each invocation owns the writes that can collide with each
// other and loops over them sequentially. Out-of-range indices (after adding
// the axis size to negative ones) are skipped.
// Params: ScatterParams (rlx-gpu kernels/scatter.rs) with the handles idx, upd, y:
// mode (0 elements, 1 nd), words (1 or 2), reduction (0 none, 1 add, 2 mul,
// 3 max, 4 min; f32 only), idx_wide, items; for mode 0: rank, axis, axis_len
// (the data's), dims and strides of the updates, y_strides; for mode 1: slice,
// tuples, k, dims and strides of the data.

fn sc_put(ui: u32, yi: u32) {
    let w = p.words;
    if (p.reduction == 0u) {
        for (var q = 0u; q < w; q++) {
            wr(p.y, yi * w + q, rd(p.upd, ui * w + q));
        }
        return;
    }
    let a = ldf(p.y, yi);
    let b = ldf(p.upd, ui);
    var v = b;
    switch (p.reduction) {
        case 1u: { v = a + b; }
        case 2u: { v = a * b; }
        case 3u: { v = max(a, b); }
        default: { v = min(a, b); }
    }
    stf(p.y, yi, v);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.items) {
        return;
    }
    let wide = p.idx_wide;
    if (p.mode == 0u) {
        let rank = p.rank;
        let ax = p.axis;
        let len = i32(p.axis_len);
        // Coordinates of line t over the update dims with the axis dim removed.
        var rem = t;
        var uo = 0u;
        var yo = 0u;
        for (var d = 0u; d < rank; d++) {
            let a = rank - 1u - d;
            if (a == ax) {
                continue;
            }
            let c = rem % p.dims[a];
            rem = rem / p.dims[a];
            uo += c * p.strides[a];
            yo += c * p.y_strides[a];
        }
        let n = p.dims[ax];
        for (var j = 0u; j < n; j++) {
            let ui = uo + j * p.strides[ax];
            var k = ldidx(p.idx, ui, wide);
            if (k < 0) {
                k += len;
            }
            if (k >= 0 && k < len) {
                sc_put(ui, yo + u32(k) * p.y_strides[ax]);
            }
        }
        return;
    }
    let slice = p.slice;
    let kd = p.k;
    for (var m = 0u; m < p.tuples; m++) {
        var off = 0u;
        var ok = true;
        for (var q = 0u; q < kd; q++) {
            var c = ldidx(p.idx, m * kd + q, wide);
            let len = i32(p.dims[q]);
            if (c < 0) {
                c += len;
            }
            if (c < 0 || c >= len) {
                ok = false;
            }
            off += u32(max(c, 0)) * p.strides[q];
        }
        if (ok) {
            sc_put(m * slice + t, off + t);
        }
    }
}
