//! `compare` finds where two runs diverge: a kernel broken on purpose (the
//! debug runs' fault hook) is reported at its ONNX node, or at the last
//! ONNX output of the fused region that holds it; -O0 against -O2 finds no
//! divergence on any golden model.

mod common;

use rlx_onnx::compare::{first_divergence, name_intermediates, onnx_nodes, Named, OnnxNode};
use rlx_onnx::conformance::Tolerance;
use rlx_onnx::importer::{decode_model, import_model, Registry};
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::{Compiler, DebugOptions, OptLevel, Session, SessionOptions, Target};

/// Every golden case's first data set run at `level` with `fault`, named.
fn run(
    case: &std::path::Path,
    level: OptLevel,
    fault: Option<&str>,
) -> (Vec<OnnxNode>, Named, Named) {
    run_on(case, Target::Cpu, level, fault, None).expect("a CPU run")
}

/// As [`run`], on `target` (None when the target cannot run the case).
fn run_on(
    case: &std::path::Path,
    target: Target,
    level: OptLevel,
    fault: Option<&str>,
    devices: Option<&std::sync::Arc<rlx_onnx::Devices>>,
) -> Option<(Vec<OnnxNode>, Named, Named)> {
    let bytes = std::fs::read(case.join("model.onnx")).unwrap();
    let proto = decode_model(&bytes).unwrap();
    let nodes = onnx_nodes(&proto);
    let imported = import_model(&proto, Some(case.to_path_buf()), &Registry::standard()).unwrap();
    let model = Compiler::new(target)
        .opt_level(level)
        .compile(imported, None)
        .ok()?;
    let names = model.input_names();
    let outs = model.output_names();
    let set = &data_set_dirs(case).unwrap()[0];
    let data = read_data_set(set).unwrap();
    let inputs: Named = names.iter().cloned().zip(data.inputs.clone()).collect();
    let refs: Vec<(&str, &rlx_onnx::ir::Tensor)> =
        names.iter().map(String::as_str).zip(&data.inputs).collect();
    let session = match devices {
        Some(d) => Session::with_devices(model, SessionOptions { threads: 1 }, d.clone()),
        None => Session::new(model, SessionOptions { threads: 1 }),
    }
    .unwrap();
    let opts = DebugOptions {
        capture: true,
        fault: fault.map(str::to_string),
    };
    let r = match session.run_debug(&refs, &opts) {
        Ok(r) => r,
        Err(e) if target != Target::Cpu && rlx_onnx::conformance::run_error_unsupported(&e) => {
            return None
        }
        Err(e) => panic!("{}: {e}", case.display()),
    };
    assert!(r.captured);
    let outputs: Vec<_> = outs.into_iter().zip(r.outputs).collect();
    let named = name_intermediates(&nodes, &r.intermediates, &outputs);
    Some((nodes, named, inputs))
}

#[test]
fn o0_and_o2_agree_on_every_golden_model() {
    let tol = Tolerance {
        rtol: 1e-3,
        atol: 1e-5,
    };
    for case in common::golden_cases() {
        let (nodes, o2, inputs) = run(&case, OptLevel::O2, None);
        let (_, o0, _) = run(&case, OptLevel::O0, None);
        let c = first_divergence(&nodes, &o2, &o0, &inputs, tol);
        assert!(c.compared > 0, "{}: nothing compared", case.display());
        assert!(c.first.is_none(), "{}: {:?}", case.display(), c.first);
    }
}

#[test]
fn a_broken_kernel_is_found_at_its_node() {
    let case = common::root().join("golden/cnn");
    let tol = Tolerance::default();
    // -O0 keeps every ONNX node: the broken one is reported by name, and its
    // input still agrees.
    let (nodes, broken, inputs) = run(&case, OptLevel::O0, Some("pool1"));
    let (_, good, _) = run(&case, OptLevel::O0, None);
    let d = first_divergence(&nodes, &broken, &good, &inputs, tol)
        .first
        .expect("a divergence");
    assert_eq!((d.node.as_str(), d.op_type.as_str()), ("pool1", "MaxPool"));
    assert_eq!(d.inputs.len(), 1);
    let input = &d.inputs[0];
    assert!(
        matches!(&input.diff, Some(Ok(x)) if x.mismatched == 0),
        "{input:?}"
    );
    // At -O2 conv2, bn2 and relu2 are one step: a fault in conv2 shows at
    // relu2, the region's last ONNX output, and nothing before it differs.
    let (nodes, broken, inputs) = run(&case, OptLevel::O2, Some("conv2"));
    let (_, good, _) = run(&case, OptLevel::O0, None);
    let d = first_divergence(&nodes, &broken, &good, &inputs, tol)
        .first
        .expect("a divergence");
    assert_eq!(d.node, "relu2");
    let diff = d.diff.unwrap();
    assert_eq!(diff.mismatched, 1, "{diff:?}");
}

/// wgpu exposes its intermediates too (every node output as an extra graph
/// output): on every golden model it runs, they match the CPU's.
#[test]
fn wgpu_intermediates_match_the_cpu() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    let tol = Tolerance {
        rtol: 1e-3,
        atol: 1e-4,
    };
    let (mut ran, mut compared) = (0, 0);
    for case in common::golden_cases() {
        let Some((nodes, gpu, inputs)) =
            run_on(&case, Target::Wgpu, OptLevel::O2, None, Some(&devices))
        else {
            continue;
        };
        let (_, cpu, _) = run(&case, OptLevel::O2, None);
        let c = first_divergence(&nodes, &gpu, &cpu, &inputs, tol);
        assert!(c.compared > 0, "{}: nothing compared", case.display());
        compared += c.compared;
        assert!(c.first.is_none(), "{}: {:?}", case.display(), c.first);
        ran += 1;
    }
    assert!(ran >= 5, "wgpu ran {ran} golden models");
    // Intermediates, not just the outputs: more tensors than models.
    assert!(compared > 3 * ran, "{compared} tensors in {ran} models");
}
