//! insta snapshots of the wgpu schedule of every golden model (and the light
//! models), planned for lavapipe's limits, without a device. Models the
//! backend cannot run pin their reason instead.

mod common;

use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{arange_input, data_set_dirs, light_models, read_data_set};
use rlx_onnx::wgsl::Caps;
use rlx_onnx::{Compiler, Session, SessionOptions, Target};

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(common::root().join("golden/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

/// The printed schedule, or the error that stops the model on wgpu.
fn schedule(model: &std::path::Path, inputs: Vec<Tensor>) -> String {
    let compiled = match Compiler::new(Target::Wgpu).compile_file(model) {
        Ok(c) => c,
        Err(e) => return format!("does not compile for wgpu: {e}\n"),
    };
    let names = compiled.input_names();
    let session = Session::new(compiled, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&inputs).collect();
    match session.wgpu_schedule(&named, Caps::default()) {
        Ok(s) => s.to_string(),
        Err(e) => format!("cannot be planned for wgpu: {e}\n"),
    }
}

#[test]
fn golden_wgpu_schedules() {
    settings().bind(|| {
        for case in common::golden_cases() {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
            insta::assert_snapshot!(
                format!("wgpu__{name}"),
                schedule(&case.join("model.onnx"), set.inputs)
            );
        }
    });
}

#[test]
fn light_wgpu_schedules() {
    let Some(data) = common::testdata() else {
        return;
    };
    settings().bind(|| {
        for m in light_models(&data.join("light")).unwrap() {
            let c = Compiler::new(Target::Cpu).compile_file(&m.model).unwrap();
            let g = &c.graph;
            let dims = g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap();
            let x = arange_input(&dims).unwrap();
            insta::assert_snapshot!(format!("wgpu__{}", m.name), schedule(&m.model, vec![x]));
        }
    });
}
