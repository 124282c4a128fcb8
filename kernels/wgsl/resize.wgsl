// resize: one axis of a separable resampling, f32. out[o, y, j] = sum over the
// k taps of output position y of w * x[o, idx, j]; a first tap index of
// 0xffffffff marks a position outside the crop box (extrapolation value).
// Params: ResizeParams (rlx-gpu kernels/resize.rs, built per launch) with the
// handles x, y: n, n_in, n_out, inner, k, fill (one f32), then the tap table:
// index and weight, k per output position.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let inner = p.inner;
    let n_out = p.n_out;
    let k = p.k;
    let j = t % inner;
    let r = t / inner;
    let y = r % n_out;
    let o = r / n_out;
    let base = o * p.n_in * inner + j;
    let tab = y * k;
    if (p.index[tab] == 0xffffffffu) {
        stf(p.y, t, p.fill[0]);
        return;
    }
    var s = 0.0;
    for (var q = 0u; q < k; q++) {
        let w = p.weight[tab + q];
        if (w != 0.0) {
            s += w * ldf(p.x, base + p.index[tab + q] * inner);
        }
    }
    stf(p.y, t, s);
}
