// loss: negative log-likelihood. Mode 0 (no reduction): one invocation per
// target element. Modes 1 (sum) and 2 (mean): one workgroup of 64 strides over
// every target and tree-reduces the losses (and, for the mean, the weights).
// Params: NllLossParams (rlx-gpu kernels/loss.rs) with the handles x, targets,
// weight, y: count, classes, inner, idx_wide, has_weight, mode, has_ignore,
// ignore (i32). Targets outside [0, classes) count as zero.

var<workgroup> ls: array<f32, 64>;
var<workgroup> lw: array<f32, 64>;

fn nll_at(e: u32) -> vec2<f32> {
    let inner = p.inner;
    let t = ldidx(p.targets, e, p.idx_wide);
    if ((p.has_ignore != 0u && t == p.ignore) || t < 0 || t >= i32(p.classes)) {
        return vec2<f32>(0.0, 0.0);
    }
    let b = e / inner;
    let d = e % inner;
    var w = 1.0;
    if (p.has_weight != 0u) {
        w = ldf(p.weight, u32(t));
    }
    return vec2<f32>(-ldf(p.x, (b * p.classes + u32(t)) * inner + d) * w, w);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let count = p.count;
    if (p.mode == 0u) {
        let t = wg_linear(wid, nwg) * 64u + li;
        if (t < count) {
            stf(p.y, t, nll_at(t).x);
        }
        return;
    }
    var s = 0.0;
    var w = 0.0;
    for (var e = li; e < count; e += 64u) {
        let v = nll_at(e);
        s += v.x;
        w += v.y;
    }
    ls[li] = s;
    lw[li] = w;
    for (var k = 32u; k > 0u; k = k >> 1u) {
        workgroupBarrier();
        if (li < k) {
            ls[li] += ls[li + k];
            lw[li] += lw[li + k];
        }
    }
    workgroupBarrier();
    if (li == 0u) {
        var r = ls[0];
        if (p.mode == 2u) {
            r = r / lw[0];
        }
        stf(p.y, 0u, r);
    }
}
