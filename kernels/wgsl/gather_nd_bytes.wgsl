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
        var off = (t / p.batch_tuples) * p.batch_elems;
        var ok = true;
        for (var q = 0u; q < p.k; q++) {
            var v = ldidx(p.idx, t * p.k + q, p.idx_wide);
            let len = i32(p.dims[q]);
            if (v < 0) {
                v += len;
            }
            if (v < 0 || v >= len) {
                ok = false;
                break;
            }
            off += u32(v) * p.strides[q];
        }
        if (ok) {
            let at = (off + e) * SIZE;
            word |= ((rd(p.data, at / 4u) >> ((at % 4u) * 8u)) & mask) << (b * bits);
        }
    }
    wr(p.y, w, word);
}
