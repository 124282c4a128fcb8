//! LinearAttention: the token-by-token state recurrence (linear, gated, delta,
//! gated-delta), computed in f64 whatever the operand dtypes.

use rlx_ir::ops::LinearAttention;
use rlx_ir::Op;

use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::LinearAttention(_) => Ok(fn_kernel(spec, linear_attention)),
        op => Err(KernelError::Internal(format!(
            "{} is not linear attention",
            op.name()
        ))),
    }
}

/// Problem sizes: batch, tokens, query and key/value heads, key and value head dims.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dims {
    pub b: usize,
    pub t: usize,
    pub hq: usize,
    pub hkv: usize,
    pub dk: usize,
    pub dv: usize,
}

/// The operands as packed `[B, T, H*D]` rows (and `[B, Hkv, dk, dv]` state).
pub struct Operands<'a> {
    pub q: &'a [f64],
    pub k: &'a [f64],
    pub v: &'a [f64],
    pub past: Option<&'a [f64]>,
    /// Decay and its last dim (`Hkv` or `Hkv*dk`).
    pub decay: Option<(&'a [f64], usize)>,
    /// Beta and its last dim (`Hkv` or 1).
    pub beta: Option<(&'a [f64], usize)>,
}

/// Runs the recurrence; returns `(output [B,T,Hq*dv], state [B,Hkv,dk,dv])`.
pub fn recur(d: Dims, scale: f64, o: &Operands) -> (Vec<f64>, Vec<f64>) {
    let Dims {
        b,
        t,
        hq,
        hkv,
        dk,
        dv,
    } = d;
    let group = hq / hkv;
    let mut out = vec![0.0; b * t * hq * dv];
    let mut state = match o.past {
        Some(p) => p.to_vec(),
        None => vec![0.0; b * hkv * dk * dv],
    };
    let mut vt = vec![0.0; dv];
    for bi in 0..b {
        for h in 0..hkv {
            let s = &mut state[(bi * hkv + h) * dk * dv..][..dk * dv];
            for ti in 0..t {
                let row = bi * t + ti;
                let k = &o.k[(row * hkv + h) * dk..][..dk];
                vt.copy_from_slice(&o.v[(row * hkv + h) * dv..][..dv]);
                if let Some((decay, last)) = o.decay {
                    for (i, si) in s.chunks_mut(dv).enumerate() {
                        let g = if last == hkv {
                            decay[row * hkv + h]
                        } else {
                            decay[(row * hkv + h) * dk + i]
                        };
                        let e = g.exp();
                        si.iter_mut().for_each(|x| *x *= e);
                    }
                }
                if let Some((beta, last)) = o.beta {
                    let bt = beta[row * last + if last == 1 { 0 } else { h }];
                    for (m, v) in vt.iter_mut().enumerate() {
                        let got: f64 = (0..dk).map(|i| s[i * dv + m] * k[i]).sum();
                        *v = bt * (*v - got);
                    }
                }
                for (i, si) in s.chunks_mut(dv).enumerate() {
                    for (x, v) in si.iter_mut().zip(&vt) {
                        *x += k[i] * v;
                    }
                }
                for j in h * group..(h + 1) * group {
                    let q = &o.q[(row * hq + j) * dk..][..dk];
                    let y = &mut out[(row * hq + j) * dv..][..dv];
                    for (m, ym) in y.iter_mut().enumerate() {
                        *ym = scale * (0..dk).map(|i| q[i] * s[i * dv + m]).sum::<f64>();
                    }
                }
            }
        }
    }
    (out, state)
}

fn sizes(l: &LinearAttention, ins: &[TensorRef]) -> Result<Dims, KernelError> {
    let bad = |what: &str| KernelError::Value(format!("linear attention: {what}"));
    let (q, k, v) = (ins[0].dims, ins[1].dims, ins[2].dims);
    if q.len() != 3 || k.len() != 3 || v.len() != 3 {
        return Err(bad("query, key and value must be rank 3"));
    }
    let (hq, hkv) = (l.q_num_heads as usize, l.kv_num_heads as usize);
    if hq == 0 || hkv == 0 || hq % hkv != 0 || q[2] % hq != 0 || v[2] % hkv != 0 {
        return Err(bad("head counts do not divide the packed dims"));
    }
    let d = Dims {
        b: q[0],
        t: q[1],
        hq,
        hkv,
        dk: q[2] / hq,
        dv: v[2] / hkv,
    };
    if k != [d.b, d.t, hkv * d.dk] || v[..2] != [d.b, d.t] {
        return Err(bad("key or value shape does not match the query"));
    }
    Ok(d)
}

fn linear_attention(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::LinearAttention(l) = op else {
        return Err(KernelError::Internal("not linear attention".into()));
    };
    let d = sizes(l, ins)?;
    let p = l.ports();
    let read = |port: Option<usize>| port.map(|i| ins[i].to_f64s()).transpose();
    let (q, k, v) = (ins[0].to_f64s()?, ins[1].to_f64s()?, ins[2].to_f64s()?);
    let past = read(p.past)?;
    if past
        .as_ref()
        .is_some_and(|s| s.len() != d.b * d.hkv * d.dk * d.dv)
    {
        return Err(KernelError::Value("past_state has the wrong size".into()));
    }
    let last = |port: Option<usize>, allowed: [usize; 2]| -> Result<usize, KernelError> {
        let Some(i) = port else { return Ok(0) };
        let dims = ins[i].dims;
        match dims {
            [b, t, l] if *b == d.b && *t == d.t && allowed.contains(l) => Ok(*l),
            _ => Err(KernelError::Value(format!(
                "input {i} has shape {dims:?}, expected [{}, {}, one of {allowed:?}]",
                d.b, d.t
            ))),
        }
    };
    let decay_last = last(p.decay, [d.hkv, d.hkv * d.dk])?;
    let beta_last = last(p.beta, [d.hkv, 1])?;
    let decay = read(p.decay)?;
    let beta = read(p.beta)?;
    let scale = match l.scale {
        Some(s) => s as f64,
        None => 1.0 / (d.dk as f64).sqrt(),
    };
    let operands = Operands {
        q: &q,
        k: &k,
        v: &v,
        past: past.as_deref(),
        decay: decay.as_deref().map(|x| (x, decay_last)),
        beta: beta.as_deref().map(|x| (x, beta_last)),
    };
    let (y, state) = recur(d, scale, &operands);
    outs[0].store_f64s(&y)?;
    outs[1].store_f64s(&state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(hq: usize, hkv: usize, t: usize) -> Dims {
        Dims {
            b: 1,
            t,
            hq,
            hkv,
            dk: 2,
            dv: 1,
        }
    }

    #[test]
    fn linear_rule_accumulates_outer_products() {
        // Two tokens, one head, dk=2, dv=1: S1 = k1 v1, S2 = S1 + k2 v2.
        let (q, k, v) = ([1.0, 0.0, 1.0, 1.0], [1.0, 2.0, 3.0, 0.0], [2.0, 1.0]);
        let o = Operands {
            q: &q,
            k: &k,
            v: &v,
            past: None,
            decay: None,
            beta: None,
        };
        let (y, s) = recur(dims(1, 1, 2), 0.5, &o);
        // S1 = [2, 4]; y1 = 0.5 * (1*2 + 0*4) = 1. S2 = [5, 4]; y2 = 0.5 * 9.
        assert_eq!(y, vec![1.0, 4.5]);
        assert_eq!(s, vec![5.0, 4.0]);
    }

    #[test]
    fn gated_delta_rule_with_past_and_gqa() {
        // One token, kv head shared by two query heads, past state [1, 2].
        let (q, k, v) = ([1.0, 0.0, 0.0, 1.0], [1.0, 1.0], [4.0]);
        let decay = [0.5f64.ln()];
        let beta = [0.5];
        let o = Operands {
            q: &q,
            k: &k,
            v: &v,
            past: Some(&[1.0, 2.0]),
            decay: Some((&decay, 1)),
            beta: Some((&beta, 1)),
        };
        let (y, s) = recur(dims(2, 1, 1), 1.0, &o);
        // Decayed S = [0.5, 1]; retrieved = 1.5; v' = 0.5 * (4 - 1.5) = 1.25;
        // S = [1.75, 2.25]; the heads read rows 0 and 1.
        assert_eq!(s, vec![1.75, 2.25]);
        assert_eq!(y, vec![1.75, 2.25]);
    }
}
