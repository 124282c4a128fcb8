// trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the
// last two dims and zeroes the rest, for 1- or 2-word elements.
// Params: TriluParams (rlx-gpu kernels/indexing.rs) with the handles x, y: n,
// words, rows, cols, k (i32), upper.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let w = p.words;
    let j = i32(t % p.cols);
    let i = i32((t / p.cols) % p.rows);
    let d = j - i;
    var keep = d <= p.k;
    if (p.upper != 0u) {
        keep = d >= p.k;
    }
    for (var q = 0u; q < w; q++) {
        var v = 0u;
        if (keep) {
            v = rd(p.x, t * w + q);
        }
        wr(p.y, t * w + q, v);
    }
}
