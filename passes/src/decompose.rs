//! Decompositions used by legalization: a node a target cannot run becomes
//! simpler nodes that compute the same values.
//!
//! - `fused_matmul` -> `matmul` [+ `add`] [+ activation];
//! - `fused_conv` -> `conv` [+ activation];
//! - `residual_norm` -> `add` + `layer_norm` / `rms_norm`;
//! - `elementwise_region` -> its chain of unary/binary nodes;
//! - `attention` (4-D, no KV cache, no causal mask, window or softcap, equal
//!   head counts, float or no mask, one output) -> `matmul`, `mul`, [`add`],
//!   `softmax`, `matmul` (a row the float mask hides entirely gives NaN
//!   there, where the attention kernels give zeros);
//! - an i32 `matmul` of operands with bounded values (MatMulInteger's 8-bit
//!   operands less their zero points) -> `cast` to f64, `matmul`, `cast` to
//!   i32: exact, as every partial sum stays below 2^53;
//! - `matmul_integer` (one zero point per operand) -> `cast`s to i32, `sub`
//!   of the zero points, an i32 `matmul`;
//! - `fused_matmul_integer` -> `matmul_integer`, `cast` to f32, `mul` by the
//!   scale [+ `add`] [+ activation];
//! - `dynamic_quantize_linear` -> min/max reductions and elementwise ops, in
//!   the CPU kernel's order of operations (the same bits).

use rlx_ir::ops::{
    Activation, Binary, BinaryKind, Cast, Clip, Compare, CompareKind, ElementwiseRegion, Gelu,
    GeluApprox, LayerNorm, MatMul, MatMulInteger, Operand, Reduce, ReduceKind, RegionFn, RmsNorm,
    RoundMode, Softmax, SoftmaxKind, Transpose, Unary, UnaryKind, Where,
};
use rlx_ir::{DType, Graph, NodeId, Op, Value, Weights};

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
            let mut t = b.add(f.conv(), &ins[..ins.len().min(3)])?;
            if let Some(residual) = ins.get(3) {
                t = b.bin(BinaryKind::Add, t, *residual)?;
            }
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
        Op::MatMul(_) if node.outputs[0].dtype == DType::I32 => {
            let k = b.g.ty(ins[0]).shape.0.last().and_then(|d| d.known());
            let bounds = (bound(b.g, b.w, ins[0], 0), bound(b.g, b.w, ins[1], 0));
            match (k, bounds) {
                (Some(k), (Some(x), Some(y))) if x * y * (k as f64) < (1u64 << 53) as f64 => {
                    let to = |d| Cast {
                        to: d,
                        saturate: false,
                        round_mode: RoundMode::Nearest,
                    };
                    let a = b.add(to(DType::F64), &[ins[0]])?;
                    let c = b.add(to(DType::F64), &[ins[1]])?;
                    let p = b.add(MatMul {}, &[a, c])?;
                    Ok(vec![b.add(to(DType::I32), &[p])?])
                }
                _ => Err("no decomposition for an i32 `matmul` of unbounded operands".into()),
            }
        }
        Op::MatMulInteger(_) => {
            let one = |b: &Builder, v: Value| b.g.ty(v).shape.numel().known() == Some(1);
            if !(one(&b, ins[2]) && one(&b, ins[3])) {
                return Err(
                    "no decomposition for a `matmul_integer` with a zero point per \
                            row or column"
                        .into(),
                );
            }
            let to_i32 = Cast {
                to: DType::I32,
                saturate: false,
                round_mode: RoundMode::Nearest,
            };
            let wide = |b: &mut Builder, x: Value, z: Value| -> Result<Value, String> {
                let x = b.add(to_i32.clone(), &[x])?;
                let z = b.add(to_i32.clone(), &[z])?;
                b.bin(BinaryKind::Sub, x, z)
            };
            let a = wide(&mut b, ins[0], ins[2])?;
            let c = wide(&mut b, ins[1], ins[3])?;
            Ok(vec![b.add(MatMul {}, &[a, c])?])
        }
        Op::FusedMatMulInteger(f) => {
            let acc = b.add(MatMulInteger {}, &ins[..4])?;
            let to_f32 = Cast {
                to: DType::F32,
                saturate: false,
                round_mode: RoundMode::Nearest,
            };
            let wide = b.add(to_f32, &[acc])?;
            let mut t = b.bin(BinaryKind::Mul, wide, ins[4])?;
            if let Some(bias) = ins.get(5) {
                t = b.bin(BinaryKind::Add, t, *bias)?;
            }
            Ok(vec![b.activation(f.activation, t)?])
        }
        Op::DynamicQuantizeLinear(_) => dynamic_quantize(&mut b, ins[0]),
        op => Err(format!("no decomposition for `{}`", op.name())),
    }
}

/// `scale = (max(x, 0) - min(x, 0)) / 255` (1/255 when that range is 0),
/// `zero = round(clamp(-min / scale, 0, 255))`, `y = clamp(round(x / scale) +
/// zero, 0, 255)` as u8.
fn dynamic_quantize(b: &mut Builder, x: Value) -> Result<Vec<Value>, String> {
    let scalar = |b: &mut Builder, v: f64| -> Result<Value, String> {
        let t = float_tensor(DType::F32, &[], &[v]).ok_or("no f32 scalar")?;
        Ok(constant(
            b.g,
            b.w,
            &format!("{}.c", b.name),
            b.origin.clone(),
            t,
        ))
    };
    let all = |kind| Reduce {
        kind,
        keepdims: false,
        noop_with_empty_axes: false,
    };
    let (zero, one) = (scalar(b, 0.0)?, scalar(b, 1.0)?);
    let (q_max, full) = (scalar(b, 255.0)?, scalar(b, 255.0)?);
    let hi = b.add(all(ReduceKind::Max), &[x])?;
    let hi = b.bin(BinaryKind::Max, hi, zero)?;
    let lo = b.add(all(ReduceKind::Min), &[x])?;
    let lo = b.bin(BinaryKind::Min, lo, zero)?;
    let range = b.bin(BinaryKind::Sub, hi, lo)?;
    let flat = b.add(
        Compare {
            kind: CompareKind::Equal,
        },
        &[range, zero],
    )?;
    // ONNX Runtime's scale of a range of zero is 1 (not 1/255).
    let scaled = b.bin(BinaryKind::Div, range, full)?;
    let scale = b.add(Where {}, &[flat, one, scaled])?;
    let shift = b.bin(BinaryKind::Div, lo, scale)?;
    let shift = b.bin(BinaryKind::Sub, zero, shift)?;
    let shift = b.add(Clip {}, &[shift, zero, q_max])?;
    let zp = b.add(
        Unary {
            kind: UnaryKind::Round,
        },
        &[shift],
    )?;
    let y = b.bin(BinaryKind::Div, x, scale)?;
    let y = b.add(
        Unary {
            kind: UnaryKind::Round,
        },
        &[y],
    )?;
    let y = b.bin(BinaryKind::Add, y, zp)?;
    let y = b.add(Clip {}, &[y, zero, q_max])?;
    let to_u8 = || Cast {
        to: DType::U8,
        saturate: false,
        round_mode: RoundMode::Nearest,
    };
    let y = b.add(to_u8(), &[y])?;
    let zp = b.add(to_u8(), &[zp])?;
    Ok(vec![y, scale, zp])
}

/// A bound on the magnitude of every element of `v`, where one follows from
/// its producer: 255 / 128 for a cast from u8 / i8, the sum of the bounds for
/// an add or subtract, the largest magnitude of a constant.
fn bound(g: &Graph, w: &Weights, v: Value, depth: usize) -> Option<f64> {
    let node = g.node(v.node);
    let ins = g.inputs_of(v.node);
    match &node.op {
        Op::Cast(_) => match g.ty(ins[0]).dtype {
            DType::U8 => Some(255.0),
            DType::I8 => Some(128.0),
            _ => None,
        },
        Op::Binary(op) if matches!(op.kind, BinaryKind::Sub | BinaryKind::Add) && depth < 4 => {
            Some(bound(g, w, ins[0], depth + 1)? + bound(g, w, ins[1], depth + 1)?)
        }
        Op::Constant(_) | Op::Weight(_) => {
            let t = crate::rewrite::const_of(g, w, v)?;
            let vals = t.to_i64_vec()?;
            Some(vals.iter().map(|x| x.unsigned_abs()).max().unwrap_or(0) as f64)
        }
        _ => None,
    }
}

/// `act(x)` as IR ops named `name` (what a fused activation computes, apart
/// from its product).
pub(crate) fn activation(
    g: &mut Graph,
    w: &mut Weights,
    name: &str,
    origin: Vec<String>,
    act: Activation,
    x: Value,
) -> Result<Value, String> {
    let mut b = Builder { g, w, name, origin };
    b.activation(act, x)
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
            Activation::HardSwish => self.add(
                ElementwiseRegion {
                    program: crate::fuse_hard::hard_swish_program(),
                },
                &[x],
            ),
            Activation::Relu6 => {
                let d = self.g.ty(x).dtype;
                let mut bound = |v: f64| -> Result<Value, String> {
                    let t = float_tensor(d, &[], &[v]).ok_or_else(|| format!("no {d} scalar"))?;
                    let name = format!("{}.relu6", self.name);
                    Ok(constant(self.g, self.w, &name, self.origin.clone(), t))
                };
                let (lo, hi) = (bound(0.0)?, bound(6.0)?);
                self.add(Clip {}, &[x, lo, hi])
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
    if a.is_causal || a.softcap != 0.0 || a.left_window_size >= 0 || a.right_window_size >= 0 {
        return Err("causal, windowed or soft-capped attention is not decomposed".into());
    }
    if a.softmax_precision == Some(DType::F64) && b.g.ty(ins[0]).dtype != DType::F64 {
        return Err("attention with softmax_precision=double is not decomposed".into());
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
