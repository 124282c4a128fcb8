//! The deterministic IR printer.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::attr::{fmt_f64, AttrValue};
use crate::dim::{write_quoted, Atom, Dim};
use crate::dtype::DType;
use crate::graph::{Graph, NodeId, Value};
use crate::ops::Op;
use crate::shape::{Shape, TensorType};
use crate::tensor::Tensor;

/// Accumulates IR text with indentation for nested subgraphs.
pub struct Writer {
    out: String,
    indent: usize,
    dims: DimNames,
}

/// A dim sub-expression (floordiv, min or max) whose text is longer than
/// this many characters prints as `$k`, defined once in the `dims { }`
/// block ahead of the graph: a chain of strided layers and broadcasts on an
/// unbound model otherwise prints dims of several kilobytes.
const NAME_OVER: usize = 40;

/// The names given to long dim sub-expressions, in order of first use.
#[derive(Default)]
struct DimNames {
    /// Off for text without a header ([`print_graph_body`]).
    enabled: bool,
    named: HashMap<Atom, usize>,
    defs: Vec<String>,
}

impl DimNames {
    fn dim(&mut self, d: &Dim) -> String {
        let mut s = String::new();
        let _ = d.write_atoms(&mut s, &mut |a| self.atom(a));
        s
    }

    fn atom(&mut self, a: &Atom) -> String {
        if let Some(k) = self.named.get(a) {
            return format!("${k}");
        }
        let text = a.render(&mut |d| self.dim(d));
        if !self.enabled || matches!(a, Atom::Sym(_)) || text.len() <= NAME_OVER {
            return text;
        }
        let k = self.defs.len();
        self.defs.push(text);
        self.named.insert(a.clone(), k);
        format!("${k}")
    }
}

impl Writer {
    pub fn new() -> Writer {
        Writer {
            out: String::new(),
            indent: 0,
            dims: DimNames::default(),
        }
    }

    /// A dim, long sub-expressions by name.
    pub fn dim(&mut self, d: &Dim) {
        let s = self.dims.dim(d);
        self.push(&s);
    }

    /// `[d0,d1,...]`.
    pub fn shape(&mut self, s: &Shape) {
        self.push("[");
        for (i, d) in s.dims().iter().enumerate() {
            if i > 0 {
                self.push(",");
            }
            self.dim(d);
        }
        self.push("]");
    }

    /// `dtype[shape]`.
    pub fn ty(&mut self, t: &TensorType) {
        let _ = write!(self.out, "{}{}", t.kind.prefix(), t.dtype);
        self.shape(&t.shape);
    }

    pub fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    pub fn push_quoted(&mut self, s: &str) {
        let _ = write_quoted(&mut self.out, s);
    }

    /// Writes `name=value`, preceded by `, ` unless it is the first attribute.
    pub fn attr<T: AttrValue>(&mut self, first: &mut bool, name: &str, value: &T) {
        if value.omitted() {
            return;
        }
        if !*first {
            self.push(", ");
        }
        *first = false;
        self.push(name);
        self.push("=");
        value.write_attr(self);
    }

    /// `dtype[shape] [v0, v1, ...]`.
    pub fn tensor(&mut self, t: &Tensor) {
        let _ = write!(self.out, "{} [", t.ty());
        write_elements(&mut self.out, t);
        self.push("]");
    }

    pub fn subgraph(&mut self, g: &Graph) {
        self.push("graph {\n");
        self.indent += 2;
        write_body(self, g);
        self.indent -= 2;
        self.line_start();
        self.push("}");
    }

    fn line_start(&mut self) {
        for _ in 0..self.indent {
            self.out.push(' ');
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

fn write_elements(out: &mut String, t: &Tensor) {
    if let Some(strings) = t.strings() {
        for (i, v) in strings.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write_quoted(out, v);
        }
        return;
    }
    if !t.is_plain() {
        // Sequences and absent optionals are never constants of a graph.
        return;
    }
    let b = t.bytes();
    let n = t.numel();
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        let s = match t.dtype() {
            DType::F32 => {
                let v = f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap_or_default());
                fmt_f64(v as f64, format!("{v:?}"))
            }
            DType::F64 => {
                let v = f64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default());
                fmt_f64(v, format!("{v:?}"))
            }
            DType::F16 => {
                let v = half::f16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32();
                fmt_f64(v as f64, format!("{v:?}"))
            }
            DType::BF16 => {
                let v = half::bf16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_f32();
                fmt_f64(v as f64, format!("{v:?}"))
            }
            DType::Bool => (if b[i] != 0 { "true" } else { "false" }).to_string(),
            d if d.is_minifloat() => format!("0x{:02x}", b[i]),
            DType::I8 | DType::I4 | DType::I2 => (b[i] as i8).to_string(),
            DType::U8 | DType::U4 | DType::U2 => b[i].to_string(),
            DType::I16 => i16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_string(),
            DType::U16 => u16::from_le_bytes([b[2 * i], b[2 * i + 1]]).to_string(),
            DType::I32 => {
                i32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap_or_default()).to_string()
            }
            DType::U32 => {
                u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap_or_default()).to_string()
            }
            DType::I64 => {
                i64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default()).to_string()
            }
            DType::U64 => {
                u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap_or_default()).to_string()
            }
            _ => format!("0x{:02x}", b[i]),
        };
        out.push_str(&s);
    }
}

/// True if an origin or node name prints without quotes.
fn is_bare_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('[')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@+-".contains(c))
}

fn write_name(out: &mut String, s: &str) {
    if is_bare_name(s) {
        out.push_str(s);
    } else {
        let _ = write_quoted(out, s);
    }
}

/// Canonical value numbers of a graph's nodes.
pub fn numbering(g: &Graph) -> (Vec<NodeId>, HashMap<NodeId, usize>) {
    let order = g.topo_order().unwrap_or_else(|_| g.node_ids());
    let num = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    (order, num)
}

fn value_ref(num: &HashMap<NodeId, usize>, g: &Graph, v: Value) -> String {
    let n = num.get(&v.node).copied().unwrap_or(usize::MAX);
    if g.node(v.node).outputs.len() == 1 && v.port == 0 {
        format!("%{n}")
    } else {
        format!("%{n}.{}", v.port)
    }
}

fn write_body(w: &mut Writer, g: &Graph) {
    let (order, num) = numbering(g);
    for id in order {
        let node = g.node(id);
        w.line_start();
        let i = num[&id];
        if node.outputs.len() == 1 {
            let _ = write!(w.out, "%{i} = ");
        } else {
            let _ = write!(w.out, "%{i}:{} = ", node.outputs.len());
        }
        match &node.op {
            Op::Input(o) => {
                w.push("input ");
                w.push_quoted(&o.name);
            }
            Op::Weight(o) => {
                w.push("weight ");
                w.push_quoted(&o.name);
            }
            Op::Constant(c) => {
                w.push("constant ");
                w.tensor(&c.value);
            }
            op => {
                w.push(op.name());
                w.push("(");
                let args: Vec<String> = g
                    .inputs_of(id)
                    .into_iter()
                    .map(|v| value_ref(&num, g, v))
                    .collect();
                w.push(&args.join(", "));
                w.push(")");
                op.write_attrs(w);
            }
        }
        w.push(" : ");
        if node.outputs.len() == 1 {
            w.ty(&node.outputs[0]);
        } else {
            w.push("(");
            for (k, t) in node.outputs.iter().enumerate() {
                if k > 0 {
                    w.push(", ");
                }
                w.ty(t);
            }
            w.push(")");
        }
        let derived = match &node.op {
            Op::Input(o) => o.name.as_str(),
            Op::Weight(o) => o.name.as_str(),
            _ => node.origin.first().map_or("", String::as_str),
        };
        if node.name != derived || !node.origin.is_empty() {
            w.push("  #");
            if node.name != derived {
                w.push(" [");
                write_name(&mut w.out, &node.name);
                w.push("]");
            }
            for (k, o) in node.origin.iter().enumerate() {
                w.push(if k == 0 { " " } else { ", " });
                write_name(&mut w.out, o);
            }
        }
        w.push("\n");
    }
    for o in g.outputs() {
        w.line_start();
        w.push("output ");
        w.push_quoted(&o.name);
        w.push(" = ");
        let r = value_ref(&num, g, o.value);
        w.push(&r);
        w.push("\n");
    }
}

/// The text form of a graph, with its version header: `rlx-ir 2`, or
/// `rlx-ir 3` and a `dims { }` block when long dims are named.
pub fn print_graph(g: &Graph) -> String {
    let mut w = Writer::new();
    w.dims.enabled = true;
    w.subgraph(g);
    w.push("\n");
    if w.dims.defs.is_empty() {
        return format!("rlx-ir 2\n{}", w.out);
    }
    let mut head = format!("rlx-ir {}\ndims {{\n", super::TEXT_VERSION);
    for (k, d) in w.dims.defs.iter().enumerate() {
        let _ = writeln!(head, "  ${k} = {d}");
    }
    head.push_str("}\n");
    head + &w.out
}

/// The text form of a graph's body only (no header), for embedding.
pub fn print_graph_body(g: &Graph) -> String {
    let mut w = Writer::new();
    write_body(&mut w, g);
    w.finish()
}
