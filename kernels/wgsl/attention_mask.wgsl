// attention_mask: what both attention kernels (attention.wgsl, attention_rows.wgsl)
// share: the softcap and the additive mask bias of a score. Reads the kernels'
// `AttentionParams` `p` (flags as attention.wgsl describes them).

// `softcap * tanh(raw / softcap)` when a softcap is set.
fn att_cap(raw: f32) -> f32 {
    let cap = p.softcap;
    if (cap > 0.0) {
        return cap * ew_att_tanh(raw / cap);
    }
    return raw;
}

// The bias added to the score of query row (b, h, i) against key j: -inf
// where a key length, causality, the key window or a bool mask excludes the
// key, else a float mask's value (0 without one).
fn att_bias(b: u32, h: u32, i: u32, j: u32) -> f32 {
    var bias = 0.0;
    let flags = p.flags;
    var np = 0;
    if ((flags & 8u) != 0u) {
        np = ldidx(p.nonpad, b, (flags >> 4u) & 1u);
        if (i32(j) >= np) {
            bias = -inf_f32();
        }
    }
    // Query position minus key position, bottom-right aligned.
    var off = i32(p.past);
    if ((flags & 64u) != 0u) {
        off = np - i32(p.sq);
    }
    let diff = i32(i) + off - i32(j);
    if (((flags & 4u) != 0u && diff < 0) || (p.left >= 0 && diff > p.left) || (p.right >= 0 && -diff > p.right)) {
        bias = -inf_f32();
    }
    if ((flags & 1u) != 0u) {
        if (j >= p.mask_len) {
            bias = -inf_f32();
        } else {
            let mi = b * p.mask_s[0] + h * p.mask_s[1] + i * p.mask_s[2] + j * p.mask_s[3];
            if ((flags & 2u) != 0u) {
                if (ldb(p.mask, mi) == 0u) {
                    bias = -inf_f32();
                }
            } else {
                bias += ldf(p.mask, mi);
            }
        }
    }
    return bias;
}

fn ew_att_tanh(x: f32) -> f32 {
    let c = clamp(x, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}
