// elementwise: helper functions of the generated element-wise kernels (unary,
// binary, compare, cast, where, clip, gelu and fused regions). The generator
// appends `main`, which decomposes each output index over the output dims and
// reads every input through its broadcast strides.

fn ew_erf(x: f32) -> f32 {
    let a = abs(x);
    if (a < 1.0) {
        // Maclaurin series: error below 1e-9 on |x| < 1.
        let z = x * x;
        var term = x;
        var sum = x;
        for (var n = 1; n < 12; n++) {
            term = -term * z / f32(n);
            sum += term / f32(2 * n + 1);
        }
        return 1.1283791670955126 * sum;
    }
    // Abramowitz and Stegun 7.1.26 (absolute error 1.5e-7) for |x| >= 1.
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
    return select(-y, y, x >= 0.0);
}

// exp(x) - 1 and log(1 + x) without cancellation. Near 0 they use series:
// Vulkan lets `log` be off by 2^-21 absolute near 1, too coarse for tiny results.
fn ew_expm1(x: f32) -> f32 {
    if (abs(x) < 0.25) {
        return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0 + x / 5040.0))))));
    }
    return exp(x) - 1.0;
}

fn ew_log1p(x: f32) -> f32 {
    if (abs(x) < 0.25) {
        // 2 atanh(s) with s = x / (2 + x).
        let s = x / (2.0 + x);
        let z = s * s;
        return 2.0 * s * (1.0 + z * (1.0 / 3.0 + z * (0.2 + z * (1.0 / 7.0 + z / 9.0))));
    }
    return log(1.0 + x);
}

fn ew_tanh(x: f32) -> f32 {
    let e = ew_expm1(-2.0 * abs(x));
    let t = -e / (e + 2.0);
    return select(-t, t, x >= 0.0);
}

fn ew_sigmoid(x: f32) -> f32 {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    let e = exp(x);
    return e / (1.0 + e);
}

fn ew_softplus(x: f32) -> f32 {
    return max(x, 0.0) + ew_log1p(exp(-abs(x)));
}

fn ew_pow(x: f32, y: f32) -> f32 {
    if (y == 0.0) {
        return 1.0;
    }
    if (x == 0.0) {
        return select(inf_f32(), 0.0, y > 0.0);
    }
    let r = exp2(y * log2(abs(x)));
    if (x > 0.0) {
        return r;
    }
    if (floor(y) != y) {
        return nan_f32();
    }
    return select(r, -r, fract(y * 0.5) != 0.0);
}

fn ew_fmod(x: f32, y: f32) -> f32 {
    return x - trunc(x / y) * y;
}

fn ew_mod(x: f32, y: f32) -> f32 {
    let r = ew_fmod(x, y);
    if (r != 0.0 && ((r < 0.0) != (y < 0.0))) {
        return r + y;
    }
    return r;
}

fn ew_imod(x: i32, y: i32) -> i32 {
    if (y == 0) {
        return 0;
    }
    let r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
        return r + y;
    }
    return r;
}

fn ew_ifmod(x: i32, y: i32) -> i32 {
    if (y == 0) {
        return 0;
    }
    return x % y;
}

fn ew_idiv(x: i32, y: i32) -> i32 {
    if (y == 0) {
        return 0;
    }
    return x / y;
}

fn ew_is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn ew_is_inf(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
}

fn ew_st64(b: u32, i: u32, v: vec2<u32>) {
    wr(b, 2u * i, v.x);
    wr(b, 2u * i + 1u, v.y);
}

// Narrow integer loads (element i of the operand at b), sign- or zero-extended.
fn ew_ld8s(b: u32, i: u32) -> i32 {
    return bitcast<i32>(ldb(b, i) << 24u) >> 24u;
}

fn ew_ld16(b: u32, i: u32) -> u32 {
    let o = (b & 0x3fffffffu) + 2u * i;
    return (rd(b & 0xc0000000u, o >> 2u) >> ((o & 2u) * 8u)) & 0xffffu;
}

fn ew_ld16s(b: u32, i: u32) -> i32 {
    return bitcast<i32>(ew_ld16(b, i) << 16u) >> 16u;
}

fn ew_ld64(b: u32, i: u32) -> vec2<u32> {
    return vec2<u32>(rd(b, 2u * i), rd(b, 2u * i + 1u));
}

// Half floats compute in f32: f16 through the pack built-ins, bf16 as the top
// half of an f32 (stores round to nearest even, NaN stays NaN).
fn ew_ldh(b: u32, i: u32) -> f32 {
    return unpack2x16float(ew_ld16(b, i)).x;
}

fn ew_ldbf(b: u32, i: u32) -> f32 {
    return bitcast<f32>(ew_ld16(b, i) << 16u);
}

fn ew_bf16(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16u) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
