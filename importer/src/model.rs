//! ModelProto -> RLX graph: scopes, initializers, node mapping and subgraphs.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use prost::Message;
use rlx_ir::analysis::{record_values, Values};
use rlx_ir::ops::{Constant, Input, Weight};
use rlx_ir::{Dim, Graph, Node, Op, Shape, Tensor, TensorType, Value, ValueKind, Weights};

use crate::ctx::NodeCtx;
use crate::error::{ImportError, MapError, NodeIssue, TensorError};
use crate::proto::{type_proto, GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use crate::registry::{norm_domain, Registry};
use crate::tensor::{tensor_from_proto, ExternalData};

/// Integer constants up to this many elements (shape vectors, axes, indices)
/// are kept inline in the graph; so are other constants up to `INLINE_SMALL`.
const INLINE_INTS: usize = 64;
const INLINE_SMALL: usize = 8;

/// An imported model: the graph, its weights and the model's metadata.
#[derive(Debug, Clone)]
pub struct ImportedModel {
    pub graph: Graph,
    pub weights: Weights,
    pub ir_version: i64,
    /// (domain, version), with the default domain as `""`.
    pub opsets: Vec<(String, i64)>,
    pub producer: String,
    /// What the model says of itself (`metadata_props` included).
    pub metadata: crate::Metadata,
}

/// Reads and imports an `.onnx` file; external data resolves next to it.
pub fn import_file(path: &Path, registry: &Registry) -> Result<ImportedModel, ImportError> {
    let io = |reason: String| ImportError::Io {
        path: path.to_path_buf(),
        reason,
    };
    // A device (`/dev/zero`), a FIFO or a directory is no model: reading
    // one would not end, or end with nothing.
    let meta = std::fs::metadata(path).map_err(|e| io(e.to_string()))?;
    if !meta.is_file() {
        return Err(io("not a regular file".into()));
    }
    let bytes = std::fs::read(path).map_err(|e| io(e.to_string()))?;
    let dir = path.parent().map(|p| {
        if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p.to_path_buf()
        }
    });
    import_bytes(&bytes, dir, registry)
}

/// The first bytes of an `.rlx` artifact.
const ARTIFACT_MAGIC: &[u8] = b"RLXONNX\0";

/// Decodes a ModelProto. An empty file, an `.rlx` artifact and a message
/// without a graph (what protobuf makes of most non-ONNX bytes) are refused
/// here, as corrupt input.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, ImportError> {
    if bytes.is_empty() {
        return Err(ImportError::Empty);
    }
    if bytes.starts_with(ARTIFACT_MAGIC) {
        return Err(ImportError::Artifact);
    }
    let m = ModelProto::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    if m.graph.is_none() {
        return Err(ImportError::NoGraph);
    }
    Ok(m)
}

/// Imports a serialized model; `base_dir` is where external data may live.
pub fn import_bytes(
    bytes: &[u8],
    base_dir: Option<PathBuf>,
    registry: &Registry,
) -> Result<ImportedModel, ImportError> {
    let model = decode_model(bytes)?;
    import_model(&model, base_dir, registry)
}

/// The newest default-domain opset the importer knows (onnx 1.23).
pub const LATEST_OPSET: i64 = 28;

/// Imports a decoded model.
pub fn import_model(
    model: &ModelProto,
    base_dir: Option<PathBuf>,
    registry: &Registry,
) -> Result<ImportedModel, ImportError> {
    let gp = model.graph.as_ref().ok_or(ImportError::NoGraph)?;
    let mut opsets = HashMap::new();
    for o in &model.opset_import {
        opsets.insert(
            norm_domain(o.domain.as_deref().unwrap_or("")).to_string(),
            o.version.unwrap_or(1),
        );
    }
    if model.opset_import.is_empty() {
        // IR version 1/2 models without opset_import mean opset 1.
        opsets.insert(String::new(), 1);
    }
    if let Some(&v) = opsets.get("") {
        if !(1..=LATEST_OPSET).contains(&v) {
            return Err(ImportError::Value {
                what: "opset import",
                name: "ai.onnx".into(),
                reason: format!(
                    "version {v} is outside 1..={LATEST_OPSET}, the opsets this importer knows"
                ),
            });
        }
    }
    let mut imp = Importer {
        registry,
        opsets: opsets.clone(),
        weights: Weights::new(),
        ext: ExternalData::new(base_dir),
        frames: Vec::new(),
        issues: Vec::new(),
        named_dims: gp
            .input
            .iter()
            .flat_map(declared_dims)
            .filter(|p| !is_placeholder(p))
            .collect(),
    };
    let (graph, _) = imp.build(gp, None)?;
    let mut opsets: Vec<(String, i64)> = opsets.into_iter().collect();
    opsets.sort();
    Ok(ImportedModel {
        graph,
        weights: imp.weights,
        ir_version: model.ir_version.unwrap_or(0),
        opsets,
        producer: format!(
            "{} {}",
            model.producer_name.clone().unwrap_or_default(),
            model.producer_version.clone().unwrap_or_default()
        )
        .trim()
        .to_string(),
        metadata: crate::Metadata::of(model),
    })
}

/// One graph under construction (the main graph or a subgraph).
pub(crate) struct Frame {
    pub graph: Graph,
    pub names: HashMap<String, Value>,
    pub values: Values,
    /// Initializers not yet materialized, by name.
    pub pending: HashMap<String, TensorProto>,
    /// Outer names this frame captures, in order of first use.
    pub captures: Vec<String>,
    pub poisoned: HashSet<String>,
}

pub(crate) struct Importer<'r> {
    pub registry: &'r Registry,
    pub opsets: HashMap<String, i64>,
    pub weights: Weights,
    pub ext: ExternalData,
    pub frames: Vec<Frame>,
    pub issues: Vec<NodeIssue>,
    /// The real dim names the graph's inputs declare: fresh names avoid them.
    named_dims: HashSet<String>,
}

/// The `dim_param`s of a value's declared shape.
fn declared_dims(vi: &ValueInfoProto) -> Vec<String> {
    use crate::proto::tensor_shape_proto::dimension::Value as DV;
    let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Vec::new();
    };
    t.shape
        .iter()
        .flat_map(|s| &s.dim)
        .filter_map(|d| match &d.value {
            Some(DV::DimParam(p)) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

/// True for the `dim_param`s exporters write to mean "unknown" rather than a
/// name shared between axes: empty, punctuation only (`?`, `*`), a number
/// (`-1`), or `None`/`null`/`unknown`. Each such dim is its own symbol.
pub fn is_placeholder(p: &str) -> bool {
    let p = p.trim();
    p.is_empty()
        || !p.chars().any(char::is_alphanumeric)
        || p.parse::<i64>().is_ok()
        || ["none", "null", "unknown"].contains(&p.to_ascii_lowercase().as_str())
}

impl<'r> Importer<'r> {
    pub fn frame(&mut self) -> &mut Frame {
        self.frames
            .last_mut()
            .expect("importer always has a frame while mapping")
    }

    /// A map type's value tensor type and key dtype (integers or strings).
    fn map_of(
        m: &crate::proto::type_proto::Map,
    ) -> Result<(&crate::proto::type_proto::Tensor, rlx_ir::DType), String> {
        let code = m.key_type.unwrap_or(0);
        let key = rlx_ir::DType::from_onnx_code(code)
            .filter(|k| *k == rlx_ir::DType::Str || k.is_int())
            .ok_or_else(|| format!("map key type {code} is not supported"))?;
        match m.value_type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => Ok((t, key)),
            _ => Err("only maps to tensor values are supported".into()),
        }
    }

    /// The tensor type of a value-info, with fresh symbols for unnamed unknown dims.
    pub fn value_type(
        &mut self,
        vi: &ValueInfoProto,
        what: &'static str,
    ) -> Result<TensorType, ImportError> {
        let name = vi.name.clone().unwrap_or_default();
        let err = |reason: String| ImportError::Value {
            what,
            name: name.clone(),
            reason,
        };
        let tp = vi
            .r#type
            .as_ref()
            .and_then(|t| t.value.as_ref())
            .ok_or_else(|| err("has no type".into()))?;
        // A sequence or optional of tensors has its elements' tensor type.
        fn elem(t: &Option<Box<crate::proto::TypeProto>>) -> Option<&type_proto::Value> {
            t.as_ref().and_then(|t| t.value.as_ref())
        }
        let (tt, kind) = match tp {
            type_proto::Value::TensorType(t) => (t, ValueKind::Tensor),
            type_proto::Value::SequenceType(s) => match elem(&s.elem_type) {
                Some(type_proto::Value::TensorType(t)) => (t, ValueKind::Sequence),
                Some(type_proto::Value::MapType(m)) => {
                    let (t, key) = Self::map_of(m).map_err(err)?;
                    (t, ValueKind::MapSequence { key })
                }
                _ => return Err(err("only sequences of tensors or maps are supported".into())),
            },
            type_proto::Value::OptionalType(o) => match elem(&o.elem_type) {
                Some(type_proto::Value::TensorType(t)) => (t, ValueKind::Optional),
                Some(type_proto::Value::SequenceType(s)) => match elem(&s.elem_type) {
                    Some(type_proto::Value::TensorType(t)) => (t, ValueKind::OptionalSequence),
                    _ => {
                        return Err(err(
                            "only optional sequences of tensors are supported".into()
                        ))
                    }
                },
                _ => {
                    return Err(err(
                        "only optionals of tensors or sequences are supported".into()
                    ))
                }
            },
            type_proto::Value::MapType(m) => {
                let (t, key) = Self::map_of(m).map_err(err)?;
                (t, ValueKind::Map { key })
            }
            type_proto::Value::SparseTensorType(_) => {
                return Err(err("sparse tensors are not supported".into()))
            }
        };
        if matches!(kind, ValueKind::Map { .. } | ValueKind::MapSequence { .. }) {
            // A map's values are scalars.
            let code = tt.elem_type.unwrap_or(0);
            let dtype = rlx_ir::DType::from_onnx_code(code)
                .ok_or_else(|| err(format!("map value type {code} is not supported")))?;
            return Ok(TensorType::new(dtype, Shape::scalar()).with_kind(kind));
        }
        if kind != ValueKind::Tensor && tt.shape.is_none() {
            // Elements of unknown rank: their shapes are only known as the
            // graph runs node by node, where every op infers from its values.
            let code = tt.elem_type.unwrap_or(0);
            let dtype = rlx_ir::DType::from_onnx_code(code)
                .ok_or_else(|| err(format!("element type {code} is not supported")))?;
            return Ok(TensorType::new(dtype, Shape::scalar()).with_kind(kind));
        }
        let code = tt.elem_type.unwrap_or(0);
        let dtype = rlx_ir::DType::from_onnx_code(code)
            .ok_or_else(|| err(format!("element type {code} is not supported")))?;
        let shape = tt
            .shape
            .as_ref()
            .ok_or_else(|| err("has no shape (unknown rank is not supported)".into()))?;
        let mut dims = Vec::new();
        for (axis, d) in shape.dim.iter().enumerate() {
            use crate::proto::tensor_shape_proto::dimension::Value as DV;
            dims.push(match &d.value {
                Some(DV::DimValue(v)) if *v >= 0 => Dim::Known(*v),
                Some(DV::DimParam(p)) if !is_placeholder(p) => Dim::sym(p),
                // Unknown (`?`, `-1`, no value): a symbol of its own, named
                // after the value and axis (`x.2`), which `--bind` accepts.
                _ => Dim::sym(&self.fresh_dim(&name, axis)),
            });
        }
        Ok(TensorType::new(dtype, Shape(dims)).with_kind(kind))
    }

    /// A new symbol for an unknown dim: `value.axis`, primed until it differs
    /// from every declared name.
    fn fresh_dim(&mut self, value: &str, axis: usize) -> String {
        let mut s = format!("{value}.{axis}");
        while self.named_dims.contains(&s) {
            s.push('\'');
        }
        self.named_dims.insert(s.clone());
        s
    }

    /// Builds a graph from `gp`, returning it and the outer names it captures
    /// (appended to its inputs in that order). `formal` overrides declared input
    /// types (bodies whose inputs take the outer types).
    pub fn build(
        &mut self,
        gp: &GraphProto,
        formal: Option<&[Option<TensorType>]>,
    ) -> Result<(Graph, Vec<String>), ImportError> {
        let mut frame = Frame {
            graph: Graph::new(),
            names: HashMap::new(),
            values: Values::new(),
            pending: HashMap::new(),
            captures: Vec::new(),
            poisoned: HashSet::new(),
        };
        if !gp.sparse_initializer.is_empty() {
            return Err(ImportError::Value {
                what: "initializer",
                name: gp.sparse_initializer.len().to_string(),
                reason: "sparse initializers are not supported".into(),
            });
        }
        for t in &gp.initializer {
            frame
                .pending
                .insert(t.name.clone().unwrap_or_default(), t.clone());
        }
        self.frames.push(frame);
        let result = self.build_in_frame(gp, formal);
        let frame = self.frames.pop().expect("frame pushed above");
        result?;
        Ok((frame.graph, frame.captures))
    }

    fn build_in_frame(
        &mut self,
        gp: &GraphProto,
        formal: Option<&[Option<TensorType>]>,
    ) -> Result<(), ImportError> {
        let issues_before = self.issues.len();
        let mut k = 0;
        for vi in &gp.input {
            let name = vi.name.clone().unwrap_or_default();
            if self.frame().pending.contains_key(&name) {
                // IR < 4: initializers are also listed as inputs; the initializer wins.
                continue;
            }
            let declared = formal.and_then(|f| f.get(k).cloned().flatten());
            k += 1;
            let ty = match declared {
                Some(t) => t,
                None => self.value_type(vi, "input")?,
            };
            let f = self.frame();
            let id = f.graph.add_input(Node::new(
                Op::Input(Input { name: name.clone() }),
                name.clone(),
                Vec::new(),
                vec![ty],
            ));
            f.names.insert(name, Value::of(id));
        }
        for (index, node) in sorted_nodes(&gp.node)? {
            self.map_node(node, index);
        }
        if self.issues.len() > issues_before {
            return Err(ImportError::Nodes(self.issues.split_off(issues_before)));
        }
        for vi in &gp.output {
            let name = vi.name.clone().unwrap_or_default();
            let level = self.frames.len() - 1;
            let v = self.lookup(level, &name).map_err(|e| ImportError::Value {
                what: "output",
                name: name.clone(),
                reason: e.to_string(),
            })?;
            // A declared element type must be what the graph computes (ORT
            // refuses the model otherwise); bodies of control flow are
            // checked by their parent op.
            let declared = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(t)) => t
                    .elem_type
                    .filter(|&c| c != 0)
                    .and_then(rlx_ir::DType::from_onnx_code),
                _ => None,
            };
            let computed = self.frames[level].graph.ty(v).dtype;
            if let (Some(d), 0) = (declared, level) {
                if d != computed {
                    return Err(ImportError::Value {
                        what: "output",
                        name,
                        reason: format!("it is declared {d}, but the graph computes {computed}"),
                    });
                }
            }
            self.frame()
                .graph
                .add_output(name, v)
                .map_err(|e| ImportError::Value {
                    what: "output",
                    name: String::new(),
                    reason: e.to_string(),
                })?;
        }
        Ok(())
    }

    /// Resolves `name` in frame `level`, capturing it from outer frames if needed.
    pub fn lookup(&mut self, level: usize, name: &str) -> Result<Value, MapError> {
        if let Some(v) = self.frames[level].names.get(name) {
            return Ok(*v);
        }
        if self.frames[level].poisoned.contains(name) {
            return Err(MapError::Poisoned(name.to_string()));
        }
        if let Some(tp) = self.frames[level].pending.remove(name) {
            return self.materialize(level, name, &tp).map_err(MapError::Tensor);
        }
        if level == 0 {
            return Err(MapError::UnknownName(name.to_string()));
        }
        let outer = self.lookup(level - 1, name)?;
        let ty = self.frames[level - 1].graph.ty(outer).clone();
        let value = self.frames[level - 1].values.get(&outer).cloned();
        let f = &mut self.frames[level];
        let id = f.graph.add_input(Node::new(
            Op::Input(Input {
                name: name.to_string(),
            }),
            name,
            Vec::new(),
            vec![ty],
        ));
        let v = Value::of(id);
        f.names.insert(name.to_string(), v);
        f.captures.push(name.to_string());
        if let Some(kv) = value {
            f.values.insert(v, kv);
        }
        Ok(v)
    }

    /// Turns an initializer into a constant or weight node.
    fn materialize(
        &mut self,
        level: usize,
        name: &str,
        tp: &TensorProto,
    ) -> Result<Value, TensorError> {
        let t = tensor_from_proto(tp, &mut self.ext)?;
        let v = self.add_tensor(level, name, t, Vec::new());
        self.frames[level].names.insert(name.to_string(), v);
        Ok(v)
    }

    /// Adds a tensor as an inline constant (small) or a weight (large).
    pub fn add_tensor(
        &mut self,
        level: usize,
        name: &str,
        t: Tensor,
        origin: Vec<String>,
    ) -> Value {
        let ty = t.ty();
        let inline =
            t.numel() <= INLINE_SMALL || (!t.dtype().is_float() && t.numel() <= INLINE_INTS);
        let op = if inline {
            Op::Constant(Constant { value: t })
        } else {
            let wname = self.weights.unique_name(name);
            self.weights.insert(wname.clone(), t);
            Op::Weight(Weight { name: wname })
        };
        let weights = &self.weights;
        let f = &mut self.frames[level];
        let node_name = match &op {
            Op::Weight(w) => w.name.clone(),
            _ => f.graph.unique_name(name),
        };
        let id = f
            .graph
            .add_node(Node::new(op, node_name, origin, vec![ty]), &[])
            .expect("a leaf has no inputs");
        record_values(&f.graph, id, &mut f.values, Some(weights));
        Value::of(id)
    }

    /// Maps the node at `index` of its graph's node list.
    fn map_node(&mut self, node: &NodeProto, index: usize) {
        let level = self.frames.len() - 1;
        let op_type = node.op_type.clone().unwrap_or_default();
        let domain = node.domain.clone().unwrap_or_default();
        let display = onnx_node_name(node, index);
        let opset = self.opsets.get(norm_domain(&domain)).copied();
        let poison = |imp: &mut Importer| {
            for o in &node.output {
                imp.frames[level].poisoned.insert(o.clone());
            }
        };
        let issue = |imp: &mut Importer, opset: i64, error: MapError| {
            imp.issues.push(NodeIssue {
                name: display.clone(),
                op_type: op_type.clone(),
                domain: domain.clone(),
                opset,
                error,
            });
        };
        let Some(opset) = opset else {
            issue(
                self,
                0,
                MapError::Unsupported(format!("the model imports no opset for domain `{domain}`")),
            );
            poison(self);
            return;
        };
        if let Err(e) = check_arity(norm_domain(&domain), &op_type, opset, node) {
            issue(self, opset, e);
            poison(self);
            return;
        }
        let Some(entry) = self.registry.find(&domain, &op_type, opset) else {
            issue(self, opset, MapError::UnknownOp { opset });
            poison(self);
            return;
        };
        let mut cx = NodeCtx::new(self, node, opset, display.clone(), level);
        let result = (entry.mapper)(&mut cx).and_then(|()| cx.finish());
        match result {
            Ok(()) => {}
            Err(MapError::Poisoned(_)) => poison(self),
            Err(e) => {
                issue(self, opset, e);
                poison(self);
            }
        }
    }
}

/// Refuses a node with more inputs or outputs than its op's schema at
/// `opset` allows, or fewer inputs than it requires, as ONNX Runtime does
/// (otherwise extra inputs would be ignored silently). Trailing empty names
/// are omitted optional values. Ops without an ONNX schema (contrib domains)
/// are left to their mappers.
fn check_arity(domain: &str, op: &str, opset: i64, node: &NodeProto) -> Result<(), MapError> {
    // The table is sorted by (domain, op, version): the op's rows are a
    // range, found by halving (a scan of every row for every node was a
    // third of a model's session setup).
    let rows = crate::arity_table::ARITY;
    let start = rows.partition_point(|r| (r.0, r.1) < (domain, op));
    let len = rows[start..].partition_point(|r| (r.0, r.1) == (domain, op));
    let Some(&(_, _, _, min_in, max_in, _, max_out)) =
        rows[start..start + len].iter().rev().find(|r| r.2 <= opset)
    else {
        return Ok(());
    };
    let present = |names: &[String]| {
        names
            .iter()
            .rposition(|n| !n.is_empty())
            .map_or(0, |i| i + 1)
    };
    let (n_in, n_out) = (present(&node.input), present(&node.output));
    let range = |min: u16, max: u16| {
        if max == u16::MAX {
            format!("at least {min}")
        } else if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        }
    };
    if n_in > usize::from(max_in) || n_in < usize::from(min_in) {
        return Err(MapError::Arity(format!(
            "{op} at opset {opset} takes {} inputs; the node has {n_in}",
            range(min_in, max_in)
        )));
    }
    if n_out > usize::from(max_out) {
        return Err(MapError::Arity(format!(
            "{op} at opset {opset} gives at most {max_out} outputs; the node has {n_out}"
        )));
    }
    Ok(())
}

/// The name errors, dumps and origins give the ONNX node at `index` of its
/// graph's node list: its own, or `{op_type}_{index}` when it has none.
pub fn onnx_node_name(node: &NodeProto, index: usize) -> String {
    match node.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => format!("{}_{index}", node.op_type.as_deref().unwrap_or_default()),
    }
}

/// The ONNX nodes in a valid order, each with its index in `nodes`: as
/// given when already topological, else a stable topological sort (names
/// read by subgraphs count as inputs).
fn sorted_nodes(nodes: &[NodeProto]) -> Result<Vec<(usize, &NodeProto)>, ImportError> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let node_name = |i: usize| onnx_node_name(&nodes[i], i);
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.output {
            if o.is_empty() {
                continue;
            }
            if let Some(first) = producer.insert(o.as_str(), i) {
                // A graph is in SSA form: a second definition would silently win.
                return Err(ImportError::Value {
                    what: "value",
                    name: o.clone(),
                    reason: format!(
                        "is defined twice, by node `{}` and by node `{}`",
                        node_name(first),
                        node_name(i)
                    ),
                });
            }
        }
    }
    let deps: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            let mut names: Vec<String> =
                n.input.iter().filter(|s| !s.is_empty()).cloned().collect();
            for a in &n.attribute {
                if let Some(g) = &a.g {
                    names.extend(free_names(g));
                }
                for g in &a.graphs {
                    names.extend(free_names(g));
                }
            }
            names
                .iter()
                .filter_map(|s| producer.get(s.as_str()).copied())
                .collect()
        })
        .collect();
    if deps
        .iter()
        .enumerate()
        .all(|(i, d)| d.iter().all(|&j| j < i))
    {
        return Ok(nodes.iter().enumerate().collect());
    }
    let mut state = vec![0u8; nodes.len()];
    let mut out = Vec::with_capacity(nodes.len());
    for root in 0..nodes.len() {
        let mut stack = vec![(root, 0usize)];
        while let Some((n, i)) = stack.pop() {
            if i == 0 {
                if state[n] == 2 {
                    continue;
                }
                if state[n] == 1 {
                    return Err(ImportError::Cycle(node_name(n)));
                }
                state[n] = 1;
            }
            if let Some(&d) = deps[n].get(i) {
                stack.push((n, i + 1));
                if state[d] == 1 && d != n {
                    return Err(ImportError::Cycle(node_name(d)));
                }
                if state[d] == 0 {
                    stack.push((d, 0));
                }
            } else {
                state[n] = 2;
                out.push((n, &nodes[n]));
            }
        }
    }
    Ok(out)
}

/// Names a subgraph reads from its enclosing scopes.
pub(crate) fn free_names(g: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<String> = g.input.iter().filter_map(|v| v.name.clone()).collect();
    defined.extend(g.initializer.iter().filter_map(|t| t.name.clone()));
    let mut free = Vec::new();
    for n in &g.node {
        for i in &n.input {
            if !i.is_empty() && !defined.contains(i) {
                free.push(i.clone());
            }
        }
        for a in &n.attribute {
            let subs = a.g.iter().chain(a.graphs.iter());
            for s in subs {
                free.extend(free_names(s).into_iter().filter(|x| !defined.contains(x)));
            }
        }
        defined.extend(n.output.iter().cloned());
    }
    for o in &g.output {
        if let Some(n) = &o.name {
            if !defined.contains(n) {
                free.push(n.clone());
            }
        }
    }
    free
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arity_rows_are_sorted_for_the_search() {
        let rows = crate::arity_table::ARITY;
        assert!(rows
            .windows(2)
            .all(|w| (w[0].0, w[0].1, w[0].2) < (w[1].0, w[1].1, w[1].2)));
    }

    #[test]
    fn arity_is_that_of_the_latest_schema_at_the_opset() {
        let node = |inputs: &[&str]| NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec!["y".into()],
            ..NodeProto::default()
        };
        // Clip: one input until opset 11, min and max as inputs from it.
        assert!(check_arity("", "Clip", 6, &node(&["x", "lo"])).is_err());
        assert!(check_arity("", "Clip", 11, &node(&["x", "lo", "hi"])).is_ok());
        assert!(check_arity("", "Clip", 13, &node(&["x", "lo", "hi", "z"])).is_err());
        // Below an op's first version, and ops without a schema: unchecked.
        assert!(check_arity("", "Gelu", 1, &node(&["x", "y", "z"])).is_ok());
        assert!(check_arity("com.microsoft", "Whatever", 1, &node(&["x"])).is_ok());
        assert!(check_arity("", "Add", 14, &node(&["a"])).is_err());
    }
}
