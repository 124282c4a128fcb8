// softmax: one workgroup of 64 per row (a row is `len` elements `inner` apart):
// tree max, tree sum of exponentials, then the normalized write.
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

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row = wg_linear(wid, nwg);
    if (row >= p.rows) {
        return;
    }
    let len = p.len;
    let inner = p.inner;
    let base = (row / inner) * len * inner + row % inner;
    var m = -inf_f32();
    for (var j = li; j < len; j += 64u) {
        m = max(m, ldf(p.x, base + j * inner));
    }
    sm[li] = m;
    sm_tree(li, true);
    let mx = sm[0];
    workgroupBarrier();
    var s = 0.0;
    for (var j = li; j < len; j += 64u) {
        s += exp(ldf(p.x, base + j * inner) - mx);
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
    for (var j = li; j < len; j += 64u) {
        let v = ldf(p.x, base + j * inner) - mx;
        var r = exp(v) / total;
        if (p.kind == 1u) {
            r = v - lt;
        }
        stf(p.y, base + j * inner, r);
    }
}
