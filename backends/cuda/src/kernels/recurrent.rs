//! RNN, GRU and LSTM layers on CUDA (f32): the input projection of every
//! time step and direction as one cuBLASLt GEMM (`X·Wᵀ` over seq*batch
//! rows, directions batched), then per time step a GEMM of the state
//! (`h·Rᵀ`, directions batched) and the fused gate kernel of
//! `kernels/cuda/recurrent.cu` (biases, activations, clip, peepholes, cell
//! update, `Y` writes); GRU without linear_before_reset takes a second GEMM
//! (`(r⊙h)·R_hᵀ`) and a second kernel. The time loop is unrolled at plan
//! time, so a run stays plain launches (one CUDA graph). Sequence lengths
//! are read on the device.

use rlx_gpu::geometry::{u32_of, LResult};
use rlx_gpu::{Layout, Params, Range};
use rlx_ir::ops::{RecurrentKind, RnnActivation, RnnDirection};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, Source};
use crate::schedule::{Gemm, GemmAct, GemmLaunch, Launch};

pub const SOURCE: Source = Source {
    name: "recurrent",
    source: include_str!("../../../../kernels/cuda/recurrent.cu"),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![RecurrentParams::LAYOUT]
}

/// Most activation functions of a layer (LSTM, both directions).
const MAX_ACTS: usize = 6;
/// Most time steps unrolled into the schedule.
pub const MAX_STEPS: usize = 4096;

rlx_gpu::kernel_params! {
    /// One launch of a recurrent layer's element-wise kernels: one thread
    /// per (direction, batch, hidden unit).
    pub struct RecurrentParams {
        /// 0 RNN, 1 GRU, 2 LSTM.
        pub kind: u32,
        pub hidden: u32,
        pub batch: u32,
        pub seq: u32,
        pub dirs: u32,
        /// Gates times hidden: the row length of `xw` and `hr`.
        pub gh: u32,
        /// The time step (the k-th of each sequence).
        pub step: u32,
        /// 1: `[batch, seq, *]` tensors.
        pub layout: u32,
        /// Bit d: direction d walks the sequence backwards.
        pub reverse: u32,
        /// Activations per direction.
        pub per_dir: u32,
        pub has_bias: u32,
        pub has_lens: u32,
        /// 1: i64 sequence lengths, 0: i32.
        pub lens_wide: u32,
        pub has_h0: u32,
        pub has_c0: u32,
        pub has_peep: u32,
        pub input_forget: u32,
        pub has_clip: u32,
        pub clip: f32,
        /// Outputs of the layer (Y, Y_h, Y_c).
        pub outputs: u32,
        /// RnnActivation per function (in the IR's order), forward first.
        pub acts: [u32; 6],
        pub alpha: [f32; 6],
        pub beta: [f32; 6],
    }
}

fn act_code(a: RnnActivation) -> u32 {
    match a {
        RnnActivation::Relu => 0,
        RnnActivation::Tanh => 1,
        RnnActivation::Sigmoid => 2,
        RnnActivation::Affine => 3,
        RnnActivation::LeakyRelu => 4,
        RnnActivation::ThresholdedRelu => 5,
        RnnActivation::ScaledTanh => 6,
        RnnActivation::HardSigmoid => 7,
        RnnActivation::Elu => 8,
        RnnActivation::Softsign => 9,
        RnnActivation::Softplus => 10,
    }
}

/// f32 layers (the GEMMs are f32), i32 or i64 sequence lengths.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let Op::Recurrent(rc) = &node.op else {
        return Err(format!("`{}` is not a recurrent layer", node.op.name()));
    };
    if rc.quantized {
        return Err(format!(
            "a quantized {} (int8 weights, DynamicQuantizeLSTM) has no cuda kernel",
            rc.kind
        ));
    }
    let lens = rc.ports().seq_lens;
    for (i, t) in inputs.iter().enumerate() {
        let ok = if Some(i) == lens {
            matches!(t.dtype, DType::I32 | DType::I64)
        } else {
            t.dtype == DType::F32
        };
        if !ok {
            return Err(format!(
                "{} on {} (input {i}) has no cuda kernel (f32 only)",
                rc.kind, t.dtype
            ));
        }
    }
    if rc.activations.len() > MAX_ACTS {
        return Err(format!(
            "{} with {} activations",
            rc.kind,
            rc.activations.len()
        ));
    }
    Ok(())
}

fn gemm_launch(g: Gemm) -> Launch {
    Launch::Gemm(GemmLaunch {
        gemm: g,
        node: String::new(),
        origin: Vec::new(),
    })
}

/// An f32 range of `elems` elements from `offset`.
fn f32s(offset: u64, elems: usize) -> Range {
    Range {
        offset,
        bytes: (elems * 4) as u64,
    }
}

/// `C[d] = A[d] · B[d]ᵀ` for each direction d: `A` is `[m, k]` (row stride
/// `k`), `B` is `[n, k]` (row stride `k`), `C` is `[m, n]` with row stride
/// `ldc`; batch strides in elements.
#[allow(clippy::too_many_arguments)]
fn abt(
    dims: (usize, usize, usize),
    dirs: usize,
    a: (u64, usize),
    b: (u64, usize),
    c: (u64, usize),
    ldc: usize,
) -> Gemm {
    let (m, n, k) = dims;
    let span = |stride: usize, rows: usize, ld: usize, cols: usize| {
        (dirs - 1) * stride + (rows - 1) * ld + cols
    };
    Gemm {
        dtype: rlx_ir::DType::F32,
        m: m as u64,
        n: n as u64,
        k: k as u64,
        trans_a: false,
        trans_b: true,
        lda: k as u64,
        ldb: k as u64,
        ldc: ldc as u64,
        batch: dirs as u64,
        stride_a: a.1 as u64,
        stride_b: b.1 as u64,
        stride_c: c.1 as u64,
        a: f32s(a.0, span(a.1, m, k, k)),
        b: f32s(b.0, span(b.1, n, k, k)),
        c: f32s(c.0, span(c.1, m, ldc, n)),
        bias: None,
        act: GemmAct::None,
    }
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Recurrent(rc) = &cx.node.op else {
        return Err(format!("`{}` is not a recurrent layer", cx.node.op.name()));
    };
    let rc = rc.clone();
    let x = cx.input(0)?.clone();
    let [a0, a1, input] = x.dims[..] else {
        return Err("recurrent X must be rank 3".into());
    };
    let layout1 = rc.layout == 1;
    let (seq, batch) = if layout1 { (a1, a0) } else { (a0, a1) };
    let hs = rc.hidden_size as usize;
    let dirs = rc.direction.count();
    let gh = rc.kind.gates() as usize * hs;
    if seq > MAX_STEPS {
        return Err(format!(
            "{} over {seq} time steps (more than {MAX_STEPS} unrolled)",
            rc.kind
        ));
    }
    if input == 0 {
        return Err(format!("{} over inputs of size 0", rc.kind));
    }
    let ports = rc.ports();
    let opt = |cx: &Cx, p: Option<usize>| p.and_then(|i| cx.io.ins.get(i).map(|o| o.range()));
    let (w, r) = (cx.input(1)?.range(), cx.input(2)?.range());
    let bias = opt(cx, ports.bias);
    let lens = opt(cx, ports.seq_lens);
    let lens_wide = ports
        .seq_lens
        .and_then(|i| cx.io.ins.get(i))
        .is_some_and(|o| o.dtype == DType::I64);
    let (h0, c0, peep) = (
        opt(cx, ports.initial_h),
        opt(cx, ports.initial_c),
        opt(cx, ports.peepholes),
    );
    let y = cx.output(0)?.range();
    let yh = cx.io.outs.get(1).map(|o| o.range());
    let yc = cx.io.outs.get(2).map(|o| o.range());
    let gru_split = rc.kind == RecurrentKind::Gru && !rc.linear_before_reset;

    let rows = seq * batch;
    let state = dirs * batch * hs;
    let xw = cx.scratch((dirs * rows * gh * 4) as u64);
    let hr = cx.scratch((dirs * batch * gh * 4) as u64);
    let h = cx.scratch((state * 4) as u64);
    let c = cx.scratch((state * 4) as u64);
    let (rh, z, rr) = if gru_split {
        (
            cx.scratch((state * 4) as u64),
            cx.scratch((state * 4) as u64),
            cx.scratch((state * 4) as u64),
        )
    } else {
        (h, c, hr)
    };

    let mut acts = [0u32; MAX_ACTS];
    let (mut alpha, mut beta) = ([0f32; MAX_ACTS], [0f32; MAX_ACTS]);
    for (i, a) in rc.activations.iter().enumerate() {
        acts[i] = act_code(*a);
        alpha[i] = rc.activation_alpha.get(i).copied().unwrap_or(0.0);
        beta[i] = rc.activation_beta.get(i).copied().unwrap_or(0.0);
    }
    let reverse = match rc.direction {
        RnnDirection::Forward => 0,
        RnnDirection::Reverse => 1,
        RnnDirection::Bidirectional => 2,
    };
    let mut p = RecurrentParams {
        kind: match rc.kind {
            RecurrentKind::Rnn => 0,
            RecurrentKind::Gru => 1,
            RecurrentKind::Lstm => 2,
        },
        hidden: u32_of(hs, "hidden size")?,
        batch: u32_of(batch, "batch")?,
        seq: u32_of(seq, "sequence length")?,
        dirs: dirs as u32,
        gh: u32_of(gh, "gates")?,
        step: 0,
        layout: u32::from(layout1),
        reverse,
        per_dir: rc.kind.activations() as u32,
        has_bias: u32::from(bias.is_some()),
        has_lens: u32::from(lens.is_some()),
        lens_wide: u32::from(lens_wide),
        has_h0: u32::from(h0.is_some()),
        has_c0: u32::from(c0.is_some()),
        has_peep: u32::from(peep.is_some()),
        input_forget: u32::from(rc.input_forget),
        has_clip: u32::from(rc.clip.is_some()),
        clip: rc.clip.unwrap_or(0.0),
        outputs: cx.io.outs.len() as u32,
        acts,
        alpha,
        beta,
    };
    // Absent operands bind the output Y (never read).
    let ops = vec![
        xw,
        hr,
        bias.unwrap_or(y),
        lens.unwrap_or(y),
        peep.unwrap_or(y),
        h0.unwrap_or(y),
        c0.unwrap_or(y),
        h,
        c,
        y,
        yh.unwrap_or(y),
        yc.unwrap_or(y),
        rh,
        z,
        rr,
    ];
    let m = cx.modules.of(&SOURCE);
    let items = state as u64;

    // X·Wᵀ for every row and direction.
    if rows > 0 {
        cx.push(gemm_launch(abt(
            (rows, gh, input),
            dirs,
            (x.at, 0),
            (w.offset, gh * input),
            (xw.offset, rows * gh),
            gh,
        )));
    }
    cx.items(m, "rnn_init", items, ops.clone(), &p);
    let r_gates = if gru_split { 2 * hs } else { gh };
    for k in 0..seq {
        p.step = k as u32;
        cx.push(gemm_launch(abt(
            (batch, r_gates, hs),
            dirs,
            (h.offset, batch * hs),
            (r.offset, gh * hs),
            (hr.offset, batch * gh),
            gh,
        )));
        if gru_split {
            cx.items(m, "rnn_gru_gates", items, ops.clone(), &p);
            cx.push(gemm_launch(abt(
                (batch, hs, hs),
                dirs,
                (rh.offset, batch * hs),
                (r.offset + (2 * hs * hs * 4) as u64, gh * hs),
                (rr.offset, batch * hs),
                hs,
            )));
            cx.items(m, "rnn_gru_update", items, ops.clone(), &p);
        } else {
            cx.items(m, "rnn_step", items, ops.clone(), &p);
        }
    }
    if cx.io.outs.len() > 1 {
        cx.items(m, "rnn_finish", items, ops, &p);
    }
    Ok(())
}
