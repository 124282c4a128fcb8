// The data element index tuple t of gather_nd addresses (its batch's
// base plus each index times its stride), or -1 when an index is out of
// range (negative ones count from the end). Shared by gather_nd.wgsl and
// gather_nd_bytes.wgsl; reads GatherNdParams `p`.
fn nd_base(t: u32) -> i32 {
    var off = (t / p.batch_tuples) * p.batch_elems;
    for (var q = 0u; q < p.k; q++) {
        var v = ldidx(p.idx, t * p.k + q, p.idx_wide);
        let len = i32(p.dims[q]);
        if (v < 0) {
            v += len;
        }
        if (v < 0 || v >= len) {
            return -1;
        }
        off += u32(v) * p.strides[q];
    }
    return i32(off);
}
