// quant: QuantizeLinear (f32 -> 8/16-bit integers, saturating, round half to
// even) and DequantizeLinear (8/16/32-bit integers -> f32), per tensor, per
// axis or blocked. One invocation per output word: quantize packs 4 bytes or
// 2 halves into it (the output is dense from a word boundary).
// Params: QuantParams (rlx-gpu kernels/quant.rs) with the handles x, scale, zp, y:
// quantize (0 dequantize, 1 quantize), n, qbytes (1, 2 or 4), qsigned, has_zp,
// kind (0 tensor, 1 axis, 2 blocked), axis_len, inner, block, scale_len, items
// (invocations).

// Quantized element `e` of the operand `h`, widened to i32.
fn q_ld(h: u32, e: u32) -> i32 {
    let qb = p.qbytes;
    if (qb == 4u) {
        return ldi(h, e);
    }
    var v = 0u;
    var bits = 8u;
    if (qb == 1u) {
        v = ldb(h, e);
    } else {
        bits = 16u;
        v = (rd(h, e >> 1u) >> ((e & 1u) * 16u)) & 0xffffu;
    }
    if (p.qsigned == 1u) {
        return (bitcast<i32>(v << (32u - bits))) >> (32u - bits);
    }
    return i32(v);
}

fn q_scale_index(e: u32) -> u32 {
    let inner = p.inner;
    let len = p.axis_len;
    let a = (e / inner) % len;
    switch (p.kind) {
        case 0u: { return 0u; }
        case 1u: { return a; }
        default: {
            let o = e / (inner * len);
            return (o * p.scale_len + a / p.block) * inner + e % inner;
        }
    }
}

fn q_zp(si: u32) -> f32 {
    if (p.has_zp == 0u) {
        return 0.0;
    }
    return f32(q_ld(p.zp, si));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = wg_linear(wid, nwg) * 64u + li;
    if (t >= p.items) {
        return;
    }
    if (p.quantize == 0u) {
        let si = q_scale_index(t);
        stf(p.y, t, (f32(q_ld(p.x, t)) - q_zp(si)) * ldf(p.scale, si));
        return;
    }
    let qb = p.qbytes;
    let per = 4u / qb;
    let bits = qb * 8u;
    var lo = 0.0;
    var hi = 255.0;
    if (qb == 2u) {
        hi = 65535.0;
    }
    if (p.qsigned == 1u) {
        hi = floor(hi / 2.0);
        lo = -hi - 1.0;
    }
    let mask = (1u << bits) - 1u;
    var word = 0u;
    for (var s = 0u; s < per; s++) {
        let e = t * per + s;
        if (e >= p.n) {
            break;
        }
        let si = q_scale_index(e);
        let v = clamp(round(fdiv(ldf(p.x, e), ldf(p.scale, si))) + q_zp(si), lo, hi);
        word |= (bitcast<u32>(i32(v)) & mask) << (s * bits);
    }
    wr(p.y, t, word);
}
