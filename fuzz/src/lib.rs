//! The bodies of rlx-onnx's fuzz targets. Each takes the fuzzer's bytes and
//! must return, whatever they hold: a typed error is a pass, a panic, an
//! abort, a hang or an allocation past [`limits`] is a finding.
//!
//! - [`import`]: ONNX bytes → import → compile for the CPU → one run.
//! - [`ir_text`]: IR text → parse → print → parse again (the dump format
//!   is stable: printing a parsed graph gives text that parses to the same
//!   print) → compile → one run.
//! - [`artifact`]: `.rlx` bytes with their header's length and CRC fixed,
//!   so the fuzzer reaches past the checksum → load → one run.
//! - [`tensor_files`]: the first byte picks `.npy`, `.npz` or ONNX `.pb`
//!   tensor bytes, the rest is read.
//! - [`structured`]: an [`arbitrary`]-driven model of up to 12 ONNX nodes
//!   (see [`structured`](mod@structured)) → compile → one run.
//! - [`gpu_plans`]: the same generated models compiled for CUDA (its
//!   pipeline: legalization, the GPU-only passes) and planned without a
//!   device (the CUDA lowering of every node).
//! - [`text_ops`]: the same over strings, bytes, sequences and images
//!   (string and regex ops, Einsum equations, ImageDecoder on the fuzzer's
//!   bytes) → compile → one run.
//!
//! Runs use deterministic inputs of each model's declared types, symbolic
//! dims bound to 2, and only when they are small. `fuzz/corpus/<target>`
//! seeds each target; `fuzz/regressions/<target>` keeps every input that
//! once crashed; `tests/corpus.rs` runs both through the bodies in every
//! `cargo test`.

pub mod structured;

use rlx_onnx::importer::{import_bytes, ImportedModel, Registry};
use rlx_onnx::ir::{DType, Tensor};
use rlx_onnx::passes::PassError;
use rlx_onnx::{CompiledModel, Compiler, DimInfo, Error, Limits, Session, SessionOptions, Target};

/// The limits every fuzzed model compiles and runs under: small enough
/// that nothing a model asks for within them can exhaust the fuzzer's
/// memory (libFuzzer's default `-rss_limit_mb` is 2048) or time.
pub fn limits() -> Limits {
    Limits {
        max_tensor_elements: 1 << 22,
        max_loop_iterations: 1 << 10,
        max_nodes: 1 << 12,
        max_nesting: 16,
        max_arena_bytes: 1 << 28,
        max_specializations: 4,
    }
}

/// The most input elements a fuzzed run is given (larger models compile
/// but do not run).
const MAX_INPUT_ELEMENTS: usize = 1 << 12;

/// ONNX model bytes: import, compile, run.
pub fn import(data: &[u8]) {
    if let Ok(model) = import_bytes(data, None, &Registry::standard()) {
        compile_and_run(model);
    }
}

/// IR text: parse, print, parse again, compile, run.
pub fn ir_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(graph) = rlx_onnx::ir::text::parse_graph(text) else {
        return;
    };
    let printed = rlx_onnx::ir::text::print_graph(&graph);
    let again = rlx_onnx::ir::text::parse_graph(&printed)
        .unwrap_or_else(|e| panic!("a printed graph does not parse: {e}\n{printed}"));
    assert_eq!(
        rlx_onnx::ir::text::print_graph(&again),
        printed,
        "printing a parsed graph is not stable"
    );
    if rlx_onnx::ir::verify(&graph, None).is_err() {
        return;
    }
    compile_and_run(ImportedModel {
        graph,
        weights: Default::default(),
        ir_version: 8,
        opsets: vec![(String::new(), rlx_onnx::importer::LATEST_OPSET)],
        producer: String::new(),
        metadata: Default::default(),
    });
}

/// Artifact bytes, with the header's payload length and CRC made right.
pub fn artifact(data: &[u8]) {
    let mut bytes = data.to_vec();
    if bytes.len() >= 32 {
        let payload = (bytes.len() - 32) as u64;
        bytes[16..24].copy_from_slice(&payload.to_le_bytes());
        let crc = crc32fast::hash(&bytes[32..]);
        bytes[24..28].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(model) = rlx_onnx::artifact::from_bytes(&bytes) {
        run(model);
    }
}

/// Tensor file bytes: `.npy` (first byte 0), `.npz` (1) or `.pb` (else).
pub fn tensor_files(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    match kind % 3 {
        0 => drop(rlx_onnx::npy::from_bytes(rest, "fuzz.npy")),
        1 => drop(rlx_onnx::npy::npz_from_bytes(rest, "fuzz.npz")),
        _ => drop(rlx_onnx::importer::tensor::tensor_from_pb(rest)),
    }
}

/// A generated model (see [`structured`](mod@structured)).
pub fn structured(data: &[u8]) {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(spec) = u.arbitrary::<structured::Spec>() else {
        return;
    };
    import(&structured::encode(&spec));
}

/// A generated model compiled for CUDA and planned without a device.
pub fn gpu_plans(data: &[u8]) {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(spec) = u.arbitrary::<structured::Spec>() else {
        return;
    };
    let Ok(model) = import_bytes(&structured::encode(&spec), None, &Registry::standard()) else {
        return;
    };
    let compiler = Compiler {
        limits: limits(),
        verify: true,
        ..Compiler::new(Target::Cuda)
    };
    match compiler.compile(model, None) {
        Ok(m) => on_inputs(m, |s, named| s.cuda_schedule(named).map(drop)),
        Err(e) => no_bug(&e),
    }
}

/// A generated model over strings, bytes, sequences and images.
pub fn text_ops(data: &[u8]) {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(spec) = u.arbitrary::<structured::TextSpec>() else {
        return;
    };
    import(&structured::encode_text(&spec));
}

/// Compiles `model` for the CPU (verifying after every pass) and runs it.
pub fn compile_and_run(model: ImportedModel) {
    let compiler = Compiler {
        limits: limits(),
        verify: true,
        ..Compiler::new(Target::Cpu)
    };
    match compiler.compile(model, None) {
        Ok(m) => run(m),
        Err(e) => no_bug(&e),
    }
}

/// Runs `model` once on deterministic inputs, when they are small.
pub fn run(model: CompiledModel) {
    on_inputs(model, |s, named| s.run(named).map(drop));
}

/// A session of `model` under [`limits`] and its deterministic inputs (when
/// they are small), handed to `f`; an error `f` returns must not be a
/// compiler bug.
fn on_inputs(
    mut model: CompiledModel,
    f: impl FnOnce(&Session, &[(&str, &Tensor)]) -> Result<(), Error>,
) {
    model.limits = limits();
    let Some(inputs) = inputs(&model) else {
        return;
    };
    let Ok(session) = Session::new(model, SessionOptions { threads: 1 }) else {
        return;
    };
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    if let Err(e) = f(&session, &named) {
        no_bug(&e);
    }
}

/// Errors that only a compiler bug makes panic here: a pass that leaves
/// an invalid graph is not the model's fault.
fn no_bug(e: &Error) {
    if let Error::Pass(p @ PassError::Verify { .. }) = e {
        panic!("{p}");
    }
}

/// One input per declared input of `model`: symbolic dims 2, values a
/// small repeating pattern of the dtype; `None` when a dim is an
/// expression, a dtype has no pattern, or the inputs are large.
fn inputs(model: &CompiledModel) -> Option<Vec<(String, Tensor)>> {
    let mut total = 0usize;
    model
        .inputs()
        .into_iter()
        .map(|io| {
            let dims: Vec<usize> = io
                .dims
                .iter()
                .map(|d| match d {
                    DimInfo::Fixed(n) => Some(*n),
                    DimInfo::Symbol(_) => Some(2),
                    DimInfo::Expr(_) => None,
                })
                .collect::<Option<_>>()?;
            let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
            total = total.checked_add(n)?;
            if total > MAX_INPUT_ELEMENTS {
                return None;
            }
            Some((io.name, pattern(io.dtype, &dims, n)?))
        })
        .collect()
}

fn pattern(dtype: DType, dims: &[usize], n: usize) -> Option<Tensor> {
    let f = |i: usize| (i % 7) as f64 / 2.0 - 1.5;
    let t = match dtype {
        DType::F32 => Tensor::from_slice(
            dtype,
            dims,
            &(0..n).map(|i| f(i) as f32).collect::<Vec<_>>(),
        ),
        DType::F64 => Tensor::from_slice(dtype, dims, &(0..n).map(f).collect::<Vec<_>>()),
        DType::I64 => Tensor::from_slice(
            dtype,
            dims,
            &(0..n).map(|i| (i % 3) as i64).collect::<Vec<_>>(),
        ),
        DType::I32 => Tensor::from_slice(
            dtype,
            dims,
            &(0..n).map(|i| (i % 3) as i32).collect::<Vec<_>>(),
        ),
        DType::Str => {
            const WORDS: &[&str] = &["a b", "ab1", "", "Héllo wörld", "x_9 y", "日本1", "a,b,,c"];
            Tensor::from_strings(
                dims,
                (0..n).map(|i| WORDS[i % WORDS.len()].into()).collect(),
            )
        }
        DType::Bool | DType::U8 | DType::I8 => Tensor::from_slice(
            dtype,
            dims,
            &(0..n).map(|i| (i % 2) as u8).collect::<Vec<_>>(),
        ),
        _ => Tensor::zeros(dtype, dims),
    };
    t.ok()
}
