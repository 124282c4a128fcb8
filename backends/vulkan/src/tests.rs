//! Device checks on the first Vulkan device (lavapipe in CI) with the
//! validation layer on where it is installed (in CI it must be): small
//! graphs run and their values are checked exactly, and the layer reports
//! nothing. Without a device they skip, saying so, except under `CI`.

use std::sync::Arc;

use rlx_gpu::io::{Input, Output, Place};
use rlx_ir::analysis::infer_graph;
use rlx_ir::text::parse_graph;
use rlx_ir::{Tensor, Weights};
use rlx_passes::plan_memory;
use rlx_wgsl::{plan, PlanOptions};

use crate::{Buffer, Context, ContextOptions, Executable, Validation, VulkanError};

const NESTED_CONTROL: &str = include_str!("../../wgsl/tests/data/nested_control.ir");

fn context() -> Option<Arc<Context>> {
    let ci = std::env::var_os("CI").is_some();
    let opts = ContextOptions {
        validation: if ci {
            Validation::Required
        } else {
            Validation::IfPresent
        },
        ..ContextOptions::default()
    };
    match Context::with_options(&opts) {
        Ok(c) => Some(Arc::new(c)),
        Err(e @ VulkanError::Unavailable(_)) if !ci => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn load(ctx: &Arc<Context>, body: &str) -> Executable {
    let src = format!("rlx-ir 2\ngraph {{\n{body}}}\n");
    let mut g = parse_graph(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    infer_graph(&mut g, None).unwrap();
    let mem = plan_memory(&g).unwrap();
    let opts = PlanOptions { caps: ctx.caps() };
    let s = plan(&g, &Weights::default(), &mem, &opts).unwrap();
    Executable::new(ctx.clone(), s).unwrap()
}

fn pipeline_names(exe: &Executable) -> Vec<&str> {
    exe.schedule
        .pipelines
        .iter()
        .map(|p| p.name.as_str())
        .collect()
}

fn quiet(ctx: &Context) {
    assert_eq!(ctx.take_validation_messages(), Vec::<String>::new());
}

#[test]
fn a_straight_line_graph_runs_twice_from_its_recorded_commands() {
    let Some(ctx) = context() else { return };
    let exe = load(
        &ctx,
        "  %0 = input \"x\" : f32[5]\n  %1 = input \"y\" : f32[5]\n  %2 = mul(%0, %1) : f32[5]\n  %3 = add(%2, %0) : f32[5]\n  %4 = softmax(%3) {axis=-1} : f32[5]\n  output \"z\" = %3\n  output \"s\" = %4\n",
    );
    for scale in [1.0f32, -2.0] {
        let x: Vec<f32> = (0..5).map(|i| i as f32 * scale).collect();
        let y = [0.5f32, 1.0, 1.5, 2.0, 2.5];
        let xt = Tensor::from_f32(&[5], &x).unwrap();
        let yt = Tensor::from_f32(&[5], &y).unwrap();
        let out = exe.run(&[&xt, &yt]).unwrap();
        let z: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a * b + a).collect();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), z.as_slice());
        let m = z.iter().cloned().fold(f32::MIN, f32::max);
        let e: Vec<f32> = z.iter().map(|v| (v - m).exp()).collect();
        let sum: f32 = e.iter().sum();
        for (got, want) in out[1].as_slice::<f32>().unwrap().iter().zip(&e) {
            assert!((got - want / sum).abs() < 1e-6, "{got} vs {}", want / sum);
        }
    }
    quiet(&ctx);
}

#[test]
fn nested_control_flow_runs() {
    let Some(ctx) = context() else { return };
    let exe = load(&ctx, NESTED_CONTROL);
    let x = Tensor::from_f32(&[2], &[1.0, -2.0]).unwrap();
    let out = exe.run(&[&x]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[8.0, -4.0]);
    assert_eq!(out[1].bytes(), &[0, 1, 1]);
    quiet(&ctx);
}

#[test]
fn outputs_stay_on_the_device_and_feed_the_next_run() {
    let Some(ctx) = context() else { return };
    let exe = load(
        &ctx,
        "  %0 = input \"x\" : f32[3]\n  %1 = add(%0, %0) : f32[3]\n  output \"y\" = %1\n",
    );
    let x = Buffer::upload(&ctx, &Tensor::from_f32(&[3], &[1.0, 2.0, 3.0]).unwrap()).unwrap();
    let mut t = x;
    for _ in 0..3 {
        let out = exe.run_io(&[Input::Device(&t)], &[Place::Device]).unwrap();
        let Some(Output::Device(d)) = out.into_iter().next() else {
            panic!("the output left the device")
        };
        t = d;
    }
    assert_eq!(
        t.download().unwrap().as_slice::<f32>().unwrap(),
        &[8.0, 16.0, 24.0]
    );
    let row = t.download_slice(0, 1, 3).unwrap();
    assert_eq!(row.as_slice::<f32>().unwrap(), &[16.0, 24.0]);
    quiet(&ctx);
}

#[test]
fn profiles_time_every_dispatch() {
    let Some(ctx) = context() else { return };
    let exe = load(&ctx, NESTED_CONTROL);
    let x = Tensor::from_f32(&[2], &[1.0, -2.0]).unwrap();
    match exe.profile(&[&x]) {
        Ok(times) => assert_eq!(times.len(), exe.schedule.dispatches.len()),
        Err(VulkanError::Unsupported(why)) => eprintln!("no profile here: {why}"),
        Err(e) => panic!("{e}"),
    }
    quiet(&ctx);
}

/// Where the device reports pipeline statistics (lavapipe does), every
/// pipeline of the schedule has its list, named after it.
#[test]
fn pipelines_carry_the_drivers_statistics() {
    let Some(ctx) = context() else { return };
    let exe = load(&ctx, NESTED_CONTROL);
    let stats = exe.kernel_statistics();
    if ctx.statistics.is_none() {
        eprintln!("no pipeline statistics on this device");
        assert!(stats.is_empty());
        return;
    }
    let names = pipeline_names(&exe);
    let got: Vec<&str> = stats.iter().map(|s| s.pipeline.as_str()).collect();
    assert_eq!(got, names);
    assert!(stats.iter().all(|s| !s.stats.is_empty()), "{stats:?}");
    quiet(&ctx);
}

#[test]
fn a_wrong_input_is_an_error_that_names_it() {
    let Some(ctx) = context() else { return };
    let exe = load(
        &ctx,
        "  %0 = input \"x\" : f32[3]\n  %1 = add(%0, %0) : f32[3]\n  output \"y\" = %1\n",
    );
    let wrong = Tensor::from_f32(&[2], &[1.0, 2.0]).unwrap();
    let e = exe.run(&[&wrong]).unwrap_err();
    assert!(
        matches!(&e, VulkanError::Input { index: 0, reason } if reason.contains("`x`")),
        "{e}"
    );
}

/// Gathers of 1- and 2-byte elements pack them into words: a bool mask
/// along its first axis (negative and out-of-range indices included) and
/// i16 columns along the last, checked element by element.
#[test]
fn gathers_of_bytes_and_halves_pack_words() {
    let Some(ctx) = context() else { return };
    let exe = load(
        &ctx,
        "  %0 = input \"m\" : bool[3,5]\n  %1 = input \"i\" : i64[4]\n  %2 = gather(%0, %1) {axis=0} : bool[4,5]\n  %3 = input \"h\" : i16[2,5]\n  %4 = input \"j\" : i32[3]\n  %5 = gather(%3, %4) {axis=1} : i16[2,3]\n  output \"a\" = %2\n  output \"b\" = %5\n",
    );
    let mask: Vec<u8> = (0..15).map(|k| u8::from(k % 3 == 0)).collect();
    let m = Tensor::new(
        rlx_ir::DType::Bool,
        vec![3, 5],
        rlx_ir::tensor::Bytes::copy_from(&mask),
    )
    .unwrap();
    let idx = [2i64, -1, 0, 7];
    let i = Tensor::from_i64(&[4], &idx).unwrap();
    let halves: Vec<i16> = (0..10).map(|k| k * 1000 - 4321).collect();
    let h = Tensor::from_slice(rlx_ir::DType::I16, &[2, 5], &halves).unwrap();
    let cols = [4i32, 0, -2];
    let j = Tensor::from_slice(rlx_ir::DType::I32, &[3], &cols).unwrap();
    let out = exe.run(&[&m, &i, &h, &j]).unwrap();
    let mut want = Vec::new();
    for &k in &idx {
        let row = if k < 0 { k + 3 } else { k };
        for c in 0..5 {
            want.push(if (0..3).contains(&row) {
                mask[row as usize * 5 + c]
            } else {
                0
            });
        }
    }
    assert_eq!(out[0].bytes(), want.as_slice());
    let mut want = Vec::new();
    for r in 0..2 {
        for &c in &cols {
            let c = if c < 0 { c + 5 } else { c } as usize;
            want.push(halves[r * 5 + c]);
        }
    }
    assert_eq!(out[1].as_slice::<i16>().unwrap(), want.as_slice());
    quiet(&ctx);
}

/// GatherND with a batch dim, negative and out-of-range tuples, over f32,
/// i64 and bool data, checked element by element.
#[test]
fn gather_nd_picks_tuples_per_batch() {
    let Some(ctx) = context() else { return };
    let exe = load(
        &ctx,
        "  %0 = input \"x\" : f32[2,3,4]\n  %1 = input \"i\" : i64[2,2,1]\n  %2 = gather_nd(%0, %1) {batch_dims=1} : f32[2,2,4]\n  %3 = input \"z\" : i64[2,3,4]\n  %4 = gather_nd(%3, %1) {batch_dims=1} : i64[2,2,4]\n  %5 = input \"m\" : bool[2,3,4]\n  %6 = gather_nd(%5, %1) {batch_dims=1} : bool[2,2,4]\n  output \"a\" = %2\n  output \"b\" = %4\n  output \"c\" = %6\n",
    );
    let xs: Vec<f32> = (0..24).map(|k| k as f32 * 1.5 - 7.0).collect();
    let zs: Vec<i64> = (0..24).map(|k| (k - 12) * (1i64 << 40)).collect();
    let idx = [2i64, -3, 5, 1];
    let x = Tensor::from_f32(&[2, 3, 4], &xs).unwrap();
    let z = Tensor::from_i64(&[2, 3, 4], &zs).unwrap();
    let i = Tensor::from_i64(&[2, 2, 1], &idx).unwrap();
    let mask: Vec<u8> = (0..24).map(|k| u8::from(k % 5 < 2)).collect();
    let m = Tensor::new(
        rlx_ir::DType::Bool,
        vec![2, 3, 4],
        rlx_ir::tensor::Bytes::copy_from(&mask),
    )
    .unwrap();
    let out = exe.run(&[&x, &i, &z, &m]).unwrap();
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for (t, &k) in idx.iter().enumerate() {
        let batch = t / 2;
        let row = if k < 0 { k + 3 } else { k };
        for e in 0..4 {
            let ok = (0..3).contains(&row);
            let at = batch * 12 + row.max(0) as usize * 4 + e;
            a.push(if ok { xs[at] } else { 0.0 });
            b.push(if ok { zs[at] } else { 0 });
            c.push(if ok { mask[at] } else { 0 });
        }
    }
    assert_eq!(out[0].as_slice::<f32>().unwrap(), a.as_slice());
    assert_eq!(out[1].as_slice::<i64>().unwrap(), b.as_slice());
    assert_eq!(out[2].bytes(), c.as_slice());
    quiet(&ctx);
}

/// A product whose few output tiles split K (16 chunks summed after):
/// against a double-precision reference, within f32 rounding.
#[test]
fn a_small_output_splits_k_and_sums_the_parts() {
    let Some(ctx) = context() else { return };
    let exe = load(
        &ctx,
        "  %0 = input \"a\" : f32[64,1024]\n  %1 = input \"b\" : f32[1024,48]\n  %2 = matmul(%0, %1) : f32[64,48]\n  output \"c\" = %2\n",
    );
    let names = pipeline_names(&exe);
    assert!(names.contains(&"matmul.split_k_sum"), "{names:?}");
    let a: Vec<f32> = (0..64 * 1024)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25)
        .collect();
    let b: Vec<f32> = (0..1024 * 48)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.125)
        .collect();
    let at = Tensor::from_f32(&[64, 1024], &a).unwrap();
    let bt = Tensor::from_f32(&[1024, 48], &b).unwrap();
    let out = exe.run(&[&at, &bt]).unwrap();
    let got = out[0].as_slice::<f32>().unwrap();
    for m in 0..64 {
        for n in 0..48 {
            let want: f64 = (0..1024)
                .map(|k| f64::from(a[m * 1024 + k]) * f64::from(b[k * 48 + n]))
                .sum();
            let g = f64::from(got[m * 48 + n]);
            assert!(
                (g - want).abs() <= 1e-4 * want.abs().max(1.0),
                "c[{m},{n}] = {g}, want {want}"
            );
        }
    }
    quiet(&ctx);
}
