// norm: layer_norm and rms_norm over the trailing `len` elements of each row, one
// workgroup of 64 per row (tree sums of x and of the squared deviations).
// Params after operands (x, scale, bias, y, mean, inv_std): rows, len, eps (f32 bits),
// rms, has_bias, scale_len, bias_len (scale and bias repeat with these periods), stats
// (write the per-row mean and inverse standard deviation).

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
    if (row >= P[6]) {
        return;
    }
    let len = P[7];
    let base = row * len;
    let rms = P[9] != 0u;
    var mean = 0.0;
    if (!rms) {
        var s = 0.0;
        for (var j = li; j < len; j += 64u) {
            s += ldf(P[0], base + j);
        }
        nm[li] = s;
        mean = nm_sum(li) / f32(len);
    }
    var q = 0.0;
    for (var j = li; j < len; j += 64u) {
        let d = ldf(P[0], base + j) - mean;
        q += d * d;
    }
    nm[li] = q;
    let inv = 1.0 / sqrt(nm_sum(li) / f32(len) + pf(8u));
    if (P[13] != 0u && li == 0u) {
        stf(P[4], row, mean);
        stf(P[5], row, inv);
    }
    for (var j = li; j < len; j += 64u) {
        var v = (ldf(P[0], base + j) - mean) * inv * ldf(P[1], j % P[11]);
        if (P[10] != 0u) {
            v += ldf(P[2], j % P[12]);
        }
        stf(P[3], base + j, v);
    }
}
