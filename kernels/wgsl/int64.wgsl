// int64: 64-bit integer arithmetic emulated on u32 pairs, for adapters without
// SHADER_INT64. A value is a vec2<u32>: x the low word, y the high word (two's
// complement for i64). Arithmetic wraps modulo 2^64 like Rust's wrapping ops;
// division and remainder by zero give 0 (as the u32 kernels do). `i64_*`
// helpers treat the pair as signed, `u64_*` as unsigned; add, sub, mul, neg and
// the bitwise operators are the same for both.

struct DivMod64 {
    q: vec2<u32>,
    r: vec2<u32>,
}

fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn i64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn i64_neg(a: vec2<u32>) -> vec2<u32> {
    return i64_sub(vec2<u32>(0u, 0u), a);
}

// The full 64-bit product of two u32, from 16-bit limbs.
fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = p01 + p10;
    let mid_carry = select(0u, 0x10000u, mid < p01);
    let lo = p00 + (mid << 16u);
    let carry = select(0u, 1u, lo < p00);
    return vec2<u32>(lo, p11 + (mid >> 16u) + mid_carry + carry);
}

// The low 64 bits of the product (signed and unsigned alike).
fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = u32_mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn i64_is_neg(a: vec2<u32>) -> bool {
    return (a.y >> 31u) != 0u;
}

fn i64_is_zero(a: vec2<u32>) -> bool {
    return (a.x | a.y) == 0u;
}

fn u64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    if (a.y != b.y) {
        return bitcast<i32>(a.y) < bitcast<i32>(b.y);
    }
    return a.x < b.x;
}

fn i64_eq(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.x == b.x && a.y == b.y;
}

fn i64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, i64_lt(b, a));
}

fn i64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, i64_lt(a, b));
}

fn u64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, u64_lt(b, a));
}

fn u64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, u64_lt(a, b));
}

// |a|, wrapping: |i64 min| is i64 min.
fn i64_abs(a: vec2<u32>) -> vec2<u32> {
    return select(a, i64_neg(a), i64_is_neg(a));
}

fn i64_sign(a: vec2<u32>) -> vec2<u32> {
    if (i64_is_neg(a)) {
        return vec2<u32>(0xffffffffu, 0xffffffffu);
    }
    return vec2<u32>(select(1u, 0u, i64_is_zero(a)), 0u);
}

fn i64_relu(a: vec2<u32>) -> vec2<u32> {
    return select(a, vec2<u32>(0u, 0u), i64_is_neg(a));
}

fn u64_sign(a: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(select(1u, 0u, i64_is_zero(a)), 0u);
}

// Unsigned quotient and remainder; both 0 for a zero divisor. Long division
// one bit at a time from the dividend's highest set bit.
fn u64_divmod(n: vec2<u32>, d: vec2<u32>) -> DivMod64 {
    var res = DivMod64(vec2<u32>(0u, 0u), vec2<u32>(0u, 0u));
    if (i64_is_zero(d)) {
        return res;
    }
    if (n.y == 0u && d.y == 0u) {
        res.q = vec2<u32>(n.x / d.x, 0u);
        res.r = vec2<u32>(n.x % d.x, 0u);
        return res;
    }
    if (u64_lt(n, d)) {
        res.r = n;
        return res;
    }
    var top = 63u - countLeadingZeros(n.y);
    if (n.y == 0u) {
        top = 31u - countLeadingZeros(n.x);
    }
    var r = vec2<u32>(0u, 0u);
    var q = vec2<u32>(0u, 0u);
    for (var k = 0u; k <= top; k++) {
        let i = top - k;
        // r < d before the shift, so 2r + 1 < 2^65: a bit shifted out of r
        // means r exceeds d.
        let spill = r.y >> 31u;
        let word = select(n.x, n.y, i >= 32u);
        let bit = (word >> (i & 31u)) & 1u;
        r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
        if (spill != 0u || !u64_lt(r, d)) {
            r = i64_sub(r, d);
            if (i >= 32u) {
                q.y |= 1u << (i - 32u);
            } else {
                q.x |= 1u << i;
            }
        }
    }
    res.q = q;
    res.r = r;
    return res;
}

fn u64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return u64_divmod(a, b).q;
}

fn u64_rem(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return u64_divmod(a, b).r;
}

// Division truncating toward zero; i64 min / -1 wraps to i64 min.
fn i64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let q = u64_divmod(i64_abs(a), i64_abs(b)).q;
    return select(q, i64_neg(q), i64_is_neg(a) != i64_is_neg(b));
}

// Remainder with the sign of the dividend (C's `%`, ONNX Mod with fmod = 1).
fn i64_fmod(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let r = u64_divmod(i64_abs(a), i64_abs(b)).r;
    return select(r, i64_neg(r), i64_is_neg(a));
}

// Remainder with the sign of the divisor (ONNX Mod with fmod = 0).
fn i64_mod(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let r = i64_fmod(a, b);
    if (!i64_is_zero(r) && i64_is_neg(r) != i64_is_neg(b)) {
        return i64_add(r, b);
    }
    return r;
}

// Logical shifts; a shift of 64 or more gives 0.
fn u64_shl(a: vec2<u32>, s: vec2<u32>) -> vec2<u32> {
    if (s.y != 0u || s.x >= 64u) {
        return vec2<u32>(0u, 0u);
    }
    let k = s.x;
    if (k == 0u) {
        return a;
    }
    if (k >= 32u) {
        return vec2<u32>(0u, a.x << (k - 32u));
    }
    return vec2<u32>(a.x << k, (a.y << k) | (a.x >> (32u - k)));
}

fn u64_shr(a: vec2<u32>, s: vec2<u32>) -> vec2<u32> {
    if (s.y != 0u || s.x >= 64u) {
        return vec2<u32>(0u, 0u);
    }
    let k = s.x;
    if (k == 0u) {
        return a;
    }
    if (k >= 32u) {
        return vec2<u32>(a.y >> (k - 32u), 0u);
    }
    return vec2<u32>((a.x >> k) | (a.y << (32u - k)), a.y >> k);
}

// Round to nearest even: the bits shifted out below 32 significant bits
// are kept as a sticky bit, so the one rounding of f32() is exact.
fn u64_to_f32(a: vec2<u32>) -> f32 {
    if (a.y == 0u) {
        return f32(a.x);
    }
    let s = 32u - countLeadingZeros(a.y);
    var t = a.y;
    var lost = a.x;
    if (s < 32u) {
        t = (a.x >> s) | (a.y << (32u - s));
        lost = a.x << (32u - s);
    }
    t |= select(0u, 1u, lost != 0u);
    return ldexp(f32(t), i32(s));
}

fn i64_to_f32(a: vec2<u32>) -> f32 {
    let m = u64_to_f32(i64_abs(a));
    return select(m, -m, i64_is_neg(a));
}

// The integer part of a non-negative f32 below 2^64, exactly.
fn u64_of_whole_f32(t: f32) -> vec2<u32> {
    let hi = floor(t * 2.3283064365386963e-10);
    return vec2<u32>(u32(t - hi * 4294967296.0), u32(hi));
}

// Float to integer conversions as Rust's `as`: truncate toward zero,
// saturate at the range ends, NaN gives 0.
fn i64_from_f32(x: f32) -> vec2<u32> {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) {
        return vec2<u32>(0u, 0u);
    }
    if (x >= 9223372036854775808.0) {
        return vec2<u32>(0xffffffffu, 0x7fffffffu);
    }
    if (x <= -9223372036854775808.0) {
        return vec2<u32>(0u, 0x80000000u);
    }
    let m = u64_of_whole_f32(trunc(abs(x)));
    return select(m, i64_neg(m), x < 0.0);
}

fn u64_from_f32(x: f32) -> vec2<u32> {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u || x <= 0.0) {
        return vec2<u32>(0u, 0u);
    }
    if (x >= 18446744073709551616.0) {
        return vec2<u32>(0xffffffffu, 0xffffffffu);
    }
    return u64_of_whole_f32(trunc(x));
}
