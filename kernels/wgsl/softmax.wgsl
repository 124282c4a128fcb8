// softmax: one workgroup of 64 per row (a row is `len` elements `inner` apart):
// tree max, tree sum of exponentials, then the normalized write. Each pass takes
// four elements an invocation per step, their loads issued before any use
// (indices past the row clamped, values selected away), as norm.wgsl explains.
// Params: SoftmaxParams (rlx-gpu kernels/softmax.rs) with the handles x, y: rows,
// len, inner, kind (0 softmax, 1 log_softmax, 2 hardmax: 1 at the first maximum,
// 0 elsewhere).

var<workgroup> sm: array<f32, 64>;

fn sm_tree(li: u32, is_max: bool) {
    for (var s = 32u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            if (is_max) {
                sm[li] = max(sm[li], sm[li + s]);
            } else {
                sm[li] = sm[li] + sm[li + s];
            }
        }
    }
    workgroupBarrier();
}

// Element `j` of the row at `base` (`inner` apart), or `past` beyond its `len`.
fn sx(base: u32, inner: u32, j: u32, len: u32, past: f32) -> f32 {
    let ok = j < len;
    return select(past, ldf(p.x, base + select(0u, j, ok) * inner), ok);
}

// exp(x[j] - mx), 0 beyond the row.
fn sexp(base: u32, inner: u32, j: u32, len: u32, mx: f32) -> f32 {
    return select(0.0, exp(sx(base, inner, j, len, 0.0) - mx), j < len);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row = wg_linear(wid, nwg);
    if (row >= p.rows) {
        return;
    }
    let len = p.len;
    let inner = p.inner;
    let base = (row / inner) * len * inner + row % inner;
    let lo = -inf_f32();
    var m = lo;
    for (var j = li; j < len; j += 256u) {
        let a = sx(base, inner, j, len, lo);
        let b = sx(base, inner, j + 64u, len, lo);
        let c = sx(base, inner, j + 128u, len, lo);
        let d = sx(base, inner, j + 192u, len, lo);
        m = max(m, max(max(a, b), max(c, d)));
    }
    sm[li] = m;
    sm_tree(li, true);
    let mx = sm[0];
    workgroupBarrier();
    var s = 0.0;
    for (var j = li; j < len; j += 256u) {
        let a = sexp(base, inner, j, len, mx);
        let b = sexp(base, inner, j + 64u, len, mx);
        let c = sexp(base, inner, j + 128u, len, mx);
        let d = sexp(base, inner, j + 192u, len, mx);
        s += (a + b) + (c + d);
    }
    sm[li] = s;
    sm_tree(li, false);
    let total = sm[0];
    if (p.kind == 2u) {
        // The first index holding the maximum, by a tree min over indices.
        workgroupBarrier();
        var first = f32(len);
        for (var j = li; j < len; j += 64u) {
            if (ldf(p.x, base + j * inner) == mx && f32(j) < first) {
                first = f32(j);
            }
        }
        sm[li] = first;
        for (var s2 = 32u; s2 > 0u; s2 = s2 >> 1u) {
            workgroupBarrier();
            if (li < s2) {
                sm[li] = min(sm[li], sm[li + s2]);
            }
        }
        workgroupBarrier();
        let at = u32(sm[0]);
        for (var j = li; j < len; j += 64u) {
            stf(p.y, base + j * inner, select(0.0, 1.0, j == at));
        }
        return;
    }
    let lt = log(total);
    let log_out = p.kind == 1u;
    let hy = p.y;
    for (var j = li; j < len; j += 256u) {
        var v = vec4<f32>(sx(base, inner, j, len, 0.0), sx(base, inner, j + 64u, len, 0.0),
                          sx(base, inner, j + 128u, len, 0.0), sx(base, inner, j + 192u, len, 0.0)) - mx;
        if (log_out) {
            v = v - lt;
        } else {
            v = exp(v) / total;
        }
        for (var c = 0u; c < 4u; c++) {
            let jc = j + 64u * c;
            if (jc < len) {
                stf(hy, base + jc * inner, v[c]);
            }
        }
    }
}
