// norm: layer_norm and rms_norm over the trailing `len` elements of each row, one
// workgroup of 64 per row (tree sums of x and of the squared deviations).
// Params: NormParams (rlx-gpu kernels/norm.rs) with the handles x, scale, bias, y,
// mean, inv_std: rows, len, eps, rms, has_bias, scale_len, bias_len (scale and bias
// repeat with these periods), stats (write the per-row mean and inverse standard
// deviation).

var<workgroup> nm: array<f32, 64>;

fn nm_sum(li: u32) -> f32 {
    for (var s = 32u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            nm[li] = nm[li] + nm[li + s];
        }
    }
    workgroupBarrier();
    let r = nm[0];
    workgroupBarrier();
    return r;
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
        nm[li] = s;
        mean = nm_sum(li) / f32(len);
    }
    var q = 0.0;
    for (var j = li; j < len; j += 64u) {
        let d = ldf(p.x, base + j) - mean;
        q += d * d;
    }
    nm[li] = q;
    let inv = 1.0 / sqrt(nm_sum(li) / f32(len) + p.eps);
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
