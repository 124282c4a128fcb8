// resize: one axis of a separable resampling, f32. out[o, y, j] = sum over the
// K taps of output position y of w * x[o, idx, j]; a first tap index of
// 0xffffffff marks a position outside the crop box (extrapolation value).
// Params after operands (x, y): n, n_in, n_out, inner, K, fill (f32 bits),
// then the tap table: for each y, K pairs (index, weight as f32 bits).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let inner = P[5];
    let n_out = P[4];
    let k = P[6];
    let j = t % inner;
    let r = t / inner;
    let y = r % n_out;
    let o = r / n_out;
    let base = o * P[3] * inner + j;
    let tab = 8u + y * k * 2u;
    if (P[tab] == 0xffffffffu) {
        stf(P[1], t, pf(7u));
        return;
    }
    var s = 0.0;
    for (var q = 0u; q < k; q++) {
        let w = pf(tab + 2u * q + 1u);
        if (w != 0.0) {
            s += w * ldf(P[0], base + P[tab + 2u * q] * inner);
        }
    }
    stf(P[1], t, s);
}
