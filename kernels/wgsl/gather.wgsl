// gather: out[o, j, i] = data[o, idx[j], i] over [outer, axis, inner] views, for
// 1- or 2-word elements; negative indices count from the end, indices out of
// range write zeros. Params after operands (data, idx, y): n, words, axis_len,
// inner, n_idx, idx_wide (1: i64 indices).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= P[3]) {
        return;
    }
    let w = P[4];
    let len = i32(P[5]);
    let inner = P[6];
    let ni = P[7];
    let i = t % inner;
    let j = (t / inner) % ni;
    let o = t / (inner * ni);
    var k = ldidx(P[1], j, P[8]);
    if (k < 0) {
        k += len;
    }
    let yb = t * w;
    if (k < 0 || k >= len) {
        wr(P[2], yb, 0u);
        if (w == 2u) {
            wr(P[2], yb + 1u, 0u);
        }
        return;
    }
    let xb = ((o * u32(len) + u32(k)) * inner + i) * w;
    wr(P[2], yb, rd(P[0], xb));
    if (w == 2u) {
        wr(P[2], yb + 1u, rd(P[0], xb + 1u));
    }
}
