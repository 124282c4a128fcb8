// softmax: one workgroup of 64 per row (a row is `len` elements `stride` apart):
// tree max, tree sum of exponentials, then the normalized write.
// Params after operands (x, y): rows, len, stride (inner size), kind (0 softmax, 1 log_softmax).

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
    if (row >= P[2]) {
        return;
    }
    let len = P[3];
    let inner = P[4];
    let base = (row / inner) * len * inner + row % inner;
    var m = -inf_f32();
    for (var j = li; j < len; j += 64u) {
        m = max(m, ldf(P[0], base + j * inner));
    }
    sm[li] = m;
    sm_tree(li, true);
    let mx = sm[0];
    workgroupBarrier();
    var s = 0.0;
    for (var j = li; j < len; j += 64u) {
        s += exp(ldf(P[0], base + j * inner) - mx);
    }
    sm[li] = s;
    sm_tree(li, false);
    let total = sm[0];
    let lt = log(total);
    for (var j = li; j < len; j += 64u) {
        let v = ldf(P[0], base + j * inner) - mx;
        var r = exp(v) / total;
        if (P[5] == 1u) {
            r = v - lt;
        }
        stf(P[1], base + j * inner, r);
    }
}
