// cumulative: cumsum / cumprod of f32 along one axis, one invocation per line
// (outer x inner lines of `len` elements `inner` apart).
// Params: CumulativeParams (rlx-gpu kernels/indexing.rs) with the handles x, y:
// lines, len, inner, exclusive, reverse, prod.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.lines) {
        return;
    }
    let len = p.len;
    let inner = p.inner;
    let base = (t / inner) * len * inner + t % inner;
    let prod = p.prod != 0u;
    var acc = select(0.0, 1.0, prod);
    for (var s = 0u; s < len; s++) {
        var j = s;
        if (p.reverse != 0u) {
            j = len - 1u - s;
        }
        let at = base + j * inner;
        let v = ldf(p.x, at);
        if (p.exclusive != 0u) {
            stf(p.y, at, acc);
        }
        if (prod) {
            acc = acc * v;
        } else {
            acc = acc + v;
        }
        if (p.exclusive == 0u) {
            stf(p.y, at, acc);
        }
    }
}
