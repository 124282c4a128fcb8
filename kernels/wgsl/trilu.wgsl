// trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the
// last two dims and zeroes the rest, for 1- or 2-word elements.
// Params after operands (x, y): n, words, rows, cols, k (i32), upper.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[2]) {
        return;
    }
    let w = P[3];
    let j = i32(t % P[5]);
    let i = i32((t / P[5]) % P[4]);
    let d = j - i;
    var keep = d <= pi(6u);
    if (P[7] != 0u) {
        keep = d >= pi(6u);
    }
    for (var q = 0u; q < w; q++) {
        var v = 0u;
        if (keep) {
            v = rd(P[0], t * w + q);
        }
        wr(P[1], t * w + q, v);
    }
}
