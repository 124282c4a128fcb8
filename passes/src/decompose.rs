//! Decompositions used by legalization: a node a target cannot run becomes
//! simpler nodes that compute the same values.
//!
//! - `fused_matmul` -> `matmul` [+ `add`] [+ activation];
//! - `fused_conv` -> `conv` [+ activation];
//! - `residual_norm` -> `add` + `layer_norm` / `rms_norm`;
//! - `elementwise_region` -> its chain of unary/binary nodes;
//! - `attention` (4-D, no KV cache, no causal mask or softcap, equal head
//!   counts, float or no mask, one output) -> `matmul`, `mul`, [`add`],
//!   `softmax`, `matmul`.

use rlx_ir::ops::{
    Activation, Binary, BinaryKind, Gelu, GeluApprox, LayerNorm, MatMul, Operand, RegionFn,
    RmsNorm, Softmax, SoftmaxKind, Transpose, Unary, UnaryKind,
};
use rlx_ir::{Graph, NodeId, Op, Value, Weights};

use crate::rewrite::{add_op, constant, float_tensor};

/// Adds nodes computing `id`'s outputs from its inputs; returns the values that
/// replace its outputs, or why it cannot be decomposed.
pub fn decompose(g: &mut Graph, w: &mut Weights, id: NodeId) -> Result<Vec<Value>, String> {
    let node = g.node(id).clone();
    let ins = g.inputs_of(id);
    let (name, origin) = (node.name.as_str(), node.origin.clone());
    let mut b = Builder { g, w, name, origin };
    match &node.op {
        Op::FusedMatMul(f) => {
            let mut t = b.add(MatMul {}, &ins[..2])?;
            if let Some(bias) = ins.get(2) {
                t = b.bin(BinaryKind::Add, t, *bias)?;
            }
            Ok(vec![b.activation(f.activation, t)?])
        }
        Op::FusedConv(f) => {
            let t = b.add(f.conv(), &ins)?;
            Ok(vec![b.activation(f.activation, t)?])
        }
        Op::ResidualNorm(r) => {
            let s = b.bin(BinaryKind::Add, ins[0], ins[1])?;
            let mut args = vec![s];
            args.extend_from_slice(&ins[2..]);
            let y = if r.rms {
                b.add(
                    RmsNorm {
                        axis: r.axis,
                        epsilon: r.epsilon,
                    },
                    &args,
                )?
            } else {
                let ln = LayerNorm {
                    axis: r.axis,
                    epsilon: r.epsilon,
                    stats: false,
                };
                b.add(ln, &args)?
            };
            Ok(vec![y, s])
        }
        Op::ElementwiseRegion(r) => {
            let dtype = node.outputs[0].dtype;
            let mut temps: Vec<Value> = Vec::new();
            for ins_ in &r.program.0 {
                let mut args = Vec::new();
                for a in &ins_.args {
                    args.push(match *a {
                        Operand::Input(k) => {
                            *ins.get(usize::from(k)).ok_or("region input out of range")?
                        }
                        Operand::Temp(k) => *temps
                            .get(usize::from(k))
                            .ok_or("region temp out of range")?,
                        Operand::Const(c) => {
                            let t = float_tensor(dtype, &[], &[c]).ok_or("bad region literal")?;
                            constant(b.g, b.w, &format!("{}.c", b.name), b.origin.clone(), t)
                        }
                    });
                }
                let t = match ins_.f {
                    RegionFn::Unary(kind) => b.add(Unary { kind }, &args)?,
                    RegionFn::Binary(kind) => b.add(Binary { kind }, &args)?,
                };
                temps.push(t);
            }
            let last = *temps.last().ok_or("empty region")?;
            if *b.g.ty(last) != node.outputs[0] {
                return Err("the region's result does not cover its output shape".into());
            }
            Ok(vec![last])
        }
        Op::Attention(a) => attention(&mut b, a, &ins, &node.outputs),
        op => Err(format!("no decomposition for `{}`", op.name())),
    }
}

struct Builder<'a> {
    g: &'a mut Graph,
    w: &'a mut Weights,
    name: &'a str,
    origin: Vec<String>,
}

impl Builder<'_> {
    fn add(&mut self, op: impl Into<Op>, ins: &[Value]) -> Result<Value, String> {
        let id = add_op(self.g, self.w, op, self.name, self.origin.clone(), ins)?;
        Ok(Value::of(id))
    }

    fn bin(&mut self, kind: BinaryKind, a: Value, b: Value) -> Result<Value, String> {
        self.add(Binary { kind }, &[a, b])
    }

    fn activation(&mut self, act: Activation, x: Value) -> Result<Value, String> {
        let un = |kind| Unary { kind };
        match act {
            Activation::None => Ok(x),
            Activation::Relu => self.add(un(UnaryKind::Relu), &[x]),
            Activation::Sigmoid => self.add(un(UnaryKind::Sigmoid), &[x]),
            Activation::Tanh => self.add(un(UnaryKind::Tanh), &[x]),
            Activation::GeluErf => self.add(
                Gelu {
                    approximate: GeluApprox::None,
                },
                &[x],
            ),
            Activation::GeluTanh => self.add(
                Gelu {
                    approximate: GeluApprox::Tanh,
                },
                &[x],
            ),
            Activation::Silu => {
                let s = self.add(un(UnaryKind::Sigmoid), &[x])?;
                self.bin(BinaryKind::Mul, x, s)
            }
        }
    }
}

fn attention(
    b: &mut Builder,
    a: &rlx_ir::ops::Attention,
    ins: &[Value],
    outs: &[rlx_ir::TensorType],
) -> Result<Vec<Value>, String> {
    if a.has_past || a.has_nonpad || outs.len() != 1 {
        return Err(
            "attention with a KV cache, sequence lengths or extra outputs is not decomposed".into(),
        );
    }
    if a.is_causal || a.softcap != 0.0 {
        return Err("causal or soft-capped attention is not decomposed".into());
    }
    let (q, k, v) = (ins[0], ins[1], ins[2]);
    let (qt, kt) = (b.g.ty(q).clone(), b.g.ty(k).clone());
    if qt.rank() != 4 || kt.rank() != 4 || b.g.ty(v).rank() != 4 {
        return Err("only 4-D attention inputs are decomposed".into());
    }
    if qt.shape.0[1] != kt.shape.0[1] {
        return Err("grouped-query attention (fewer key heads) is not decomposed".into());
    }
    let scale = match a.scale {
        Some(s) => f64::from(s),
        None => {
            let d = qt.shape.0[3]
                .known()
                .ok_or("the head size is symbolic; give the scale")?;
            1.0 / (d as f64).sqrt()
        }
    };
    let mask = a.ports().mask.map(|p| ins[p]);
    if let Some(m) = mask {
        if b.g.ty(m).dtype != qt.dtype {
            return Err(format!(
                "a {} mask is not decomposed (only float masks)",
                b.g.ty(m).dtype
            ));
        }
    }
    let kt_ = b.add(
        Transpose {
            perm: vec![0, 1, 3, 2],
        },
        &[k],
    )?;
    let mut s = b.add(MatMul {}, &[q, kt_])?;
    let st = float_tensor(qt.dtype, &[], &[scale]).ok_or("bad scale")?;
    let sc = constant(b.g, b.w, &format!("{}.scale", b.name), b.origin.clone(), st);
    s = b.bin(BinaryKind::Mul, s, sc)?;
    if let Some(m) = mask {
        s = b.bin(BinaryKind::Add, s, m)?;
    }
    let p = b.add(
        Softmax {
            kind: SoftmaxKind::Softmax,
            axis: -1,
        },
        &[s],
    )?;
    Ok(vec![b.add(MatMul {}, &[p, v])?])
}
