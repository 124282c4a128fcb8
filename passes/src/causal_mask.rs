//! Causality written out as a mask, back to the attention's flag
//! (`causal-mask`, GPU targets).
//!
//! Both of PyTorch's ONNX exporters write a decoder's attention mask as
//!
//! ```text
//! mask = where(and(T, P), 0, NEG)        or        where(T, 0, NEG)
//! ```
//!
//! with `T` a constant lower triangle over `[S, S]` (key `j` visible from
//! query row `i` when `j <= i`), `P` the per-key padding mask broadcast over
//! the rows (`[.., 1, S]`, from the `attention_mask` input) and `NEG` -inf
//! or the most negative float. A kernel given that mask reads a bias per
//! score and scores every key tile of every row; given the causal flag and
//! the per-key part (`where(P, 0, NEG)`, or no mask) it stops at the
//! diagonal and stages one bias per key a tile at a time. Measured on an
//! H200 (`scripts/attention_bench.py`, 12 heads of 64 over 1,024 positions,
//! f16): 95 us a layer with the written mask, 40 with the flag.
//!
//! The two forms are the same attention wherever a row sees a key: -inf
//! and a bias of -3.4e38 both give a score that contributes exactly zero.
//! They differ on a row that sees no key at all (a left-padded sequence's
//! first rows): ONNX adds -3.4e38 to every score there and averages every
//! value; the GPU kernels (CUDA and WGSL) count a score at or below -3e38 as
//! hidden and give such a row zeros in either form. So the rewrite runs on
//! GPU targets, where it changes nothing the kernels compute; a `NEG` above
//! -3e38 (a bias that does not hide) is left alone.
//!
//! Conditions: an attention without the flag, a KV cache, key windows or
//! per-batch key lengths, whose query and key lengths are both `S`.

use std::collections::HashMap;

use rlx_ir::ops::Where;
use rlx_ir::{DType, Graph, NodeId, Op, Value};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, const_of, finish, splat};

pub struct CausalMask;

const NAME: &str = "causal-mask";

/// Biases at or below this hide a key in every GPU kernel (`FA_MASKED` in
/// `kernels/cuda/flash_attention.cu`, `MASKED` in `kernels/wgsl/attention*.wgsl`).
const HIDES: f64 = -3.0e38;

impl Pass for CausalMask {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        // One rewritten mask per written one (every layer reads the same).
        let mut done: HashMap<Value, Option<Value>> = HashMap::new();
        let mut changed = false;
        for id in g.node_ids() {
            let Some((mask_port, s)) = candidate(g, id) else {
                continue;
            };
            let mask = g.inputs_of(id)[mask_port];
            let keyed = match done.get(&mask) {
                Some(k) => *k,
                None => {
                    let Some(parts) = split(g, cx, mask, s) else {
                        continue;
                    };
                    let keyed = match parts {
                        Parts::Causal => None,
                        Parts::Padded { padding, zero, neg } => {
                            let origin = g.node(mask.node).origin.clone();
                            let base = format!("{}.keyed", g.node(mask.node).name);
                            let w = add_op(
                                g,
                                cx.weights,
                                Where {},
                                &base,
                                origin,
                                &[padding, zero, neg],
                            )
                            .map_err(|reason| node_error(g, id, reason))?;
                            Some(Value::of(w))
                        }
                    };
                    done.insert(mask, keyed);
                    keyed
                }
            };
            let mut ins = g.inputs_of(id);
            match keyed {
                Some(k) => ins[mask_port] = k,
                None => {
                    ins.remove(mask_port);
                }
            }
            g.set_inputs(id, &ins)
                .map_err(|e| node_error(g, id, e.to_string()))?;
            if let Op::Attention(a) = &mut g.node_mut(id).op {
                a.is_causal = true;
                a.has_mask = keyed.is_some();
            }
            cx.count("causal_mask");
            changed = true;
        }
        if changed {
            finish(g, cx, NAME)?;
        }
        Ok(changed)
    }
}

fn node_error(g: &Graph, id: NodeId, reason: String) -> PassError {
    PassError::Node {
        pass: NAME,
        node: g.node(id).name.clone(),
        origin: g.node(id).origin_text(),
        reason,
    }
}

/// The mask's input port of an attention the rewrite may take, and the
/// sequence length its queries and keys share.
fn candidate(g: &Graph, id: NodeId) -> Option<(usize, usize)> {
    let Op::Attention(a) = &g.node(id).op else {
        return None;
    };
    if a.is_causal
        || !a.has_mask
        || a.has_past
        || a.has_nonpad
        || a.left_window_size >= 0
        || a.right_window_size >= 0
        || a.qk_matmul_output_mode != 0
        || a.num_outputs != 1
        || !a.views.is_empty()
    {
        return None;
    }
    let ins = g.inputs_of(id);
    // Sequence lengths: [b, h, s, d] or [b, s, h*d].
    let seq = |v: Value| {
        let dims = g.ty(v).shape.as_known()?;
        match dims.len() {
            4 => Some(dims[2]),
            3 => Some(dims[1]),
            _ => None,
        }
    };
    let (sq, sk) = (seq(ins[0])?, seq(ins[1])?);
    (sq == sk && sq > 1).then_some((a.ports().mask?, sq))
}

/// What a written causal mask holds besides the triangle.
enum Parts {
    /// Only causality: the attention needs no mask.
    Causal,
    /// A per-key padding mask too: `where(padding, zero, neg)` stays.
    Padded {
        padding: Value,
        zero: Value,
        neg: Value,
    },
}

/// `mask` as causality over `s` positions and what else it holds, if it is
/// `where(T, 0, NEG)` or `where(and(T, P), 0, NEG)` as the module describes.
fn split(g: &Graph, cx: &PassContext, mask: Value, s: usize) -> Option<Parts> {
    let node = g.node(mask.node);
    if !matches!(node.op, Op::Where(_)) || !node.outputs[mask.port as usize].dtype.is_float() {
        return None;
    }
    let [cond, zero, neg] = g.inputs_of(mask.node)[..] else {
        return None;
    };
    let hides = splat(g, cx.weights, neg)? <= HIDES;
    if splat(g, cx.weights, zero)?.to_bits() != 0f64.to_bits() || !hides {
        return None;
    }
    if is_triangle(g, cx, cond, s) {
        return Some(Parts::Causal);
    }
    let and = g.node(cond.node);
    if !matches!(&and.op, Op::Logical(l) if l.kind == rlx_ir::ops::LogicalKind::And) {
        return None;
    }
    let [a, b] = g.inputs_of(cond.node)[..] else {
        return None;
    };
    let padding = if is_triangle(g, cx, a, s) {
        b
    } else if is_triangle(g, cx, b, s) {
        a
    } else {
        return None;
    };
    // One value per key, the same for every row: `[.., 1, s]` (or `[s]`).
    let dims = g.ty(padding).shape.as_known()?;
    let per_key = dims.last() == Some(&s)
        && (dims.len() < 2 || dims[dims.len() - 2] == 1)
        && g.ty(padding).dtype == DType::Bool;
    per_key.then_some(Parts::Padded { padding, zero, neg })
}

/// Whether `v` is a constant bool `[1, .., 1, s, s]` that is true exactly
/// where the key does not follow the query (`j <= i`).
fn is_triangle(g: &Graph, cx: &PassContext, v: Value, s: usize) -> bool {
    let Some(t) = const_of(g, cx.weights, v) else {
        return false;
    };
    let dims = t.dims();
    let r = dims.len();
    if t.dtype() != DType::Bool
        || r < 2
        || dims[r - 2] != s
        || dims[r - 1] != s
        || dims[..r - 2].iter().any(|&d| d != 1)
    {
        return false;
    }
    let bits = t.bytes();
    (0..s).all(|i| (0..s).all(|j| (bits[i * s + j] != 0) == (j <= i)))
}
