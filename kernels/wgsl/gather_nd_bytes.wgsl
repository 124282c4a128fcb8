// gather_nd of SIZE-byte elements (a constant the plan prepends: 1 or 2)
// where storage is words: one invocation per output word packs the
// 4 / SIZE elements it holds, each y[t, e] = data[batch(t), idx[t, 0..k], e]
// as in gather_nd.wgsl (a tuple out of range gives a zero element).
// Params: GatherNdParams (rlx-gpu kernels/gather.rs).

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let w = wg_linear(wid, nwg) * 64u + li;
    let per = 4u / SIZE;
    if (w * per >= p.n) {
        return;
    }
    let bits = SIZE * 8u;
    let mask = (1u << bits) - 1u;
    var word = 0u;
    for (var b = 0u; b < per; b++) {
        let i = w * per + b;
        if (i >= p.n) {
            break;
        }
        let e = i % p.slice;
        let t = i / p.slice;
        let base = nd_base(t);
        if (base >= 0) {
            let at = (u32(base) + e) * SIZE;
            word |= ((rd(p.data, at / 4u) >> ((at % 4u) * 8u)) & mask) << (b * bits);
        }
    }
    wr(p.y, w, word);
}
