//! The ONNX backend-test layout: `model.onnx` plus `test_data_set_*/input_*.pb`
//! and `output_*.pb`.

use std::path::{Path, PathBuf};

use rlx_importer::tensor::{tensor_from_pb, value_from_pb};
use rlx_ir::{Graph, Tensor, TensorType};

/// One test data set: inputs and expected outputs, in index order.
#[derive(Debug, Clone)]
pub struct DataSet {
    pub dir: PathBuf,
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
}

/// Why a test case directory could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TestDataError {
    #[error("cannot read `{0}`: {1}")]
    Io(PathBuf, String),
    #[error("`{0}`: {1}")]
    Tensor(PathBuf, String),
}

fn numbered(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>, TestDataError> {
    let mut v: Vec<(usize, PathBuf)> = Vec::new();
    let rd =
        std::fs::read_dir(dir).map_err(|e| TestDataError::Io(dir.to_path_buf(), e.to_string()))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(".pb"))
            .and_then(|n| n.parse().ok())
        {
            v.push((n, e.path()));
        }
    }
    v.sort();
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

/// Reads one `.pb` tensor file.
pub fn read_pb(path: &Path) -> Result<Tensor, TestDataError> {
    let bytes = crate::files::read_regular(path)
        .map_err(|e| TestDataError::Io(path.to_path_buf(), e.to_string()))?;
    tensor_from_pb(&bytes).map_err(|e| TestDataError::Tensor(path.to_path_buf(), e.to_string()))
}

/// Reads one `.pb` file holding a value of type `ty`: a `TensorProto`, or a
/// `SequenceProto` / `OptionalProto` for a sequence or an optional.
pub fn read_value_pb(path: &Path, ty: &TensorType) -> Result<Tensor, TestDataError> {
    let bytes = crate::files::read_regular(path)
        .map_err(|e| TestDataError::Io(path.to_path_buf(), e.to_string()))?;
    value_from_pb(&bytes, ty).map_err(|e| TestDataError::Tensor(path.to_path_buf(), e.to_string()))
}

/// Reads `dir/input_*.pb` and `dir/output_*.pb` as the values `g` takes and
/// gives (so sequence and optional files decode as what they are).
pub fn read_data_set_for(dir: &Path, g: &Graph) -> Result<DataSet, TestDataError> {
    let ins: Vec<TensorType> = g
        .inputs()
        .iter()
        .map(|&i| g.node(i).outputs[0].clone())
        .collect();
    let outs: Vec<TensorType> = g.outputs().iter().map(|o| g.ty(o.value).clone()).collect();
    let read = |paths: Vec<PathBuf>, types: &[TensorType]| -> Result<Vec<Tensor>, TestDataError> {
        paths
            .iter()
            .enumerate()
            .map(|(i, p)| match types.get(i) {
                Some(t) => read_value_pb(p, t),
                None => read_pb(p),
            })
            .collect()
    };
    Ok(DataSet {
        dir: dir.to_path_buf(),
        inputs: read(numbered(dir, "input_")?, &ins)?,
        outputs: read(numbered(dir, "output_")?, &outs)?,
    })
}

/// Reads `dir/input_*.pb` and `dir/output_*.pb`, every file a `TensorProto`.
pub fn read_data_set(dir: &Path) -> Result<DataSet, TestDataError> {
    let inputs = numbered(dir, "input_")?
        .iter()
        .map(|p| read_pb(p))
        .collect::<Result<_, _>>()?;
    let outputs = numbered(dir, "output_")?
        .iter()
        .map(|p| read_pb(p))
        .collect::<Result<_, _>>()?;
    Ok(DataSet {
        dir: dir.to_path_buf(),
        inputs,
        outputs,
    })
}

/// The `test_data_set_*` directories of a case, sorted.
pub fn data_set_dirs(case: &Path) -> Result<Vec<PathBuf>, TestDataError> {
    let rd = std::fs::read_dir(case)
        .map_err(|e| TestDataError::Io(case.to_path_buf(), e.to_string()))?;
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_"))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// The case directories (containing `model.onnx`) directly under `root`, sorted.
pub fn case_dirs(root: &Path) -> Result<Vec<PathBuf>, TestDataError> {
    let rd = std::fs::read_dir(root)
        .map_err(|e| TestDataError::Io(root.to_path_buf(), e.to_string()))?;
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    v.sort();
    Ok(v)
}

/// A model of the `light/` folder: `light_NAME.onnx` with `light_NAME_output_0.pb`.
#[derive(Debug, Clone)]
pub struct LightModel {
    pub name: String,
    pub model: PathBuf,
    pub output: PathBuf,
}

/// The light models under `dir`, sorted by name.
pub fn light_models(dir: &Path) -> Result<Vec<LightModel>, TestDataError> {
    let rd =
        std::fs::read_dir(dir).map_err(|e| TestDataError::Io(dir.to_path_buf(), e.to_string()))?;
    let mut v = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".onnx") {
            let output = dir.join(format!("{stem}_output_0.pb"));
            if output.is_file() {
                v.push(LightModel {
                    name: stem.to_string(),
                    model: e.path(),
                    output,
                });
            }
        }
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(v)
}

/// The ONNX test runner's dummy input: `arange(n) / n` in f32, shaped `dims`.
pub fn arange_input(dims: &[usize]) -> Result<Tensor, rlx_ir::tensor::TensorError> {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|i| i as f32 / n as f32).collect();
    Tensor::from_f32(dims, &v)
}
