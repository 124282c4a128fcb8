//! GroupQueryAttention (com.microsoft) on f32, as ONNX Runtime's CPU kernel
//! computes it: present caches hold each batch entry's past then its new
//! (rotated) keys and values; each query attends causally to its entry's
//! valid keys (within the local window), with softcap, bias and sink.

use rlx_ir::ops::{GroupQueryAttention, Op};

use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::GroupQueryAttention(_) => Ok(fn_kernel(spec, gqa)),
        op => Err(KernelError::Internal(format!(
            "{} is not group query attention",
            op.name()
        ))),
    }
}

fn bad(m: impl Into<String>) -> KernelError {
    KernelError::Value(m.into())
}

/// The rotary tables: `cos` and `sin` `[positions, R/2]`.
struct Rotary<'a> {
    cos: &'a [f32],
    sin: &'a [f32],
    half: usize,
    positions: usize,
    interleaved: bool,
}

impl Rotary<'_> {
    /// Rotates `x` (one head) in place for position `pos`.
    fn apply(&self, x: &mut [f32], pos: i64) -> Result<(), KernelError> {
        let p = usize::try_from(pos)
            .ok()
            .filter(|&p| p < self.positions)
            .ok_or_else(|| bad(format!("position {pos} is outside the rotary cache")))?;
        let (c, s) = (&self.cos[p * self.half..], &self.sin[p * self.half..]);
        for i in 0..self.half {
            let (a, b) = if self.interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + self.half)
            };
            let (xa, xb) = (x[a], x[b]);
            x[a] = xa * c[i] - xb * s[i];
            x[b] = xb * c[i] + xa * s[i];
        }
        Ok(())
    }
}

fn gqa(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::GroupQueryAttention(a) = op else {
        return Err(KernelError::Internal("not group query attention".into()));
    };
    run(a, ins, outs)
}

fn run(
    a: &GroupQueryAttention,
    ins: &[TensorRef],
    outs: &mut [TensorMut],
) -> Result<(), KernelError> {
    let ports = a.ports();
    let group = a.group().map_err(bad)?;
    let (n, kvn) = (a.num_heads as usize, a.kv_num_heads as usize);
    let (q, k, v) = (
        ins[0].slice::<f32>()?,
        ins[1].slice::<f32>()?,
        ins[2].slice::<f32>()?,
    );
    let [b, s, qd] =
        <[usize; 3]>::try_from(ins[0].dims).map_err(|_| bad("query must be [B, S, N*H]"))?;
    let h = qd / n;
    if h * n != qd || ins[1].dims != [b, s, kvn * h] || ins[2].dims != [b, s, kvn * h] {
        return Err(bad(format!(
            "query {:?}, key {:?} and value {:?} do not fit {n} and {kvn} heads",
            ins[0].dims, ins[1].dims, ins[2].dims
        )));
    }
    let seqlens = ins[3].to_i64s()?;
    if seqlens.len() != b {
        return Err(bad(format!(
            "{} seqlens_k for a batch of {b}",
            seqlens.len()
        )));
    }
    let total = match ins[4].to_i64s()?.as_slice() {
        [t] => *t,
        _ => return Err(bad("total_sequence_length must be one integer")),
    };
    let (past_k, past_v, plen) = match ports.past {
        Some(p) => {
            let d = ins[p].dims;
            if d.len() != 4 || d[0] != b || d[1] != kvn || d[3] != h || ins[p + 1].dims != d {
                return Err(bad(format!(
                    "past key/value {d:?} do not fit [{b}, {kvn}, P, {h}]"
                )));
            }
            (ins[p].slice::<f32>()?, ins[p + 1].slice::<f32>()?, d[2])
        }
        None => (&[][..], &[][..], 0),
    };
    let lp = outs[1].dims[2];
    if outs[0].dims != ins[0].dims
        || outs[1].dims != [b, kvn, lp, h]
        || lp as i64 != total.max(plen as i64)
    {
        return Err(KernelError::Internal(
            "output shapes disagree with the inputs".into(),
        ));
    }
    let first_prompt = s as i64 == total;
    let rotary = match ports.rotary {
        Some(p) => {
            let (c, sn) = (ins[p], ins[p + 1]);
            if c.dims.len() != 2 || sn.dims != c.dims || 2 * c.dims[1] > h {
                return Err(bad(format!(
                    "rotary caches {:?} do not fit head size {h}",
                    c.dims
                )));
            }
            Some(Rotary {
                cos: c.slice::<f32>()?,
                sin: sn.slice::<f32>()?,
                half: c.dims[1],
                positions: c.dims[0],
                interleaved: a.rotary_interleaved,
            })
        }
        None => None,
    };
    let position_ids = match ports.position_ids {
        Some(p) => {
            let v = ins[p].to_i64s()?;
            if ins[p].dims.len() != 2 || ins[p].dims[0] != b || ins[p].dims[1] < s {
                return Err(bad(format!(
                    "position ids {:?} do not fit [{b}, {s}]",
                    ins[p].dims
                )));
            }
            Some((v, ins[p].dims[1]))
        }
        None => None,
    };
    let bias = match ports.bias {
        Some(p) => {
            let d = ins[p].dims;
            let ok = d.len() == 4
                && (d[0] == b || d[0] == 1)
                && (d[1] == n || d[1] == 1)
                && d[2] == s
                && d[3] as i64 >= total.max(0);
            if !ok {
                return Err(bad(format!(
                    "attention bias {d:?} does not fit [{b}|1, {n}|1, {s}, {total}]"
                )));
            }
            Some((ins[p].slice::<f32>()?, d.to_vec()))
        }
        None => None,
    };
    let sink = match ports.sink {
        Some(p) if ins[p].numel() == n => Some(ins[p].slice::<f32>()?),
        Some(p) => return Err(bad(format!("head_sink {:?} is not [{n}]", ins[p].dims))),
        None => None,
    };
    let scale = if a.scale == 0.0 {
        1.0 / (h as f32).sqrt()
    } else {
        a.scale
    };

    // Present caches: each entry's past, then its new (rotated) keys and values.
    let (o, rest) = outs.split_at_mut(1);
    let (pk, pv) = rest.split_at_mut(1);
    let (pk, pv) = (pk[0].slice::<f32>()?, pv[0].slice::<f32>()?);
    pk.fill(0.0);
    pv.fill(0.0);
    let mut qr = q.to_vec();
    let mut lens = Vec::with_capacity(b);
    for bi in 0..b {
        let t = seqlens[bi] + 1;
        let past = if first_prompt { 0 } else { t - s as i64 };
        let fits = t >= 1
            && t as usize <= lp
            && past >= 0
            && past as usize <= plen
            && past as usize + s <= lp
            && bias.as_ref().is_none_or(|(_, d)| t as usize <= d[3]);
        if !fits {
            return Err(bad(format!(
                "seqlens_k[{bi}] = {} does not fit {s} new tokens, a past of {plen} and a cache of {lp}",
                seqlens[bi]
            )));
        }
        let (t, past) = (t as usize, past as usize);
        lens.push((t, past));
        let pos = |si: usize| -> i64 {
            match (&position_ids, first_prompt) {
                (Some((ids, _)), true) => ids[0] + si as i64,
                (Some((ids, w)), false) => ids[bi * w + si],
                (None, true) => si as i64,
                (None, false) => (past + si) as i64,
            }
        };
        for g in 0..kvn {
            let cache = (bi * kvn + g) * lp * h;
            if past > 0 {
                let src = (bi * kvn + g) * plen * h;
                pk[cache..cache + past * h].copy_from_slice(&past_k[src..src + past * h]);
                pv[cache..cache + past * h].copy_from_slice(&past_v[src..src + past * h]);
            }
            for si in 0..s {
                let at = cache + (past + si) * h;
                let from = (bi * s + si) * kvn * h + g * h;
                pk[at..at + h].copy_from_slice(&k[from..from + h]);
                pv[at..at + h].copy_from_slice(&v[from..from + h]);
                if let Some(r) = &rotary {
                    r.apply(&mut pk[at..at + h], pos(si))?;
                }
            }
        }
        if let Some(r) = &rotary {
            for si in 0..s {
                for hn in 0..n {
                    let at = (bi * s + si) * n * h + hn * h;
                    r.apply(&mut qr[at..at + h], pos(si))?;
                }
            }
        }
    }

    let out = o[0].slice::<f32>()?;
    let mut x = vec![0f32; lp];
    for bi in 0..b {
        let (t, past) = lens[bi];
        for hn in 0..n {
            let g = hn / group;
            let cache = (bi * kvn + g) * lp * h;
            for i in 0..s {
                let end = if a.causal { (past + i + 1).min(t) } else { t };
                let start = match usize::try_from(a.local_window_size) {
                    Ok(w) if w < end => end - w,
                    _ => 0,
                };
                let qv = &qr[(bi * s + i) * n * h + hn * h..][..h];
                let mut m = f32::NEG_INFINITY;
                for j in start..end {
                    let kj = &pk[cache + j * h..][..h];
                    let mut d = qv.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale;
                    if a.softcap > 0.0 {
                        d = a.softcap * (d / a.softcap).tanh();
                    }
                    if let Some((bv, bd)) = &bias {
                        let at = (((if bd[0] == 1 { 0 } else { bi }) * bd[1]
                            + if bd[1] == 1 { 0 } else { hn })
                            * s
                            + i)
                            * bd[3]
                            + j;
                        d += bv[at];
                    }
                    x[j] = d;
                    m = m.max(d);
                }
                let sink_logit = match (sink, a.smooth_softmax) {
                    (Some(sk), _) => Some(sk[hn]),
                    (None, true) => Some(0.0),
                    (None, false) => None,
                };
                if let Some(sl) = sink_logit {
                    m = m.max(sl);
                }
                let mut den = sink_logit.map_or(0.0, |sl| (sl - m).exp());
                for xj in &mut x[start..end] {
                    *xj = (*xj - m).exp();
                    den += *xj;
                }
                let dst = &mut out[(bi * s + i) * n * h + hn * h..][..h];
                dst.fill(0.0);
                if end > start {
                    for j in start..end {
                        let p = x[j] / den;
                        let vj = &pv[cache + j * h..][..h];
                        for (o, vv) in dst.iter_mut().zip(vj) {
                            *o += p * vv;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}
