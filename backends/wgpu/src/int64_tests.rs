//! Device checks of the 64-bit integer emulation (`kernels/wgsl/int64.wgsl`):
//! small graphs run on the first Vulkan adapter (lavapipe in CI) and every
//! element is compared exactly with Rust's wrapping i64/u64 arithmetic and
//! hand-written values (carries across the 32-bit boundary, signs, i64::MIN
//! and i64::MAX). Without an adapter the tests skip, saying so.

use std::sync::Arc;

use rlx_ir::analysis::infer_graph;
use rlx_ir::text::parse_graph;
use rlx_ir::{DType, Tensor, Weights};
use rlx_passes::plan_memory;

use rlx_wgsl::{plan, PlanOptions};

use crate::{Context, Executable, WgpuError};

fn context() -> Option<Arc<Context>> {
    match Context::new() {
        Ok(c) => Some(Arc::new(c)),
        Err(WgpuError::Unavailable(e)) => {
            eprintln!("skipping: no wgpu adapter ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Runs the graph `body` on `inputs` (in graph-input order).
fn run(ctx: &Arc<Context>, body: &str, inputs: &[Tensor]) -> Vec<Tensor> {
    let src = format!("rlx-ir 2\ngraph {{\n{body}}}\n");
    let mut g = parse_graph(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    infer_graph(&mut g, None).unwrap();
    let mem = plan_memory(&g).unwrap();
    let opts = PlanOptions { caps: ctx.caps() };
    let s = plan(&g, &Weights::default(), &mem, &opts).unwrap_or_else(|e| panic!("{e}"));
    let exec = Executable::new(ctx.clone(), s).unwrap();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    exec.run(&refs).unwrap()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    assert_eq!(t.dtype(), DType::I64);
    t.as_slice::<i64>().unwrap().to_vec()
}

fn u64s(t: &Tensor) -> Vec<u64> {
    assert_eq!(t.dtype(), DType::U64);
    t.as_slice::<u64>().unwrap().to_vec()
}

fn bools(t: &Tensor) -> Vec<bool> {
    t.bytes().iter().map(|&b| b != 0).collect()
}

const MIN: i64 = i64::MIN;
const MAX: i64 = i64::MAX;
/// Pairs that cross the word boundary, change sign, or sit at the range ends.
const A: [i64; 16] = [
    0xffff_ffff,
    -1,
    MIN,
    MAX,
    -7,
    7,
    123_456_789_012_345,
    -5,
    0x1_0000_0000,
    MIN,
    -0x1_0000_0001,
    0x7fff_ffff_0000_0000,
    0,
    -(1 << 40),
    1 << 62,
    9,
];
const B: [i64; 16] = [
    1,
    1,
    -1,
    1,
    2,
    -2,
    -987_654_321,
    3,
    0xffff_ffff,
    1,
    0x1_0000_0001,
    -0x1_0000,
    0,
    7,
    4,
    0,
];

fn div_ref(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_div(b)
    }
}

fn fmod_ref(a: i64, b: i64) -> i64 {
    if b == 0 {
        0
    } else {
        a.wrapping_rem(b)
    }
}

fn mod_ref(a: i64, b: i64) -> i64 {
    let r = fmod_ref(a, b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

const I64_BINARY: &str = "  %0 = input \"a\" : i64[16]\n  %1 = input \"b\" : i64[16]\n  %2 = add(%0, %1) : i64[16]\n  %3 = sub(%0, %1) : i64[16]\n  %4 = mul(%0, %1) : i64[16]\n  %5 = div(%0, %1) : i64[16]\n  %6 = mod(%0, %1) : i64[16]\n  %7 = fmod(%0, %1) : i64[16]\n  %8 = min(%0, %1) : i64[16]\n  %9 = max(%0, %1) : i64[16]\n  %10 = bitwise_and(%0, %1) : i64[16]\n  %11 = bitwise_or(%0, %1) : i64[16]\n  %12 = bitwise_xor(%0, %1) : i64[16]\n  output \"add\" = %2\n  output \"sub\" = %3\n  output \"mul\" = %4\n  output \"div\" = %5\n  output \"mod\" = %6\n  output \"fmod\" = %7\n  output \"min\" = %8\n  output \"max\" = %9\n  output \"and\" = %10\n  output \"or\" = %11\n  output \"xor\" = %12\n";

#[test]
fn i64_binary_ops_match_wrapping_arithmetic() {
    let Some(ctx) = context() else { return };
    let a = Tensor::from_i64(&[16], &A).unwrap();
    let b = Tensor::from_i64(&[16], &B).unwrap();
    let out = run(&ctx, I64_BINARY, &[a, b]);
    type F = fn(i64, i64) -> i64;
    let refs: [(&str, F); 11] = [
        ("add", i64::wrapping_add),
        ("sub", i64::wrapping_sub),
        ("mul", i64::wrapping_mul),
        ("div", div_ref),
        ("mod", mod_ref),
        ("fmod", fmod_ref),
        ("min", i64::min),
        ("max", i64::max),
        ("and", |a, b| a & b),
        ("or", |a, b| a | b),
        ("xor", |a, b| a ^ b),
    ];
    for ((name, f), got) in refs.iter().zip(&out) {
        let want: Vec<i64> = A.iter().zip(&B).map(|(&a, &b)| f(a, b)).collect();
        assert_eq!(i64s(got), want, "{name}");
    }
    // Hand-checked values: carries and borrows across the word boundary,
    // the wrapping ends, and the signs of the remainders.
    let (add, sub, mul) = (i64s(&out[0]), i64s(&out[1]), i64s(&out[2]));
    assert_eq!(add[0], 0x1_0000_0000);
    assert_eq!(add[3], MIN);
    assert_eq!(sub[2], MIN + 1);
    assert_eq!(sub[8], 1);
    assert_eq!(mul[8], 0xffff_ffff_0000_0000_u64 as i64);
    assert_eq!(mul[10], -0x2_0000_0001);
    let (div, md, fm) = (i64s(&out[3]), i64s(&out[4]), i64s(&out[5]));
    assert_eq!(div[2], MIN, "i64::MIN / -1 wraps");
    assert_eq!((div[4], md[4], fm[4]), (-3, 1, -1), "-7 / 2");
    assert_eq!((div[5], md[5], fm[5]), (-3, -1, 1), "7 / -2");
    assert_eq!((div[7], md[7], fm[7]), (-1, 1, -2), "-5 / 3");
    assert_eq!((div[12], md[12], fm[12]), (0, 0, 0), "0 / 0");
    assert_eq!((div[15], md[15], fm[15]), (0, 0, 0), "9 / 0");
}

#[test]
fn i64_unary_compare_clip_and_casts() {
    let Some(ctx) = context() else { return };
    let body = "  %0 = input \"a\" : i64[16]\n  %1 = input \"b\" : i64[16]\n  %2 = neg(%0) : i64[16]\n  %3 = abs(%0) : i64[16]\n  %4 = sign(%0) : i64[16]\n  %5 = relu(%0) : i64[16]\n  %6 = bitwise_not(%0) : i64[16]\n  %7 = less(%0, %1) : bool[16]\n  %8 = less_or_equal(%0, %1) : bool[16]\n  %9 = greater(%0, %1) : bool[16]\n  %10 = greater_or_equal(%0, %1) : bool[16]\n  %11 = equal(%0, %1) : bool[16]\n  %12 = constant i64[] [-6] : i64[]\n  %13 = constant i64[] [4294967296] : i64[]\n  %14 = clip(%0, %12, %13) : i64[16]\n  %15 = cast(%0) {to=f32, saturate=true, round_mode=nearest} : f32[16]\n  %16 = cast(%15) {to=i64, saturate=true, round_mode=nearest} : i64[16]\n  %17 = cast(%0) {to=i32, saturate=true, round_mode=nearest} : i32[16]\n  output \"neg\" = %2\n  output \"abs\" = %3\n  output \"sign\" = %4\n  output \"relu\" = %5\n  output \"not\" = %6\n  output \"lt\" = %7\n  output \"le\" = %8\n  output \"gt\" = %9\n  output \"ge\" = %10\n  output \"eq\" = %11\n  output \"clip\" = %14\n  output \"f\" = %15\n  output \"back\" = %16\n  output \"i32\" = %17\n";
    let a = Tensor::from_i64(&[16], &A).unwrap();
    let b = Tensor::from_i64(&[16], &B).unwrap();
    let out = run(&ctx, body, &[a, b]);
    type U = fn(i64) -> i64;
    let unary: [U; 5] = [
        i64::wrapping_neg,
        i64::wrapping_abs,
        i64::signum,
        |a| a.max(0),
        |a| !a,
    ];
    for (i, f) in unary.iter().enumerate() {
        let want: Vec<i64> = A.iter().map(|&a| f(a)).collect();
        assert_eq!(i64s(&out[i]), want, "unary output {i}");
    }
    assert_eq!(i64s(&out[0])[2], MIN, "-i64::MIN wraps");
    assert_eq!(i64s(&out[1])[2], MIN, "|i64::MIN| wraps");
    type C = fn(&i64, &i64) -> bool;
    let cmp: [C; 5] = [i64::lt, i64::le, i64::gt, i64::ge, i64::eq];
    for (i, f) in cmp.iter().enumerate() {
        let want: Vec<bool> = A.iter().zip(&B).map(|(a, b)| f(a, b)).collect();
        assert_eq!(bools(&out[5 + i]), want, "compare output {i}");
    }
    let want: Vec<i64> = A.iter().map(|&a| a.clamp(-6, 1 << 32)).collect();
    assert_eq!(i64s(&out[10]), want, "clip");
    // To f32 rounds to nearest (even); back to i64 truncates and saturates.
    let f = out[11].as_slice::<f32>().unwrap();
    let want: Vec<f32> = A.iter().map(|&a| a as f32).collect();
    assert_eq!(f, want.as_slice());
    let want: Vec<i64> = want.iter().map(|&x| x as i64).collect();
    assert_eq!(i64s(&out[12]), want);
    assert_eq!(i64s(&out[12])[3], MAX, "2^63 as f32 saturates");
    let want: Vec<i32> = A.iter().map(|&a| a as i32).collect();
    assert_eq!(out[13].as_slice::<i32>().unwrap(), want.as_slice());
}

#[test]
fn u64_ops_shifts_and_float_casts() {
    let Some(ctx) = context() else { return };
    let a: [u64; 8] = [
        u64::MAX,
        0xffff_ffff,
        1 << 63,
        5,
        0x1234_5678_9abc_def0,
        7,
        0,
        1,
    ];
    let b: [u64; 8] = [2, 1, 3, 0, 36, 64, 1, 31];
    let body = "  %0 = input \"a\" : u64[8]\n  %1 = input \"b\" : u64[8]\n  %2 = add(%0, %1) : u64[8]\n  %3 = mul(%0, %1) : u64[8]\n  %4 = div(%0, %1) : u64[8]\n  %5 = mod(%0, %1) : u64[8]\n  %6 = shift_left(%0, %1) : u64[8]\n  %7 = shift_right(%0, %1) : u64[8]\n  %8 = less(%0, %1) : bool[8]\n  %9 = max(%0, %1) : u64[8]\n  %10 = cast(%0) {to=f32, saturate=true, round_mode=nearest} : f32[8]\n  %11 = cast(%10) {to=u64, saturate=true, round_mode=nearest} : u64[8]\n  output \"add\" = %2\n  output \"mul\" = %3\n  output \"div\" = %4\n  output \"mod\" = %5\n  output \"shl\" = %6\n  output \"shr\" = %7\n  output \"lt\" = %8\n  output \"max\" = %9\n  output \"f\" = %10\n  output \"back\" = %11\n";
    let ta = Tensor::from_slice(DType::U64, &[8], &a).unwrap();
    let tb = Tensor::from_slice(DType::U64, &[8], &b).unwrap();
    let out = run(&ctx, body, &[ta, tb]);
    let zip =
        |f: fn(u64, u64) -> u64| -> Vec<u64> { a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect() };
    assert_eq!(u64s(&out[0]), zip(u64::wrapping_add));
    assert_eq!(u64s(&out[1]), zip(u64::wrapping_mul));
    assert_eq!(u64s(&out[2]), zip(|x, y| x.checked_div(y).unwrap_or(0)));
    assert_eq!(u64s(&out[3]), zip(|x, y| x.checked_rem(y).unwrap_or(0)));
    let shl = |x: u64, s: u64| if s >= 64 { 0 } else { x << s };
    let shr = |x: u64, s: u64| if s >= 64 { 0 } else { x >> s };
    assert_eq!(u64s(&out[4]), zip(shl));
    assert_eq!(u64s(&out[5]), zip(shr));
    assert_eq!(u64s(&out[4])[4], 0xabcd_ef00_0000_0000);
    assert_eq!(u64s(&out[5])[4], 0x123_4567);
    let lt: Vec<bool> = a.iter().zip(&b).map(|(x, y)| x < y).collect();
    assert_eq!(bools(&out[6]), lt);
    assert_eq!(u64s(&out[7]), zip(u64::max));
    let f: Vec<f32> = a.iter().map(|&x| x as f32).collect();
    assert_eq!(out[8].as_slice::<f32>().unwrap(), f.as_slice());
    let back: Vec<u64> = f.iter().map(|&x| x as u64).collect();
    assert_eq!(u64s(&out[9]), back);
    assert_eq!(u64s(&out[9])[0], u64::MAX, "2^64 as f32 saturates");
}

#[test]
fn float_to_i64_truncates_and_saturates() {
    let Some(ctx) = context() else { return };
    let x: [f32; 8] = [
        -2.9,
        2.9,
        1e19,
        -1e19,
        f32::NAN,
        -4294967296.0,
        12345678.0 * 4096.0,
        -0.5,
    ];
    let body = "  %0 = input \"x\" : f32[8]\n  %1 = cast(%0) {to=i64, saturate=true, round_mode=nearest} : i64[8]\n  output \"y\" = %1\n";
    let out = run(&ctx, body, &[Tensor::from_f32(&[8], &x).unwrap()]);
    assert_eq!(
        i64s(&out[0]),
        vec![-2, 2, MAX, MIN, 0, -4294967296, 50_567_897_088, 0]
    );
}

#[test]
fn integer_cumsum_and_reductions() {
    let Some(ctx) = context() else { return };
    let body = "  %0 = input \"x\" : i64[2,4]\n  %1 = constant i64[] [1] : i64[]\n  %2 = cumsum(%0, %1) {exclusive=false, reverse=false} : i64[2,4]\n  %3 = cumprod(%0, %1) {exclusive=true, reverse=true} : i64[2,4]\n  %4 = constant i64[1] [1] : i64[1]\n  %5 = reduce_sum(%0, %4) {keepdims=false, noop_with_empty_axes=false} : i64[2]\n  %6 = reduce_max(%0, %4) {keepdims=false, noop_with_empty_axes=false} : i64[2]\n  %7 = reduce_min(%0, %4) {keepdims=false, noop_with_empty_axes=false} : i64[2]\n  %8 = reduce_prod(%0, %4) {keepdims=false, noop_with_empty_axes=false} : i64[2]\n  %9 = argmax(%0) {axis=1, keepdims=false, select_last_index=false} : i64[2]\n  %10 = argmin(%0) {axis=1, keepdims=false, select_last_index=true} : i64[2]\n  %11 = reduce_l1(%0, %4) {keepdims=false, noop_with_empty_axes=false} : i64[2]\n  output \"cumsum\" = %2\n  output \"cumprod\" = %3\n  output \"sum\" = %5\n  output \"max\" = %6\n  output \"min\" = %7\n  output \"prod\" = %8\n  output \"argmax\" = %9\n  output \"argmin\" = %10\n  output \"l1\" = %11\n";
    let x: [i64; 8] = [0xffff_ffff, 1, -3, MAX, -(1 << 40), 5, -(1 << 40), MIN];
    let out = run(&ctx, body, &[Tensor::from_i64(&[2, 4], &x).unwrap()]);
    assert_eq!(
        i64s(&out[0]),
        vec![
            0xffff_ffff,
            0x1_0000_0000,
            0xffff_fffd,
            MAX.wrapping_add(0xffff_fffd),
            -(1 << 40),
            -(1 << 40) + 5,
            -(2 << 40) + 5,
            (-(2 << 40) + 5i64).wrapping_add(MIN),
        ]
    );
    // Exclusive reverse products: each element gets the product of those after it.
    assert_eq!(
        i64s(&out[1]),
        vec![
            (-3i64).wrapping_mul(MAX),
            (-3i64).wrapping_mul(MAX),
            MAX,
            1,
            (5i64 << 40).wrapping_neg().wrapping_mul(MIN),
            (-(1i64 << 40)).wrapping_mul(MIN),
            MIN,
            1,
        ]
    );
    let sum0 = 0xffff_ffffi64 + 1 - 3;
    assert_eq!(
        i64s(&out[2]),
        vec![
            sum0.wrapping_add(MAX),
            (-(2i64 << 40) + 5).wrapping_add(MIN)
        ]
    );
    assert_eq!(i64s(&out[3]), vec![MAX, 5]);
    assert_eq!(i64s(&out[4]), vec![-3, MIN]);
    assert_eq!(
        i64s(&out[5]),
        vec![
            (-3 * 0xffff_ffffi64).wrapping_mul(MAX),
            (1i64 << 40)
                .wrapping_mul(5)
                .wrapping_mul(1 << 40)
                .wrapping_mul(MIN)
        ]
    );
    assert_eq!(i64s(&out[6]), vec![3, 1]);
    assert_eq!(i64s(&out[7]), vec![2, 3]);
    let l1_1 = (1i64 << 40) + 5 + (1 << 40);
    assert_eq!(
        i64s(&out[8]),
        vec![
            (0xffff_ffffi64 + 1 + 3).wrapping_add(MAX),
            l1_1.wrapping_add(MIN)
        ]
    );
}

#[test]
fn i32_cumsum_and_reductions() {
    let Some(ctx) = context() else { return };
    let body = "  %0 = input \"x\" : i32[6]\n  %1 = constant i64[] [0] : i64[]\n  %2 = cumsum(%0, %1) {exclusive=true, reverse=false} : i32[6]\n  %3 = constant i64[1] [0] : i64[1]\n  %4 = reduce_sum(%0, %3) {keepdims=false, noop_with_empty_axes=false} : i32[]\n  %5 = reduce_mean(%0, %3) {keepdims=false, noop_with_empty_axes=false} : i32[]\n  %6 = reduce_min(%0, %3) {keepdims=false, noop_with_empty_axes=false} : i32[]\n  %7 = argmax(%0) {axis=0, keepdims=false, select_last_index=false} : i64[]\n  output \"cumsum\" = %2\n  output \"sum\" = %4\n  output \"mean\" = %5\n  output \"min\" = %6\n  output \"argmax\" = %7\n";
    let x: [i32; 6] = [i32::MAX, 2, -7, i32::MAX, -1, i32::MIN];
    let out = run(
        &ctx,
        body,
        &[Tensor::from_slice(DType::I32, &[6], &x).unwrap()],
    );
    let cum: Vec<i32> = (0..6)
        .map(|i| x[..i].iter().fold(0i32, |a, &v| a.wrapping_add(v)))
        .collect();
    assert_eq!(out[0].as_slice::<i32>().unwrap(), cum.as_slice());
    let sum = x.iter().fold(0i32, |a, &v| a.wrapping_add(v));
    assert_eq!(out[1].as_slice::<i32>().unwrap(), &[sum]);
    // The mean divides the exact (not wrapped) sum, truncating.
    let exact: i64 = x.iter().map(|&v| i64::from(v)).sum();
    assert_eq!(out[2].as_slice::<i32>().unwrap(), &[(exact / 6) as i32]);
    assert_eq!(out[3].as_slice::<i32>().unwrap(), &[i32::MIN]);
    assert_eq!(i64s(&out[4]), vec![0]);
}

#[test]
fn large_i64_reductions_use_every_lane() {
    let Some(ctx) = context() else { return };
    let body = "  %0 = input \"x\" : i64[3,200]\n  %1 = constant i64[1] [1] : i64[1]\n  %2 = reduce_sum(%0, %1) {keepdims=false, noop_with_empty_axes=false} : i64[3]\n  %3 = reduce_max(%0, %1) {keepdims=false, noop_with_empty_axes=false} : i64[3]\n  %4 = argmin(%0) {axis=1, keepdims=false, select_last_index=false} : i64[3]\n  %5 = constant i64[] [0] : i64[]\n  %6 = cumsum(%0, %5) {exclusive=false, reverse=true} : i64[3,200]\n  output \"sum\" = %2\n  output \"max\" = %3\n  output \"argmin\" = %4\n  output \"cumsum\" = %6\n";
    // A spread of magnitudes around 2^32 and 2^62, both signs, with repeats.
    let x: Vec<i64> = (0..600i64)
        .map(|i| {
            let v = (i * 7919 % 613) - 300;
            v.wrapping_mul(if i % 3 == 0 { 1 << 30 } else { 3 << 52 })
        })
        .collect();
    let out = run(&ctx, body, &[Tensor::from_i64(&[3, 200], &x).unwrap()]);
    let rows: Vec<&[i64]> = x.chunks(200).collect();
    let sum: Vec<i64> = rows
        .iter()
        .map(|r| r.iter().fold(0i64, |a, &v| a.wrapping_add(v)))
        .collect();
    let max: Vec<i64> = rows.iter().map(|r| *r.iter().max().unwrap()).collect();
    let argmin: Vec<i64> = rows
        .iter()
        .map(|r| {
            let m = r.iter().min().unwrap();
            r.iter().position(|v| v == m).unwrap() as i64
        })
        .collect();
    assert_eq!(i64s(&out[0]), sum);
    assert_eq!(i64s(&out[1]), max);
    assert_eq!(i64s(&out[2]), argmin);
    let mut cum = x.clone();
    for r in (0..2).rev() {
        for c in 0..200 {
            cum[r * 200 + c] = cum[r * 200 + c].wrapping_add(cum[(r + 1) * 200 + c]);
        }
    }
    assert_eq!(i64s(&out[3]), cum);
}

#[test]
fn i64_division_on_random_pairs() {
    let Some(ctx) = context() else { return };
    let body = "  %0 = input \"a\" : i64[512]\n  %1 = input \"b\" : i64[512]\n  %2 = div(%0, %1) : i64[512]\n  %3 = mod(%0, %1) : i64[512]\n  %4 = mul(%0, %1) : i64[512]\n  %5 = cast(%0) {to=u64, saturate=true, round_mode=nearest} : u64[512]\n  %6 = cast(%1) {to=u64, saturate=true, round_mode=nearest} : u64[512]\n  %7 = div(%5, %6) : u64[512]\n  output \"div\" = %2\n  output \"mod\" = %3\n  output \"mul\" = %4\n  output \"udiv\" = %7\n";
    // An LCG; divisors are narrowed by random shifts so every quotient size occurs.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s
    };
    let a: Vec<i64> = (0..512).map(|_| next() as i64 >> (next() % 64)).collect();
    let b: Vec<i64> = (0..512).map(|_| next() as i64 >> (next() % 64)).collect();
    let out = run(
        &ctx,
        body,
        &[
            Tensor::from_i64(&[512], &a).unwrap(),
            Tensor::from_i64(&[512], &b).unwrap(),
        ],
    );
    let zip =
        |f: fn(i64, i64) -> i64| -> Vec<i64> { a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect() };
    assert_eq!(i64s(&out[0]), zip(div_ref));
    assert_eq!(i64s(&out[1]), zip(mod_ref));
    assert_eq!(i64s(&out[2]), zip(i64::wrapping_mul));
    let udiv: Vec<u64> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| (x as u64).checked_div(y as u64).unwrap_or(0))
        .collect();
    assert_eq!(u64s(&out[3]), udiv);
}
