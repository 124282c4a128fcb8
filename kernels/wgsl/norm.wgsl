// norm: layer_norm and rms_norm over the trailing `len` elements of each row, one
// workgroup of 64 per row: each invocation sums its share of x (then of the squared
// deviations) and every invocation adds up the 64 partial sums from workgroup
// memory, two barriers a sum (a tree took seven).
// Params: NormParams (rlx-gpu kernels/norm.rs) with the handles x, scale, bias, y,
// mean, inv_std: rows, len, eps, rms, has_bias, scale_len, bias_len (scale and bias
// repeat with these periods), stats (write the per-row mean and inverse standard
// deviation).

var<workgroup> nm: array<vec4<f32>, 16>;

// The workgroup's sum of `v` (each invocation's partial sum), in every invocation.
fn nm_sum(li: u32, v: f32) -> f32 {
    nm[li / 4u][li % 4u] = v;
    workgroupBarrier();
    var s = vec4<f32>(0.0);
    for (var i = 0u; i < 16u; i++) {
        s += nm[i];
    }
    workgroupBarrier();
    return (s.x + s.y) + (s.z + s.w);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row = wg_linear(wid, nwg);
    if (row >= p.rows) {
        return;
    }
    let len = p.len;
    let base = row * len;
    let rms = p.rms != 0u;
    var mean = 0.0;
    if (!rms) {
        var s = 0.0;
        for (var j = li; j < len; j += 64u) {
            s += ldf(p.x, base + j);
        }
        mean = nm_sum(li, s) / f32(len);
    }
    var q = 0.0;
    for (var j = li; j < len; j += 64u) {
        let d = ldf(p.x, base + j) - mean;
        q += d * d;
    }
    let inv = 1.0 / sqrt(nm_sum(li, q) / f32(len) + p.eps);
    if (p.stats != 0u && li == 0u) {
        stf(p.mean, row, mean);
        stf(p.inv_std, row, inv);
    }
    for (var j = li; j < len; j += 64u) {
        var v = (ldf(p.x, base + j) - mean) * inv * ldf(p.scale, j % p.scale_len);
        if (p.has_bias != 0u) {
            v += ldf(p.bias, j % p.bias_len);
        }
        stf(p.y, base + j, v);
    }
}
