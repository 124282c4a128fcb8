//! Attention (ONNX opset 23): scaled dot-product attention with grouped-query
//! heads, 3-D or 4-D operands, bool or float masks, causality, softcap,
//! per-batch key lengths, a KV cache and the QK output, in two tiled kernels
//! with an online softmax that share their mask rules
//! (`wgsl/attention_mask.wgsl`): `attention_rows.wgsl`, a workgroup per 8
//! query rows with keys and values staged through workgroup memory, for heads
//! of up to 64 features and several query rows; `attention.wgsl`, a
//! workgroup per query row with keys in tiles of 64, for the rest (a single
//! query row, larger heads, the QK output). A KV cache is first concatenated
//! into the present outputs (or scratch) by slab copies; the kernel then reads
//! keys from there.

use rlx_gpu::kernels::attention::{
    check_heads, mask_strides, params, AttentionParams, Extras, Heads, ATTENTION_OPERANDS,
};
use rlx_gpu::Params;
use rlx_ir::ops::Attention;
use rlx_ir::{DType, Node, TensorType};

use super::control::{copy, Side};
use super::{Cx, LResult, Operand};
use crate::schedule::Range;

const SRC: &str = include_str!("../../../../kernels/wgsl/attention.wgsl");
const ROWS_SRC: &str = include_str!("../../../../kernels/wgsl/attention_rows.wgsl");
const MASK: &str = include_str!("../../../../kernels/wgsl/attention_mask.wgsl");

/// Largest head of `attention_rows.wgsl` (16 vec4 a row in workgroup memory).
const ROWS_HEAD: usize = 64;
/// Query rows per workgroup of `attention_rows.wgsl`; fewer query rows take
/// the row kernel, whose 64 invocations score 64 keys at once.
const ROWS: usize = 8;

/// Largest head size: the query row lives in workgroup memory and each of the
/// 64 invocations accumulates 4 output features.
const MAX_HEAD: usize = 256;

fn dtype_of(inputs: &[TensorType], i: usize) -> LResult<DType> {
    inputs
        .get(i)
        .map(|t| t.dtype)
        .ok_or_else(|| format!("input {i} is missing"))
}

/// f32 operands, bool or f32 masks, i32 or i64 key lengths, heads up to
/// [`MAX_HEAD`].
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let rlx_ir::Op::Attention(a) = &node.op else {
        return Err("not an attention".into());
    };
    for i in 0..3 {
        let d = dtype_of(inputs, i)?;
        if d != DType::F32 {
            return Err(format!("attention on {d} has no WGSL kernel (f32 only)"));
        }
    }
    let ports = a.ports();
    if let Some(m) = ports.mask {
        match dtype_of(inputs, m)? {
            DType::Bool | DType::F32 => {}
            d => return Err(format!("attention masks of {d} have no WGSL kernel")),
        }
    }
    if let Some(n) = ports.nonpad {
        match dtype_of(inputs, n)? {
            DType::I32 | DType::I64 => {}
            d => return Err(format!("nonpad_kv_seqlen of {d} has no WGSL kernel")),
        }
    }
    for (i, heads) in [(0, a.q_num_heads), (2, a.kv_num_heads)] {
        let t = &inputs[i];
        let head = match (a.views.get(i), t.shape.rank()) {
            (Some(v), _) => Some(v.dims[3] as i64),
            (None, 4) => t.shape.0[3].known(),
            (None, 3) if heads > 0 => t.shape.0[2].known().map(|h| h / heads),
            _ => None,
        };
        if head.is_some_and(|h| h > MAX_HEAD as i64) {
            return Err(format!(
                "attention with head sizes above {MAX_HEAD} has no WGSL kernel"
            ));
        }
    }
    Ok(())
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
    if g.is_dense() {
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
            "attention on {} has no WGSL kernel (f32 only)",
            q.dtype
        ));
    }
    // Each operand as it lies, or through its view (packed projections,
    // sequence-first layouts), from the view's first element: a handle
    // addresses any word of the buffer.
    let (qg, qo) = Heads::operand(a, 0, &q.dims)?;
    let (kg, ko) = Heads::operand(a, 1, &k.dims)?;
    let (vg, vo) = Heads::operand(a, 2, &v.dims)?;
    let from = |r: Range, at: usize| Range {
        offset: r.offset + (at * 4) as u64,
        bytes: r.bytes - (at * 4) as u64,
    };
    let (q_r, k_r, v_r) = (
        from(q.range(), qo),
        from(k.range(), ko),
        from(v.range(), vo),
    );
    check_heads(qg, kg, vg)?;
    if qg.d > MAX_HEAD || vg.d > MAX_HEAD {
        return Err(format!("head sizes above {MAX_HEAD} have no WGSL kernel"));
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
    let (mut kr, mut vr) = ((k_r, kg), (v_r, vg));
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
            let pkg = Heads::of(&pk.dims, 0, "past_key")?;
            let pvg = Heads::of(&pv.dims, 0, "past_value")?;
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
        kr = (kd, Heads::dense(b, hkv, total, dk));
        vr = (vd, Heads::dense(b, hkv, total, dv));
    }
    let y = cx.output(0)?.clone();
    let yg = Heads::of(&y.dims, a.q_num_heads, "Y")?;
    let none = y.range();
    let mut extras = Extras {
        past: p,
        f64: false,
        ..Extras::default()
    };
    let mut mask_r = none;
    if let Some(mi) = ports.mask {
        let m = cx.input(mi)?.clone();
        let is_bool = match m.dtype {
            DType::Bool => true,
            DType::F32 => false,
            d => return Err(format!("attention masks of {d} have no WGSL kernel")),
        };
        let (st, len) = mask_strides(&m.dims, b, hq, sq, total)?;
        extras.mask = Some((st, len, is_bool));
        mask_r = m.range();
    }
    let mut nonpad_r = none;
    if let Some(ni) = ports.nonpad {
        let n = cx.input(ni)?.clone();
        extras.nonpad = Some(match n.dtype {
            DType::I64 => true,
            DType::I32 => false,
            d => return Err(format!("nonpad_kv_seqlen of {d} has no WGSL kernel")),
        });
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
        extras.qk = true;
        qk_r = cx.output(3)?.range();
        if qk_r.bytes != (b * hq * sq * total * 4) as u64 {
            return Err("the QK output does not have [B, Hq, Sq, keys] f32 elements".into());
        }
    }
    let qk = extras.qk;
    let params = params(a, qg, kr.1, vr.1, yg, extras)?;
    let operands = vec![y.range(), q_r, kr.0, vr.0, mask_r, nonpad_r, qk_r];
    if dk <= ROWS_HEAD && dv <= ROWS_HEAD && sq >= ROWS && !qk {
        let pipe = cx.typed_pipeline(
            "attention.rows8",
            ATTENTION_OPERANDS,
            &AttentionParams::LAYOUT,
            &format!("{MASK}\n{ROWS_SRC}"),
        );
        let groups = b * hq * sq.div_ceil(ROWS);
        cx.launch_params(pipe, operands, &params, groups as u64);
        return Ok(());
    }
    let pipe = cx.typed_pipeline(
        "attention.flash64",
        ATTENTION_OPERANDS,
        &AttentionParams::LAYOUT,
        &format!("{MASK}\n{SRC}"),
    );
    cx.launch_params(pipe, operands, &params, u64::from(params.rows));
    Ok(())
}
