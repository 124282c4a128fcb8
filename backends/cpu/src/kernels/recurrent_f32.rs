//! The f32 path of RNN, GRU and LSTM: the input projection of every time step
//! and batch row as one GEMM (`X · Wᵀ` plus the biases), then per step the
//! recurrent product (a GEMV for one sequence, a GEMM for several) and the
//! gates fused over it. Directions run in parallel. Semantics are those of the
//! f64 reference path in `recurrent.rs` (sequence lengths, clip, peepholes,
//! input forget, linear-before-reset, both layouts).
//!
//! A quantized layer (ORT's DynamicQuantizeLSTM) keeps its weights as the
//! integers `w_q - w_zp` (exact in f32) with a scale per row; each product
//! quantizes its activations to uint8 first ([`quantize_u8`]) and scales the
//! integer sums back.

use rlx_ir::ops::{Recurrent, RecurrentKind, RnnActivation, RnnDirection};

use super::gemm::gemm_strided;
use super::gemm::gemv;
use super::recurrent::{Act, Geom};
use super::recurrent_cells as cells;
use super::vmath;

/// Rows of `R` per parallel task in a GEMV.
const GEMV_CHUNK: usize = 128;
/// Multiply-adds of one step's GEMV below which it runs inline: a GRU of
/// hidden 128 (49K per step) ran 4x slower than onnxruntime on 16 threads
/// when every step forked and joined the pool.
const GEMV_PAR_WORK: usize = 1 << 18;

/// One direction's f32 weights.
pub(super) struct DirWeights<'a> {
    /// `[gates*hidden, input]`.
    pub w: &'a [f32],
    /// `w` transposed, `[input, gates*hidden]`, when the kernel made it.
    pub w_t: Option<&'a [f32]>,
    /// `w` packed as the projection's right operand, when the kernel made it.
    pub w_packed: Option<&'a super::gemm::weights::PackedW>,
    /// `[gates*hidden, hidden]`.
    pub r: &'a [f32],
    /// `r` transposed, `[hidden, gates*hidden]` in rows `ld` apart, when
    /// the kernel made it.
    pub r_t: Option<(&'a [f32], usize)>,
    /// Per row of `w` and `r`: the scale of a quantized layer; empty for f32.
    pub w_scale: &'a [f32],
    pub r_scale: &'a [f32],
    /// A quantized LSTM's W and R as packed signed bytes, where they fit.
    pub packed: Option<&'a super::recurrent_int8::PackedDir>,
    /// `Wb` then `Rb`, `[2*gates*hidden]`; empty for none.
    pub bias: &'a [f32],
    /// `[3*hidden]` (`i, o, f`); empty for none.
    pub peep: &'a [f32],
    /// Initial `h` and `c`, `[batch*hidden]` each, in state order; empty for zeros.
    pub h0: Vec<f32>,
    pub c0: Vec<f32>,
    pub acts: &'a [Act],
}

/// What one direction computes: `y [seq, batch, hidden]`, final `h`, `c`.
pub(super) struct DirOut {
    pub y: Vec<f32>,
    pub h: Vec<f32>,
    pub c: Vec<f32>,
}

fn apply(a: Act, x: f32) -> f32 {
    match a.0 {
        RnnActivation::Sigmoid => vmath::sigmoid(x),
        RnnActivation::Tanh => vmath::tanh_exp(x),
        RnnActivation::Relu => x.max(0.0),
        _ => a.apply(x as f64) as f32,
    }
}

/// `apply` over a slice; sigmoid and tanh vectorized.
fn apply_slice(a: Act, xs: &mut [f32]) {
    match a.0 {
        RnnActivation::Sigmoid => vmath::sigmoid_slice(xs),
        RnnActivation::Tanh => vmath::tanh_exp_slice(xs),
        _ => xs.iter_mut().for_each(|x| *x = apply(a, *x)),
    }
}

/// `out[j] = dot(m[j, :], v)` for the `n`-wide rows of `m`; row blocks in
/// parallel when there are enough and the product is large enough.
fn gemv(m: &[f32], n: usize, v: &[f32], out: &mut [f32]) {
    if out.len() >= 2 * GEMV_CHUNK && out.len() * n >= GEMV_PAR_WORK && crate::par::parallel() {
        crate::par::chunks_mut(out, GEMV_CHUNK, |c, o| {
            gemv::rows(m, n, v, c * GEMV_CHUNK, o)
        });
    } else {
        gemv::rows(m, n, v, 0, out);
    }
}

/// `hr[rows, gh] = h[rows, hidden] · R[rows of R]ᵀ` for `gh` rows of `r`;
/// with `scale` (a quantized layer, one per row of `r`), `h` is quantized
/// first and the integer sums scaled back. At one row, `r_t` (`R`
/// transposed, `[hidden, ld]`, from column `col`), where there is one,
/// serves instead of `r`.
#[allow(clippy::too_many_arguments)]
fn recurrent_product(
    h: &[f32],
    rows: usize,
    hs: usize,
    r: &[f32],
    r_t: Option<(&[f32], usize, usize)>,
    scale: &[f32],
    gh: usize,
    hr: &mut [f32],
) {
    let quantized;
    let (h, hscale) = if scale.is_empty() {
        (h, 1.0)
    } else {
        let (q, s) = quantize_u8(h);
        quantized = q;
        (&quantized[..], s)
    };
    match r_t {
        Some((t, ld, col)) if rows == 1 => gemv_columns(&h[..hs], t, ld, col, &mut hr[..gh]),
        _ if rows == 1 => gemv(r, hs, h, hr),
        _ => gemm_strided(rows, gh, hs, h, (hs, 1), r, (1, hs), hr, gh, false),
    }
    if !scale.is_empty() {
        rescale(hr, gh, hscale, scale);
    }
}

/// [`gemv::columns`], column blocks in parallel when the product is large
/// enough (as [`gemv`]).
fn gemv_columns(h: &[f32], t: &[f32], ld: usize, col: usize, out: &mut [f32]) {
    if out.len() >= 2 * GEMV_CHUNK && out.len() * h.len() >= GEMV_PAR_WORK && crate::par::parallel()
    {
        crate::par::chunks_mut(out, GEMV_CHUNK, |c, o| {
            gemv::columns(h, t, ld, col + c * GEMV_CHUNK, o)
        });
    } else {
        gemv::columns(h, t, ld, col, out);
    }
}

/// Quantizes `a` to uint8 over its own range (which takes in 0), as ONNX
/// Runtime quantizes a GEMM's activations: `scale = (max - min) / 255`,
/// `q = clamp(round(a / scale) + zp, 0, 255)`; returns `q - zp` (small
/// integers, exact in f32) and the scale.
pub(super) fn quantize_u8(a: &[f32]) -> (Vec<f32>, f32) {
    let (scale, zp) = u8_range(a);
    // |x / scale| <= 255, where `round_small` is exact.
    let mut q = vec![0f32; a.len()];
    vmath::vectorized(|| {
        for (q, &x) in q.iter_mut().zip(a) {
            *q = (vmath::round_small(x / scale) + zp).clamp(0.0, 255.0) - zp;
        }
    });
    (q, scale)
}

/// The uint8 scale and zero point of `a`'s range (which takes in 0).
pub(super) fn u8_range(a: &[f32]) -> (f32, f32) {
    let (min, max) = super::quant::range_with_zero(a);
    let scale = if max == min { 1.0 } else { (max - min) / 255.0 };
    (scale, (-min / scale).clamp(0.0, 255.0).round_ties_even())
}

/// Scales column `j` of the `[rows, n]` integer sums by `a_scale * w_scale[j]`.
fn rescale(sums: &mut [f32], n: usize, a_scale: f32, w_scale: &[f32]) {
    let s: Vec<f32> = w_scale[..n].iter().map(|&w| a_scale * w).collect();
    for row in sums.chunks_mut(n) {
        for (v, s) in row.iter_mut().zip(&s) {
            *v *= s;
        }
    }
}

/// Runs one direction over the projected inputs `xw` (`[rows, gh]`, row of
/// `(t, b)` at `g.x(t, b) / input`), compiled for AVX-512 where the CPU has
/// it: a small layer's step is mostly the gate arithmetic between the calls.
pub(super) fn direction(
    rc: &Recurrent,
    g: &Geom,
    lens: &[usize],
    xw: &[f32],
    dw: &DirWeights,
    reverse: bool,
) -> DirOut {
    super::vmath::vectorized(|| steps(rc, g, lens, xw, dw, reverse))
}

#[inline(always)]
fn steps(
    rc: &Recurrent,
    g: &Geom,
    lens: &[usize],
    xw: &[f32],
    dw: &DirWeights,
    reverse: bool,
) -> DirOut {
    let (hs, batch) = (g.hidden, g.batch);
    let gates = rc.kind.gates() as usize;
    let gh = gates * hs;
    let mut h = if dw.h0.is_empty() {
        vec![0.0; batch * hs]
    } else {
        dw.h0.clone()
    };
    let mut c = if dw.c0.is_empty() {
        vec![0.0; batch * hs]
    } else {
        dw.c0.clone()
    };
    let mut y = vec![0.0; g.seq * batch * hs];
    let mut hr = vec![0.0; batch * gh];
    // GRU without linear-before-reset multiplies `r ⊙ h` by R_h separately.
    let mut rh = vec![0.0; batch * hs];
    let mut rhr = vec![0.0; batch * hs];
    // R's biases (`Rb`, zero where the layer has none) and the clip as
    // slices and a pass of their own: an element's bias looked up through
    // a checked `get` kept the GRU's gate loops scalar.
    let zeros;
    let r_bias: &[f32] = match dw.bias.get(gh..2 * gh) {
        Some(b) => b,
        None => {
            zeros = vec![0.0; gh];
            &zeros
        }
    };
    // The GRU's new-gate share of them.
    let rb_n = r_bias.get(2 * hs..).unwrap_or(&[]);
    let clip = |x: f32| match rc.clip {
        Some(cl) => x.clamp(-cl, cl),
        None => x,
    };
    let clip_all = |v: &mut [f32]| {
        if let Some(cl) = rc.clip {
            for x in v {
                *x = x.clamp(-cl, cl);
            }
        }
    };
    let f = dw.acts[0];
    let steps = lens.iter().copied().max().unwrap_or(0);
    // The default cell, its gates in one pass of registers
    // ([`super::recurrent_cells`]).
    let kinds: Vec<RnnActivation> = dw.acts.iter().map(|a| a.0).collect();
    let fused = super::recurrent_cells::available()
        && rc.clip.is_none()
        && match rc.kind {
            RecurrentKind::Lstm => {
                !rc.input_forget
                    && kinds
                        == [
                            RnnActivation::Sigmoid,
                            RnnActivation::Tanh,
                            RnnActivation::Tanh,
                        ]
            }
            RecurrentKind::Gru => kinds == [RnnActivation::Sigmoid, RnnActivation::Tanh],
            RecurrentKind::Rnn => false,
        };
    let (r_gates, gh_now) = match rc.kind {
        RecurrentKind::Gru if !rc.linear_before_reset => (&dw.r[..2 * hs * hs], 2 * hs),
        _ => (dw.r, gh),
    };
    let scale_of = |rows: std::ops::Range<usize>| dw.r_scale.get(rows).unwrap_or(&[]);
    let mut hr_rows = vec![0.0; batch * gh_now];
    let mut pre = vec![0.0; gh];
    for k in 0..steps {
        match dw.packed {
            // Only LSTMs are quantized: all of R, every gate.
            Some(p) => {
                super::recurrent_int8::step_product(&h, batch, &p.r, dw.r_scale, &mut hr_rows)
            }
            None => recurrent_product(
                &h,
                batch,
                hs,
                r_gates,
                dw.r_t.map(|(t, ld)| (t, ld, 0)),
                scale_of(0..gh_now),
                gh_now,
                &mut hr_rows,
            ),
        }
        for b in 0..batch {
            hr[b * gh..b * gh + gh_now].copy_from_slice(&hr_rows[b * gh_now..(b + 1) * gh_now]);
        }
        let active = |b: &usize| k < lens[*b];
        let t_of = |b: usize| if reverse { lens[b] - 1 - k } else { k };
        if rc.kind == RecurrentKind::Gru && !rc.linear_before_reset {
            for b in (0..batch).filter(active) {
                let x = &xw[g.x(t_of(b), b) / g.input * gh..][..gh];
                let rows = b * hs..(b + 1) * hs;
                if fused {
                    let hr_r = &hr[b * gh + hs..b * gh + 2 * hs];
                    cells::gru_reset(&x[hs..2 * hs], hr_r, &h[rows.clone()], &mut rh[rows]);
                    continue;
                }
                let r = &mut pre[..hs];
                for ((r, a), c) in r.iter_mut().zip(&x[hs..2 * hs]).zip(&hr[b * gh + hs..]) {
                    *r = a + c;
                }
                clip_all(r);
                apply_slice(f, r);
                for ((o, r), h) in rh[rows.clone()].iter_mut().zip(r.iter()).zip(&h[rows]) {
                    *o = r * h;
                }
            }
            let rs = scale_of(2 * hs..3 * hs);
            let r_t = dw.r_t.map(|(t, ld)| (t, ld, 2 * hs));
            recurrent_product(&rh, batch, hs, &dw.r[2 * hs * hs..], r_t, rs, hs, &mut rhr);
        }
        for b in (0..batch).filter(active) {
            let t = t_of(b);
            let x = &xw[g.x(t, b) / g.input * gh..][..gh];
            let hrb = &hr[b * gh..(b + 1) * gh];
            let (hb, cb) = (&mut h[b * hs..(b + 1) * hs], &mut c[b * hs..(b + 1) * hs]);
            match rc.kind {
                RecurrentKind::Lstm if fused => {
                    let peep = (!dw.peep.is_empty()).then_some(dw.peep);
                    cells::lstm(x, hrb, peep, cb, hb)
                }
                RecurrentKind::Gru if fused => {
                    let new = if rc.linear_before_reset {
                        cells::NewGate::Reset {
                            xr: &x[hs..2 * hs],
                            hr_r: &hrb[hs..2 * hs],
                            hn: &hrb[2 * hs..],
                            rb: rb_n,
                        }
                    } else {
                        cells::NewGate::Product {
                            rhr: &rhr[b * hs..(b + 1) * hs],
                            rb: rb_n,
                        }
                    };
                    cells::gru_update(&x[..hs], &hrb[..hs], &x[2 * hs..], new, hb);
                }
                RecurrentKind::Rnn => {
                    for j in 0..hs {
                        hb[j] = apply(f, clip(x[j] + hrb[j]));
                    }
                }
                RecurrentKind::Gru => {
                    // Gates in bulk (order z, r, h).
                    let gact = dw.acts[1];
                    let (z, rest) = pre.split_at_mut(hs);
                    let (r, n) = rest.split_at_mut(hs);
                    let n = &mut n[..hs];
                    for ((z, a), c) in z.iter_mut().zip(&x[..hs]).zip(hrb) {
                        *z = a + c;
                    }
                    clip_all(z);
                    apply_slice(f, z);
                    let xn = &x[2 * hs..3 * hs];
                    if rc.linear_before_reset {
                        for ((r, a), c) in r.iter_mut().zip(&x[hs..2 * hs]).zip(&hrb[hs..]) {
                            *r = a + c;
                        }
                        clip_all(r);
                        apply_slice(f, r);
                        let hn = hrb[2 * hs..].iter().zip(rb_n);
                        for (((n, a), r), (c, bias)) in n.iter_mut().zip(xn).zip(r.iter()).zip(hn) {
                            *n = a + r * (c + bias);
                        }
                    } else {
                        let hn = rhr[b * hs..(b + 1) * hs].iter().zip(rb_n);
                        for ((n, a), (c, bias)) in n.iter_mut().zip(xn).zip(hn) {
                            *n = a + c + bias;
                        }
                    }
                    clip_all(n);
                    apply_slice(gact, n);
                    for ((h, z), n) in hb.iter_mut().zip(z.iter()).zip(n.iter()) {
                        *h = (1.0 - z) * n + z * *h;
                    }
                }
                RecurrentKind::Lstm => {
                    // Gates in bulk (order i, o, f, c): peepholes of i and f
                    // read the old C, o's the new one; C = f*C + i*g(c),
                    // H = o * h(C).
                    let (gact, hact) = (dw.acts[1], dw.acts[2]);
                    for (p, (a, r)) in pre.iter_mut().zip(x.iter().zip(hrb)) {
                        *p = a + r;
                    }
                    let peep = (!dw.peep.is_empty()).then(|| dw.peep.split_at(hs));
                    {
                        let (i, rest) = pre.split_at_mut(hs);
                        let (fg, ct) = rest[hs..].split_at_mut(hs);
                        if let Some((pi, rest)) = peep {
                            let pf = &rest[hs..];
                            for j in 0..hs {
                                i[j] += pi[j] * cb[j];
                                fg[j] += pf[j] * cb[j];
                            }
                        }
                        if rc.clip.is_some() {
                            for v in i.iter_mut().chain(fg.iter_mut()).chain(ct.iter_mut()) {
                                *v = clip(*v);
                            }
                        }
                    }
                    // Without peepholes, clipping or coupled gates, `o`
                    // needs nothing of the new C: i, o and f (adjacent)
                    // take `f` in one call.
                    let together = peep.is_none() && rc.clip.is_none() && !rc.input_forget;
                    if together {
                        apply_slice(f, &mut pre[..3 * hs]);
                    }
                    let (i, rest) = pre.split_at_mut(hs);
                    let (o, rest) = rest.split_at_mut(hs);
                    let (fg, ct) = rest.split_at_mut(hs);
                    if !together {
                        apply_slice(f, i);
                        if rc.input_forget {
                            for (fg, i) in fg.iter_mut().zip(i.iter()) {
                                *fg = 1.0 - i;
                            }
                        } else {
                            apply_slice(f, fg);
                        }
                    }
                    apply_slice(gact, ct);
                    for j in 0..hs {
                        cb[j] = fg[j] * cb[j] + i[j] * ct[j];
                    }
                    if let Some((_, rest)) = peep {
                        let po = &rest[..hs];
                        for j in 0..hs {
                            o[j] += po[j] * cb[j];
                        }
                    }
                    if !together {
                        for v in o.iter_mut() {
                            *v = clip(*v);
                        }
                        apply_slice(f, o);
                    }
                    ct.copy_from_slice(cb);
                    apply_slice(hact, ct);
                    for j in 0..hs {
                        hb[j] = o[j] * ct[j];
                    }
                }
            }
            y[(t * batch + b) * hs..][..hs].copy_from_slice(hb);
        }
    }
    DirOut { y, h, c }
}

/// `X · Wᵀ + Wb + Rb` for every row of `x` (`[rows, input]`); the recurrent
/// bias of GRU's third gate stays out (it goes inside `r ⊙ (…)`).
pub(super) fn project(
    rc: &Recurrent,
    x: &[f32],
    rows: usize,
    input: usize,
    hs: usize,
    dw: &DirWeights,
) -> Vec<f32> {
    let gh = rc.kind.gates() as usize * hs;
    let mut xw = vec![0.0; rows * gh];
    if let Some(p) = dw.packed {
        super::recurrent_int8::product(x, rows, &p.w, dw.w_scale, &mut xw);
        add_bias(rc, hs, dw, &mut xw);
        return xw;
    }
    let quantized;
    let (x, xscale) = if dw.w_scale.is_empty() {
        (x, 1.0)
    } else {
        let (q, s) = quantize_u8(x);
        quantized = q;
        (&quantized[..], s)
    };
    if let Some(packed) = dw.w_packed {
        packed.product(x, rows, &mut xw, false, rlx_ir::ops::Activation::None);
        if !dw.w_scale.is_empty() {
            rescale(&mut xw, gh, xscale, dw.w_scale);
        }
        add_bias(rc, hs, dw, &mut xw);
        return xw;
    }
    // `Wᵀ` read in place where the kernel transposed it once.
    let (w, w_strides) = match dw.w_t {
        Some(t) => (t, (gh, 1)),
        None => (dw.w, (1, input)),
    };
    gemm_strided(
        rows,
        gh,
        input,
        x,
        (input, 1),
        w,
        w_strides,
        &mut xw,
        gh,
        false,
    );
    if !dw.w_scale.is_empty() {
        rescale(&mut xw, gh, xscale, dw.w_scale);
    }
    add_bias(rc, hs, dw, &mut xw);
    xw
}

/// Adds `Wb + Rb` to every row of the projection `xw`; GRU's third gate's
/// `Rb` stays out (it goes inside `r ⊙ (…)`).
fn add_bias(rc: &Recurrent, hs: usize, dw: &DirWeights, xw: &mut [f32]) {
    let gh = rc.kind.gates() as usize * hs;
    if !dw.bias.is_empty() {
        let keep_rb = |j: usize| rc.kind == RecurrentKind::Gru && j >= 2 * hs;
        let bias: Vec<f32> = (0..gh)
            .map(|j| dw.bias[j] + if keep_rb(j) { 0.0 } else { dw.bias[gh + j] })
            .collect();
        super::layout::par_rows(xw, gh, |_, row| {
            for (v, b) in row.iter_mut().zip(&bias) {
                *v += b;
            }
        });
    }
}

/// True when the direction runs backwards.
pub(super) fn reversed(rc: &Recurrent, d: usize) -> bool {
    rc.direction == RnnDirection::Reverse || d == 1
}

/// Direction `d`'s part of `v` (`n` elements each); empty stays empty.
fn part(v: &[f32], d: usize, n: usize) -> &[f32] {
    if v.is_empty() {
        v
    } else {
        &v[d * n..(d + 1) * n]
    }
}

/// `q - zp` of int8 or uint8 weights `[dirs, rows, k]` with one zero point
/// per row (`[dirs, rows]`), as f32.
pub(super) fn integers(
    q: &crate::tensor::TensorRef,
    zp: &crate::tensor::TensorRef,
) -> Result<Vec<f32>, crate::kernel::KernelError> {
    let (q, zp) = (q.to_i64s()?, zp.to_i64s()?);
    if zp.is_empty() || q.len() % zp.len() != 0 {
        return Err(crate::kernel::KernelError::Value(format!(
            "{} zero points for {} weights",
            zp.len(),
            q.len()
        )));
    }
    let k = q.len() / zp.len();
    Ok(q.iter()
        .enumerate()
        .map(|(i, &v)| (v - zp[i / k]) as f32)
        .collect())
}

/// The whole layer in f32. `ins` and `outs` as the op defines them.
pub(super) fn run(
    rc: &Recurrent,
    g: &Geom,
    lens: &[usize],
    acts: &[Act],
    ins: &[crate::tensor::TensorRef],
    outs: &mut [crate::tensor::TensorMut],
    prepared: &super::recurrent::Prepared,
) -> Result<(), crate::kernel::KernelError> {
    use crate::kernel::KernelError;
    use std::borrow::Cow;
    let p = rc.ports();
    let f32s = |i: usize| -> Result<&[f32], KernelError> { ins[i].slice::<f32>() };
    let x = f32s(0)?;
    let (w_int, r_int, w_scale, r_scale);
    let (w, r, w_scale, r_scale) = match p.quant {
        Some([ws, wz, rs, rz]) => {
            w_int = match &prepared.fixed.w_int {
                Some(w) => Cow::Borrowed(&w[..]),
                None => Cow::Owned(integers(&ins[1], &ins[wz])?),
            };
            r_int = match &prepared.fixed.r_int {
                Some(r) => Cow::Borrowed(&r[..]),
                None => Cow::Owned(integers(&ins[2], &ins[rz])?),
            };
            w_scale = f32s(ws)?;
            r_scale = f32s(rs)?;
            (&w_int[..], &r_int[..], w_scale, r_scale)
        }
        None => (f32s(1)?, f32s(2)?, &[][..], &[][..]),
    };
    let opt = |port: Option<usize>, n: usize, what: &str| -> Result<&[f32], KernelError> {
        let Some(i) = port else { return Ok(&[]) };
        let v = f32s(i)?;
        if v.len() != n {
            return Err(KernelError::Value(format!(
                "{what} has {} elements, expected {n}",
                v.len()
            )));
        }
        Ok(v)
    };
    let (hs, input, dirs) = (g.hidden, g.input, g.dirs);
    let gh = rc.kind.gates() as usize * hs;
    let state_len = dirs * g.batch * hs;
    if x.len() != g.seq * g.batch * input
        || w.len() != dirs * gh * input
        || r.len() != dirs * gh * hs
        || (p.quant.is_some() && (w_scale.len() != dirs * gh || r_scale.len() != dirs * gh))
    {
        return Err(KernelError::Value(
            "X, W or R does not match the layer's sizes".into(),
        ));
    }
    let bias = opt(p.bias, dirs * 2 * gh, "B")?;
    let h0 = opt(p.initial_h, state_len, "initial_h")?;
    let c0 = opt(p.initial_c, state_len, "initial_c")?;
    let peep = opt(p.peepholes, dirs * 3 * hs, "P")?;
    let per_dir = rc.kind.activations();
    let state = |s: &[f32], d: usize| -> Vec<f32> {
        if s.is_empty() {
            return Vec::new();
        }
        (0..g.batch)
            .flat_map(|b| s[g.state(d, b)..][..hs].iter().copied())
            .collect()
    };
    let weights: Vec<DirWeights> = (0..dirs)
        .map(|d| DirWeights {
            w: part(w, d, gh * input),
            w_t: prepared
                .fixed
                .w_t
                .get(d)
                .map(|t| &t[..])
                .filter(|t| t.len() == gh * input),
            w_packed: prepared
                .w_packed
                .get(d)
                .filter(|p| p.depth() == input && p.columns() == gh),
            r: part(r, d, gh * hs),
            r_t: prepared
                .fixed
                .r_t
                .get(d)
                .map(|t| (t.data.as_slice(), t.ld))
                .filter(|(t, ld)| *ld >= gh && t.len() == ld * hs && p.quant.is_none()),
            w_scale: part(w_scale, d, gh),
            r_scale: part(r_scale, d, gh),
            packed: prepared.fixed.packed.get(d),
            bias: part(bias, d, 2 * gh),
            peep: part(peep, d, 3 * hs),
            h0: state(h0, d),
            c0: state(c0, d),
            acts: &acts[d * per_dir..(d + 1) * per_dir],
        })
        .collect();
    let rows = g.seq * g.batch;
    // The input projections (GEMMs over every step, split over the pool),
    // then the recurrences: the two directions on two threads when a step's
    // product is too small to split, else one after the other, each step
    // split over the pool.
    let xws: Vec<Vec<f32>> = (0..dirs)
        .map(|d| project(rc, x, rows, input, hs, &weights[d]))
        .collect();
    let one = |d: usize| direction(rc, g, lens, &xws[d], &weights[d], reversed(rc, d));
    let split_steps = gh >= 2 * GEMV_CHUNK && gh * hs >= GEMV_PAR_WORK;
    let results: Vec<DirOut> = if dirs == 2 && crate::par::parallel() && !split_steps {
        let (a, b) = crate::par::join(|| one(0), || one(1));
        vec![a, b]
    } else {
        (0..dirs).map(one).collect()
    };
    if let Some(o) = outs.get_mut(0) {
        let y = o.slice::<f32>()?;
        for (d, res) in results.iter().enumerate() {
            for t in 0..g.seq {
                for b in 0..g.batch {
                    y[g.y(t, d, b)..][..hs].copy_from_slice(&res.y[(t * g.batch + b) * hs..][..hs]);
                }
            }
        }
    }
    for (k, o) in outs.iter_mut().enumerate().skip(1).take(2) {
        let v = o.slice::<f32>()?;
        v.fill(0.0);
        for (d, res) in results.iter().enumerate() {
            let src = if k == 1 { &res.h } else { &res.c };
            for b in 0..g.batch {
                // A sequence of length 0 leaves its final state zero.
                if lens[b] > 0 {
                    v[g.state(d, b)..][..hs].copy_from_slice(&src[b * hs..][..hs]);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::quantize_u8;

    #[test]
    fn activations_quantize_over_a_range_that_holds_zero() {
        // Range [0, 2.55]: scale 0.01, zero point 0; ties round to even.
        let (q, s) = quantize_u8(&[0.0, 1.0, 2.55, 0.005, 0.015]);
        assert_eq!(s, 2.55 / 255.0);
        assert_eq!(q, vec![0.0, 100.0, 255.0, 0.0, 2.0]);
        // Range [-1, 1]: 1 / scale is 127.49999 in f32, so the zero point
        // is 127; values come back as q - zp.
        let (q, s) = quantize_u8(&[-1.0, 1.0, 0.0]);
        assert_eq!(s, 2.0 / 255.0);
        assert_eq!(q, vec![-127.0, 127.0, 0.0]);
        // All zeros: scale 1.
        assert_eq!(quantize_u8(&[0.0; 3]), (vec![0.0; 3], 1.0));
    }
}
