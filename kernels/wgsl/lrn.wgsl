// lrn: local response normalization across channels, one invocation per element.
// Params: LrnParams (rlx-gpu kernels/pool.rs) with the handles x, y: n, channels,
// spatial, lo, hi (the channel window around the centre), alpha (already divided
// by the window size), beta, bias.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let C = p.channels; let S = p.spatial;
    let s = t % S;
    let ch = (t / S) % C;
    let b = t / (S * C);
    let c0 = select(0u, ch - p.lo, ch >= p.lo);
    let c1 = min(ch + p.hi, C - 1u);
    var sq = 0.0;
    for (var k = c0; k <= c1; k++) {
        let v = ldf(p.x, (b * C + k) * S + s);
        sq += v * v;
    }
    let x = ldf(p.x, t);
    stf(p.y, t, x / pow(p.bias + p.alpha * sq, p.beta));
}
