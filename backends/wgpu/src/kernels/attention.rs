//! Attention (ONNX opset 23): scaled dot-product attention with grouped-query
//! heads, 3-D or 4-D operands, bool or float masks, causality, softcap,
//! per-batch key lengths, a KV cache and the QK output, in one tiled kernel
//! (`wgsl/attention.wgsl`: a workgroup per query row, keys in tiles of 64 with
//! an online softmax). A KV cache is first concatenated into the present
//! outputs (or scratch) by slab copies; the kernel then reads keys from there.

use rlx_ir::ops::Attention;
use rlx_ir::DType;

use super::control::{copy, Side};
use super::{strides, u32_of, Cx, LResult, Operand};
use crate::schedule::Range;

const SRC: &str = include_str!("../../../../kernels/wgsl/attention.wgsl");

/// Largest head size: the query row lives in workgroup memory and each of the
/// 64 invocations accumulates 4 output features.
const MAX_HEAD: usize = 256;

/// `[B, heads, seq, head]` geometry and element strides (b, h, s) of an operand.
#[derive(Debug, Clone, Copy)]
struct Heads {
    b: usize,
    h: usize,
    s: usize,
    d: usize,
    st: [usize; 3],
}

impl Heads {
    fn of(o: &Operand, heads: i64, what: &str) -> LResult<Heads> {
        match *o.dims.as_slice() {
            [b, h, s, d] => Ok(Heads {
                b,
                h,
                s,
                d,
                st: [h * s * d, s * d, d],
            }),
            [b, s, hidden] => {
                let h = usize::try_from(heads).unwrap_or(0);
                if h == 0 || hidden % h != 0 {
                    return Err(format!(
                        "{what} hidden size {hidden} is not a multiple of {heads} heads"
                    ));
                }
                let d = hidden / h;
                Ok(Heads {
                    b,
                    h,
                    s,
                    d,
                    st: [s * hidden, d, hidden],
                })
            }
            _ => Err(format!("{what} must be 3-D or 4-D, got {:?}", o.dims)),
        }
    }
}

fn words(v: &[usize]) -> LResult<Vec<u32>> {
    v.iter().map(|&x| u32_of(x, "an attention size")).collect()
}

/// Copies `src` (`[B, H, S, D]` geometry `g`) into rows `at..at + S` of the
/// 4-D `[B, H, T, D]` value at `dst`.
fn copy_into_seq(
    cx: &mut Cx,
    dst: Range,
    t: usize,
    at: usize,
    src: &Operand,
    g: Heads,
) -> LResult<()> {
    let e = 4;
    if g.st == [g.h * g.s * g.d, g.s * g.d, g.d] {
        // 4-D: one row of S * D elements per (b, h).
        let d = Side {
            range: Range {
                offset: dst.offset + (at * g.d * e) as u64,
                bytes: dst.bytes - (at * g.d * e) as u64,
            },
            stride: (t * g.d * e) as u64,
            step: None,
        };
        let rows = (g.b * g.h) as u64;
        if let Some(dr) = copy(
            cx.pipelines_mut(),
            d,
            Side::dense(src.range()),
            rows,
            (g.s * g.d * e) as u64,
            None,
        )? {
            cx.push(dr);
        }
        return Ok(());
    }
    // 3-D: per (b, h), rows of D elements `hidden` apart.
    for b in 0..g.b {
        for h in 0..g.h {
            let d_off = (((b * g.h + h) * t + at) * g.d * e) as u64;
            let s_off = ((b * g.st[0] + h * g.st[1]) * e) as u64;
            let d = Side {
                range: Range {
                    offset: dst.offset + d_off,
                    bytes: dst.bytes - d_off,
                },
                stride: (g.d * e) as u64,
                step: None,
            };
            let s = Side {
                range: Range {
                    offset: src.at + s_off,
                    bytes: src.bytes - s_off,
                },
                stride: (g.st[2] * e) as u64,
                step: None,
            };
            if let Some(dr) = copy(cx.pipelines_mut(), d, s, g.s as u64, (g.d * e) as u64, None)? {
                cx.push(dr);
            }
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx, a: &Attention) -> LResult<()> {
    let ports = a.ports();
    let (q, k, v) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.input(2)?.clone(),
    );
    if q.dtype != DType::F32 || k.dtype != DType::F32 || v.dtype != DType::F32 {
        return Err(format!(
            "attention on {} has no wgpu kernel (f32 only)",
            q.dtype
        ));
    }
    let qg = Heads::of(&q, a.q_num_heads, "Q")?;
    let kg = Heads::of(&k, a.kv_num_heads, "K")?;
    let vg = Heads::of(&v, a.kv_num_heads, "V")?;
    if kg.b != qg.b || vg.b != qg.b || kg.h != vg.h || kg.s != vg.s || kg.d != qg.d {
        return Err(format!(
            "Q {:?}, K {:?} and V {:?} do not fit together",
            q.dims, k.dims, v.dims
        ));
    }
    if kg.h == 0 || qg.h % kg.h != 0 {
        return Err(format!(
            "{} query heads do not share {} key heads",
            qg.h, kg.h
        ));
    }
    if qg.d > MAX_HEAD || vg.d > MAX_HEAD {
        return Err(format!("head sizes above {MAX_HEAD} have no wgpu kernel"));
    }
    let (b, hq, hkv, sq, dk, dv) = (qg.b, qg.h, kg.h, qg.s, qg.d, vg.d);
    // The keys and values the kernel reads: the inputs, or the cache
    // concatenated with them into the present outputs (scratch when absent).
    let past = match (ports.past_key, ports.past_value) {
        (Some(pk), Some(pv)) => Some((cx.input(pk)?.clone(), cx.input(pv)?.clone())),
        _ => None,
    };
    let p = past
        .as_ref()
        .map_or(0, |(pk, _)| pk.dims.get(2).copied().unwrap_or(0));
    let total = p + kg.s;
    let present = cx.outs.len() > 1;
    let (mut kr, mut vr) = ((k.range(), kg), (v.range(), vg));
    if past.is_some() || present {
        let kbytes = (b * hkv * total * dk * 4) as u64;
        let vbytes = (b * hkv * total * dv * 4) as u64;
        let (kd, vd) = if present {
            (cx.output(1)?.range(), cx.output(2)?.range())
        } else {
            (cx.scratch(kbytes), cx.scratch(vbytes))
        };
        if kd.bytes != kbytes || vd.bytes != vbytes {
            return Err("present key/value shapes do not fit the cache and the new keys".into());
        }
        if let Some((pk, pv)) = &past {
            let pkg = Heads::of(pk, 0, "past_key")?;
            let pvg = Heads::of(pv, 0, "past_value")?;
            if pk.dims.len() != 4
                || (pkg.b, pkg.h, pkg.d) != (b, hkv, dk)
                || (pvg.b, pvg.h, pvg.s, pvg.d) != (b, hkv, p, dv)
            {
                return Err(format!(
                    "past key {:?} / value {:?} do not fit K {:?}, V {:?}",
                    pk.dims, pv.dims, k.dims, v.dims
                ));
            }
            copy_into_seq(cx, kd, total, 0, pk, pkg)?;
            copy_into_seq(cx, vd, total, 0, pv, pvg)?;
        }
        copy_into_seq(cx, kd, total, p, &k, kg)?;
        copy_into_seq(cx, vd, total, p, &v, vg)?;
        let dense = |d: usize| Heads {
            b,
            h: hkv,
            s: total,
            d,
            st: [hkv * total * d, total * d, d],
        };
        kr = (kd, dense(dk));
        vr = (vd, dense(dv));
    }
    let y = cx.output(0)?.clone();
    let yg = Heads::of(&y, a.q_num_heads, "Y")?;
    let none = y.range();
    let mut flags = 0u32;
    let (mut mask_r, mut mask_st, mut mask_len) = (none, [0usize; 4], 0usize);
    if let Some(mi) = ports.mask {
        let m = cx.input(mi)?.clone();
        flags |= 1;
        match m.dtype {
            DType::Bool => flags |= 2,
            DType::F32 => {}
            d => return Err(format!("attention masks of {d} have no wgpu kernel")),
        }
        let len = m.dims.last().copied().unwrap_or(total);
        if m.dims.len() > 4 || len > total {
            return Err(format!(
                "attention mask {:?} does not broadcast to [{b}, {hq}, {sq}, {total}]",
                m.dims
            ));
        }
        let full = [b, hq, sq, len];
        let pad = 4 - m.dims.len();
        let st = strides(&m.dims);
        for (i, &d) in m.dims.iter().enumerate() {
            let f = full[pad + i];
            if d != 1 && d != f {
                return Err(format!(
                    "attention mask {:?} does not broadcast to [{b}, {hq}, {sq}, {total}]",
                    m.dims
                ));
            }
            mask_st[pad + i] = if d == 1 { 0 } else { st[i] };
        }
        mask_r = m.range();
        mask_len = len;
    }
    if a.is_causal {
        flags |= 4;
    }
    let mut nonpad_r = none;
    if let Some(ni) = ports.nonpad {
        let n = cx.input(ni)?.clone();
        flags |= 8;
        match n.dtype {
            DType::I64 => flags |= 16,
            DType::I32 => {}
            d => return Err(format!("nonpad_kv_seqlen of {d} has no wgpu kernel")),
        }
        if n.numel() != b {
            return Err(format!(
                "nonpad_kv_seqlen has {} entries for batch {b}",
                n.numel()
            ));
        }
        nonpad_r = n.range();
    }
    let mut qk_r = none;
    if cx.outs.len() > 3 {
        flags |= 32;
        qk_r = cx.output(3)?.range();
        if qk_r.bytes != (b * hq * sq * total * 4) as u64 {
            return Err("the QK output does not have [B, Hq, Sq, keys] f32 elements".into());
        }
    }
    let mode = match a.qk_matmul_output_mode {
        m @ 0..=3 => m as u32,
        m => return Err(format!("qk_matmul_output_mode {m} is not one of 0-3")),
    };
    let scale = a.scale.unwrap_or(1.0 / (dk as f32).sqrt());
    let rows = b * hq * sq;
    let mut params = words(&[hq, hq / hkv, sq, total, dk, dv])?;
    params.extend(words(&qg.st)?);
    params.extend(words(&kr.1.st)?);
    params.extend(words(&vr.1.st)?);
    params.extend(words(&yg.st)?);
    params.extend(words(&mask_st)?);
    params.push(u32_of(mask_len, "a mask length")?);
    params.push(flags);
    params.push(u32_of(p, "the cache length")?);
    params.push(mode);
    params.push(scale.to_bits());
    params.push(a.softcap.to_bits());
    params.push(u32_of(rows, "attention rows")?);
    let pipe = cx.pipeline("attention.flash64", SRC);
    let operands = vec![y.range(), q.range(), kr.0, vr.0, mask_r, nonpad_r, qk_r];
    cx.dispatch(pipe, operands, params, rows as u64);
    Ok(())
}
