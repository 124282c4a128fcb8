// attention_mask: what the attention kernels (attention.wgsl, attention_tile.wgsl)
// share: the softcap and the additive mask bias of a score, and loads and stores
// of four consecutive elements. Reads the kernels' `AttentionParams` `p` (flags
// as attention.wgsl describes them).

// The rules a score follows, read from the parameters once per workgroup
// (each read of `p` is a load from memory; the tile kernel read a dozen a
// score).
struct AttRules {
    flags: u32,
    // Batch b's key length (flags & 8).
    np: i32,
    // Query position minus query row, bottom-right aligned.
    off: i32,
    left: i32,
    right: i32,
    mask_len: u32,
    mask_s: vec4<u32>,
    softcap: f32,
}

fn att_rules(b: u32) -> AttRules {
    var r: AttRules;
    r.flags = p.flags;
    r.np = 0;
    if ((r.flags & 8u) != 0u) {
        r.np = ldidx(p.nonpad, b, (r.flags >> 4u) & 1u);
    }
    r.off = i32(p.past);
    if ((r.flags & 64u) != 0u) {
        r.off = r.np - i32(p.sq);
    }
    r.left = p.left;
    r.right = p.right;
    r.mask_len = p.mask_len;
    r.mask_s = vec4<u32>(p.mask_s[0], p.mask_s[1], p.mask_s[2], p.mask_s[3]);
    r.softcap = p.softcap;
    return r;
}

// `softcap * tanh(raw / softcap)` when a softcap is set.
fn att_cap_r(r: AttRules, raw: f32) -> f32 {
    if (r.softcap > 0.0) {
        return r.softcap * ew_att_tanh(raw / r.softcap);
    }
    return raw;
}

// -inf where batch b's key length, causality or the key window excludes key
// j from query row i, else 0.
fn att_rule_bias(r: AttRules, i: u32, j: u32) -> f32 {
    if ((r.flags & 8u) != 0u && i32(j) >= r.np) {
        return -inf_f32();
    }
    let diff = i32(i) + r.off - i32(j);
    if (((r.flags & 4u) != 0u && diff < 0) || (r.left >= 0 && diff > r.left) || (r.right >= 0 && -diff > r.right)) {
        return -inf_f32();
    }
    return 0.0;
}

// The mask's bias of key j for query row (b, h, i) (flags & 1): -inf past the
// mask's length or where a bool mask is false, else a float mask's value.
fn att_mask_bias(r: AttRules, b: u32, h: u32, i: u32, j: u32) -> f32 {
    if (j >= r.mask_len) {
        return -inf_f32();
    }
    let mi = b * r.mask_s.x + h * r.mask_s.y + i * r.mask_s.z + j * r.mask_s.w;
    if ((r.flags & 2u) != 0u) {
        return select(0.0, -inf_f32(), ldb(p.mask, mi) == 0u);
    }
    return ldf(p.mask, mi);
}

// The bias added to the score of query row (b, h, i) against key j: -inf
// where a key length, causality, the key window or a bool mask excludes the
// key, else a float mask's value (0 without one).
fn att_bias_r(r: AttRules, b: u32, h: u32, i: u32, j: u32) -> f32 {
    var bias = att_rule_bias(r, i, j);
    if ((r.flags & 1u) != 0u) {
        bias += att_mask_bias(r, b, h, i, j);
    }
    return bias;
}

fn ew_att_tanh(x: f32) -> f32 {
    let c = clamp(x, -15.0, 15.0);
    let e = exp(2.0 * c);
    return (e - 1.0) / (e + 1.0);
}

// Four consecutive elements of operand `h` from `at`, the first `valid` of
// them (the rest read as zero). Branch-free, so that the loads of several
// calls issue together: an element past `valid` reloads the first (or the
// operand's first, when none is valid) and is selected away.
fn ld4(h: u32, at: u32, valid: u32) -> vec4<f32> {
    let a = select(0u, at, valid > 0u);
    return vec4<f32>(
        select(0.0, ldf(h, a), valid > 0u),
        select(0.0, ldf(h, a + select(0u, 1u, valid > 1u)), valid > 1u),
        select(0.0, ldf(h, a + select(0u, 2u, valid > 2u)), valid > 2u),
        select(0.0, ldf(h, a + select(0u, 3u, valid > 3u)), valid > 3u));
}

// Key or value row `j` of a tile (four features from `d`), zero past `keys`.
fn kv4(h: u32, base: u32, stride: u32, j: u32, keys: u32, d: u32, n: u32) -> vec4<f32> {
    let ok = j < keys;
    return ld4(h, base + select(0u, j, ok) * stride + d, select(0u, left4(d, n), ok));
}

// Stores the first `valid` of four consecutive elements.
fn st4(h: u32, at: u32, v: vec4<f32>, valid: u32) {
    for (var c = 0u; c < min(valid, 4u); c++) {
        stf(h, at + c, v[c]);
    }
}

// How many of the four features from `d` lie below `n`.
fn left4(d: u32, n: u32) -> u32 {
    return n - min(d, n);
}
