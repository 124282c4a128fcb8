// gather of 1- or 2-byte elements: out[o, j, i] = data[o, idx[j], i] over
// [outer, axis, inner] views, where storage is words. One invocation per
// output word packs the 4 / size elements it holds (so no two invocations
// write one word); negative indices count from the end, indices out of range
// give zeros, and the bytes past the last element of the last word are zero.
// Params: GatherBytesParams (rlx-gpu kernels/gather.rs) with the handles
// data, idx, y: n, size, axis_len, inner, n_idx, idx_wide (1: i64 indices).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    let per = 4u / p.size;
    let first = t * per;
    if (first >= p.n) {
        return;
    }
    let len = i32(p.axis_len);
    let bits = p.size * 8u;
    let mask = (1u << bits) - 1u;
    var word = 0u;
    for (var b = 0u; b < per; b++) {
        let e = first + b;
        if (e >= p.n) {
            break;
        }
        let i = e % p.inner;
        let j = (e / p.inner) % p.n_idx;
        let o = e / (p.inner * p.n_idx);
        var k = ldidx(p.idx, j, p.idx_wide);
        if (k < 0) {
            k += len;
        }
        if (k < 0 || k >= len) {
            continue;
        }
        let at = ((o * u32(len) + u32(k)) * p.inner + i) * p.size;
        let v = (rd(p.data, at / 4u) >> ((at % 4u) * 8u)) & mask;
        word |= v << (b * bits);
    }
    wr(p.y, t, word);
}
