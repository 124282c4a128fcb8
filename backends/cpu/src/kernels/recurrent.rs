//! Recurrent layers (RNN, GRU, LSTM in every direction and layout, with
//! sequence lengths, clip and peepholes), computed in f64; and the stateful
//! depthwise CausalConvWithState.
//!
//! As in ONNX Runtime, `Y` is zero past each sequence's length, and `Y_h` /
//! `Y_c` are zero for a sequence of length 0.

use std::sync::Arc;

use rlx_ir::ops::{CausalConvActivation, Recurrent, RecurrentKind, RnnActivation, RnnDirection};
use rlx_ir::Op;

use super::gemm::microkernel::Shape;
use super::gemm::packed;
use super::num::Real;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Recurrent(rc) => Ok(Box::new(
            RecurrentKernel {
                op: spec.node.op.clone(),
                label: format!("{}.{}", spec.node.op.name(), spec.inputs[0].dtype),
                prepared: prepare(rc, spec),
                steps: spec.in_dims(0).iter().take(2).product(),
            }
            .labelled(),
        )),
        Op::CausalConvWithState(_) => Ok(fn_kernel(spec, causal_conv)),
        op => Err(KernelError::Internal(format!(
            "{} is not a recurrent op",
            op.name()
        ))),
    }
}

/// An activation function with its alpha and beta.
#[derive(Debug, Clone, Copy)]
pub struct Act(pub RnnActivation, pub f64, pub f64);

impl Act {
    pub fn apply(self, x: f64) -> f64 {
        let Act(kind, a, b) = self;
        match kind {
            RnnActivation::Relu => x.max(0.0),
            RnnActivation::Tanh => x.tanh(),
            RnnActivation::Sigmoid => sigmoid(x),
            RnnActivation::Affine => a * x + b,
            RnnActivation::LeakyRelu => {
                if x >= 0.0 {
                    x
                } else {
                    a * x
                }
            }
            RnnActivation::ThresholdedRelu => {
                if x >= a {
                    x
                } else {
                    0.0
                }
            }
            RnnActivation::ScaledTanh => a * (b * x).tanh(),
            RnnActivation::HardSigmoid => (a * x + b).clamp(0.0, 1.0),
            RnnActivation::Elu => {
                if x >= 0.0 {
                    x
                } else {
                    a * x.exp_m1()
                }
            }
            RnnActivation::Softsign => x / (1.0 + x.abs()),
            RnnActivation::Softplus => {
                // log(1 + e^x) without overflow for large x.
                x.max(0.0) + (-x.abs()).exp().ln_1p()
            }
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// One direction's weights and settings.
pub struct Cell<'a> {
    pub kind: RecurrentKind,
    pub hidden: usize,
    pub input: usize,
    /// `[gates*hidden, input]`.
    pub w: &'a [f64],
    /// `[gates*hidden, hidden]`.
    pub r: &'a [f64],
    /// `[2*gates*hidden]`: `Wb` then `Rb`; empty for no bias.
    pub bias: &'a [f64],
    /// `[3*hidden]` peepholes `i, o, f`; empty for none.
    pub peep: &'a [f64],
    /// `f`, `g`, `h` (as many as the kind uses).
    pub acts: &'a [Act],
    pub clip: Option<f64>,
    pub linear_before_reset: bool,
    pub input_forget: bool,
}

impl Cell<'_> {
    fn clip(&self, x: f64) -> f64 {
        match self.clip {
            Some(c) => x.clamp(-c, c),
            None => x,
        }
    }

    fn bias(&self, rec: bool, j: usize) -> f64 {
        let gh = self.kind.gates() as usize * self.hidden;
        self.bias
            .get(usize::from(rec) * gh + j)
            .copied()
            .unwrap_or(0.0)
    }

    fn peep(&self, gate: usize, j: usize) -> f64 {
        self.peep
            .get(gate * self.hidden + j)
            .copied()
            .unwrap_or(0.0)
    }

    /// Row `j` of `m` (row length `n`) times `v`.
    fn dot(m: &[f64], n: usize, j: usize, v: &[f64]) -> f64 {
        m[j * n..(j + 1) * n]
            .iter()
            .zip(v)
            .map(|(a, b)| a * b)
            .sum()
    }

    /// One time step: updates `h` (and `c` for LSTM) from `x`.
    pub fn step(&self, x: &[f64], h: &mut [f64], c: &mut [f64]) {
        let (hs, is) = (self.hidden, self.input);
        let gh = self.kind.gates() as usize * hs;
        let xw: Vec<f64> = (0..gh)
            .map(|j| Self::dot(self.w, is, j, x) + self.bias(false, j))
            .collect();
        let hr: Vec<f64> = (0..gh)
            .map(|j| Self::dot(self.r, hs, j, h) + self.bias(true, j))
            .collect();
        let f = self.acts[0];
        match self.kind {
            RecurrentKind::Rnn => {
                for j in 0..hs {
                    h[j] = f.apply(self.clip(xw[j] + hr[j]));
                }
            }
            RecurrentKind::Gru => {
                let g = self.acts[1];
                let z: Vec<f64> = (0..hs).map(|j| f.apply(self.clip(xw[j] + hr[j]))).collect();
                let r: Vec<f64> = (0..hs)
                    .map(|j| f.apply(self.clip(xw[hs + j] + hr[hs + j])))
                    .collect();
                let rh: Vec<f64> = r.iter().zip(h.iter()).map(|(a, b)| a * b).collect();
                for j in 0..hs {
                    let k = 2 * hs + j;
                    let pre = if self.linear_before_reset {
                        xw[k] + r[j] * hr[k]
                    } else {
                        xw[k] + Self::dot(self.r, hs, k, &rh) + self.bias(true, k)
                    };
                    let hh = g.apply(self.clip(pre));
                    h[j] = (1.0 - z[j]) * hh + z[j] * h[j];
                }
            }
            RecurrentKind::Lstm => {
                let (g, ha) = (self.acts[1], self.acts[2]);
                for j in 0..hs {
                    let pre = |gate: usize| xw[gate * hs + j] + hr[gate * hs + j];
                    let i = f.apply(self.clip(pre(0) + self.peep(0, j) * c[j]));
                    let fg = if self.input_forget {
                        1.0 - i
                    } else {
                        f.apply(self.clip(pre(2) + self.peep(2, j) * c[j]))
                    };
                    let ct = g.apply(self.clip(pre(3)));
                    c[j] = fg * c[j] + i * ct;
                    let o = f.apply(self.clip(pre(1) + self.peep(1, j) * c[j]));
                    h[j] = o * ha.apply(c[j]);
                }
            }
        }
    }
}

/// Sizes of a recurrent layer run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geom {
    pub seq: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
    pub dirs: usize,
    pub layout1: bool,
}

impl Geom {
    /// Offset of `X[t, b, :]`.
    pub fn x(&self, t: usize, b: usize) -> usize {
        let row = if self.layout1 {
            b * self.seq + t
        } else {
            t * self.batch + b
        };
        row * self.input
    }

    /// Offset of `Y[t, d, b, :]`.
    pub fn y(&self, t: usize, d: usize, b: usize) -> usize {
        let row = if self.layout1 {
            (b * self.seq + t) * self.dirs + d
        } else {
            (t * self.dirs + d) * self.batch + b
        };
        row * self.hidden
    }

    /// Offset of `Y_h[d, b, :]` (and of the initial and cell states).
    pub fn state(&self, d: usize, b: usize) -> usize {
        let row = if self.layout1 {
            b * self.dirs + d
        } else {
            d * self.batch + b
        };
        row * self.hidden
    }
}

/// A recurrent layer, with its constant weights prepared once at build.
struct RecurrentKernel {
    op: Op,
    label: String,
    prepared: Prepared,
    /// Rows of the input projection: every time step of every batch.
    steps: usize,
}

/// Weights made ready when the kernel is built, from constant operands: the
/// input weights of each direction packed (or transposed), so the
/// projection over all time steps does not repack `W` on every run; and for
/// a quantized layer, `q - zero_point` of W and R as f32, so a run does not
/// widen a million integers. Both parts are kept in the plan's store
/// ([`crate::packs`]): the plans of other input shapes share them, the
/// packing where their projections choose the same tile shape.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    pub fixed: Arc<Fixed>,
    /// W per direction packed as the right operand of the projection
    /// ([`super::weights_gemm`]); empty when W is not constant or the CPU
    /// has no microkernels (then `fixed.w_t` serves).
    pub w_packed: Arc<Vec<super::gemm::weights::PackedW>>,
}

/// What of the weights does not depend on the input shapes.
#[derive(Debug, Default)]
pub(super) struct Fixed {
    /// `[input, gates*hidden]` per direction, where the CPU has no
    /// microkernels; empty when W is not constant.
    pub w_t: Vec<Vec<f32>>,
    /// A quantized layer's W and R as integers in f32, when constant.
    pub w_int: Option<Vec<f32>>,
    pub r_int: Option<Vec<f32>>,
    /// `R` per direction transposed for the step's product at batch 1
    /// ([`super::gemm::gemv::columns`]); empty when R is not a constant of
    /// f32 or the layer is quantized.
    pub r_t: Vec<RowsOf>,
    /// A quantized LSTM's W and R per direction as packed signed bytes
    /// ([`super::recurrent_int8`]); empty where they do not fit or the CPU
    /// has no VNNI.
    pub packed: Vec<super::recurrent_int8::PackedDir>,
}

impl RecurrentKernel {
    /// Names the integer products of a packed quantized layer.
    fn labelled(mut self) -> RecurrentKernel {
        if !self.prepared.fixed.packed.is_empty() {
            self.label += if super::int8_gemm::vnni() {
                " int8 (vnni)"
            } else {
                " int8 (avx2)"
            };
        }
        self
    }
}

impl Kernel for RecurrentKernel {
    fn label(&self) -> String {
        self.label.clone()
    }

    /// The input projections run one after another on the calling thread;
    /// a quantized one's row blocks on any.
    fn per_thread(&self) -> crate::scratch::PerThread {
        let prepared = &self.prepared;
        let caller = prepared
            .w_packed
            .iter()
            .map(|w| w.scratch(self.steps))
            .max();
        let each = prepared
            .fixed
            .packed
            .iter()
            .map(|d| super::recurrent_int8::product_scratch(self.steps, &d.w));
        crate::scratch::PerThread {
            caller: caller.unwrap_or(0),
            each: each.max().unwrap_or(0),
        }
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        _: &mut [u8],
    ) -> Result<(), KernelError> {
        recurrent_with(&self.op, ins, outs, &self.prepared)
    }
}

/// The layer's prepared weights, from the spec's store where a plan of
/// other input shapes made them from the same constant operands.
fn prepare(rc: &Recurrent, spec: &Spec) -> Prepared {
    let constant = |port: usize| spec.consts.get(port).and_then(Option::as_ref);
    let quant = rc.ports().quant;
    let mut ports = vec![1, 2];
    if let Some([_, wz, _, rz]) = quant {
        ports.extend([wz, rz]);
    }
    let mut present = 0;
    let mut sources = Vec::new();
    for (bit, &port) in ports.iter().enumerate() {
        if let Some(t) = constant(port) {
            present |= 1 << bit;
            sources.push(t);
        }
    }
    let kept = |what, params: &[usize], make: &dyn Fn() -> Fixed| match sources.is_empty() {
        true => Arc::new(make()),
        false => spec
            .packs
            .get_or_make(what, params, &sources, || Some(make()))
            .unwrap_or_default(),
    };
    let params = [present, rc.kind as usize, usize::from(rc.quantized)];
    let fixed = kept("recurrent.fixed", &params, &|| prepare_fixed(rc, spec));
    // The projection's rows (every time step of every batch) choose the
    // tile shape W is packed for.
    let steps = spec.in_dims(0).iter().take(2).product::<usize>();
    let w_packed = match constant(1) {
        Some(t) if packed::available() => {
            let gh = t.dims().get(1).copied().unwrap_or(0);
            let shape = Shape::for_product(steps.max(1), gh.max(1));
            let params = [present, usize::from(rc.quantized), shape.mr, shape.nv];
            spec.packs
                .get_or_make("recurrent.w", &params, &sources, || {
                    Some(match (&fixed.w_int, rc.quantized) {
                        (Some(w), _) => packed_w(w, t.dims(), steps),
                        (None, false) => t
                            .as_slice::<f32>()
                            .map_or_else(|_| Vec::new(), |w| packed_w(w, t.dims(), steps)),
                        (None, true) => Vec::new(),
                    })
                })
                .unwrap_or_default()
        }
        _ => Arc::default(),
    };
    Prepared { fixed, w_packed }
}

/// What of the weights does not depend on the input shapes.
fn prepare_fixed(rc: &Recurrent, spec: &Spec) -> Fixed {
    let constant = |port: usize| spec.consts.get(port).and_then(Option::as_ref);
    let (mut w_int, mut r_int) = (None, None);
    if let Some([_, wz, _, rz]) = rc.ports().quant {
        // A bad operand is left for the run to report.
        let ints = |q: usize, zp: usize| {
            let (q, zp) = (constant(q)?, constant(zp)?);
            super::recurrent_f32::integers(&TensorRef::of(q), &TensorRef::of(zp)).ok()
        };
        w_int = ints(1, wz);
        r_int = ints(2, rz);
    }
    let w_t = match (&w_int, constant(1)) {
        _ if packed::available() => Vec::new(),
        (Some(w), Some(t)) => transposed(w, t.dims()),
        (None, Some(t)) if !rc.quantized => t
            .as_slice::<f32>()
            .map_or_else(|_| Vec::new(), |w| transposed(w, t.dims())),
        _ => Vec::new(),
    };
    // One direction's bytes of R.
    let r_bytes =
        |t: &rlx_ir::Tensor| t.bytes().len() / t.dims().first().copied().unwrap_or(1).max(1);
    let r_t = match constant(2) {
        Some(t) if !rc.quantized && r_bytes(t) <= R_T_MAX_BYTES => t.as_slice::<f32>().map_or_else(
            |_| Vec::new(),
            |r| per_direction(r, t.dims(), RowsOf::transposed),
        ),
        _ => Vec::new(),
    };
    let packed = match (&w_int, &r_int, constant(1), constant(2)) {
        (Some(w), Some(r), Some(wt), Some(rt)) if rc.kind == RecurrentKind::Lstm => {
            match (wt.dims(), rt.dims()) {
                (&[dirs, gh, input], &[_, _, hidden]) => {
                    super::recurrent_int8::pack(w, r, dirs, gh, input, hidden)
                }
                _ => None,
            }
        }
        _ => None,
    };
    Fixed {
        w_t,
        w_int,
        r_int,
        r_t,
        packed: packed.unwrap_or_default(),
    }
}

/// `f(W_d, gh, input)` for each direction `d` of `W [dirs, gh, input]`;
/// empty unless `W` has those dims and every direction gives a value.
fn per_direction<T>(
    w: &[f32],
    dims: &[usize],
    f: impl Fn(&[f32], usize, usize) -> Option<T>,
) -> Vec<T> {
    let &[dirs, gh, input] = dims else {
        return Vec::new();
    };
    if gh * input == 0 || w.len() != dirs * gh * input {
        return Vec::new();
    }
    w.chunks_exact(gh * input)
        .map(|wd| f(wd, gh, input))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default()
}

/// `W` per direction as the right operand of the projection of `steps` rows.
fn packed_w(w: &[f32], dims: &[usize], steps: usize) -> Vec<super::gemm::weights::PackedW> {
    per_direction(w, dims, |wd, gh, input| {
        super::gemm::weights::PackedW::new(wd, input, gh, (1, input), steps)
    })
}

/// Bytes of one direction's `R` up to which the step's product reads it
/// transposed ([`RowsOf`]): past L2 the transposed product streams `R` in
/// strided blocks the prefetchers follow worse than the rows' one stream
/// (one thread: an LSTM of hidden 512, 4 MiB, 3.35-3.51 -> 3.64-4.14 ms;
/// a GRU of hidden 384, 1.7 MiB, 0.67-0.82 -> 0.46-0.73).
const R_T_MAX_BYTES: usize = 2 << 20;

/// A matrix in rows that start on cache lines: `rows` rows of `cols`
/// floats, `ld` apart (`cols` rounded up to 16). Every vector load of a
/// product streaming it from L2 then touches one line, not two.
#[derive(Debug)]
pub(super) struct RowsOf {
    pub data: super::gemm::microkernel::AlignedBuf,
    pub ld: usize,
}

impl RowsOf {
    /// `m` (`[rows, k]`, row-major) transposed to `[k, rows]`.
    fn transposed(m: &[f32], rows: usize, k: usize) -> Option<RowsOf> {
        let ld = rows.next_multiple_of(16);
        let mut data = super::gemm::microkernel::AlignedBuf::zeroed(k * ld);
        let t = data.as_mut_slice();
        for (j, row) in m.chunks_exact(k).take(rows).enumerate() {
            for (kk, &v) in row.iter().enumerate() {
                t[kk * ld + j] = v;
            }
        }
        Some(RowsOf { data, ld })
    }
}

/// `W` per direction transposed: `[dirs, gh, k]` to `[k, gh]` each.
fn transposed(w: &[f32], dims: &[usize]) -> Vec<Vec<f32>> {
    per_direction(w, dims, |wd, gh, input| {
        let mut t = vec![0f32; gh * input];
        for (j, row) in wd.chunks_exact(input).enumerate() {
            for (k, &v) in row.iter().enumerate() {
                t[k * gh + j] = v;
            }
        }
        Some(t)
    })
}

fn recurrent_with(
    op: &Op,
    ins: &[TensorRef],
    outs: &mut [TensorMut],
    prepared: &Prepared,
) -> Result<(), KernelError> {
    let Op::Recurrent(rc) = op else {
        return Err(KernelError::Internal("not a recurrent layer".into()));
    };
    let xd = ins[0].dims;
    let [a0, a1, input] = xd[..] else {
        return Err(KernelError::Value("X must be rank 3".into()));
    };
    let layout1 = rc.layout == 1;
    let (seq, batch) = if layout1 { (a1, a0) } else { (a0, a1) };
    let g = Geom {
        seq,
        batch,
        input,
        hidden: rc.hidden_size as usize,
        dirs: rc.direction.count(),
        layout1,
    };
    let gh = rc.kind.gates() as usize * g.hidden;
    let p = rc.ports();
    let lens = match p.seq_lens {
        Some(i) => ins[i].to_i64s()?,
        None => vec![seq as i64; batch],
    };
    if lens.len() != batch || lens.iter().any(|&l| l < 0 || l as usize > seq) {
        return Err(KernelError::Value(format!(
            "sequence_lens {lens:?} must hold {batch} values in 0..={seq}"
        )));
    }
    let per_dir = rc.kind.activations();
    let acts: Vec<Act> = rc
        .activations
        .iter()
        .zip(&rc.activation_alpha)
        .zip(&rc.activation_beta)
        .map(|((&k, &a), &b)| Act(k, a as f64, b as f64))
        .collect();
    if acts.len() != per_dir * g.dirs {
        return Err(KernelError::Value("wrong number of activations".into()));
    }
    if rc.quantized || ins[..3].iter().all(|t| t.dtype == rlx_ir::DType::F32) {
        let lens: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
        return super::recurrent_f32::run(rc, &g, &lens, &acts, ins, outs, prepared);
    }
    let read = |port: Option<usize>, want: usize, what: &str| -> Result<Vec<f64>, KernelError> {
        let Some(i) = port else { return Ok(Vec::new()) };
        let v = ins[i].to_f64s()?;
        if v.len() != want {
            return Err(KernelError::Value(format!(
                "{what} has {} elements, expected {want}",
                v.len()
            )));
        }
        Ok(v)
    };
    let x = read(Some(0), seq * batch * input, "X")?;
    let w = read(Some(1), g.dirs * gh * input, "W")?;
    let r = read(Some(2), g.dirs * gh * g.hidden, "R")?;
    let bias = read(p.bias, g.dirs * 2 * gh, "B")?;
    let state_len = g.dirs * batch * g.hidden;
    let h0 = read(p.initial_h, state_len, "initial_h")?;
    let c0 = read(p.initial_c, state_len, "initial_c")?;
    let peep = read(p.peepholes, g.dirs * 3 * g.hidden, "P")?;
    let mut y = vec![0.0; seq * g.dirs * batch * g.hidden];
    let mut yh = vec![0.0; state_len];
    let mut yc = vec![0.0; state_len];
    let hs = g.hidden;
    for d in 0..g.dirs {
        let slice = |v: &'_ [f64], n: usize| -> Vec<f64> {
            if v.is_empty() {
                Vec::new()
            } else {
                v[d * n..(d + 1) * n].to_vec()
            }
        };
        let (wd, rd) = (slice(&w, gh * input), slice(&r, gh * hs));
        let (bd, pd) = (slice(&bias, 2 * gh), slice(&peep, 3 * hs));
        let cell = Cell {
            kind: rc.kind,
            hidden: hs,
            input,
            w: &wd,
            r: &rd,
            bias: &bd,
            peep: &pd,
            acts: &acts[d * per_dir..(d + 1) * per_dir],
            clip: rc.clip.map(f64::from),
            linear_before_reset: rc.linear_before_reset,
            input_forget: rc.input_forget,
        };
        let reverse = rc.direction == RnnDirection::Reverse || d == 1;
        for (b, &len) in lens.iter().enumerate() {
            let len = len as usize;
            let s = g.state(d, b);
            let mut h = if h0.is_empty() {
                vec![0.0; hs]
            } else {
                h0[s..s + hs].to_vec()
            };
            let mut c = if c0.is_empty() {
                vec![0.0; hs]
            } else {
                c0[s..s + hs].to_vec()
            };
            for k in 0..len {
                let t = if reverse { len - 1 - k } else { k };
                let xo = g.x(t, b);
                cell.step(&x[xo..xo + input], &mut h, &mut c);
                let yo = g.y(t, d, b);
                y[yo..yo + hs].copy_from_slice(&h);
            }
            if len > 0 {
                yh[s..s + hs].copy_from_slice(&h);
                yc[s..s + hs].copy_from_slice(&c);
            }
        }
    }
    for (o, vals) in outs.iter_mut().zip([y, yh, yc]) {
        o.store_f64s(&vals)?;
    }
    Ok(())
}

fn causal_conv_typed<T: Real>(
    silu: bool,
    ins: &[TensorRef],
    bias: Option<usize>,
    past: Option<usize>,
    outs: &mut [TensorMut],
) -> Result<(), KernelError> {
    let [b, ch, l] = ins[0].dims[..] else {
        return Err(KernelError::Value("input must be rank 3".into()));
    };
    let k = ins[1].dims.get(2).copied().unwrap_or(0);
    if k == 0 || ins[1].dims != [ch, 1, k] {
        return Err(KernelError::Value(format!(
            "weight {:?} does not match {ch} channels",
            ins[1].dims
        )));
    }
    let x = ins[0].slice::<T>()?;
    let w = ins[1].slice::<T>()?;
    let bias = bias.map(|i| ins[i].slice::<T>()).transpose()?;
    let past = past.map(|i| ins[i].slice::<T>()).transpose()?;
    if bias.is_some_and(|v| v.len() != ch) || past.is_some_and(|v| v.len() != b * ch * (k - 1)) {
        return Err(KernelError::Value(
            "bias or past_state does not match the input".into(),
        ));
    }
    let (y, rest) = outs.split_at_mut(1);
    let y = y[0].slice::<T>()?;
    let state = rest[0].slice::<T>()?;
    let mut padded = vec![T::from_f64(0.0); k - 1 + l];
    for row in 0..b * ch {
        let c = row % ch;
        if let Some(p) = past {
            padded[..k - 1].copy_from_slice(&p[row * (k - 1)..(row + 1) * (k - 1)]);
        }
        padded[k - 1..].copy_from_slice(&x[row * l..(row + 1) * l]);
        let wc = &w[c * k..(c + 1) * k];
        let b0 = bias.map_or(0.0, |v| v[c].to_f64());
        for t in 0..l {
            let acc: f64 = (0..k)
                .map(|j| wc[j].to_f64() * padded[t + j].to_f64())
                .sum();
            // The convolution rounds to the dtype before the activation, as ONNX's reference does.
            let v = T::from_f64(acc + b0);
            y[row * l + t] = if silu {
                let v = v.to_f64();
                T::from_f64(v * sigmoid(v))
            } else {
                v
            };
        }
        state[row * (k - 1)..(row + 1) * (k - 1)].copy_from_slice(&padded[l..]);
    }
    Ok(())
}

fn causal_conv(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::CausalConvWithState(cc) = op else {
        return Err(KernelError::Internal("not a causal convolution".into()));
    };
    let silu = cc.activation == CausalConvActivation::Silu;
    let bias = cc.has_bias.then_some(2);
    let past = cc.past_port();
    with_dtype!(ins[0].dtype, T => causal_conv_typed::<T>(silu, ins, bias, past, outs), float)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::Recurrent;
    use rlx_ir::{DType, Tensor};

    fn act(k: RnnActivation) -> Act {
        Act(k, 0.0, 0.0)
    }

    fn cell<'a>(kind: RecurrentKind, w: &'a [f64], r: &'a [f64], acts: &'a [Act]) -> Cell<'a> {
        Cell {
            kind,
            hidden: 1,
            input: 1,
            w,
            r,
            bias: &[],
            peep: &[],
            acts,
            clip: None,
            linear_before_reset: false,
            input_forget: false,
        }
    }

    #[test]
    fn activations_match_their_formulas() {
        assert_eq!(Act(RnnActivation::Affine, 2.0, 1.0).apply(3.0), 7.0);
        assert_eq!(Act(RnnActivation::LeakyRelu, 0.1, 0.0).apply(-2.0), -0.2);
        assert_eq!(Act(RnnActivation::HardSigmoid, 0.2, 0.5).apply(10.0), 1.0);
        assert_eq!(act(RnnActivation::Softsign).apply(1.0), 0.5);
        assert!((act(RnnActivation::Softplus).apply(0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(act(RnnActivation::Softplus).apply(1000.0), 1000.0);
    }

    #[test]
    fn rnn_step_with_clip() {
        let acts = [Act(RnnActivation::Affine, 1.0, 0.0)];
        let mut c = cell(RecurrentKind::Rnn, &[2.0], &[0.5], &acts);
        let mut h = [4.0];
        c.step(&[1.0], &mut h, &mut []);
        assert_eq!(h, [4.0]); // 2*1 + 0.5*4
        c.clip = Some(1.5);
        c.step(&[1.0], &mut h, &mut []);
        assert_eq!(h, [1.5]);
    }

    #[test]
    fn gru_reset_placement() {
        // W = [z, r, h] = [0, 0, 1]; R = [0, 0, 2]; Rb(h) = 1; f = affine(1, 0)
        // so z = 0 and r = 0 + 0 = pre-activation 0.
        let acts = [
            Act(RnnActivation::Affine, 0.0, 0.5),
            Act(RnnActivation::Affine, 1.0, 0.0),
        ];
        let bias = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let (w, r) = ([0.0, 0.0, 1.0], [0.0, 0.0, 2.0]);
        let mut c = cell(RecurrentKind::Gru, &w, &r, &acts);
        c.bias = &bias;
        // z = r = 0.5. Default: hh = x + (r*h)*2 + 1 = 1 + 3 + 1 = 5.
        let mut h = [3.0];
        c.step(&[1.0], &mut h, &mut []);
        assert_eq!(h, [0.5 * 5.0 + 0.5 * 3.0]);
        // Linear before reset: hh = x + r*(h*2 + 1) = 1 + 0.5*7 = 4.5.
        c.linear_before_reset = true;
        let mut h = [3.0];
        c.step(&[1.0], &mut h, &mut []);
        assert_eq!(h, [0.5 * 4.5 + 0.5 * 3.0]);
    }

    #[test]
    fn lstm_step_with_peepholes_and_coupled_gates() {
        // All gates affine(1, 0), W = 1 for every gate, no recurrence.
        let acts = [Act(RnnActivation::Affine, 1.0, 0.0); 3];
        let (w, r) = ([0.5, 0.25, 0.125, 1.0], [0.0; 4]);
        let peep = [1.0, 1.0, 1.0];
        let mut c = cell(RecurrentKind::Lstm, &w, &r, &acts);
        c.peep = &peep;
        let (mut h, mut cs) = ([0.0], [2.0]);
        c.step(&[1.0], &mut h, &mut cs);
        // i = 0.5 + 2 = 2.5, f = 0.125 + 2 = 2.125, ct = 1, C = 2.125*2 + 2.5 = 6.75,
        // o = 0.25 + 6.75 = 7, H = 7 * 6.75.
        assert_eq!(cs, [6.75]);
        assert_eq!(h, [7.0 * 6.75]);
        c.input_forget = true;
        let (mut h, mut cs) = ([0.0], [2.0]);
        c.step(&[1.0], &mut h, &mut cs);
        // f = 1 - i = -1.5, C = -3 + 2.5 = -0.5, o = 0.25 - 0.5.
        assert_eq!(cs, [-0.5]);
        assert_eq!(h, [-0.25 * -0.5]);
    }

    fn run(op: &Op, ins: &[Tensor], out_dims: &[&[usize]]) -> Vec<Vec<f32>> {
        run_prepared(op, ins, out_dims, &Prepared::default())
    }

    /// [`run`] with weights prepared as a kernel prepares them.
    fn run_prepared(
        op: &Op,
        ins: &[Tensor],
        out_dims: &[&[usize]],
        prepared: &Prepared,
    ) -> Vec<Vec<f32>> {
        let refs: Vec<TensorRef> = ins.iter().map(TensorRef::of).collect();
        let mut bufs: Vec<Vec<f32>> = out_dims
            .iter()
            .map(|d| vec![0.0; d.iter().product()])
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
        match op {
            Op::Recurrent(_) => recurrent_with(op, &refs, &mut outs, prepared),
            _ => causal_conv(op, &refs, &mut outs),
        }
        .unwrap();
        drop(outs);
        bufs
    }

    fn f32t(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f32(dims, v).unwrap()
    }

    #[test]
    fn reverse_rnn_with_sequence_lengths() {
        // h_t = x_t + h_{t-1}, seq 3, batch 2 with lengths 2 and 0.
        let op = Op::Recurrent(Recurrent {
            kind: RecurrentKind::Rnn,
            hidden_size: 1,
            direction: RnnDirection::Reverse,
            activations: vec![RnnActivation::Affine],
            activation_alpha: vec![1.0],
            activation_beta: vec![0.0],
            clip: None,
            layout: 0,
            linear_before_reset: false,
            input_forget: false,
            has_bias: false,
            has_seq_lens: true,
            has_initial_h: false,
            has_initial_c: false,
            has_peepholes: false,
            num_outputs: 2,
            quantized: false,
        });
        let lens = Tensor::from_slice(DType::I32, &[2], &[2i32, 0]).unwrap();
        let ins = [
            f32t(&[3, 2, 1], &[1.0, 10.0, 2.0, 20.0, 4.0, 40.0]),
            f32t(&[1, 1, 1], &[1.0]),
            f32t(&[1, 1, 1], &[1.0]),
            lens,
        ];
        let out = run(&op, &ins, &[&[3, 1, 2, 1], &[1, 2, 1]]);
        // Batch 0 runs t=1 then t=0: h = 2, then 3. Batch 1 and t=2 stay zero.
        assert_eq!(out[0], vec![3.0, 0.0, 2.0, 0.0, 0.0, 0.0]);
        assert_eq!(out[1], vec![3.0, 0.0]);
    }

    /// Runs a recurrent op on f64 copies of `ins` (the reference path).
    fn run_f64(op: &Op, ins: &[Tensor], out_dims: &[&[usize]]) -> Vec<Vec<f64>> {
        let ins: Vec<Tensor> = ins
            .iter()
            .map(|t| match t.dtype() {
                DType::F32 => {
                    let v: Vec<f64> = t
                        .as_slice::<f32>()
                        .unwrap()
                        .iter()
                        .map(|&x| x as f64)
                        .collect();
                    Tensor::from_slice(DType::F64, t.dims(), &v).unwrap()
                }
                _ => t.clone(),
            })
            .collect();
        let refs: Vec<TensorRef> = ins.iter().map(TensorRef::of).collect();
        let mut bufs: Vec<Vec<f64>> = out_dims
            .iter()
            .map(|d| vec![0.0; d.iter().product()])
            .collect();
        let mut outs: Vec<TensorMut> = bufs
            .iter_mut()
            .zip(out_dims)
            .map(|(b, d)| TensorMut {
                dtype: DType::F64,
                dims: d,
                bytes: bytemuck::cast_slice_mut(b),
            })
            .collect();
        recurrent_with(op, &refs, &mut outs, &Prepared::default()).unwrap();
        drop(outs);
        bufs
    }

    /// The f32 path (one GEMM for the input projection, fused gates) agrees
    /// with the f64 reference in every kind, direction and layout, with
    /// sequence lengths, initial states, peepholes, clip and both GRU forms.
    /// Seeded values in `[-scale/2, scale/2)`, `n` at a time.
    fn values(mut seed: u64, scale: f32) -> impl FnMut(usize) -> Vec<f32> {
        move |n| {
            (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
                })
                .collect()
        }
    }

    /// The default activations of `kind`, one direction's.
    fn default_acts(kind: RecurrentKind) -> Vec<RnnActivation> {
        match kind {
            RecurrentKind::Rnn => vec![RnnActivation::Tanh],
            RecurrentKind::Gru => vec![RnnActivation::Sigmoid, RnnActivation::Tanh],
            RecurrentKind::Lstm => vec![
                RnnActivation::Sigmoid,
                RnnActivation::Tanh,
                RnnActivation::Tanh,
            ],
        }
    }

    #[test]
    fn f32_path_matches_the_reference() {
        let mut rnd = values(7, 1.2);
        let (seq, batch, input, hs) = (5, 3, 4, 6);
        for kind in [RecurrentKind::Rnn, RecurrentKind::Gru, RecurrentKind::Lstm] {
            for direction in [
                RnnDirection::Forward,
                RnnDirection::Reverse,
                RnnDirection::Bidirectional,
            ] {
                for (layout, lbr, extras) in [
                    (0, false, false),
                    (1, true, true),
                    (0, true, true),
                    (1, false, false),
                ] {
                    let dirs = direction.count();
                    let gates = kind.gates() as usize;
                    let acts: Vec<RnnActivation> =
                        (0..dirs).flat_map(|_| default_acts(kind)).collect();
                    let n = acts.len();
                    let lstm = kind == RecurrentKind::Lstm;
                    let op = Op::Recurrent(Recurrent {
                        kind,
                        hidden_size: hs as i64,
                        direction,
                        activations: acts,
                        activation_alpha: vec![0.0; n],
                        activation_beta: vec![0.0; n],
                        clip: extras.then_some(0.9),
                        layout,
                        linear_before_reset: lbr && kind == RecurrentKind::Gru,
                        input_forget: false,
                        has_bias: true,
                        has_seq_lens: extras,
                        has_initial_h: extras,
                        has_initial_c: extras && lstm,
                        has_peepholes: extras && lstm,
                        num_outputs: if lstm { 3 } else { 2 },
                        quantized: false,
                    });
                    let xd = if layout == 1 {
                        [batch, seq, input]
                    } else {
                        [seq, batch, input]
                    };
                    let sd = if layout == 1 {
                        [batch, dirs, hs]
                    } else {
                        [dirs, batch, hs]
                    };
                    let mut ins = vec![
                        f32t(&xd, &rnd(seq * batch * input)),
                        f32t(&[dirs, gates * hs, input], &rnd(dirs * gates * hs * input)),
                        f32t(&[dirs, gates * hs, hs], &rnd(dirs * gates * hs * hs)),
                        f32t(&[dirs, 2 * gates * hs], &rnd(dirs * 2 * gates * hs)),
                    ];
                    if extras {
                        ins.push(Tensor::from_slice(DType::I32, &[batch], &[5i32, 0, 3]).unwrap());
                        ins.push(f32t(&sd, &rnd(dirs * batch * hs)));
                        if lstm {
                            ins.push(f32t(&sd, &rnd(dirs * batch * hs)));
                            ins.push(f32t(&[dirs, 3 * hs], &rnd(dirs * 3 * hs)));
                        }
                    }
                    let yd = if layout == 1 {
                        vec![batch, seq, dirs, hs]
                    } else {
                        vec![seq, dirs, batch, hs]
                    };
                    let mut dims: Vec<&[usize]> = vec![&yd, &sd];
                    if lstm {
                        dims.push(&sd);
                    }
                    let fast = run(&op, &ins, &dims);
                    let reference = run_f64(&op, &ins, &dims);
                    for (o, (a, b)) in fast.iter().zip(&reference).enumerate() {
                        for (i, (x, y)) in a.iter().zip(b).enumerate() {
                            assert!(
                                (*x as f64 - y).abs() < 1e-5,
                                "{kind:?} {direction:?} layout {layout} lbr {lbr} extras {extras}: output {o}[{i}] {x} vs {y}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// At batch 1 with `R` transposed (as a kernel with constant weights
    /// prepares it), each kind agrees with the f64 reference, at hidden
    /// sizes whose gates end inside a register and past a block of 16, the
    /// default cells (in registers where the CPU has AVX-512) with and
    /// without peepholes.
    #[test]
    fn batch_one_with_r_transposed_matches_the_reference() {
        let mut rnd = values(11, 0.4);
        let (seq, input) = (4, 5);
        for (kind, hs, lbr, peep) in [
            (RecurrentKind::Rnn, 25, false, false),
            (RecurrentKind::Gru, 25, false, false),
            (RecurrentKind::Gru, 90, false, false),
            (RecurrentKind::Gru, 90, true, false),
            (RecurrentKind::Lstm, 25, false, false),
            (RecurrentKind::Lstm, 25, false, true),
            (RecurrentKind::Lstm, 70, false, true),
        ] {
            let gates = kind.gates() as usize;
            let lstm = kind == RecurrentKind::Lstm;
            let acts = default_acts(kind);
            let n = acts.len();
            let op = Op::Recurrent(Recurrent {
                kind,
                hidden_size: hs as i64,
                direction: RnnDirection::Bidirectional,
                activations: [acts.clone(), acts].concat(),
                activation_alpha: vec![0.0; 2 * n],
                activation_beta: vec![0.0; 2 * n],
                clip: None,
                layout: 0,
                linear_before_reset: lbr,
                input_forget: false,
                has_bias: true,
                has_seq_lens: false,
                has_initial_h: false,
                has_initial_c: false,
                has_peepholes: peep,
                num_outputs: if lstm { 3 } else { 2 },
                quantized: false,
            });
            let r_dims = [2, gates * hs, hs];
            let r = rnd(2 * gates * hs * hs);
            let mut ins = vec![
                f32t(&[seq, 1, input], &rnd(seq * input)),
                f32t(&[2, gates * hs, input], &rnd(2 * gates * hs * input)),
                f32t(&r_dims, &r),
                f32t(&[2, 2 * gates * hs], &rnd(2 * 2 * gates * hs)),
            ];
            if peep {
                ins.push(f32t(&[2, 3 * hs], &rnd(2 * 3 * hs)));
            }
            let prepared = Prepared {
                fixed: Arc::new(Fixed {
                    r_t: per_direction(&r, &r_dims, RowsOf::transposed),
                    ..Fixed::default()
                }),
                w_packed: Arc::default(),
            };
            assert_eq!(prepared.fixed.r_t.len(), 2);
            let (yd, sd) = (vec![seq, 2, 1, hs], vec![2, 1, hs]);
            let mut dims: Vec<&[usize]> = vec![&yd, &sd];
            if lstm {
                dims.push(&sd);
            }
            let bufs = run_prepared(&op, &ins, &dims, &prepared);
            let reference = run_f64(&op, &ins, &dims);
            for (o, (a, b)) in bufs.iter().zip(&reference).enumerate() {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    assert!(
                        (*x as f64 - y).abs() < 1e-5,
                        "{kind:?} hidden {hs} lbr {lbr} peepholes {peep}: output {o}[{i}] {x} vs {y}"
                    );
                }
            }
        }
    }

    #[test]
    fn causal_conv_carries_state() {
        let op = Op::CausalConvWithState(rlx_ir::ops::CausalConvWithState {
            activation: CausalConvActivation::None,
            has_bias: true,
            has_past: true,
        });
        // One channel, k = 3: y_t = p_{t} + 2 p_{t+1} + 3 p_{t+2} + 1 over [past, x].
        let ins = [
            f32t(&[1, 1, 2], &[1.0, 2.0]),
            f32t(&[1, 1, 3], &[1.0, 2.0, 3.0]),
            f32t(&[1], &[1.0]),
            f32t(&[1, 1, 2], &[5.0, 6.0]),
        ];
        let out = run(&op, &ins, &[&[1, 1, 2], &[1, 1, 2]]);
        assert_eq!(out[0], vec![5.0 + 12.0 + 3.0 + 1.0, 6.0 + 2.0 + 6.0 + 1.0]);
        assert_eq!(out[1], vec![1.0, 2.0]);
    }
}
