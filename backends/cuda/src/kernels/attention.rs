//! Attention on CUDA (ONNX opset 23): Q, K and V read in place through their
//! strides, with grouped-query heads, bool or float masks, causality, key
//! windows, softcap and per-batch key lengths, planned by rlx-gpu's
//! `kernels::attention` (the struct the WGSL kernel reads). Two kernels:
//! - the tiled one (`kernels/cuda/flash_attention.cu`, `flash_mma.cu`): a
//!   block per (batch, head, query tile), K/V tiles through shared memory,
//!   online softmax; tensor cores for f16/bf16 (in the three forms of
//!   `Form`), exact FMAs for f32; head sizes up to [`FLASH_MAX_HEAD`];
//! - the row kernel (`kernels/cuda/attention.cu`, a warp per query row) for
//!   the rest: the QK output, f64, head sizes up to [`MAX_HEAD`].
//! A KV cache is first concatenated into the present outputs (or scratch) by
//! slab copies, as on wgpu; the kernel then reads keys from there.

use rlx_gpu::control::{slab_copy, Side};
use rlx_gpu::geometry::LResult;
use rlx_gpu::kernels::attention::{
    check_heads, mask_strides, params, AttentionParams, Extras, Heads,
};
use rlx_gpu::{Layout, Operand, Params, Range};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{control, Cx, Source};
use crate::AttentionKernel;

pub const SOURCE: Source = Source {
    name: "attention",
    source: concat!(
        include_str!("../../../../kernels/cuda/attention.cuh"),
        include_str!("../../../../kernels/cuda/attention.cu")
    ),
    layouts,
};

/// The tiled kernels, one module per element type (each compiles only its
/// own entries: NVRTC takes seconds over the tensor-core ones), the half
/// types' with the tensor-core kernel (`flash_mma.cu`).
macro_rules! flash_source {
    ($name:literal, $define:literal $(, $more:literal)?) => {
        Source {
            name: $name,
            source: concat!(
                $define,
                "\n",
                include_str!("../../../../kernels/cuda/attention.cuh"),
                include_str!("../../../../kernels/cuda/flash_attention.cu"),
                $(include_str!($more))?
            ),
            layouts,
        }
    };
}

pub const FLASH_F32: Source = flash_source!("flash_attention_f32", "#define FA_F32 1");
pub const FLASH_F16: Source = flash_source!(
    "flash_attention_f16",
    "#define FA_F16 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_BF16: Source = flash_source!(
    "flash_attention_bf16",
    "#define FA_BF16 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_F16_SPLIT: Source = flash_source!(
    "flash_attention_f16_split",
    "#define FA_F16 1\n#define FA_SPLIT 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_BF16_SPLIT: Source = flash_source!(
    "flash_attention_bf16_split",
    "#define FA_BF16 1\n#define FA_SPLIT 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
// The same four without per-score rules (`_plain` entries), for attention
// with no causality, key window or softcap, and without a mask either
// (`_unmasked`).
pub const FLASH_F16_PLAIN: Source = flash_source!(
    "flash_attention_f16_plain",
    "#define FA_F16 1\n#define FA_PLAIN 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_BF16_PLAIN: Source = flash_source!(
    "flash_attention_bf16_plain",
    "#define FA_BF16 1\n#define FA_PLAIN 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_F16_SPLIT_PLAIN: Source = flash_source!(
    "flash_attention_f16_split_plain",
    "#define FA_F16 1\n#define FA_SPLIT 1\n#define FA_PLAIN 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_BF16_SPLIT_PLAIN: Source = flash_source!(
    "flash_attention_bf16_split_plain",
    "#define FA_BF16 1\n#define FA_SPLIT 1\n#define FA_PLAIN 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_F16_UNMASKED: Source = flash_source!(
    "flash_attention_f16_unmasked",
    "#define FA_F16 1\n#define FA_UNMASKED 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_BF16_UNMASKED: Source = flash_source!(
    "flash_attention_bf16_unmasked",
    "#define FA_BF16 1\n#define FA_UNMASKED 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_F16_SPLIT_UNMASKED: Source = flash_source!(
    "flash_attention_f16_split_unmasked",
    "#define FA_F16 1\n#define FA_SPLIT 1\n#define FA_UNMASKED 1",
    "../../../../kernels/cuda/flash_mma.cu"
);
pub const FLASH_BF16_SPLIT_UNMASKED: Source = flash_source!(
    "flash_attention_bf16_split_unmasked",
    "#define FA_BF16 1\n#define FA_SPLIT 1\n#define FA_UNMASKED 1",
    "../../../../kernels/cuda/flash_mma.cu"
);

fn layouts() -> Vec<Layout> {
    vec![AttentionParams::LAYOUT]
}

/// Largest head size: each of a warp's 32 lanes accumulates 8 features.
pub const MAX_HEAD: usize = 256;
/// Query rows per block (warps).
const ROWS_PER_BLOCK: u64 = 4;
/// Largest head size of the tiled kernels.
pub const FLASH_MAX_HEAD: usize = 128;
/// Threads per block of the tiled kernels.
const FLASH_THREADS: u32 = 128;

/// Below this many blocks of 64 query rows, an f16/bf16 attention runs on
/// key-split 16-row tiles instead (32-row for head sizes above 64), four
/// times the blocks, each warp over a quarter of every key tile. Measured on
/// an H200 (`scripts/attention_bench.py`, heads of 64): with 12 heads of 128
/// or 197 queries (24 and 48 blocks) the two shapes tie, from 96 blocks on
/// the 64-row tiles are faster (8 x 128 queries: 16.0 against 22.4 us; 1536
/// queries: 61 against 117 us): the split reads every K/V tile four times as
/// often. Below 32 blocks (a few heads, short sequences) most of the device
/// would idle with 64-row tiles.
pub const FEW_BLOCKS: u64 = 32;

/// A tensor-core tile shape (`FaShape` in `kernels/cuda/flash_mma.cu`):
/// head size `d`, `bk` keys a tile, `wq` x `wk` warps over queries (16 rows
/// each) and keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MmaShape {
    d: u32,
    bk: u32,
    wq: u32,
    wk: u32,
}

impl MmaShape {
    const fn new(d: u32, bk: u32, wq: u32, wk: u32) -> Self {
        MmaShape { d, bk, wq, wk }
    }

    fn rows(self) -> u64 {
        u64::from(16 * self.wq)
    }

    fn threads(self) -> u32 {
        32 * self.wq * self.wk
    }

    /// Dynamic shared memory bytes (`FaShape::SE` elements of 2 bytes):
    /// two K/V buffers, the second first Q's staging area (Q moves to
    /// registers before it is filled), rows padded by 8 elements.
    fn shared(self) -> u32 {
        let ld = self.d + 8;
        let (qe, kve) = (self.rows() as u32 * ld, 2 * self.bk * ld);
        2 * (qe.max(kve) + kve)
    }
}

/// A tiled kernel: module, entry, query rows a block, threads a block and
/// dynamic shared memory bytes.
#[derive(Clone)]
struct Flash {
    source: &'static Source,
    entry: String,
    rows: u64,
    threads: u32,
    shared: u32,
}

impl Flash {
    fn mma(source: &'static Source, entry: String, s: MmaShape) -> Self {
        Flash {
            source,
            entry,
            rows: s.rows(),
            threads: s.threads(),
            shared: s.shared(),
        }
    }
}

/// The tiled kernel for `dtype` and head sizes `dk`, `dv`; `None` where the
/// row kernel runs. `split`: the key-split tiles of the half types (f32 has
/// one shape); `form`: what the half types' kernel must handle.
fn flash_entry(dtype: DType, dk: usize, dv: usize, split: bool, form: Form) -> Option<Flash> {
    let d = dk.max(dv);
    if dtype == DType::F32 {
        let entry = match d {
            0..=64 => "flash_attention_f32_d64",
            65..=128 => "flash_attention_f32_d128",
            _ => return None,
        };
        return Some(Flash {
            source: &FLASH_F32,
            entry: entry.to_string(),
            rows: 32,
            threads: FLASH_THREADS,
            shared: 0,
        });
    }
    let (size, shape) = match (d, split) {
        (0..=32, false) => (32, MmaShape::new(32, 64, 4, 1)),
        (33..=64, false) => (64, MmaShape::new(64, 64, 4, 1)),
        (65..=128, false) => (128, MmaShape::new(128, 64, 4, 1)),
        (0..=32, true) => (32, MmaShape::new(32, 64, 1, 4)),
        (33..=64, true) => (64, MmaShape::new(64, 64, 1, 4)),
        (65..=128, true) => (128, MmaShape::new(128, 32, 2, 2)),
        _ => return None,
    };
    use Form::{Plain, Rules, Unmasked};
    let (t, source) = match (dtype, split, form) {
        (DType::F16, false, Rules) => ("f16", &FLASH_F16),
        (DType::F16, true, Rules) => ("f16", &FLASH_F16_SPLIT),
        (DType::F16, false, Plain) => ("f16", &FLASH_F16_PLAIN),
        (DType::F16, true, Plain) => ("f16", &FLASH_F16_SPLIT_PLAIN),
        (DType::F16, false, Unmasked) => ("f16", &FLASH_F16_UNMASKED),
        (DType::F16, true, Unmasked) => ("f16", &FLASH_F16_SPLIT_UNMASKED),
        (DType::BF16, false, Rules) => ("bf16", &FLASH_BF16),
        (DType::BF16, true, Rules) => ("bf16", &FLASH_BF16_SPLIT),
        (DType::BF16, false, Plain) => ("bf16", &FLASH_BF16_PLAIN),
        (DType::BF16, true, Plain) => ("bf16", &FLASH_BF16_SPLIT_PLAIN),
        (DType::BF16, false, Unmasked) => ("bf16", &FLASH_BF16_UNMASKED),
        (DType::BF16, true, Unmasked) => ("bf16", &FLASH_BF16_SPLIT_UNMASKED),
        _ => return None,
    };
    let sp = if split { "_split" } else { "" };
    let suffix = match form {
        Rules => "",
        Plain => "_plain",
        Unmasked => "_unmasked",
    };
    Some(Flash::mma(
        source,
        format!("flash_attention_{t}_d{size}{sp}{suffix}"),
        shape,
    ))
}

/// What a tensor-core attention kernel is compiled to handle: the per-score
/// path (`Rules`: causality, a key window or softcap), a mask without
/// those (`Plain`), or neither (`Unmasked`). The kernel's code shrinks with
/// each (8,057, 4,151 and 2,557 PTX lines at heads of 64), and a short
/// kernel's warps wait on instruction fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Rules,
    Plain,
    Unmasked,
}

impl Form {
    fn of(p: &AttentionParams) -> Form {
        if p.flags & 4 != 0 || p.left >= 0 || p.right >= 0 || p.softcap > 0.0 {
            Form::Rules
        } else if p.flags & 1 != 0 {
            Form::Plain
        } else {
            Form::Unmasked
        }
    }
}

/// Whether the half-type tiled kernel runs key-split tiles, by the
/// option and, for [`AttentionKernel::Tiled`], the grid 64-row tiles make.
fn split_tiles(kernel: AttentionKernel, heads: usize, sq: usize) -> bool {
    match kernel {
        AttentionKernel::TiledSplit => true,
        AttentionKernel::Tiled => (heads as u64) * (sq as u64).div_ceil(64) < FEW_BLOCKS,
        AttentionKernel::TiledWide | AttentionKernel::Rows => false,
    }
}

/// Keys per span of the split-key kernels (`ATT_SPLIT` in attention.cu).
const SPLIT_KEYS: u64 = 64;

/// Whether attention of `sq` query rows over `keys` keys runs split by keys
/// (a decode step: the tiled kernels' query tiles would be nearly empty and
/// one block per head too few).
fn split_keys(dtype: DType, sq: usize, keys: usize) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
        && sq <= 4
        && keys >= 2 * SPLIT_KEYS as usize
}

fn entry(d: DType) -> LResult<&'static str> {
    Ok(match d {
        DType::F32 => "attention_f32",
        DType::F64 => "attention_f64",
        DType::F16 => "attention_f16",
        DType::BF16 => "attention_bf16",
        d => return Err(format!("attention on {d} has no cuda kernel")),
    })
}

fn dtype_of(inputs: &[TensorType], i: usize) -> LResult<DType> {
    inputs
        .get(i)
        .map(|t| t.dtype)
        .ok_or_else(|| format!("input {i} is missing"))
}

/// Float operands, bool or same-float masks, i32 or i64 key lengths, head
/// sizes up to [`MAX_HEAD`].
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let Op::Attention(a) = &node.op else {
        return Err("not an attention".into());
    };
    let d = dtype_of(inputs, 0)?;
    entry(d)?;
    let ports = a.ports();
    if let Some(m) = ports.mask {
        let md = dtype_of(inputs, m)?;
        if md != DType::Bool && md != d {
            return Err(format!(
                "attention masks of {md} with {d} operands have no cuda kernel"
            ));
        }
    }
    if let Some(n) = ports.nonpad {
        match dtype_of(inputs, n)? {
            DType::I32 | DType::I64 => {}
            d => return Err(format!("nonpad_kv_seqlen of {d} has no cuda kernel")),
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
                "attention with head sizes above {MAX_HEAD} has no cuda kernel"
            ));
        }
    }
    Ok(())
}

fn copy(cx: &mut Cx, dst: Side, src: Side, rows: u64, inner: u64) -> LResult<()> {
    if let Some(c) = slab_copy(dst, src, rows, inner, None)? {
        let l = control::slab(cx.modules, c);
        cx.push(l);
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
    e: usize,
) -> LResult<()> {
    if g.is_dense() {
        let d = Side {
            range: Range {
                offset: dst.offset + (at * g.d * e) as u64,
                bytes: dst.bytes - (at * g.d * e) as u64,
            },
            stride: (t * g.d * e) as u64,
            step: None,
        };
        return copy(
            cx,
            d,
            Side::dense(src.range()),
            (g.b * g.h) as u64,
            (g.s * g.d * e) as u64,
        );
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
            copy(cx, d, s, g.s as u64, (g.d * e) as u64)?;
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Attention(a) = &cx.node.op else {
        return Err("not an attention".into());
    };
    let ports = a.ports();
    let (q, k, v) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.input(2)?.clone(),
    );
    let dtype = q.dtype;
    let entry = entry(dtype)?;
    let e = dtype.size();
    // Where each operand starts: a view's first element, in bytes.
    let (qg, qo) = Heads::operand(a, 0, &q.dims)?;
    let (kg, ko) = Heads::operand(a, 1, &k.dims)?;
    let (vg, vo) = Heads::operand(a, 2, &v.dims)?;
    let from = |r: Range, at: usize| Range {
        offset: r.offset + (at * e) as u64,
        bytes: r.bytes - (at * e) as u64,
    };
    let (q_r, k_r, v_r) = (
        from(q.range(), qo),
        from(k.range(), ko),
        from(v.range(), vo),
    );
    check_heads(qg, kg, vg)?;
    if qg.d > MAX_HEAD || vg.d > MAX_HEAD {
        return Err(format!("head sizes above {MAX_HEAD} have no cuda kernel"));
    }
    let (b, hq, hkv, sq, dk, dv) = (qg.b, qg.h, kg.h, qg.s, qg.d, vg.d);
    let past = match (ports.past_key, ports.past_value) {
        (Some(pk), Some(pv)) => Some((cx.input(pk)?.clone(), cx.input(pv)?.clone())),
        _ => None,
    };
    let p = past
        .as_ref()
        .map_or(0, |(pk, _)| pk.dims.get(2).copied().unwrap_or(0));
    let total = p + kg.s;
    let present = cx.io.outs.len() > 1;
    let (mut kr, mut vr) = ((k_r, kg), (v_r, vg));
    if past.is_some() || present {
        let kbytes = (b * hkv * total * dk * e) as u64;
        let vbytes = (b * hkv * total * dv * e) as u64;
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
            copy_into_seq(cx, kd, total, 0, pk, pkg, e)?;
            copy_into_seq(cx, vd, total, 0, pv, pvg, e)?;
        }
        copy_into_seq(cx, kd, total, p, &k, kg, e)?;
        copy_into_seq(cx, vd, total, p, &v, vg, e)?;
        kr = (kd, Heads::dense(b, hkv, total, dk));
        vr = (vd, Heads::dense(b, hkv, total, dv));
    }
    let y = cx.output(0)?.clone();
    let yg = Heads::of(&y.dims, a.q_num_heads, "Y")?;
    let none = y.range();
    let mut extras = Extras {
        past: p,
        f64: dtype == DType::F64,
        ..Extras::default()
    };
    let mut mask_r = none;
    if let Some(mi) = ports.mask {
        let m = cx.input(mi)?.clone();
        let is_bool = match m.dtype {
            DType::Bool => true,
            d if d == dtype => false,
            d => return Err(format!("attention masks of {d} have no cuda kernel")),
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
            d => return Err(format!("nonpad_kv_seqlen of {d} has no cuda kernel")),
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
    if cx.io.outs.len() > 3 {
        extras.qk = true;
        qk_r = cx.output(3)?.range();
        if qk_r.bytes != (b * hq * sq * total * e) as u64 {
            return Err("the QK output does not have [B, Hq, Sq, keys] elements".into());
        }
    }
    let params = params(a, qg, kr.1, vr.1, yg, extras)?;
    let operands = vec![y.range(), q_r, kr.0, vr.0, mask_r, nonpad_r, qk_r];
    let tiled = cx.opts.attention != AttentionKernel::Rows && !extras.qk;
    if tiled && split_keys(dtype, sq, total) {
        // Decode: a block per (query row, span of keys), then a merge.
        let t = entry.strip_prefix("attention_").unwrap_or(entry);
        let rows = u64::from(params.rows);
        let spans = (total as u64).div_ceil(SPLIT_KEYS);
        let part = cx.scratch(rows * spans * (dv as u64 + 2) * 4);
        let m = cx.modules.of(&SOURCE);
        let block = (32 * ROWS_PER_BLOCK) as u32;
        let split = vec![part, q_r, kr.0, vr.0, mask_r, nonpad_r];
        let blocks = rows * spans;
        cx.kernel_params(
            m,
            &format!("attention_split_{t}"),
            blocks,
            block,
            split,
            &params,
        );
        let blocks = rows.div_ceil(ROWS_PER_BLOCK);
        let merge = vec![y.range(), part];
        cx.kernel_params(
            m,
            &format!("attention_merge_{t}"),
            blocks,
            block,
            merge,
            &params,
        );
        return Ok(());
    }
    let split = split_tiles(cx.opts.attention, b * hq, sq);
    match flash_entry(dtype, dk, dv, split, Form::of(&params)).filter(|_| tiled) {
        Some(f) => {
            let m = cx.modules.of(f.source);
            let blocks = (b * hq) as u64 * (sq as u64).div_ceil(f.rows);
            cx.kernel_params_shared(m, &f.entry, blocks, f.threads, f.shared, operands, &params);
        }
        None => {
            let m = cx.modules.of(&SOURCE);
            let blocks = u64::from(params.rows).div_ceil(ROWS_PER_BLOCK);
            let block = (32 * ROWS_PER_BLOCK) as u32;
            cx.kernel_params(m, entry, blocks, block, operands, &params);
        }
    }
    Ok(())
}
