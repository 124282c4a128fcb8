// norm: layer_norm and rms_norm over the trailing `len` elements of each row, one
// workgroup of 64 per row. Rows of up to 1024 elements are read once: each
// invocation keeps its 16 (element li + 64c) in registers, so its loads are all
// in flight together, and sums, centres and scales them there. Longer rows are
// read once per pass. Each sum is every invocation adding up the 64 partial
// sums from workgroup memory (two barriers).
// Params: NormParams (rlx-gpu kernels/norm.rs): rows, len, eps, rms, has_bias,
// scale_len, bias_len (scale and bias repeat with these periods), stats (write the
// per-row mean and inverse standard deviation). The pipeline prepends `nx(i)`, the
// normalized value's element i (x, or x + residual for residual_norm), `keep(i, v)`
// (nothing, or the residual sum's store) and `stats(row, mean, inv_std)` (the
// statistics' stores when `stats` asks for them, or nothing).

const PER: u32 = 16u;

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

// Element j of the row at `base` normalized, scaled and shifted.
fn nm_out(base: u32, j: u32, v: f32, mean: f32, inv: f32) {
    var o = (v - mean) * inv * ldf(p.scale, j % p.scale_len);
    if (p.has_bias != 0u) {
        o += ldf(p.bias, j % p.bias_len);
    }
    stf(p.y, base + j, o);
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
    let n = f32(len);
    var mean = 0.0;
    var inv = 0.0;
    if (len <= 64u * PER) {
        var xs: array<f32, 16>;
        var s = 0.0;
        for (var c = 0u; c < PER; c++) {
            let j = li + 64u * c;
            var v = 0.0;
            if (j < len) {
                v = nx(base + j);
                keep(base + j, v);
            }
            xs[c] = v;
            s += v;
        }
        if (!rms) {
            mean = nm_sum(li, s) / n;
        }
        var q = 0.0;
        for (var c = 0u; c < PER; c++) {
            if (li + 64u * c < len) {
                let d = xs[c] - mean;
                q += d * d;
            }
        }
        inv = 1.0 / sqrt(nm_sum(li, q) / n + p.eps);
        for (var c = 0u; c < PER; c++) {
            let j = li + 64u * c;
            if (j < len) {
                nm_out(base, j, xs[c], mean, inv);
            }
        }
    } else {
        var s = 0.0;
        for (var j = li; j < len; j += 64u) {
            let v = nx(base + j);
            keep(base + j, v);
            s += v;
        }
        if (!rms) {
            mean = nm_sum(li, s) / n;
        }
        var q = 0.0;
        for (var j = li; j < len; j += 64u) {
            let d = nx(base + j) - mean;
            q += d * d;
        }
        inv = 1.0 / sqrt(nm_sum(li, q) / n + p.eps);
        for (var j = li; j < len; j += 64u) {
            nm_out(base, j, nx(base + j), mean, inv);
        }
    }
    if (li == 0u) {
        stats(row, mean, inv);
    }
}
