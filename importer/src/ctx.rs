//! The mapper API: what a mapper can read from its ONNX node and how it adds RLX nodes.

use rlx_ir::analysis::{infer_node, record_values};
use rlx_ir::ops::values::{float_tensor, int_tensor};
use rlx_ir::{DType, Graph, KnownValue, Node, Op, Tensor, TensorType, Value};

use crate::error::MapError;
use crate::model::Importer;
use crate::proto::{attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto};
use crate::tensor::tensor_from_proto;

/// One ONNX node being mapped.
pub struct NodeCtx<'a, 'r> {
    imp: &'a mut Importer<'r>,
    node: &'a NodeProto,
    /// The opset version of the node's domain.
    pub opset: i64,
    display: String,
    level: usize,
    read: Vec<bool>,
    outputs: Vec<Option<Value>>,
}

impl<'a, 'r> NodeCtx<'a, 'r> {
    pub(crate) fn new(
        imp: &'a mut Importer<'r>,
        node: &'a NodeProto,
        opset: i64,
        display: String,
        level: usize,
    ) -> Self {
        let n_out = node.output.len();
        NodeCtx {
            imp,
            node,
            opset,
            display,
            level,
            read: vec![false; node.attribute.len()],
            outputs: vec![None; n_out],
        }
    }

    /// The ONNX node's name (or `OpType_N` when it has none).
    pub fn name(&self) -> &str {
        &self.display
    }

    pub fn op_type(&self) -> &str {
        self.node.op_type.as_deref().unwrap_or_default()
    }

    // ----- inputs -----

    /// Number of input slots, including empty (absent) ones.
    pub fn num_inputs(&self) -> usize {
        self.node.input.len()
    }

    /// Input `i`, or `None` when absent or empty.
    pub fn input(&mut self, i: usize) -> Result<Option<Value>, MapError> {
        match self.node.input.get(i) {
            None => Ok(None),
            Some(n) if n.is_empty() => Ok(None),
            Some(n) => {
                let n = n.clone();
                self.imp.lookup(self.level, &n).map(Some)
            }
        }
    }

    /// Input `i`, which must be present.
    pub fn req(&mut self, i: usize) -> Result<Value, MapError> {
        self.input(i)?.ok_or(MapError::MissingInput { index: i })
    }

    /// All present inputs, in order (for variadic ops).
    pub fn all_inputs(&mut self) -> Result<Vec<Value>, MapError> {
        let mut v = Vec::new();
        for i in 0..self.num_inputs() {
            if let Some(x) = self.input(i)? {
                v.push(x);
            }
        }
        Ok(v)
    }

    pub fn ty(&self, v: Value) -> TensorType {
        self.graph().ty(v).clone()
    }

    pub fn dtype(&self, v: Value) -> DType {
        self.graph().ty(v).dtype
    }

    pub fn rank(&self, v: Value) -> usize {
        self.graph().ty(v).rank()
    }

    fn graph(&self) -> &Graph {
        &self.imp.frames[self.level].graph
    }

    /// The compile-time value of `v`, if known.
    pub fn known(&self, v: Value) -> Option<&KnownValue> {
        self.imp.frames[self.level].values.get(&v)
    }

    /// The integer elements of `v`, if known.
    pub fn known_ints(&self, v: Value) -> Option<Vec<i64>> {
        self.known(v)?.as_i64s()
    }

    /// The concrete tensor of `v`, if fully known.
    pub fn known_tensor(&self, v: Value) -> Option<Tensor> {
        self.known(v)?.to_tensor()
    }

    // ----- outputs -----

    pub fn num_outputs(&self) -> usize {
        self.node.output.len()
    }

    /// True if output `i` exists and is named (i.e. requested).
    pub fn output_used(&self, i: usize) -> bool {
        self.node.output.get(i).is_some_and(|n| !n.is_empty())
    }

    /// Binds ONNX output `i` to `v`.
    pub fn set_output(&mut self, i: usize, v: Value) {
        if i < self.outputs.len() {
            self.outputs[i] = Some(v);
        }
    }

    /// Binds the ONNX outputs in order.
    pub fn set_outputs(&mut self, vals: &[Value]) {
        for (i, v) in vals.iter().enumerate() {
            self.set_output(i, *v);
        }
    }

    // ----- attributes -----

    fn attr(&mut self, name: &str) -> Option<&'a AttributeProto> {
        let i = self
            .node
            .attribute
            .iter()
            .position(|a| a.name.as_deref() == Some(name))?;
        self.read[i] = true;
        Some(&self.node.attribute[i])
    }

    /// True if the node sets attribute `name`.
    pub fn has_attr(&self, name: &str) -> bool {
        self.node
            .attribute
            .iter()
            .any(|a| a.name.as_deref() == Some(name))
    }

    /// Marks an attribute as deliberately irrelevant at inference.
    pub fn ignore_attr(&mut self, name: &str) {
        let _ = self.attr(name);
    }

    fn attr_err(name: &str, reason: impl Into<String>) -> MapError {
        MapError::Attr {
            name: name.to_string(),
            reason: reason.into(),
        }
    }

    fn typed(
        &mut self,
        name: &str,
        want: AttributeType,
    ) -> Result<Option<&'a AttributeProto>, MapError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                let t = a.r#type.unwrap_or(0);
                // Old models may leave `type` unset; accept when the payload field is present.
                if t == want as i32 || t == 0 {
                    Ok(Some(a))
                } else {
                    Err(Self::attr_err(
                        name,
                        format!(
                            "has type {:?}, expected {want:?}",
                            AttributeType::try_from(t).unwrap_or(AttributeType::Undefined)
                        ),
                    ))
                }
            }
        }
    }

    pub fn attr_i_opt(&mut self, name: &str) -> Result<Option<i64>, MapError> {
        Ok(self
            .typed(name, AttributeType::Int)?
            .map(|a| a.i.unwrap_or(0)))
    }

    pub fn attr_i(&mut self, name: &str, default: i64) -> Result<i64, MapError> {
        Ok(self.attr_i_opt(name)?.unwrap_or(default))
    }

    pub fn attr_bool(&mut self, name: &str, default: bool) -> Result<bool, MapError> {
        match self.attr_i_opt(name)? {
            None => Ok(default),
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => Err(Self::attr_err(name, format!("must be 0 or 1, got {v}"))),
        }
    }

    pub fn attr_f_opt(&mut self, name: &str) -> Result<Option<f32>, MapError> {
        Ok(self
            .typed(name, AttributeType::Float)?
            .map(|a| a.f.unwrap_or(0.0)))
    }

    pub fn attr_f(&mut self, name: &str, default: f32) -> Result<f32, MapError> {
        Ok(self.attr_f_opt(name)?.unwrap_or(default))
    }

    pub fn attr_ints(&mut self, name: &str) -> Result<Option<Vec<i64>>, MapError> {
        Ok(self
            .typed(name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    pub fn attr_floats(&mut self, name: &str) -> Result<Option<Vec<f32>>, MapError> {
        Ok(self
            .typed(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }

    pub fn attr_s(&mut self, name: &str) -> Result<Option<String>, MapError> {
        match self.typed(name, AttributeType::String)? {
            None => Ok(None),
            Some(a) => String::from_utf8(a.s.clone().unwrap_or_default())
                .map(Some)
                .map_err(|_| Self::attr_err(name, "is not UTF-8")),
        }
    }

    pub fn attr_strings(&mut self, name: &str) -> Result<Option<Vec<String>>, MapError> {
        match self.typed(name, AttributeType::Strings)? {
            None => Ok(None),
            Some(a) => a
                .strings
                .iter()
                .map(|s| {
                    String::from_utf8(s.clone()).map_err(|_| Self::attr_err(name, "is not UTF-8"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }

    /// A string attribute from `allowed`, or `default`; anything else is an error.
    pub fn attr_choice(
        &mut self,
        name: &str,
        default: &str,
        allowed: &[&str],
    ) -> Result<String, MapError> {
        let v = self.attr_s(name)?.unwrap_or_else(|| default.to_string());
        if allowed.contains(&v.as_str()) {
            Ok(v)
        } else {
            Err(Self::attr_err(
                name,
                format!("`{v}` is not supported (supported: {})", allowed.join(", ")),
            ))
        }
    }

    pub fn attr_t(&mut self, name: &str) -> Result<Option<Tensor>, MapError> {
        match self.typed(name, AttributeType::Tensor)? {
            None => Ok(None),
            Some(a) => {
                let tp =
                    a.t.as_ref()
                        .ok_or_else(|| Self::attr_err(name, "has no tensor"))?;
                Ok(Some(tensor_from_proto(tp, &mut self.imp.ext)?))
            }
        }
    }

    /// A `TypeProto` attribute (Optional's `type`) as an RLX value type.
    pub fn attr_type(&mut self, name: &str) -> Result<Option<TensorType>, MapError> {
        let Some(a) = self.typed(name, AttributeType::TypeProto)? else {
            return Ok(None);
        };
        let tp =
            a.tp.clone()
                .ok_or_else(|| Self::attr_err(name, "has no type"))?;
        let vi = crate::proto::ValueInfoProto {
            name: Some(name.to_string()),
            r#type: Some(tp),
            ..Default::default()
        };
        self.imp
            .value_type(&vi, "attribute")
            .map(Some)
            .map_err(|e| Self::attr_err(name, e.to_string()))
    }

    pub fn attr_g(&mut self, name: &str) -> Result<Option<&'a GraphProto>, MapError> {
        Ok(self
            .typed(name, AttributeType::Graph)?
            .and_then(|a| a.g.as_ref()))
    }

    /// A dtype attribute (a `TensorProto.DataType` code).
    pub fn attr_dtype(&mut self, name: &str) -> Result<Option<DType>, MapError> {
        match self.attr_i_opt(name)? {
            None => Ok(None),
            Some(c) => DType::from_onnx_code(c as i32)
                .map(Some)
                .ok_or_else(|| Self::attr_err(name, format!("dtype code {c} is not supported"))),
        }
    }

    /// Fails on any attribute the mapper did not read.
    pub(crate) fn finish(&mut self) -> Result<(), MapError> {
        for (i, a) in self.node.attribute.iter().enumerate() {
            if !self.read[i] {
                return Err(MapError::UnhandledAttr(a.name.clone().unwrap_or_default()));
            }
        }
        for (i, o) in self.node.output.iter().enumerate() {
            if o.is_empty() {
                continue;
            }
            let v = self.outputs[i].ok_or_else(|| {
                MapError::Unsupported(format!(
                    "output {i} (`{o}`) is not produced by this importer"
                ))
            })?;
            self.imp.frames[self.level].names.insert(o.clone(), v);
        }
        Ok(())
    }

    // ----- building -----

    /// Adds an RLX node fed by `inputs`, infers its types and returns its outputs.
    pub fn add(&mut self, op: impl Into<Op>, inputs: &[Value]) -> Result<Vec<Value>, MapError> {
        let op = op.into();
        let weights = &self.imp.weights;
        let f = &mut self.imp.frames[self.level];
        let name = f.graph.unique_name(&self.display);
        let id = f
            .graph
            .add_node(
                Node::new(op, name, vec![self.display.clone()], Vec::new()),
                inputs,
            )
            .map_err(|e| MapError::Unsupported(e.to_string()))?;
        match infer_node(&f.graph, id, &f.values, Some(weights)) {
            Ok(types) => {
                let n = types.len();
                f.graph.node_mut(id).outputs = types;
                record_values(&f.graph, id, &mut f.values, Some(weights));
                Ok((0..n).map(|p| Value::new(id, p as u16)).collect())
            }
            Err(e) => {
                f.graph.remove_node(id);
                Err(MapError::Infer(e))
            }
        }
    }

    /// Adds a single-output node.
    pub fn add1(&mut self, op: impl Into<Op>, inputs: &[Value]) -> Result<Value, MapError> {
        let v = self.add(op, inputs)?;
        v.first()
            .copied()
            .ok_or_else(|| MapError::Unsupported("op produced no output".into()))
    }

    /// A constant (inline when small, a weight otherwise).
    pub fn constant(&mut self, t: Tensor) -> Value {
        let name = format!("{}.const", self.display);
        self.imp
            .add_tensor(self.level, &name, t, vec![self.display.clone()])
    }

    /// A 1-D i64 constant.
    pub fn const_i64(&mut self, v: &[i64]) -> Value {
        let t = int_tensor(DType::I64, &[v.len()], v).expect("i64 tensors always build");
        self.constant(t)
    }

    /// A scalar constant of `dtype` (a float or integer dtype).
    pub fn scalar(&mut self, dtype: DType, v: f64) -> Result<Value, MapError> {
        let t = if dtype.is_float() {
            float_tensor(dtype, &[], &[v])
        } else {
            int_tensor(dtype, &[], &[v as i64])
        };
        let t =
            t.ok_or_else(|| MapError::Unsupported(format!("no scalar constant of dtype {dtype}")))?;
        Ok(self.constant(t))
    }

    /// Imports a subgraph attribute. `formal` gives the types of the body's own
    /// inputs where the outer op determines them. Returns the graph (captures
    /// appended to its inputs) and the captured outer values.
    pub fn subgraph(
        &mut self,
        attr: &str,
        gp: &GraphProto,
        formal: &[Option<TensorType>],
    ) -> Result<(Graph, Vec<String>), MapError> {
        self.imp
            .build(gp, Some(formal))
            .map_err(|e| MapError::Subgraph {
                attr: attr.to_string(),
                source: Box::new(e),
            })
    }

    /// Inlines a subgraph into this node's graph (see [`Graph::inline`]),
    /// recording the compile-time values of the new nodes.
    pub fn inline(&mut self, sub: &Graph, args: &[Value]) -> Result<Vec<Value>, MapError> {
        let weights = &self.imp.weights;
        let f = &mut self.imp.frames[self.level];
        let before: std::collections::HashSet<rlx_ir::NodeId> =
            f.graph.node_ids().into_iter().collect();
        let outs = f
            .graph
            .inline(sub, args)
            .map_err(|e| MapError::Unsupported(e.to_string()))?;
        let order = f
            .graph
            .topo_order()
            .map_err(|e| MapError::Unsupported(e.to_string()))?;
        for id in order {
            if !before.contains(&id) {
                let node = f.graph.node_mut(id);
                if node.origin.is_empty() {
                    node.origin = vec![self.display.clone()];
                }
                record_values(&f.graph, id, &mut f.values, Some(weights));
            }
        }
        Ok(outs)
    }

    /// Resolves an outer name in this node's scope (used for subgraph captures).
    pub fn lookup(&mut self, name: &str) -> Result<Value, MapError> {
        self.imp.lookup(self.level, name)
    }

    /// Errors with a reason.
    pub fn unsupported<T>(&self, reason: impl Into<String>) -> Result<T, MapError> {
        Err(MapError::Unsupported(reason.into()))
    }
}
