// gather: out[o, j, i] = data[o, idx[j], i] over [outer, axis, inner] views, for
// 1- or 2-word elements; negative indices count from the end, indices out of
// range write zeros. Params: GatherParams (rlx-gpu kernels/gather.rs) with the
// handles data, idx, y: n, words, axis_len, inner, n_idx, idx_wide (1: i64 indices).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let w = p.words;
    let len = i32(p.axis_len);
    let inner = p.inner;
    let ni = p.n_idx;
    let i = t % inner;
    let j = (t / inner) % ni;
    let o = t / (inner * ni);
    var k = ldidx(p.idx, j, p.idx_wide);
    if (k < 0) {
        k += len;
    }
    let yb = t * w;
    if (k < 0 || k >= len) {
        wr(p.y, yb, 0u);
        if (w == 2u) {
            wr(p.y, yb + 1u, 0u);
        }
        return;
    }
    let xb = ((o * u32(len) + u32(k)) * inner + i) * w;
    wr(p.y, yb, rd(p.data, xb));
    if (w == 2u) {
        wr(p.y, yb + 1u, rd(p.data, xb + 1u));
    }
}
