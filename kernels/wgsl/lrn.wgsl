// lrn: local response normalization across channels, one invocation per element.
// Params after operands (x, y): n, C, spatial, lo, hi, alpha / size, beta, bias (f32 bits).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let C = P[3]; let S = P[4];
    let s = t % S;
    let ch = (t / S) % C;
    let b = t / (S * C);
    let c0 = select(0u, ch - P[5], ch >= P[5]);
    let c1 = min(ch + P[6], C - 1u);
    var sq = 0.0;
    for (var k = c0; k <= c1; k++) {
        let v = ldf(P[0], (b * C + k) * S + s);
        sq += v * v;
    }
    let x = ldf(P[0], t);
    stf(P[1], t, x / pow(pf(9u) + pf(7u) * sq, pf(8u)));
}
