// attention: scaled dot-product attention, f32. One workgroup of 64 per
// (batch, query head, query row); keys go by in tiles of 64 with an online
// softmax (running max `m` and sum `l`, rescaled per tile), so any key length
// runs in fixed workgroup memory. Each invocation scores one key of the tile
// and accumulates up to 4 output features (head sizes up to 256).
//
// Params `p`: rlx-gpu `AttentionParams` after the operand handles y, q, k, v,
// mask, nonpad, qk (absent ones repeat y): hq, group (query heads per key
// head), sq, keys, dk, dv, element strides (b, h, s) q_s, k_s, v_s, y_s, mask
// strides (b, h, i, j) mask_s and mask_len, flags, past (the first query row's
// position), left and right (the key window, -1 unbounded), qk mode, scale,
// softcap, rows. Flags: 1 mask, 2 bool mask, 4 causal, 8 nonpad, 16 nonpad is
// i64, 32 qk out, 64 the first query row sits at nonpad[b] - sq. A row with
// every key masked gives zeros. The softcap and masks are attention_mask.wgsl's
// (prepended).

var<workgroup> qrow: array<f32, 256>;
var<workgroup> red: array<f32, 64>;
var<workgroup> prob: array<f32, 64>;

const MASKED: f32 = -3.0e38;

fn at_tree(li: u32, is_max: bool) -> f32 {
    for (var s = 32u; s > 0u; s = s >> 1u) {
        workgroupBarrier();
        if (li < s) {
            if (is_max) {
                red[li] = max(red[li], red[li + s]);
            } else {
                red[li] = red[li] + red[li + s];
            }
        }
    }
    return workgroupUniformLoad(&red[0]);
}

// The capped score of query row (b, h, i) against key j, plus the mask bias
// (-inf where masked), and the raw and capped scores for the QK output.
fn score(b: u32, h: u32, i: u32, j: u32) -> vec3<f32> {
    let kvh = h / p.group;
    let dk = p.dk;
    let kb = b * p.k_s[0] + kvh * p.k_s[1] + j * p.k_s[2];
    var raw = 0.0;
    for (var d = 0u; d < dk; d++) {
        raw += qrow[d] * ldf(p.k, kb + d);
    }
    let capped = att_cap(raw);
    return vec3<f32>(raw, capped, capped + att_bias(b, h, i, j));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row = wg_linear(wid, nwg);
    if (row >= p.rows) {
        return;
    }
    let hq = p.hq;
    let sq = p.sq;
    let keys = p.keys;
    let dk = p.dk;
    let dv = p.dv;
    let i = row % sq;
    let h = (row / sq) % hq;
    let b = row / (sq * hq);
    let kvh = h / p.group;
    let qb = b * p.q_s[0] + h * p.q_s[1] + i * p.q_s[2];
    let scale = p.scale;
    for (var d = li; d < dk; d += 64u) {
        qrow[d] = ldf(p.q, qb + d) * scale;
    }
    workgroupBarrier();
    let qk_out = (p.flags & 32u) != 0u;
    let mode = p.mode;
    let qk_row = row * keys;
    var m = -inf_f32();
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var t0 = 0u; t0 < keys; t0 += 64u) {
        let j = t0 + li;
        var s = -inf_f32();
        if (j < keys) {
            let sc = score(b, h, i, j);
            s = sc.z;
            if (qk_out && mode < 3u) {
                stf(p.qk, qk_row + j, sc[min(mode, 2u)]);
            }
        }
        red[li] = s;
        let mnew = max(m, at_tree(li, true));
        // Nothing unmasked yet: keep the state (alpha 1, pr 0).
        let live = mnew > MASKED;
        var pr = 0.0;
        if (live && s > MASKED) {
            pr = exp(s - mnew);
        }
        var alpha = 1.0;
        if (live && m > MASKED) {
            alpha = exp(m - mnew);
        } else if (live) {
            alpha = 0.0;
        }
        workgroupBarrier();
        prob[li] = pr;
        red[li] = pr;
        let tsum = at_tree(li, false);
        l = l * alpha + tsum;
        let n = min(64u, keys - t0);
        for (var c = 0u; c < 4u; c++) {
            let d = li + c * 64u;
            if (d < dv) {
                var a = acc[c] * alpha;
                let vb = b * p.v_s[0] + kvh * p.v_s[1] + t0 * p.v_s[2] + d;
                for (var jj = 0u; jj < n; jj++) {
                    a += prob[jj] * ldf(p.v, vb + jj * p.v_s[2]);
                }
                acc[c] = a;
            }
        }
        if (live) {
            m = mnew;
        }
        workgroupBarrier();
    }
    let yb = b * p.y_s[0] + h * p.y_s[1] + i * p.y_s[2];
    for (var c = 0u; c < 4u; c++) {
        let d = li + c * 64u;
        if (d < dv) {
            if (l > 0.0) {
                stf(p.y, yb + d, acc[c] / l);
            } else {
                stf(p.y, yb + d, 0.0);
            }
        }
    }
    if (qk_out && mode == 3u) {
        for (var j = li; j < keys; j += 64u) {
            let s = score(b, h, i, j).z;
            var pr = 0.0;
            if (l > 0.0 && s > MASKED) {
                pr = exp(s - m) / l;
            }
            stf(p.qk, qk_row + j, pr);
        }
    }
}
