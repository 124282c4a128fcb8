// norm: layer_norm and rms_norm over the trailing `len` elements of each row, one
// workgroup of 64 per row. Rows of up to 1024 elements are read once: each
// invocation keeps its 16 (element li + 64c) in registers, so its loads are all
// in flight together, and sums, centres and scales them there; stores come after
// the loads they would otherwise hold up (the one buffer may alias itself). Longer
// rows are read once per pass. Each sum is every invocation adding up the 64 partial
// sums from workgroup memory (two barriers).
// Params: NormParams (rlx-gpu kernels/norm.rs): rows, len, eps, rms, has_bias,
// scale_len, bias_len (scale and bias repeat with these periods), stats (write the
// per-row mean and inverse standard deviation). The pipeline prepends `nx(i)`, the
// normalized value's element i (x, or x + residual for residual_norm), `kept()`
// (the handle the residual sum is stored to, or NONE) and `stats(row, mean,
// inv_std)` (the statistics' stores when `stats` asks for them, or nothing).

const PER: u32 = 16u;
// `kept()` when nothing is kept.
const NONE: u32 = 0xffffffffu;

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
    // Everything read from `p` is read here, before the first store: a
    // load after a store to the same buffer waits its turn.
    let len = p.len;
    let eps = p.eps;
    let rms = p.rms != 0u;
    let has_bias = p.has_bias != 0u;
    let sl = p.scale_len;
    let bl = p.bias_len;
    let hs = p.scale;
    let hb = p.bias;
    let hy = p.y;
    let hk = kept();
    let base = row * len;
    let n = f32(len);
    var mean = 0.0;
    var inv = 0.0;
    if (len <= 64u * PER) {
        // Loads, then arithmetic, then stores, each in a loop of its own.
        var xs: array<f32, 16>;
        var s = 0.0;
        for (var c = 0u; c < PER; c++) {
            let j = li + 64u * c;
            var v = 0.0;
            if (j < len) {
                v = nx(base + j);
            }
            xs[c] = v;
            s += v;
        }
        if (hk != NONE) {
            for (var c = 0u; c < PER; c++) {
                let j = li + 64u * c;
                if (j < len) {
                    stf(hk, base + j, xs[c]);
                }
            }
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
        inv = 1.0 / sqrt(nm_sum(li, q) / n + eps);
        for (var c = 0u; c < PER; c++) {
            let j = li + 64u * c;
            if (j < len) {
                var o = (xs[c] - mean) * inv * ldf(hs, j % sl);
                if (has_bias) {
                    o += ldf(hb, j % bl);
                }
                xs[c] = o;
            }
        }
        for (var c = 0u; c < PER; c++) {
            let j = li + 64u * c;
            if (j < len) {
                stf(hy, base + j, xs[c]);
            }
        }
    } else {
        var s = 0.0;
        for (var j = li; j < len; j += 64u) {
            s += nx(base + j);
        }
        if (hk != NONE) {
            for (var j = li; j < len; j += 64u) {
                stf(hk, base + j, nx(base + j));
            }
        }
        if (!rms) {
            mean = nm_sum(li, s) / n;
        }
        var q = 0.0;
        for (var j = li; j < len; j += 64u) {
            let d = nx(base + j) - mean;
            q += d * d;
        }
        inv = 1.0 / sqrt(nm_sum(li, q) / n + eps);
        for (var j = li; j < len; j += 64u) {
            var o = (nx(base + j) - mean) * inv * ldf(hs, j % sl);
            if (has_bias) {
                o += ldf(hb, j % bl);
            }
            stf(hy, base + j, o);
        }
    }
    if (li == 0u) {
        stats(row, mean, inv);
    }
}
