//! Sequence ops on CUDA (`kernels/cuda/sequence.cu`): LinearAttention (its
//! state recurrence, one thread per state column, in double),
//! CausalConvWithState and RotaryEmbedding, over f32, f64, f16 and bf16.

use rlx_gpu::geometry::{u32_of, LResult};
use rlx_gpu::kernels::rotary::{rotary_params, RotaryParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::ops::CausalConvActivation;
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, float_name, Cx, Source};

pub const SOURCE: Source = Source {
    name: "sequence",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/sequence.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![
        LinearAttentionParams::LAYOUT,
        CausalConvParams::LAYOUT,
        RotaryParams::LAYOUT,
    ]
}

rlx_gpu::kernel_params! {
    /// LinearAttention over packed `[B, T, H*D]` rows and a `[B, Hkv, dk, dv]` state.
    pub struct LinearAttentionParams {
        pub batch: u32,
        pub tokens: u32,
        pub hq: u32,
        pub hkv: u32,
        pub dk: u32,
        pub dv: u32,
        pub has_past: u32,
        /// Decay's last dim (`Hkv` or `Hkv*dk`); 0 without decay.
        pub decay_last: u32,
        /// Beta's last dim (`Hkv` or 1); 0 without beta.
        pub beta_last: u32,
        pub scale: f32,
    }
}

rlx_gpu::kernel_params! {
    /// CausalConvWithState over `[B, C, L]` with a depthwise kernel of `kernel`.
    pub struct CausalConvParams {
        /// B * C.
        pub rows: u32,
        pub channels: u32,
        pub len: u32,
        pub kernel: u32,
        pub has_bias: u32,
        pub has_past: u32,
        pub silu: u32,
    }
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    let name = node.op.name();
    float_name(d).ok_or_else(|| format!("{name} of {d} has no cuda kernel"))?;
    for (i, t) in inputs.iter().enumerate().skip(1) {
        let ok = match &node.op {
            Op::RotaryEmbedding(_) if i == 3 => matches!(t.dtype, DType::I32 | DType::I64),
            Op::LinearAttention(l) if Some(i) == l.ports().past => float_name(t.dtype).is_some(),
            _ => t.dtype == d,
        };
        if !ok {
            return Err(format!(
                "{name} on {d} with a {} input {i} has no cuda kernel",
                t.dtype
            ));
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    match cx.node.op.clone() {
        Op::LinearAttention(l) => {
            let (q, k, v) = (
                cx.input(0)?.clone(),
                cx.input(1)?.clone(),
                cx.input(2)?.clone(),
            );
            let (y, state) = (cx.output(0)?.clone(), cx.output(1)?.clone());
            let (hq, hkv) = (l.q_num_heads as usize, l.kv_num_heads as usize);
            let bad = || {
                format!(
                    "linear attention of {:?}, {:?}, {:?}",
                    q.dims, k.dims, v.dims
                )
            };
            if q.dims.len() != 3 || v.dims.len() != 3 || hq == 0 || hkv == 0 || hq % hkv != 0 {
                return Err(bad());
            }
            let (b, t) = (q.dims[0], q.dims[1]);
            let (dk, dv) = (q.dims[2] / hq, v.dims[2] / hkv);
            if k.dims != [b, t, hkv * dk] || state.dims != [b, hkv, dk, dv] {
                return Err(bad());
            }
            let p = l.ports();
            let last = |port: Option<usize>| -> LResult<u32> {
                port.map_or(Ok(0), |i| {
                    let o = cx.input(i)?;
                    u32_of(o.dims.last().copied().unwrap_or(0), "decay or beta")
                })
            };
            let scale = l.scale.unwrap_or(1.0 / (dk as f32).sqrt());
            let params = LinearAttentionParams {
                batch: u32_of(b, "batch")?,
                tokens: u32_of(t, "tokens")?,
                hq: hq as u32,
                hkv: hkv as u32,
                dk: u32_of(dk, "key head size")?,
                dv: u32_of(dv, "value head size")?,
                has_past: u32::from(p.past.is_some()),
                decay_last: last(p.decay)?,
                beta_last: last(p.beta)?,
                scale,
            };
            let opt = |cx: &Cx, port: Option<usize>| {
                port.and_then(|i| cx.io.ins.get(i))
                    .map_or(y.range(), |o| o.range())
            };
            let work = cx.scratch((state.numel() * 8) as u64);
            let ops = vec![
                q.range(),
                k.range(),
                v.range(),
                opt(cx, p.past),
                opt(cx, p.decay),
                opt(cx, p.beta),
                y.range(),
                state.range(),
                work,
            ];
            let (tn, sn) = (
                float_name(q.dtype).ok_or("not a float query")?,
                float_name(state.dtype).ok_or("not a float state")?,
            );
            let m = cx.modules.of(&SOURCE);
            let cols = (b * hkv * dv) as u64;
            cx.items(
                m,
                &format!("linear_attention_{tn}_{sn}"),
                cols,
                ops,
                &params,
            );
            Ok(())
        }
        Op::CausalConvWithState(cc) => {
            let (x, w) = (cx.input(0)?.clone(), cx.input(1)?.clone());
            let (y, state) = (cx.output(0)?.clone(), cx.output(1)?.clone());
            let [b, ch, l] = x.dims[..] else {
                return Err("causal_conv_with_state input must be rank 3".into());
            };
            let kernel = w.dims.get(2).copied().unwrap_or(0);
            if kernel == 0 || w.dims != [ch, 1, kernel] {
                return Err(format!("weight {:?} does not match {ch} channels", w.dims));
            }
            let bias = cc
                .has_bias
                .then(|| cx.io.ins.get(2).map(|o| o.range()))
                .flatten();
            let past = cc
                .past_port()
                .and_then(|i| cx.io.ins.get(i))
                .map(|o| o.range());
            let p = CausalConvParams {
                rows: u32_of(b * ch, "rows")?,
                channels: u32_of(ch, "channels")?,
                len: u32_of(l, "length")?,
                kernel: u32_of(kernel, "kernel")?,
                has_bias: u32::from(bias.is_some()),
                has_past: u32::from(past.is_some()),
                silu: u32::from(cc.activation == CausalConvActivation::Silu),
            };
            let ops = vec![
                x.range(),
                w.range(),
                bias.unwrap_or(w.range()),
                past.unwrap_or(w.range()),
                y.range(),
                state.range(),
            ];
            let n = float_name(x.dtype).ok_or("not a float input")?;
            let m = cx.modules.of(&SOURCE);
            let items = (b * ch * (l + kernel - 1)) as u64;
            cx.items(m, &format!("causal_conv_{n}"), items, ops, &p);
            Ok(())
        }
        Op::RotaryEmbedding(r) => {
            let x = cx.input(0)?.clone();
            let (cos, sin) = (cx.input(1)?.clone(), cx.input(2)?.clone());
            let ids = cx.io.ins.get(3).cloned();
            let y = cx.output(0)?.clone();
            let p = rotary_params(
                &r,
                &x.dims,
                &cos.dims,
                &sin.dims,
                ids.as_ref().map(|o| (o.numel(), o.dtype)),
                y.numel(),
            )?;
            let ops = vec![
                x.range(),
                cos.range(),
                sin.range(),
                ids.map_or(x.range(), |o| o.range()),
                y.range(),
            ];
            let n = float_name(x.dtype).ok_or("not a float input")?;
            let m = cx.modules.of(&SOURCE);
            cx.items(m, &format!("rotary_{n}"), y.numel() as u64, ops, &p);
            Ok(())
        }
        op => Err(format!("`{}` is not a sequence op", op.name())),
    }
}
