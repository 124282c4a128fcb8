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
