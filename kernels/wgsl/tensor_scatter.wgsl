// tensor_scatter: a key/value cache write (ONNX TensorScatter) for 1- or
// 2-word elements. y is the cache with each batch row's update written along
// the axis from its write index (i64, 0 without indices), wrapping when
// circular; update positions past a linear cache's end are not written.
// Params: TensorScatterParams (rlx-gpu kernels/tensor_scatter.rs) with the
// handles past, update, write_indices, y: n, per_batch, len, inner, upd_len,
// circular, has_indices, words.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.n) {
        return;
    }
    let span = p.len * p.inner;
    let b = t / p.per_batch;
    let rest = t % p.per_batch;
    let row = rest / span;
    let s = i32((rest % span) / p.inner);
    let r = rest % p.inner;
    var w = 0;
    if (p.has_indices != 0u) {
        // The low word of the i64 index (cache positions fit in 31 bits).
        w = bitcast<i32>(rd(p.write_indices, b * 2u));
    }
    var d = s - w;
    if (p.circular != 0u) {
        let l = i32(p.len);
        d = ((d % l) + l) % l;
    }
    let words = p.words;
    if (d >= 0 && u32(d) < p.upd_len) {
        let rows = p.per_batch / span;
        let u = ((b * rows + row) * p.upd_len + u32(d)) * p.inner + r;
        for (var q = 0u; q < words; q++) {
            wr(p.y, t * words + q, rd(p.update, u * words + q));
        }
    } else {
        for (var q = 0u; q < words; q++) {
            wr(p.y, t * words + q, rd(p.past, t * words + q));
        }
    }
}
