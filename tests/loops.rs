//! Loops as exporters write them (`tests/data/loops`, made by its
//! `make_models.py` with ONNX Runtime's outputs): at -O2 the weights a decoder
//! passes through its loop become constants of the body, what the body
//! computes from them and from the encoder's features runs once before the
//! loop, and the outputs still match ONNX Runtime's (rtol 1e-4, atol 1e-5) and
//! the unoptimized (-O0) run's.

mod common;

use rlx_onnx::conformance::Tolerance;
use rlx_onnx::ir::{Op, Tensor};
use rlx_onnx::testdata::read_data_set;
use rlx_onnx::{CompiledModel, Compiler, OptLevel, Session, SessionOptions, Target};

const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

fn run(model: CompiledModel, inputs: &[Tensor]) -> Vec<Tensor> {
    let names = model.input_names();
    let session = Session::new(model, SessionOptions { threads: 2 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    session.run(&named).unwrap()
}

fn check(got: &[Tensor], want: &[Tensor], what: &str) {
    common::check_outputs(got, want, TOL, what);
}

#[test]
fn a_decoder_loop_loses_its_invariants_and_matches_onnx_runtime() {
    let case = common::root().join("tests/data/loops/decoder_loop/model.onnx");
    let data = read_data_set(&case.with_file_name("test_data_set_0")).unwrap();
    let o2 = Compiler::new(Target::Cpu).compile_file(&case).unwrap();
    let g = &o2.graph;
    let loops: Vec<_> = g
        .node_ids()
        .into_iter()
        .filter_map(|id| match &g.node(id).op {
            Op::Loop(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(loops.len(), 1);
    let body = &loops[0].body;
    // Carried: the state and the output buffer; the features and the seven
    // weights were passed through.
    assert_eq!(loops[0].num_carried, 2);
    // The weights' transposes folded inside the body; the features'
    // projection moved out of it.
    for gone in ["proj", "w_x_t", "w_h_t"] {
        let computed = body.node_ids().into_iter().any(|id| {
            let n = body.node(id);
            !n.op.is_leaf() && n.origin.iter().any(|o| o == gone)
        });
        assert!(!computed, "`{gone}` is still computed in the body");
    }
    let got = run(o2, &data.inputs);
    check(&got, &data.outputs, "-O2 against ONNX Runtime");
    let o0 = Compiler::new(Target::Cpu)
        .opt_level(OptLevel::O0)
        .compile_file(&case)
        .unwrap();
    check(&got, &run(o0, &data.inputs), "-O2 against -O0");
}
