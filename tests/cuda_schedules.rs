//! insta snapshots of the CUDA schedule of every golden model (and the light
//! models), planned without a device (the CUDA plan is pure). Models the
//! backend cannot run pin their reason instead.

mod common;

use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{arange_input, data_set_dirs, light_models, read_data_set};
use rlx_onnx::{Compiler, Session, SessionOptions, Target};

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(common::root().join("golden/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

/// The printed schedule, or the error that stops the model on CUDA.
fn schedule(model: &std::path::Path, inputs: Vec<Tensor>) -> String {
    let compiled = match Compiler::new(Target::Cuda).compile_file(model) {
        Ok(c) => c,
        Err(e) => return format!("does not compile for cuda: {e}\n"),
    };
    let names = compiled.input_names();
    let session = Session::new(compiled, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&inputs).collect();
    match session.cuda_schedule(&named) {
        Ok(s) => s.to_string(),
        Err(e) => format!("cannot be planned for cuda: {e}\n"),
    }
}

#[test]
fn golden_cuda_schedules() {
    settings().bind(|| {
        for case in common::golden_cases() {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
            insta::assert_snapshot!(
                format!("cuda__{name}"),
                schedule(&case.join("model.onnx"), set.inputs)
            );
        }
    });
}

#[test]
fn light_cuda_schedules() {
    let Some(data) = common::testdata() else {
        return;
    };
    settings().bind(|| {
        for m in light_models(&data.join("light")).unwrap() {
            let c = Compiler::new(Target::Cpu).compile_file(&m.model).unwrap();
            let g = &c.graph;
            let dims = g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap();
            let x = arange_input(&dims).unwrap();
            insta::assert_snapshot!(format!("cuda__{}", m.name), schedule(&m.model, vec![x]));
        }
    });
}

/// One decode step of the golden decoder with its cache written in place
/// (`kv-cache-in-place`): batch 2, a buffer of 17 positions. The plan
/// writes each new key and value at `cache_position` over the cache's own
/// buffer (`tensor_update`: the past input and the present output share a
/// slot, so only the new position moves) and has no concatenation of the
/// cache left.
#[test]
fn decoder_decode_step_writes_its_cache_in_place() {
    let model = Compiler::new(Target::Cuda)
        .compile_file(&common::root().join("golden/decoder/model.onnx"))
        .unwrap();
    let model = rlx_onnx::generate::in_place_model(&model).unwrap();
    let names = model.input_names();
    let session = Session::new(model, SessionOptions { threads: 1 }).unwrap();
    let (b, cap) = (2, 17);
    let mut inputs = Vec::new();
    for n in &names {
        let t = match n.as_str() {
            "input_ids" => Tensor::from_i64(&[b, 1], &[3, 4]).unwrap(),
            "attention_mask" => Tensor::from_i64(&[b, cap], &[1; 2 * 17]).unwrap(),
            "position_ids" => Tensor::from_i64(&[b, 1], &[9, 9]).unwrap(),
            "cache_position" => Tensor::from_i64(&[b], &[9, 9]).unwrap(),
            _ => Tensor::zeros(rlx_onnx::ir::DType::F32, &[b, 2, cap, 8]).unwrap(),
        };
        inputs.push(t);
    }
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&inputs).collect();
    let plan = session.cuda_schedule(&named).unwrap().to_string();
    assert_eq!(plan.matches("tensor_update_b4").count(), 4, "{plan}");
    assert!(!plan.contains("tensor_scatter_b4"), "{plan}");
    assert!(!plan.contains("concat"), "{plan}");
    settings().bind(|| insta::assert_snapshot!("cuda__decoder_in_place", plan));
}
