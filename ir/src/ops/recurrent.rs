//! Ops that scan a sequence carrying a state: the RNN, GRU and LSTM layers
//! (one kinded op) and the stateful depthwise CausalConvWithState.

use super::{attr_err, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, kinded_op, op_attrs};

const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

attr_enum! {
    /// The cell of a [`Recurrent`] layer.
    pub enum RecurrentKind { Rnn = "rnn", Gru = "gru", Lstm = "lstm" }
}

impl RecurrentKind {
    /// Gates stacked in `W` and `R` (`[num_directions, gates*hidden, *]`).
    pub fn gates(self) -> i64 {
        match self {
            RecurrentKind::Rnn => 1,
            RecurrentKind::Gru => 3,
            RecurrentKind::Lstm => 4,
        }
    }

    /// Activation functions per direction (`f`; `f, g`; `f, g, h`).
    pub fn activations(self) -> usize {
        match self {
            RecurrentKind::Rnn => 1,
            RecurrentKind::Gru => 2,
            RecurrentKind::Lstm => 3,
        }
    }

    /// Outputs the layer can have (`Y`, `Y_h`, and `Y_c` for LSTM).
    pub fn max_outputs(self) -> i64 {
        if self == RecurrentKind::Lstm {
            3
        } else {
            2
        }
    }
}

attr_enum! {
    /// Which way a [`Recurrent`] layer walks the sequence.
    pub enum RnnDirection { Forward = "forward", Reverse = "reverse", Bidirectional = "bidirectional" }
}

impl RnnDirection {
    pub fn count(self) -> usize {
        if self == RnnDirection::Bidirectional {
            2
        } else {
            1
        }
    }
}

attr_enum! {
    /// The activation functions ONNX recurrent layers accept.
    pub enum RnnActivation {
        Relu = "relu",
        Tanh = "tanh",
        Sigmoid = "sigmoid",
        Affine = "affine",
        LeakyRelu = "leaky_relu",
        ThresholdedRelu = "thresholded_relu",
        ScaledTanh = "scaled_tanh",
        HardSigmoid = "hard_sigmoid",
        Elu = "elu",
        Softsign = "softsign",
        Softplus = "softplus",
    }
}

kinded_op! {
    /// One ONNX RNN, GRU or LSTM layer. Inputs `X`, `W`, `R`, then in order
    /// `B` if `has_bias`, `sequence_lens` if `has_seq_lens`, `initial_h` if
    /// `has_initial_h`, and for LSTM `initial_c` if `has_initial_c` and `P` if
    /// `has_peepholes`. `activations` lists every direction's functions
    /// (forward first), each with its resolved `activation_alpha` and
    /// `activation_beta`. `layout` 0 is `[seq, batch, *]`, 1 is `[batch, seq, *]`.
    /// Outputs `Y`, `Y_h`, `Y_c` (the first `num_outputs` of them).
    ///
    /// `quantized` (ORT's DynamicQuantizeLSTM): `W` and `R` hold int8 or uint8
    /// values, and four more inputs follow: `W_scale`, `W_zero_point`,
    /// `R_scale`, `R_zero_point`, each `[directions, gates*hidden]`. Every
    /// product quantizes its activations (`X` once, `h` at each step) to uint8
    /// with their own range, as DynamicQuantizeLinear does, and multiplies
    /// integers: `((a_q - a_zp) · (w_q - w_zp)) * a_scale * w_scale`.
    pub struct Recurrent [RecurrentKind] {
        pub hidden_size: i64,
        pub direction: RnnDirection,
        pub activations: Vec<RnnActivation>,
        pub activation_alpha: Vec<f32>,
        pub activation_beta: Vec<f32>,
        pub clip: Option<f32>,
        pub layout: i64,
        pub linear_before_reset: bool,
        pub input_forget: bool,
        pub has_bias: bool,
        pub has_seq_lens: bool,
        pub has_initial_h: bool,
        pub has_initial_c: bool,
        pub has_peepholes: bool,
        pub num_outputs: i64,
        pub quantized: bool,
    }
}

/// Port numbers of a recurrent layer's optional inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecurrentPorts {
    pub bias: Option<usize>,
    pub seq_lens: Option<usize>,
    pub initial_h: Option<usize>,
    pub initial_c: Option<usize>,
    pub peepholes: Option<usize>,
    /// `W_scale`, `W_zero_point`, `R_scale`, `R_zero_point` when quantized.
    pub quant: Option<[usize; 4]>,
}

impl Recurrent {
    pub fn ports(&self) -> RecurrentPorts {
        let mut next = 3;
        let mut take = |on: bool| {
            on.then(|| {
                next += 1;
                next - 1
            })
        };
        let bias = take(self.has_bias);
        let seq_lens = take(self.has_seq_lens);
        let initial_h = take(self.has_initial_h);
        let initial_c = take(self.has_initial_c);
        let peepholes = take(self.has_peepholes);
        let quant = self.quantized.then(|| [next, next + 1, next + 2, next + 3]);
        RecurrentPorts {
            bias,
            seq_lens,
            initial_h,
            initial_c,
            peepholes,
            quant,
        }
    }

    fn input_count(&self) -> usize {
        3 + [
            self.has_bias,
            self.has_seq_lens,
            self.has_initial_h,
            self.has_initial_c,
            self.has_peepholes,
        ]
        .iter()
        .filter(|&&b| b)
        .count()
            + if self.quantized { 4 } else { 0 }
    }

    fn check_attrs(&self) -> Result<(), InferError> {
        let lstm = self.kind == RecurrentKind::Lstm;
        if self.hidden_size < 1 {
            return Err(attr_err("hidden_size", "must be positive"));
        }
        // Gate rows are gates * hidden_size: far past any weight a model holds.
        if self.hidden_size > 1 << 31 {
            return Err(attr_err("hidden_size", "is past 2^31"));
        }
        let n = self.kind.activations() * self.direction.count();
        if self.activations.len() != n {
            return Err(attr_err(
                "activations",
                format!("{} given, {n} expected", self.activations.len()),
            ));
        }
        if self.activation_alpha.len() != n || self.activation_beta.len() != n {
            return Err(attr_err(
                "activation_alpha",
                "alpha and beta need one value per activation",
            ));
        }
        if self.clip.is_some_and(|c| c.is_nan() || c <= 0.0) {
            return Err(attr_err("clip", "must be positive"));
        }
        if !(0..=1).contains(&self.layout) {
            return Err(attr_err("layout", "must be 0 or 1"));
        }
        if self.linear_before_reset && self.kind != RecurrentKind::Gru {
            return Err(attr_err("linear_before_reset", "only GRU has it"));
        }
        if !lstm && (self.input_forget || self.has_initial_c || self.has_peepholes) {
            return Err(attr_err(
                "input_forget",
                "input_forget, initial_c and peepholes are LSTM only",
            ));
        }
        if !(1..=self.kind.max_outputs()).contains(&self.num_outputs) {
            return Err(attr_err("num_outputs", "out of range"));
        }
        Ok(())
    }
}

/// Requires the dims of input `port` to equal `want` where both are known.
fn expect_dims(cx: &InferCx, port: usize, want: &[Dim]) -> Result<(), InferError> {
    cx.expect_rank(port, want.len())?;
    for (axis, (got, want)) in cx.shape(port).0.iter().zip(want).enumerate() {
        if let (Some(g), Some(w)) = (got.known(), want.known()) {
            if g != w {
                return Err(value_err(port, format!("dim {axis} is {g}, expected {w}")));
            }
        }
    }
    Ok(())
}

impl OpDef for Recurrent {
    fn arity(&self) -> (usize, usize) {
        let n = self.input_count();
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        self.check_attrs()?;
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_rank(0, 3)?;
        let x = cx.shape(0).0.clone();
        let (seq, batch) = if self.layout == 0 {
            (x[0].clone(), x[1].clone())
        } else {
            (x[1].clone(), x[0].clone())
        };
        let nd = Dim::Known(self.direction.count() as i64);
        let h = Dim::Known(self.hidden_size);
        let gh = Dim::Known(self.kind.gates() * self.hidden_size);
        let p = self.ports();
        if let Some([ws, wz, rs, rz]) = p.quant {
            if d != DType::F32 {
                return Err(value_err(0, "a quantized layer takes f32 inputs"));
            }
            let q = cx.expect_dtype(1, &[DType::I8, DType::U8])?;
            cx.expect_dtype(2, &[q])?;
            for (port, want) in [(ws, DType::F32), (wz, q), (rs, DType::F32), (rz, q)] {
                cx.expect_dtype(port, &[want])?;
                expect_dims(cx, port, &[nd.clone(), gh.clone()])?;
            }
        } else {
            cx.expect_same_dtype(1, 0)?;
            cx.expect_same_dtype(2, 0)?;
        }
        expect_dims(cx, 1, &[nd.clone(), gh.clone(), x[2].clone()])?;
        expect_dims(cx, 2, &[nd.clone(), gh.clone(), h.clone()])?;
        let state = if self.layout == 0 {
            vec![nd.clone(), batch.clone(), h.clone()]
        } else {
            vec![batch.clone(), nd.clone(), h.clone()]
        };
        if let Some(port) = p.bias {
            cx.expect_same_dtype(port, 0)?;
            expect_dims(cx, port, &[nd.clone(), gh.mul(&Dim::Known(2))])?;
        }
        if let Some(port) = p.seq_lens {
            cx.expect_dtype(port, &[DType::I32, DType::I64])?;
            expect_dims(cx, port, &[batch.clone()])?;
        }
        for port in [p.initial_h, p.initial_c].into_iter().flatten() {
            cx.expect_same_dtype(port, 0)?;
            expect_dims(cx, port, &state)?;
        }
        if let Some(port) = p.peepholes {
            cx.expect_same_dtype(port, 0)?;
            expect_dims(cx, port, &[nd.clone(), h.mul(&Dim::Known(3))])?;
        }
        let y = if self.layout == 0 {
            vec![seq, nd, batch, h]
        } else {
            vec![batch, seq, nd, h]
        };
        let mut out = vec![TensorType::new(d, Shape(y))];
        for _ in 1..self.num_outputs {
            out.push(TensorType::new(d, Shape(state.clone())));
        }
        Ok(out)
    }
}

attr_enum! {
    /// The activation fused into [`CausalConvWithState`] (ONNX `swish` is `silu`).
    pub enum CausalConvActivation { None = "none", Silu = "silu" }
}

op_attrs! {
    /// Causal depthwise 1-D convolution with a carried state. Inputs
    /// `x [B,C,L]`, `weight [C,1,k]`, then `bias [C]` if `has_bias` and
    /// `past_state [B,C,k-1]` if `has_past` (zeros otherwise). Outputs
    /// `y [B,C,L]` and `present_state [B,C,k-1]`, the last `k-1` positions of
    /// the state followed by the input.
    pub struct CausalConvWithState {
        pub activation: CausalConvActivation,
        pub has_bias: bool,
        pub has_past: bool,
    }
}

impl CausalConvWithState {
    /// The port of `past_state`, if any.
    pub fn past_port(&self) -> Option<usize> {
        self.has_past.then_some(2 + usize::from(self.has_bias))
    }
}

impl OpDef for CausalConvWithState {
    fn arity(&self) -> (usize, usize) {
        let n = 2 + usize::from(self.has_bias) + usize::from(self.has_past);
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_rank(0, 3)?;
        let x = cx.shape(0).0.clone();
        cx.expect_same_dtype(1, 0)?;
        cx.expect_rank(1, 3)?;
        let k = cx.shape(1).0[2].clone();
        expect_dims(cx, 1, &[x[1].clone(), Dim::Known(1), k.clone()])?;
        if k.known() == Some(0) {
            return Err(value_err(1, "kernel size 0"));
        }
        if self.has_bias {
            cx.expect_same_dtype(2, 0)?;
            expect_dims(cx, 2, &[x[1].clone()])?;
        }
        let state = Shape(vec![x[0].clone(), x[1].clone(), k.sub(&Dim::Known(1))]);
        if let Some(port) = self.past_port() {
            cx.expect_same_dtype(port, 0)?;
            expect_dims(cx, port, &state.0)?;
        }
        Ok(vec![cx.ty(0).clone(), TensorType::new(d, state)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;

    fn infer(op: impl Into<Op>, ins: &[TensorType]) -> Result<Vec<TensorType>, InferError> {
        let values = vec![None; ins.len()];
        let cx = InferCx {
            inputs: ins,
            values: &values,
            node: "n",
            prior: &[],
        };
        op.into().infer(&cx)
    }

    fn f32s(d: &[usize]) -> TensorType {
        TensorType::known(DType::F32, d)
    }

    fn lstm(direction: RnnDirection, layout: i64) -> Recurrent {
        let n = 3 * direction.count();
        Recurrent {
            kind: RecurrentKind::Lstm,
            hidden_size: 3,
            direction,
            activations: [
                RnnActivation::Sigmoid,
                RnnActivation::Tanh,
                RnnActivation::Tanh,
            ]
            .repeat(direction.count()),
            activation_alpha: vec![0.0; n],
            activation_beta: vec![0.0; n],
            clip: None,
            layout,
            linear_before_reset: false,
            input_forget: false,
            has_bias: true,
            has_seq_lens: false,
            has_initial_h: false,
            has_initial_c: false,
            has_peepholes: true,
            num_outputs: 3,
            quantized: false,
        }
    }

    #[test]
    fn lstm_shapes_per_layout() {
        let op = lstm(RnnDirection::Bidirectional, 0);
        let ins = [
            f32s(&[5, 2, 4]),
            f32s(&[2, 12, 4]),
            f32s(&[2, 12, 3]),
            f32s(&[2, 24]),
            f32s(&[2, 9]),
        ];
        let out = infer(op.clone(), &ins).unwrap();
        assert_eq!(out[0], f32s(&[5, 2, 2, 3]));
        assert_eq!(out[1], f32s(&[2, 2, 3]));
        assert_eq!(out[2], f32s(&[2, 2, 3]));
        let op1 = Recurrent { layout: 1, ..op };
        let mut ins1 = ins.clone();
        ins1[0] = f32s(&[2, 5, 4]);
        let out = infer(op1, &ins1).unwrap();
        assert_eq!(out[0], f32s(&[2, 5, 2, 3]));
        assert_eq!(out[1], f32s(&[2, 2, 3]));
    }

    #[test]
    fn recurrent_rejects_bad_weights_and_attrs() {
        let op = lstm(RnnDirection::Forward, 0);
        let ins = [
            f32s(&[5, 2, 4]),
            f32s(&[1, 8, 4]),
            f32s(&[1, 12, 3]),
            f32s(&[1, 24]),
            f32s(&[1, 9]),
        ];
        assert!(infer(op.clone(), &ins).is_err(), "W with 2 gates");
        let mut good = ins.clone();
        good[1] = f32s(&[1, 12, 4]);
        assert!(infer(op.clone(), &good).is_ok());
        let gru_flag = Recurrent {
            linear_before_reset: true,
            ..op.clone()
        };
        assert!(infer(gru_flag, &good).is_err());
        let short = Recurrent {
            activations: vec![RnnActivation::Tanh],
            ..op
        };
        assert!(infer(short, &good).is_err());
    }

    #[test]
    fn quantized_layers_take_integer_weights_and_per_row_scales() {
        let op = Recurrent {
            quantized: true,
            has_peepholes: false,
            ..lstm(RnnDirection::Forward, 0)
        };
        assert_eq!(op.ports().quant, Some([4, 5, 6, 7]));
        let t = |d: DType, dims: &[usize]| TensorType::known(d, dims);
        let mut ins = vec![
            f32s(&[5, 2, 4]),
            t(DType::I8, &[1, 12, 4]),
            t(DType::I8, &[1, 12, 3]),
            f32s(&[1, 24]),
            f32s(&[1, 12]),
            t(DType::I8, &[1, 12]),
            f32s(&[1, 12]),
            t(DType::I8, &[1, 12]),
        ];
        assert!(infer(op.clone(), &ins).is_ok());
        ins[5] = t(DType::U8, &[1, 12]);
        assert!(
            infer(op.clone(), &ins).is_err(),
            "zero point of another dtype"
        );
        ins[5] = t(DType::I8, &[1, 1]);
        assert!(infer(op.clone(), &ins).is_err(), "one zero point per row");
        ins[5] = t(DType::I8, &[1, 12]);
        ins[1] = f32s(&[1, 12, 4]);
        assert!(infer(op, &ins).is_err(), "float weights");
    }

    #[test]
    fn gru_ports_skip_absent_inputs() {
        let op = Recurrent {
            kind: RecurrentKind::Gru,
            activations: vec![RnnActivation::Sigmoid, RnnActivation::Tanh],
            activation_alpha: vec![0.0; 2],
            activation_beta: vec![0.0; 2],
            has_bias: false,
            has_seq_lens: true,
            has_initial_h: true,
            has_peepholes: false,
            num_outputs: 2,
            ..lstm(RnnDirection::Forward, 0)
        };
        let p = op.ports();
        assert_eq!((p.bias, p.seq_lens, p.initial_h), (None, Some(3), Some(4)));
        let ins = [
            f32s(&[5, 2, 4]),
            f32s(&[1, 9, 4]),
            f32s(&[1, 9, 3]),
            TensorType::known(DType::I32, &[2]),
            f32s(&[1, 2, 3]),
        ];
        let out = infer(op, &ins).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1], f32s(&[1, 2, 3]));
    }

    #[test]
    fn causal_conv_state_shape() {
        let op = CausalConvWithState {
            activation: CausalConvActivation::Silu,
            has_bias: false,
            has_past: true,
        };
        assert_eq!(op.past_port(), Some(2));
        let ins = [f32s(&[2, 4, 8]), f32s(&[4, 1, 3]), f32s(&[2, 4, 2])];
        let out = infer(op.clone(), &ins).unwrap();
        assert_eq!(out, vec![f32s(&[2, 4, 8]), f32s(&[2, 4, 2])]);
        let bad = [f32s(&[2, 4, 8]), f32s(&[4, 1, 3]), f32s(&[2, 4, 3])];
        assert!(infer(op, &bad).is_err());
        let k1 = CausalConvWithState {
            activation: CausalConvActivation::None,
            has_bias: true,
            has_past: false,
        };
        let out = infer(k1, &[f32s(&[1, 2, 5]), f32s(&[2, 1, 1]), f32s(&[2])]).unwrap();
        assert_eq!(out[1], f32s(&[1, 2, 0]));
    }
}
