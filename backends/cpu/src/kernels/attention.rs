//! ONNX Attention (opset 23-25): scaled dot-product attention over heads with
//! GQA/MQA head sharing, masks, bottom-right causality, key windows, softcap
//! and a KV cache. Products go through gemm; the softmax runs in f32 (f64 for
//! f64 inputs or `softmax_precision` f64).

use num_traits::{Float, ToPrimitive};
use rlx_ir::ops::{Attention, HeadView};
use rlx_ir::{DType, Op};

use super::gemm::{gemm, gemm_strided, GemmElem};

/// The fewest query rows an attention task takes when heads are split.
const MIN_BLOCK_ROWS: usize = 16;
use super::layout::broadcast_strides;
use super::num::{Comp, Real};
use super::vmath;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Attention(_) => Ok(fn_kernel(spec, attention)),
        op => Err(KernelError::Internal(format!(
            "{} is not attention",
            op.name()
        ))),
    }
}

impl From<HeadView> for Heads {
    fn from(v: HeadView) -> Heads {
        let [b, h, s, d] = v.dims;
        Heads {
            b,
            h,
            s,
            d,
            offset: v.offset,
            st: v.strides,
        }
    }
}

/// `[B, heads, seq, head]` geometry of an operand: where element `(b, h,
/// s, 0)` lies (`offset` + the strides; the head contiguous).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Heads {
    b: usize,
    h: usize,
    s: usize,
    d: usize,
    offset: usize,
    st: [usize; 3],
}

impl Heads {
    /// The operand `i` (0 Q, 1 K, 2 V) of `a` in `t`: through its view, if
    /// the attention has views, else as `t` lies.
    fn operand(a: &Attention, i: usize, t: &TensorRef) -> Result<Heads, KernelError> {
        a.operand_view(i, t.dims)
            .map(Heads::from)
            .map_err(KernelError::Value)
    }

    /// A `[B, heads, seq, head]` (or 3-D, split into `heads`) operand as it lies.
    fn of(t: &TensorRef, heads: i64, what: &str) -> Result<Heads, KernelError> {
        HeadView::dense(t.dims, heads, what)
            .map(Heads::from)
            .map_err(KernelError::Value)
    }

    fn len(&self) -> usize {
        self.b * self.h * self.s * self.d
    }
}

/// An operand in `[B, heads, seq, head]` order, widened to the compute type
/// (read through its strides: 3-D operands `[B, seq, heads*head]` and views
/// are transposed).
fn to_bhsd<T: Real>(t: &TensorRef, g: Heads, mul: f64) -> Result<Vec<T::C>, KernelError> {
    let src = t.slice::<T>()?;
    let m = <T::C as Comp>::from_f64c(mul);
    let mut out = Vec::with_capacity(g.len());
    for b in 0..g.b {
        for h in 0..g.h {
            for s in 0..g.s {
                let at = g.offset + b * g.st[0] + h * g.st[1] + s * g.st[2];
                let row = src.get(at..at + g.d).ok_or_else(|| {
                    KernelError::Internal(format!("attention operand row at {at} past its input"))
                })?;
                out.extend(row.iter().map(|v| v.up() * m));
            }
        }
    }
    Ok(out)
}

/// Concatenates `past` (`[B, H, P, D]`) and `new` along the sequence axis.
fn concat_seq<C: Copy>(past: &[C], p: usize, new: &[C], n: usize, bh: usize, d: usize) -> Vec<C> {
    let mut out = Vec::with_capacity(bh * (p + n) * d);
    for i in 0..bh {
        out.extend_from_slice(&past[i * p * d..(i + 1) * p * d]);
        out.extend_from_slice(&new[i * n * d..(i + 1) * n * d]);
    }
    out
}

/// The additive bias `[B, Hq, Sq, T]` (broadcast strides) from the mask,
/// `is_causal`, the key window and `nonpad_kv_seqlen`.
struct Bias {
    mask: Option<(Vec<f64>, Vec<usize>, usize)>,
    causal: bool,
    /// Left and right window bounds (`-1`: unbounded).
    window: (i64, i64),
    /// Position of the first query row: the past length (one for every
    /// batch) or `nonpad_kv_seqlen[b] - q_len` (per batch).
    offset: Vec<i64>,
    nonpad: Option<Vec<i64>>,
}

impl Bias {
    /// The bias at (b, h, i, j); `mask_len` is the mask's own last dim, past
    /// which it counts as masked.
    fn at(&self, b: usize, h: usize, i: usize, j: usize) -> f64 {
        if self.at_position(b, i, j) {
            return f64::NEG_INFINITY;
        }
        match &self.mask {
            Some((vals, st, len)) => {
                if j >= *len {
                    f64::NEG_INFINITY
                } else {
                    vals[b * st[0] + h * st[1] + i * st[2] + j * st[3]]
                }
            }
            None => 0.0,
        }
    }
}

impl Bias {
    /// The biases of query row `i` over every key, in f32, into `out`;
    /// false when every key is masked.
    fn row(&self, b: usize, h: usize, i: usize, out: &mut [f32]) -> bool {
        match &self.mask {
            Some((vals, st, len)) => {
                let base = b * st[0] + h * st[1] + i * st[2];
                for (j, o) in out.iter_mut().enumerate() {
                    *o = if j >= *len {
                        f32::NEG_INFINITY
                    } else {
                        vals[base + j * st[3]] as f32
                    };
                }
            }
            None => out.fill(0.0),
        }
        let (left, right) = self.window;
        if self.causal || left >= 0 || right >= 0 || self.nonpad.is_some() {
            for (j, o) in out.iter_mut().enumerate() {
                if self.at_position(b, i, j) {
                    *o = f32::NEG_INFINITY;
                }
            }
        }
        out.iter().any(|&v| v != f32::NEG_INFINITY)
    }

    /// Whether causality, the window or `nonpad_kv_seqlen` hide key `j`
    /// from query row `i`.
    fn at_position(&self, b: usize, i: usize, j: usize) -> bool {
        let off = self.offset[if self.offset.len() == 1 { 0 } else { b }];
        // Query position minus key position.
        let diff = i as i64 + off - j as i64;
        let (left, right) = self.window;
        (self.causal && diff < 0)
            || (left >= 0 && diff > left)
            || (right >= 0 && -diff > right)
            || self.nonpad.as_ref().is_some_and(|np| j as i64 >= np[b])
    }
}

/// Softmax of each `total`-long row of f32 scores `sc` plus its biases
/// (`bias(i, row)`, false when every key is masked: the row attends
/// nothing and is zeros), through `vmath`'s vectorized exp.
fn softmax_rows_f32(sc: &mut [f32], total: usize, bias: impl Fn(usize, &mut [f32]) -> bool) {
    let (mut brow, mut e) = (vec![0f32; total], vec![0f32; total]);
    for (i, srow) in sc.chunks_mut(total.max(1)).enumerate() {
        if !bias(i, &mut brow) {
            srow.fill(0.0);
            continue;
        }
        for (s, b) in srow.iter_mut().zip(&brow) {
            *s += *b;
        }
        let m = srow.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let inv = (1.0 / vmath::exp_shifted(srow, m, &mut e)) as f32;
        for (s, &x) in srow.iter_mut().zip(&e) {
            *s = x * inv;
        }
    }
}

fn mask_values(m: &TensorRef) -> Result<Vec<f64>, KernelError> {
    if m.dtype == DType::Bool {
        Ok(m.bytes
            .iter()
            .map(|&v| if v != 0 { 0.0 } else { f64::NEG_INFINITY })
            .collect())
    } else if m.dtype.is_float() {
        m.to_f64s()
    } else {
        Err(KernelError::Value(format!(
            "attention mask must be bool or float, got {}",
            m.dtype
        )))
    }
}

fn attention_typed<T: Real>(
    a: &Attention,
    ins: &[TensorRef],
    outs: &mut [TensorMut],
) -> Result<(), KernelError>
where
    T::C: GemmElem,
{
    let ports = a.ports();
    let (qg, kg, vg) = (
        Heads::operand(a, 0, &ins[0])?,
        Heads::operand(a, 1, &ins[1])?,
        Heads::operand(a, 2, &ins[2])?,
    );
    // Each operand is 3-D or 4-D on its own (a 3-D K or V beside a 4-D Q:
    // `fuse-attention` reads a head split in place); Q's rank is Y's.
    if kg.b != qg.b || vg.b != qg.b || kg.h != vg.h || kg.s != vg.s || kg.d != qg.d {
        return Err(KernelError::Value(format!(
            "Q {qg:?}, K {kg:?} and V {vg:?} do not fit together"
        )));
    }
    if kg.h == 0 || qg.h % kg.h != 0 {
        return Err(KernelError::Value(format!(
            "{} query heads do not share {} key heads",
            qg.h, kg.h
        )));
    }
    let (b, hq, hkv, sq, dk, dv) = (qg.b, qg.h, kg.h, qg.s, qg.d, vg.d);
    let scale = match a.scale {
        Some(s) => s as f64,
        None => 1.0 / (dk as f64).sqrt(),
    };
    let q = to_bhsd::<T>(&ins[0], qg, scale)?;
    let mut k = to_bhsd::<T>(&ins[1], kg, 1.0)?;
    let mut v = to_bhsd::<T>(&ins[2], vg, 1.0)?;
    let mut past = 0;
    if let (Some(pk), Some(pv)) = (ports.past_key, ports.past_value) {
        let (pk, pv) = (&ins[pk], &ins[pv]);
        if pk.rank() != 4 || pv.rank() != 4 {
            return Err(KernelError::Value("past key/value must be 4-D".into()));
        }
        let pkg = Heads::of(pk, 0, "past_key")?;
        let pvg = Heads::of(pv, 0, "past_value")?;
        if (pkg.b, pkg.h, pkg.d) != (b, hkv, dk)
            || (pvg.b, pvg.h, pvg.s, pvg.d) != (b, hkv, pkg.s, dv)
        {
            return Err(KernelError::Value(format!(
                "past key {:?} / value {:?} do not fit K {kg:?}, V {vg:?}",
                pk.dims, pv.dims
            )));
        }
        past = pkg.s;
        let pkv = to_bhsd::<T>(pk, pkg, 1.0)?;
        let pvv = to_bhsd::<T>(pv, pvg, 1.0)?;
        k = concat_seq(&pkv, past, &k, kg.s, b * hkv, dk);
        v = concat_seq(&pvv, past, &v, kg.s, b * hkv, dv);
    }
    let total = past + kg.s;
    let mask = match ports.mask {
        Some(mi) => {
            let m = &ins[mi];
            let r = m.rank();
            // A shorter last dim is padded with masked positions (a scalar
            // mask covers every key).
            let len = m.dims.last().copied().unwrap_or(total);
            if r > 4 || len > total {
                return Err(KernelError::Value(format!(
                    "attention mask {:?} does not broadcast to [{b}, {hq}, {sq}, {total}]",
                    m.dims
                )));
            }
            let mut full = [b, hq, sq, len];
            let md: Vec<usize> = m.dims.to_vec();
            for (i, &d) in md.iter().rev().enumerate().skip(1) {
                let f = full[3 - i];
                if d != 1 && d != f {
                    return Err(KernelError::Value(format!(
                        "attention mask {:?} does not broadcast to [{b}, {hq}, {sq}, {total}]",
                        m.dims
                    )));
                }
            }
            full[3] = len;
            let st = broadcast_strides(&md, &full);
            Some((mask_values(m)?, st, len))
        }
        None => None,
    };
    let nonpad = match ports.nonpad {
        Some(i) => {
            let v = ins[i].to_i64s()?;
            if v.len() != b {
                return Err(KernelError::Value(format!(
                    "nonpad_kv_seqlen has {} entries for batch {b}",
                    v.len()
                )));
            }
            Some(v)
        }
        None => None,
    };
    let offset = match (&nonpad, ports.past_key) {
        (Some(np), None) => np.iter().map(|&n| n - sq as i64).collect(),
        _ => vec![past as i64],
    };
    let bias = Bias {
        mask,
        causal: a.is_causal,
        window: (a.left_window_size, a.right_window_size),
        offset,
        nonpad,
    };
    let softmax_f64 = a.softmax_precision == Some(DType::F64);
    let want_qk = outs.len() > 3;
    let mode = a.qk_matmul_output_mode;
    let softcap = a.softcap as f64;
    let group = hq / hkv;
    let zero = <T::C as Comp>::from_f64c(0.0);
    let sq_all = sq;
    // One block of query rows of one (b, query head) at a time: its output
    // rows and, when asked, its QK values. Heads are split into blocks of
    // rows when there are fewer heads than threads.
    let blocks = crate::par::threads()
        .div_ceil(b * hq)
        .min(sq.div_ceil(MIN_BLOCK_ROWS))
        .max(1);
    let per_block = sq.div_ceil(blocks);
    let head = |task: usize| -> (Vec<T::C>, Vec<T::C>) {
        let (bh, blk) = (task / blocks, task % blocks);
        let i0 = (blk * per_block).min(sq);
        let sq = (sq - i0).min(per_block);
        let (bi, h) = (bh / hq, bh % hq);
        let kvh = bi * hkv + h / group;
        let qs = &q[(bh * sq_all + i0) * dk..(bh * sq_all + i0 + sq) * dk];
        let ks = &k[kvh * total * dk..(kvh + 1) * total * dk];
        let vs = &v[kvh * total * dv..(kvh + 1) * total * dv];
        let mut sc = vec![zero; sq * total];
        // scores = (Q * scale) · Kᵀ
        gemm_strided(
            sq,
            total,
            dk,
            qs,
            (dk, 1),
            ks,
            (1, dk),
            &mut sc,
            total,
            false,
        );
        let mut qko = vec![zero; if want_qk { sq * total } else { 0 }];
        // f32 scores with no cap, no QK output and an f32 softmax: whole
        // rows at a time, vectorized.
        if !want_qk && softcap == 0.0 && !softmax_f64 {
            if let Some(scf) = (&mut sc as &mut dyn std::any::Any).downcast_mut::<Vec<f32>>() {
                softmax_rows_f32(scf, total, |i, row| bias.row(bi, h, i0 + i, row));
                let mut yo = vec![zero; sq * dv];
                gemm(sq, dv, total, &sc, total, vs, dv, &mut yo, dv, false);
                return (yo, qko);
            }
        }
        let mut row = vec![0f64; total];
        for i in 0..sq {
            let srow = &mut sc[i * total..(i + 1) * total];
            // A row whose bias masks every key attends nothing: zeros.
            let mut masked = true;
            for (j, s) in srow.iter().enumerate() {
                let raw = ToPrimitive::to_f64(s).unwrap_or(f64::NAN);
                let capped = if softcap > 0.0 {
                    softcap * (raw / softcap).tanh()
                } else {
                    raw
                };
                let b = bias.at(bi, h, i0 + i, j);
                masked &= b == f64::NEG_INFINITY;
                let biased = capped + b;
                row[j] = biased;
                if want_qk && mode != 3 {
                    let v = match mode {
                        0 => raw,
                        1 => capped,
                        _ => biased,
                    };
                    qko[i * total + j] = <T::C as Comp>::from_f64c(v);
                }
            }
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if masked {
                srow.fill(zero);
            } else if softmax_f64 {
                let sum: f64 = row.iter().map(|&r| (r - m).exp()).sum();
                for (s, &r) in srow.iter_mut().zip(row.iter()) {
                    *s = <T::C as Comp>::from_f64c((r - m).exp() / sum);
                }
            } else {
                // Softmax in the compute type of the input.
                let mc = <T::C as Comp>::from_f64c(m);
                let mut sum = zero;
                for (s, &r) in srow.iter_mut().zip(row.iter()) {
                    let e = Float::exp(<T::C as Comp>::from_f64c(r) - mc);
                    *s = e;
                    sum = sum + e;
                }
                for s in srow.iter_mut() {
                    *s = *s / sum;
                }
            }
            if want_qk && mode == 3 {
                qko[i * total..(i + 1) * total].copy_from_slice(srow);
            }
        }
        // Y = softmax · V
        let mut yo = vec![zero; sq * dv];
        gemm(sq, dv, total, &sc, total, vs, dv, &mut yo, dv, false);
        (yo, qko)
    };
    let heads: Vec<(Vec<T::C>, Vec<T::C>)> = crate::par::map(b * hq * blocks, head);
    let y: Vec<T::C> = heads.iter().flat_map(|(y, _)| y.iter().copied()).collect();
    let qk: Vec<T::C> = heads.iter().flat_map(|(_, q)| q.iter().copied()).collect();
    // Y back to the input layout.
    let yo = outs[0].slice::<T>()?;
    let four = if a.views.is_empty() {
        ins[0].rank() == 4
    } else {
        a.q_num_heads < 1
    };
    if four {
        for (o, &c) in yo.iter_mut().zip(&y) {
            *o = T::down(c);
        }
    } else {
        for bi in 0..b {
            for h in 0..hq {
                for s in 0..sq {
                    let src = ((bi * hq + h) * sq + s) * dv;
                    let dst = (bi * sq + s) * hq * dv + h * dv;
                    for d in 0..dv {
                        yo[dst + d] = T::down(y[src + d]);
                    }
                }
            }
        }
    }
    let write = |out: &mut TensorMut, vals: &[T::C]| -> Result<(), KernelError> {
        let o = out.slice::<T>()?;
        if o.len() != vals.len() {
            return Err(KernelError::Internal(format!(
                "attention output of {} for {} values",
                o.len(),
                vals.len()
            )));
        }
        for (o, &c) in o.iter_mut().zip(vals) {
            *o = T::down(c);
        }
        Ok(())
    };
    if outs.len() > 1 {
        write(&mut outs[1], &k)?;
    }
    if outs.len() > 2 {
        write(&mut outs[2], &v)?;
    }
    if want_qk {
        write(&mut outs[3], &qk)?;
    }
    Ok(())
}

fn attention(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Attention(a) = op else {
        return Err(KernelError::Internal("not attention".into()));
    };
    with_dtype!(ins[0].dtype, T => attention_typed::<T>(a, ins, outs), float)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(causal: bool, has_mask: bool, has_past: bool, outputs: i64) -> Attention {
        Attention {
            is_causal: causal,
            has_mask,
            has_past,
            num_outputs: outputs,
            ..Attention::default()
        }
    }

    fn r<'a>(dims: &'a [usize], v: &'a [f32]) -> TensorRef<'a> {
        TensorRef {
            dtype: DType::F32,
            dims,
            bytes: bytemuck::cast_slice(v),
        }
    }

    /// Runs the op and returns every output as f32s.
    fn run(a: &Attention, ins: &[TensorRef], out_dims: &[&[usize]]) -> Vec<Vec<f32>> {
        let mut bufs: Vec<Vec<f32>> = out_dims
            .iter()
            .map(|d| vec![0f32; d.iter().product()])
            .collect();
        let mut outs: Vec<TensorMut> = bufs
            .iter_mut()
            .zip(out_dims)
            .map(|(b, d)| TensorMut {
                dtype: DType::F32,
                dims: d,
                bytes: bytemuck::cast_slice_mut(b),
            })
            .collect();
        attention(&Op::Attention(a.clone()), ins, &mut outs).unwrap();
        drop(outs);
        bufs
    }

    const LN3: f32 = 1.098_612_3;

    #[test]
    fn softmax_weights_values() {
        // Scores 0 and ln 3 -> weights 1/4, 3/4 -> 0.25 * 4 + 0.75 * 8 = 7.
        let (q, k, v) = ([1.0f32], [0.0f32, LN3], [4.0f32, 8.0]);
        let d1 = [1, 1, 1, 1];
        let d2 = [1, 1, 2, 1];
        let ins = [r(&d1, &q), r(&d2, &k), r(&d2, &v)];
        let y = run(&op(false, false, false, 1), &ins, &[&d1]);
        assert!((y[0][0] - 7.0).abs() < 1e-5, "{y:?}");
    }

    #[test]
    fn causal_and_bool_mask_hide_keys() {
        let (q, k, v) = ([1.0f32, 1.0], [0.0f32, LN3], [4.0f32, 8.0]);
        let (dq, dk) = ([1, 1, 2, 1], [1, 1, 2, 1]);
        let ins = [r(&dq, &q), r(&dk, &k), r(&dk, &v)];
        // Query 0 sees key 0 only; query 1 sees both.
        let y = run(&op(true, false, false, 1), &ins, &[&dq]);
        assert!(
            (y[0][0] - 4.0).abs() < 1e-5 && (y[0][1] - 7.0).abs() < 1e-5,
            "{y:?}"
        );
        // A [1, 2] bool mask hiding key 0 everywhere.
        let mask = [0u8, 1];
        let md = [1, 2];
        let m = TensorRef {
            dtype: DType::Bool,
            dims: &md,
            bytes: &mask,
        };
        let ins = [r(&dq, &q), r(&dk, &k), r(&dk, &v), m];
        let y = run(&op(false, true, false, 1), &ins, &[&dq]);
        assert!(y[0].iter().all(|&v| (v - 8.0).abs() < 1e-5), "{y:?}");
    }

    #[test]
    fn gqa_past_and_present() {
        // Two query heads share one KV head; one past key joins one new key.
        let q = [1.0f32, 1.0];
        let (k, v) = ([LN3], [8.0f32]);
        let (pk, pv) = ([0.0f32], [4.0f32]);
        let dq = [1, 2, 1, 1];
        let dkv = [1, 1, 1, 1];
        let ins = [
            r(&dq, &q),
            r(&dkv, &k),
            r(&dkv, &v),
            r(&dkv, &pk),
            r(&dkv, &pv),
        ];
        let dp = [1, 1, 2, 1];
        let out = run(&op(false, false, true, 3), &ins, &[&dq, &dp, &dp]);
        assert!(out[0].iter().all(|&v| (v - 7.0).abs() < 1e-5), "{out:?}");
        assert_eq!(out[1], vec![0.0, LN3]);
        assert_eq!(out[2], vec![4.0, 8.0]);
    }
}
