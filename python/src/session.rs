//! The native session: a compiled model on one target, run with the GIL
//! released. `rlx_onnx.InferenceSession` (Python) wraps it with ONNX
//! Runtime's names; this side keeps to what needs Rust.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use rlx_onnx::importer::DeclaredDim;
use rlx_onnx::ir::{DType, Tensor, ValueKind};
use rlx_onnx::{
    artifact, CompiledModel, Compiler, DimInfo, Fallback, IoInfo, Limits, OptLevel, Outputs,
    Precision, SessionOptions, Target, Value,
};

use crate::arrays;
use crate::errors::{invalid, to_py, NoModel};
use crate::options::PyLimits;
use crate::value::PyValue;

/// How a session is compiled and run (the keyword arguments of
/// `_native.Session`).
pub struct Options {
    pub target: Target,
    pub threads: usize,
    pub opt_level: OptLevel,
    pub precision: Precision,
    pub fallback: Fallback,
    pub bindings: Vec<(String, i64)>,
    pub device_id: usize,
    pub limits: Limits,
}

impl Options {
    /// Options from the names Python passes; `threads` 0 is one a core.
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        target: &str,
        threads: usize,
        opt_level: u8,
        precision: &str,
        fallback: &str,
        bindings: Vec<(String, i64)>,
        device_id: usize,
        limits: PyLimits,
    ) -> PyResult<Options> {
        Ok(Options {
            target: Target::parse(target).map_err(to_py)?,
            threads: if threads == 0 {
                SessionOptions::default().threads
            } else {
                threads
            },
            opt_level: match opt_level {
                0 => OptLevel::O0,
                1 => OptLevel::O1,
                _ => OptLevel::O2,
            },
            precision: Precision::parse(precision).ok_or_else(|| {
                invalid(format!(
                    "unknown precision `{precision}`; the precisions are exact, tf32, fp16, bf16"
                ))
            })?,
            fallback: Fallback::parse(fallback).ok_or_else(|| {
                invalid(format!("unknown fallback `{fallback}`; the fallbacks are refuse, cpu"))
            })?,
            bindings,
            device_id: match (target, device_id) {
                ("wgpu", 1..) => {
                    return Err(invalid(
                        "wgpu runs on its default adapter: device_id must be 0 (the Vulkan provider picks devices by index)",
                    ))
                }
                _ => device_id,
            },
            limits: limits.0,
        })
    }
}

/// A model compiled for one target, ready to run.
#[pyclass(name = "Session", module = "rlx_onnx._native", frozen)]
pub struct PySession {
    pub(crate) inner: Arc<rlx_onnx::Session>,
    inputs: Vec<IoInfo>,
    outputs: Vec<IoInfo>,
    /// The input names as interned Python strings (their hashes kept), for
    /// the feed's membership checks.
    input_keys: Vec<Py<PyString>>,
}

/// The model a session is made from.
pub enum Source {
    Path(PathBuf),
    Bytes(Vec<u8>),
}

const ARTIFACT_MAGIC: &[u8] = b"RLXONNX\0";

fn is_artifact_file(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && magic == ARTIFACT_MAGIC
}

/// Loads an artifact or compiles an ONNX model as `o` says.
pub fn compile(source: &Source, o: &Options) -> rlx_onnx::Result<CompiledModel> {
    let compiler = || {
        let mut c = Compiler::new(o.target)
            .opt_level(o.opt_level)
            .precision(o.precision)
            .fallback(o.fallback);
        c.limits = o.limits;
        for (name, value) in &o.bindings {
            c = c.bind(name, *value);
        }
        c
    };
    let artifact = match source {
        Source::Path(p) if is_artifact_file(p) => Some(artifact::load(p)?),
        Source::Bytes(b) if b.starts_with(ARTIFACT_MAGIC) => Some(artifact::from_bytes(b)?),
        _ => None,
    };
    if let Some(mut m) = artifact {
        if m.target != o.target {
            return Err(rlx_onnx::Error::Target(format!(
                "{} (the artifact was compiled for {}; ask for its provider, or convert the .onnx model for {})",
                o.target.name(),
                m.target.name(),
                o.target.name()
            )));
        }
        m.limits = o.limits;
        return Ok(m);
    }
    match source {
        Source::Path(p) => compiler().compile_file(p),
        Source::Bytes(b) => {
            let registry = rlx_onnx::importer::Registry::standard();
            let imported = rlx_onnx::importer::import_bytes(b, None, &registry)?;
            compiler().compile(imported, None)
        }
    }
}

/// ONNX's name of an element type, as ONNX Runtime prints it.
pub fn onnx_type_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::U16 => "uint16",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::Bool => "bool",
        DType::F16 => "float16",
        DType::F64 => "double",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::BF16 => "bfloat16",
        DType::F8E4M3FN => "float8e4m3fn",
        DType::F8E4M3FNUZ => "float8e4m3fnuz",
        DType::F8E5M2 => "float8e5m2",
        DType::F8E5M2FNUZ => "float8e5m2fnuz",
        DType::U4 => "uint4",
        DType::I4 => "int4",
        DType::F4E2M1 => "float4e2m1",
        DType::F8E8M0 => "float8e8m0",
        DType::U2 => "uint2",
        DType::I2 => "int2",
        DType::Str => "string",
    }
}

/// ONNX Runtime's type string of a value: `tensor(float)`,
/// `seq(tensor(int64))`, `seq(map(int64,tensor(float)))`, ...
pub fn type_string(dtype: DType, kind: ValueKind) -> String {
    let t = format!("tensor({})", onnx_type_name(dtype));
    match kind {
        ValueKind::Tensor => t,
        ValueKind::Sequence => format!("seq({t})"),
        ValueKind::Optional => format!("optional({t})"),
        ValueKind::OptionalSequence => format!("optional(seq({t}))"),
        ValueKind::Map { key } => format!("map({},{t})", onnx_type_name(key)),
        ValueKind::MapSequence { key } => format!("seq(map({},{t}))", onnx_type_name(key)),
    }
}

/// (name, type string, shape) of an input or output; a symbolic dim is its
/// name, an expression its text.
fn describe<'py>(py: Python<'py>, io: &IoInfo) -> PyResult<Bound<'py, PyAny>> {
    let shape = PyList::empty(py);
    for d in &io.dims {
        match d {
            DimInfo::Fixed(n) => shape.append(*n)?,
            DimInfo::Symbol(s) | DimInfo::Expr(s) => shape.append(s)?,
        }
    }
    Ok((io.name.as_str(), type_string(io.dtype, io.kind), shape)
        .into_pyobject(py)?
        .into_any())
}

/// (name, type, shape) of an output whose model declares its shape `dims`.
fn describe_declared<'py>(
    py: Python<'py>,
    io: &IoInfo,
    dims: &[DeclaredDim],
) -> PyResult<Bound<'py, PyAny>> {
    // A size rlx-onnx's inference fixes wins over a declared name (ONNX
    // Runtime's own inference refines the declared shape the same way).
    let same_rank = io.dims.len() == dims.len();
    let shape = PyList::empty(py);
    for (i, d) in dims.iter().enumerate() {
        match (d, io.dims.get(i)) {
            (_, Some(DimInfo::Fixed(n))) if same_rank => shape.append(*n)?,
            // Exporters write -1 for "unknown" (ORT reports None).
            (DeclaredDim::Value(v), _) if *v >= 0 => shape.append(*v)?,
            (DeclaredDim::Param(p), _) => shape.append(p)?,
            (DeclaredDim::Value(_) | DeclaredDim::Unknown, _) => shape.append(py.None())?,
        }
    }
    Ok((io.name.as_str(), type_string(io.dtype, io.kind), shape)
        .into_pyobject(py)?
        .into_any())
}

impl PySession {
    /// The indices of `names` among the outputs (all outputs for `None`).
    fn output_indices(&self, names: Option<Vec<String>>) -> PyResult<Vec<usize>> {
        let Some(names) = names else {
            return Ok((0..self.outputs.len()).collect());
        };
        names
            .iter()
            .map(|n| {
                self.outputs
                    .iter()
                    .position(|o| &o.name == n)
                    .ok_or_else(|| {
                        invalid(format!(
                            "Invalid output name: {n}; the model's outputs are {:?}",
                            self.outputs.iter().map(|o| &o.name).collect::<Vec<_>>()
                        ))
                    })
            })
            .collect()
    }
}

/// `rlx_onnx.session._check_run`: a `RunOptions`' checks, in Python.
fn check_run(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static CHECK: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let f = CHECK.get_or_try_init(py, || {
        Ok::<_, PyErr>(
            py.import("rlx_onnx.session")?
                .getattr("_check_run")?
                .unbind(),
        )
    })?;
    Ok(f.bind(py).clone())
}

/// The named inputs of a feed dict, as tensors or lent values.
/// The value an `rlx_onnx.OrtValue` (the Python class) holds; `None` for
/// anything else (arrays, first, without an attribute lookup).
fn ort_value(v: &Bound<'_, PyAny>) -> Option<Value> {
    if v.cast::<numpy::PyUntypedArray>().is_ok() {
        return None;
    }
    let inner = v.getattr(pyo3::intern!(v.py(), "_value")).ok()?;
    let pv = inner.cast::<PyValue>().ok()?;
    Some(pv.get().value.clone())
}

fn feed_values(feed: &Bound<'_, PyDict>) -> PyResult<Vec<(String, Value)>> {
    feed.iter()
        .map(|(k, v)| {
            let name: String = k
                .extract()
                .map_err(|_| invalid("input names must be strings"))?;
            let value = match v.cast::<PyValue>() {
                Ok(pv) => pv.get().value.clone(),
                Err(_) => match ort_value(&v) {
                    Some(value) => value,
                    None => Value::Host(arrays::to_tensor(&name, &v)?),
                },
            };
            Ok((name, value))
        })
        .collect()
}

#[pymethods]
impl PySession {
    /// Compiles (or loads, for an `.rlx` artifact) `model`: a path or the
    /// file's bytes.
    #[new]
    #[pyo3(signature = (model, *, target, threads, opt_level, precision, fallback, bindings, device_id, limits))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        target: &str,
        threads: usize,
        opt_level: u8,
        precision: &str,
        fallback: &str,
        bindings: Vec<(String, i64)>,
        device_id: usize,
        limits: PyLimits,
    ) -> PyResult<PySession> {
        let source =
            if let Ok(b) = model.cast::<PyBytes>() {
                Source::Bytes(b.as_bytes().to_vec())
            } else if model.is_none() {
                return Err(NoModel::new_err(
                    "no model: give a path or the model's bytes",
                ));
            } else {
                Source::Path(model.extract::<PathBuf>().map_err(|_| {
                    invalid("the model must be a path (str or os.PathLike) or bytes")
                })?)
            };
        let options = Options::parse(
            target, threads, opt_level, precision, fallback, bindings, device_id, limits,
        )?;
        let session = py
            .detach(|| {
                let model = compile(&source, &options)?;
                let devices = crate::devices::of(options.target, options.device_id);
                // Opened now: a missing device is an error here (the caller
                // may then try the next provider).
                devices.open(options.target)?;
                rlx_onnx::Session::with_devices(
                    model,
                    SessionOptions {
                        threads: options.threads,
                    },
                    devices,
                )
            })
            .map_err(to_py)?;
        let inputs = session.inputs();
        let input_keys = inputs
            .iter()
            .map(|i| PyString::intern(py, &i.name).unbind())
            .collect();
        Ok(PySession {
            inputs,
            outputs: session.outputs(),
            input_keys,
            inner: Arc::new(session),
        })
    }

    /// The inputs: a list of (name, type, shape).
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.inputs.iter().map(|io| describe(py, io)).collect()
    }

    /// The outputs: a list of (name, type, shape), the shape as ONNX
    /// Runtime reports it where the model declares one: each dim's size
    /// where inference fixes it, else the declared value or name (`None`
    /// for neither); outputs without a declared shape as inferred.
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let declared = &self.inner.model().metadata.outputs;
        self.outputs
            .iter()
            .map(|io| {
                let dims = declared
                    .iter()
                    .find(|(n, _)| n == &io.name)
                    .and_then(|(_, d)| d.as_ref());
                match dims {
                    Some(dims) => describe_declared(py, io, dims),
                    None => describe(py, io),
                }
            })
            .collect()
    }

    /// The target the model was compiled for: `cpu`, `cuda`, `wgpu` or `vulkan`.
    #[getter]
    fn target(&self) -> &'static str {
        self.inner.model().target.name()
    }

    /// What the model says of itself (ONNX Runtime's `get_modelmeta()`).
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = &self.inner.model().metadata;
        let d = PyDict::new(py);
        for (k, v) in m.fields() {
            d.set_item(k, v)?;
        }
        // ONNX Runtime gives i64::MAX for a model without a version.
        d.set_item("version", m.version.unwrap_or(i64::MAX))?;
        let custom = PyDict::new(py);
        for (k, v) in &m.custom {
            custom.set_item(k, v)?;
        }
        d.set_item("custom_metadata_map", custom)?;
        Ok(d)
    }

    /// Runs on `feed` (input name to array or `Value`) and returns the
    /// outputs named (all for `None`) as numpy arrays, lists (sequences),
    /// dicts (maps) or `None` (absent optionals). The GIL is released
    /// while the model runs.
    #[pyo3(signature = (output_names, feed))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        output_names: Option<Vec<String>>,
        feed: &Bound<'py, PyDict>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let wanted = self.output_indices(output_names)?;
        let values = feed_values(feed)?;
        let host: Option<Vec<(&str, &Tensor)>> = values
            .iter()
            .map(|(n, v)| Some((n.as_str(), v.as_host()?)))
            .collect();
        let outs = if let Some(tensors) = host {
            py.detach(|| self.inner.run(&tensors)).map_err(to_py)?
        } else {
            let refs: Vec<(&str, &Value)> = values.iter().map(|(n, v)| (n.as_str(), v)).collect();
            py.detach(|| {
                self.inner
                    .run_values(&refs, Outputs::Host)?
                    .iter()
                    .map(Value::to_host)
                    .collect::<rlx_onnx::Result<Vec<_>>>()
            })
            .map_err(to_py)?
        };
        wanted
            .into_iter()
            .map(|i| arrays::to_python(py, &outs[i]))
            .collect()
    }

    /// Runs on `feed` and returns the outputs named (all for `None`) as
    /// `Value`s: those in `on_device` left on the session's device, the
    /// others on the host.
    #[pyo3(signature = (output_names, feed, on_device))]
    fn run_values(
        &self,
        py: Python<'_>,
        output_names: Option<Vec<String>>,
        feed: &Bound<'_, PyDict>,
        on_device: Vec<String>,
    ) -> PyResult<Vec<PyValue>> {
        let wanted = self.output_indices(output_names)?;
        let values = feed_values(feed)?;
        let refs: Vec<(&str, &Value)> = values.iter().map(|(n, v)| (n.as_str(), v)).collect();
        let device: Vec<&str> = on_device.iter().map(String::as_str).collect();
        let outs = py
            .detach(|| self.inner.run_values(&refs, Outputs::OnDevice(&device)))
            .map_err(to_py)?;
        Ok(wanted
            .into_iter()
            .map(|i| PyValue {
                value: outs[i].clone(),
            })
            .collect())
    }

    /// `InferenceSession.run`, ONNX Runtime's signature and checks, whole:
    /// `run_options` (checked by the package's `_check_run`), a feed of any
    /// mapping, ONNX Runtime's ValueError for missing inputs, an empty or
    /// `None` list of output names for all of them. The Python class binds
    /// it as the instance's `run`, so a call pays no Python frame.
    #[pyo3(signature = (output_names, input_feed, run_options=None))]
    fn run_feed<'py>(
        &self,
        py: Python<'py>,
        output_names: Option<&Bound<'py, PyAny>>,
        input_feed: &Bound<'py, PyAny>,
        run_options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        if let Some(o) = run_options.filter(|o| !o.is_none()) {
            check_run(py)?.call1((o,))?;
        }
        let feed = match input_feed.cast::<PyDict>() {
            Ok(d) => d.clone(),
            Err(_) => py
                .get_type::<PyDict>()
                .call1((input_feed,))?
                .cast_into::<PyDict>()?,
        };
        let mut missing = Vec::new();
        for (i, key) in self.inputs.iter().zip(&self.input_keys) {
            if !feed.contains(key.bind(py))? {
                missing.push(i.name.as_str());
            }
        }
        if !missing.is_empty() {
            // ONNX Runtime's class and words for it.
            let given = PyList::new(py, feed.keys())?;
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "Required inputs ({}) are missing from input feed ({}).",
                PyList::new(py, missing)?.repr()?,
                given.repr()?
            )));
        }
        let names = match output_names.filter(|o| !o.is_none()) {
            None => None,
            Some(o) => {
                let v = o
                    .try_iter()?
                    .map(|n| n?.extract::<String>())
                    .collect::<PyResult<Vec<_>>>()?;
                (!v.is_empty()).then_some(v)
            }
        };
        self.run(py, names, &feed)
    }

    /// Copies an array to the session's device (the host on the CPU).
    fn upload(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let t = arrays::to_tensor("value", array)?;
        let value = py.detach(|| self.inner.upload(&t)).map_err(to_py)?;
        Ok(PyValue { value })
    }
}
