//! Device check of control flow: a loop with an `if` inside runs on the
//! first Vulkan adapter (lavapipe in CI); without one it skips, saying so.

use rlx_ir::analysis::infer_graph;
use rlx_ir::text::parse_graph;
use rlx_ir::Weights;
use rlx_passes::plan_memory;
use rlx_wgsl::{plan, PlanOptions};

const NESTED_CONTROL: &str = include_str!("../../wgsl/tests/data/nested_control.ir");

#[test]
fn nested_control_flow_runs() {
    let ctx = match crate::Context::new() {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let src = format!("rlx-ir 2\ngraph {{\n{NESTED_CONTROL}}}\n");
    let mut g = parse_graph(&src).unwrap();
    infer_graph(&mut g, None).unwrap();
    let mem = plan_memory(&g).unwrap();
    let opts = PlanOptions { caps: ctx.caps() };
    let s = plan(&g, &Weights::default(), &mem, &opts).unwrap();
    let exe = crate::Executable::new(ctx, s).unwrap();
    let x = rlx_ir::Tensor::from_f32(&[2], &[1.0, -2.0]).unwrap();
    let out = exe.run(&[&x]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[8.0, -4.0]);
    assert_eq!(out[1].bytes(), &[0, 1, 1]);
}
