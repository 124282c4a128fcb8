//! Transformer ops: scaled dot-product Attention (MHA/GQA/MQA, masks, KV cache),
//! rotary position embedding, and recurrent LinearAttention (linear, gated,
//! delta and gated-delta state updates).

use super::{attr_err, value_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

op_attrs! {
    /// ONNX Attention. Inputs `Q`, `K`, `V`, then `attn_mask` if `has_mask`,
    /// `past_key`, `past_value` if `has_past`, `nonpad_kv_seqlen` if `has_nonpad`.
    /// Q/K/V are `[B, heads, seq, head_dim]`, or `[B, seq, heads*head_dim]` with
    /// the head counts given. Outputs `Y`, then up to `present_key`,
    /// `present_value` and the QK product (`num_outputs` in all).
    ///
    /// Causal masking and the key window are aligned bottom-right: query `i`
    /// sits at position `p = offset + i`, where `offset` is the past length,
    /// or `nonpad_kv_seqlen[b] - q_len` for an external cache, else 0. Causal
    /// keeps keys `j <= p`; the window keeps `p - left <= j <= p + right`
    /// (`-1`: that side unbounded). A query row with every key masked gives
    /// zeros (Y and the mode-3 QK output), not NaN.
    pub struct Attention {
        pub q_num_heads: i64,
        pub kv_num_heads: i64,
        pub scale: Option<f32>,
        pub is_causal: bool,
        pub softcap: f32,
        pub qk_matmul_output_mode: i64,
        pub has_mask: bool,
        pub has_past: bool,
        pub has_nonpad: bool,
        pub num_outputs: i64,
        pub left_window_size: i64,
        pub right_window_size: i64,
        /// The dtype the softmax runs in (`none`: the backend's compute type,
        /// f32 or wider).
        pub softmax_precision: Option<DType>,
        /// Where Q, K and V lie inside their inputs (not an ONNX attribute:
        /// `fold-attention-layout` sets it). Empty: as they are.
        pub views: HeadViews,
    }
}

/// Where one Attention operand lies inside its input value: the logical
/// `[b, h, s, d]` operand starts at element `offset`, its batch, head and
/// sequence steps `strides` elements apart, its head dimension contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadView {
    pub dims: [usize; 4],
    pub offset: usize,
    pub strides: [usize; 3],
}

impl HeadView {
    /// An operand read as it lies in its input of `dims`: `[b, h, s, d]`
    /// (4-D), or `[b, s, heads * d]` (3-D) split into `heads`.
    pub fn dense(dims: &[usize], heads: i64, what: &str) -> Result<HeadView, String> {
        match *dims {
            [b, h, s, d] => Ok(HeadView {
                dims: [b, h, s, d],
                offset: 0,
                strides: [h * s * d, s * d, d],
            }),
            [b, s, hidden] => {
                let h = usize::try_from(heads).unwrap_or(0);
                if h == 0 || hidden % h != 0 {
                    return Err(format!(
                        "{what} hidden size {hidden} is not a multiple of {heads} heads"
                    ));
                }
                let d = hidden / h;
                Ok(HeadView {
                    dims: [b, h, s, d],
                    offset: 0,
                    strides: [s * hidden, d, hidden],
                })
            }
            _ => Err(format!("{what} must be 3-D or 4-D, got {dims:?}")),
        }
    }

    /// One past the last element the view reads (0 when it has none).
    pub fn extent(&self) -> Option<usize> {
        let [b, h, s, d] = self.dims;
        if b == 0 || h == 0 || s == 0 || d == 0 {
            return Some(0);
        }
        let [sb, sh, ss] = self.strides;
        let last = (b - 1)
            .checked_mul(sb)?
            .checked_add((h - 1).checked_mul(sh)?)?
            .checked_add((s - 1).checked_mul(ss)?)?
            .checked_add(d - 1)?;
        self.offset.checked_add(last)?.checked_add(1)
    }
}

/// Attention's operand views: Q, K and V (in that order) read in place from
/// wider values, such as one packed QKV projection or a sequence-first
/// layout, instead of through copies that lay each out on its own. Empty
/// (the default): every operand as it is. Only for an attention whose one
/// output is Y (no cache in or out). With views the output is
/// `[B, S, Hq*Dv]` when `q_num_heads` is set, else `[B, Hq, S, Dv]`. The
/// text form, left out when empty, is
/// `views=[[b, h, s, d, offset, stride_b, stride_h, stride_s], .. x3]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeadViews(pub Vec<HeadView>);

impl HeadViews {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The view of operand `i` (0 Q, 1 K, 2 V), if there are views.
    pub fn get(&self, i: usize) -> Option<&HeadView> {
        self.0.get(i)
    }
}

impl crate::text::AttrValue for HeadViews {
    fn write_attr(&self, w: &mut crate::text::Writer) {
        let lists: Vec<Vec<i64>> = self
            .0
            .iter()
            .map(|v| {
                v.dims
                    .iter()
                    .chain([v.offset].iter())
                    .chain(v.strides.iter())
                    .map(|&x| x as i64)
                    .collect()
            })
            .collect();
        lists.write_attr(w);
    }

    fn read_attr(p: &mut crate::text::Parser) -> Result<Self, crate::text::ParseError> {
        let at = p.offset();
        let lists: Vec<Vec<i64>> = crate::text::AttrValue::read_attr(p)?;
        let bad = || {
            p.error_at(
                at,
                "views are three lists of 8 nonnegative integers".to_string(),
            )
        };
        if lists.len() != 3 {
            return Err(bad());
        }
        let mut views = Vec::with_capacity(3);
        for l in lists {
            let u: Vec<usize> = l
                .iter()
                .map(|&x| usize::try_from(x))
                .collect::<Result<_, _>>()
                .map_err(|_| bad())?;
            let [b, h, s, d, offset, sb, sh, ss] = u[..] else {
                return Err(bad());
            };
            views.push(HeadView {
                dims: [b, h, s, d],
                offset,
                strides: [sb, sh, ss],
            });
        }
        Ok(HeadViews(views))
    }

    fn omitted(&self) -> bool {
        self.0.is_empty()
    }

    fn absent() -> Option<Self> {
        Some(HeadViews::default())
    }
}

impl Default for Attention {
    /// Plain multi-head attention: no mask, cache, causality, window or
    /// softcap; one output; head counts from 4-D operands.
    fn default() -> Self {
        Attention {
            q_num_heads: 0,
            kv_num_heads: 0,
            scale: None,
            is_causal: false,
            softcap: 0.0,
            qk_matmul_output_mode: 0,
            has_mask: false,
            has_past: false,
            has_nonpad: false,
            num_outputs: 1,
            left_window_size: -1,
            right_window_size: -1,
            softmax_precision: None,
            views: HeadViews::default(),
        }
    }
}

/// Port numbers of Attention's optional inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionPorts {
    pub mask: Option<usize>,
    pub past_key: Option<usize>,
    pub past_value: Option<usize>,
    pub nonpad: Option<usize>,
}

impl Attention {
    pub fn ports(&self) -> AttentionPorts {
        let mut next = 3;
        let mut take = |on: bool| {
            on.then(|| {
                next += 1;
                next - 1
            })
        };
        let mask = take(self.has_mask);
        let past_key = take(self.has_past);
        let past_value = take(self.has_past);
        let nonpad = take(self.has_nonpad);
        AttentionPorts {
            mask,
            past_key,
            past_value,
            nonpad,
        }
    }

    /// Where operand `i` (0 Q, 1 K, 2 V) lies in its input of `dims`: its
    /// view, checked to fit, or the input as it lies (3-D split by the head
    /// count). What the kernels read.
    pub fn operand_view(&self, i: usize, dims: &[usize]) -> Result<HeadView, String> {
        let what = ["Q", "K", "V"].get(i).copied().unwrap_or("operand");
        let Some(v) = self.views.get(i) else {
            let heads = if i == 0 {
                self.q_num_heads
            } else {
                self.kv_num_heads
            };
            return HeadView::dense(dims, heads, what);
        };
        let numel = dims.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
        match (v.extent(), numel) {
            (Some(e), Some(n)) if e <= n => Ok(*v),
            _ => Err(format!(
                "the view of {what} does not fit its input of {dims:?}"
            )),
        }
    }

    /// The `[B, heads, seq, head_dim]` of operand `port` read through its
    /// view, checked to lie inside the input.
    fn viewed(&self, cx: &InferCx, port: usize) -> Result<[Dim; 4], InferError> {
        let what = ["Q", "K", "V"][port];
        if self.views.0.len() != 3 {
            return Err(attr_err("views", "one view for each of Q, K and V"));
        }
        if self.has_past || self.num_outputs > 1 {
            return Err(attr_err(
                "views",
                "only with Y alone: no past or present key and value, no QK output",
            ));
        }
        let v = self.views.0[port];
        let extent = v
            .extent()
            .ok_or_else(|| attr_err("views", format!("the view of {what} overflows")))?;
        if let Some(n) = cx.shape(port).numel().known() {
            if extent as u128 > n.max(0) as u128 {
                return Err(value_err(
                    port,
                    format!("the view of {what} reads {extent} elements of {n}"),
                ));
            }
        }
        Ok(v.dims.map(|d| Dim::Known(d as i64)))
    }

    fn input_count(&self) -> usize {
        3 + usize::from(self.has_mask)
            + 2 * usize::from(self.has_past)
            + usize::from(self.has_nonpad)
    }
}

/// `[B, heads, seq, head_dim]` view of a 3-D or 4-D attention operand.
fn heads_view(s: &Shape, heads: i64, port: usize) -> Result<[Dim; 4], InferError> {
    match s.rank() {
        4 => Ok([
            s.0[0].clone(),
            s.0[1].clone(),
            s.0[2].clone(),
            s.0[3].clone(),
        ]),
        3 => {
            if heads < 1 {
                return Err(attr_err(
                    "q_num_heads",
                    "3-D inputs need q_num_heads and kv_num_heads",
                ));
            }
            let hd = s.0[2].floor_div(&Dim::Known(heads))?;
            Ok([s.0[0].clone(), Dim::Known(heads), s.0[1].clone(), hd])
        }
        r => Err(InferError::Rank {
            port,
            got: r,
            expected: "3 or 4".into(),
        }),
    }
}

impl OpDef for Attention {
    fn arity(&self) -> (usize, usize) {
        let n = self.input_count();
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, FLOATS)?;
        cx.expect_same_dtype(1, 0)?;
        cx.expect_same_dtype(2, 0)?;
        for (name, w) in [
            ("left_window_size", self.left_window_size),
            ("right_window_size", self.right_window_size),
        ] {
            if w < -1 {
                return Err(attr_err(name, "must be -1 or nonnegative"));
            }
        }
        if let Some(p) = self.softmax_precision {
            if !FLOATS.contains(&p) {
                return Err(attr_err("softmax_precision", "must be a float dtype"));
            }
        }
        let (q, k, v) = if self.views.is_empty() {
            (
                heads_view(cx.shape(0), self.q_num_heads, 0)?,
                heads_view(cx.shape(1), self.kv_num_heads, 1)?,
                heads_view(cx.shape(2), self.kv_num_heads, 2)?,
            )
        } else {
            (
                self.viewed(cx, 0)?,
                self.viewed(cx, 1)?,
                self.viewed(cx, 2)?,
            )
        };
        if let (Some(qh), Some(kh)) = (q[1].known(), k[1].known()) {
            if kh == 0 || qh % kh != 0 {
                return Err(InferError::Mismatch {
                    what: "query heads must be a multiple of key heads",
                    a: qh.to_string(),
                    b: kh.to_string(),
                });
            }
        }
        let p = self.ports();
        let total = match p.past_key {
            Some(pk) => cx
                .shape(pk)
                .0
                .get(2)
                .cloned()
                .unwrap_or(Dim::Known(0))
                .add(&k[2]),
            None => k[2].clone(),
        };
        let four = if self.views.is_empty() {
            cx.rank(0) == 4
        } else {
            self.q_num_heads < 1
        };
        let y = if four {
            Shape(vec![q[0].clone(), q[1].clone(), q[2].clone(), v[3].clone()])
        } else {
            Shape(vec![q[0].clone(), q[2].clone(), q[1].mul(&v[3])])
        };
        let mut out = vec![TensorType::new(d, y)];
        let n = self.num_outputs.clamp(1, 4) as usize;
        if n > 1 {
            out.push(TensorType::new(
                d,
                Shape(vec![
                    k[0].clone(),
                    k[1].clone(),
                    total.clone(),
                    k[3].clone(),
                ]),
            ));
        }
        if n > 2 {
            out.push(TensorType::new(
                d,
                Shape(vec![
                    v[0].clone(),
                    v[1].clone(),
                    total.clone(),
                    v[3].clone(),
                ]),
            ));
        }
        if n > 3 {
            out.push(TensorType::new(
                d,
                Shape(vec![q[0].clone(), q[1].clone(), q[2].clone(), total]),
            ));
        }
        Ok(out)
    }
}

op_attrs! {
    /// Rotary position embedding; inputs `x` (`[B,H,S,D]`, or `[B,S,H*D]` with
    /// `num_heads`), `cos_cache`, `sin_cache`, optional `position_ids`.
    /// `rotary_embedding_dim = 0` rotates the whole head.
    pub struct RotaryEmbedding {
        pub interleaved: bool,
        pub rotary_embedding_dim: i64,
        pub num_heads: i64,
    }
}

impl OpDef for RotaryEmbedding {
    fn arity(&self) -> (usize, usize) {
        (3, 4)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, FLOATS)?;
        let r = cx.rank(0);
        if r != 3 && r != 4 {
            return Err(InferError::Rank {
                port: 0,
                got: r,
                expected: "3 or 4".into(),
            });
        }
        if r == 3 && self.num_heads < 1 {
            return Err(attr_err("num_heads", "3-D input needs num_heads"));
        }
        Ok(vec![cx.ty(0).clone()])
    }
}

attr_enum! {
    /// The state recurrence of [`LinearAttention`].
    pub enum LinearUpdateRule {
        Linear = "linear",
        Gated = "gated",
        Delta = "delta",
        GatedDelta = "gated_delta",
    }
}

impl LinearUpdateRule {
    /// True if the state decays by `exp(decay)` each step (a `decay` input).
    pub fn gated(self) -> bool {
        matches!(self, LinearUpdateRule::Gated | LinearUpdateRule::GatedDelta)
    }

    /// True if the write is delta-corrected by `beta` (a `beta` input).
    pub fn delta(self) -> bool {
        matches!(self, LinearUpdateRule::Delta | LinearUpdateRule::GatedDelta)
    }
}

op_attrs! {
    /// ONNX LinearAttention. Inputs `query [B,T,Hq*dk]`, `key [B,T,Hkv*dk]`,
    /// `value [B,T,Hkv*dv]`, then `past_state [B,Hkv,dk,dv]` if `has_past`,
    /// `decay` (`[B,T,Hkv*dk]` or `[B,T,Hkv]`) if the rule is gated, and `beta`
    /// (`[B,T,Hkv]` or `[B,T,1]`) if it is a delta rule. Outputs
    /// `output [B,T,Hq*dv]` and `present_state [B,Hkv,dk,dv]`, the latter in the
    /// dtype of `past_state` (of `query` without it). `scale` defaults to `1/sqrt(dk)`.
    pub struct LinearAttention {
        pub q_num_heads: i64,
        pub kv_num_heads: i64,
        pub scale: Option<f32>,
        pub update_rule: LinearUpdateRule,
        pub has_past: bool,
    }
}

/// Port numbers of LinearAttention's optional inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearAttentionPorts {
    pub past: Option<usize>,
    pub decay: Option<usize>,
    pub beta: Option<usize>,
}

impl LinearAttention {
    pub fn ports(&self) -> LinearAttentionPorts {
        let mut next = 3;
        let mut take = |on: bool| {
            on.then(|| {
                next += 1;
                next - 1
            })
        };
        let past = take(self.has_past);
        let decay = take(self.update_rule.gated());
        let beta = take(self.update_rule.delta());
        LinearAttentionPorts { past, decay, beta }
    }

    fn input_count(&self) -> usize {
        3 + usize::from(self.has_past)
            + usize::from(self.update_rule.gated())
            + usize::from(self.update_rule.delta())
    }
}

/// `packed / heads`, checked to divide evenly where known.
fn per_head(packed: &Dim, heads: i64, port: usize) -> Result<Dim, InferError> {
    if let Some(p) = packed.known() {
        if p % heads != 0 {
            return Err(value_err(
                port,
                format!("last dim {p} does not split into {heads} heads"),
            ));
        }
    }
    Ok(packed.floor_div(&Dim::Known(heads))?)
}

/// Requires dim `axis` of input `port` to equal `want` where both are known.
fn expect_dim(cx: &InferCx, port: usize, axis: usize, want: &Dim) -> Result<(), InferError> {
    let got = &cx.shape(port).0[axis];
    match (got.known(), want.known()) {
        (Some(g), Some(w)) if g != w => Err(InferError::Mismatch {
            what: "linear attention operand dims",
            a: format!("input {port} dim {axis} = {g}"),
            b: w.to_string(),
        }),
        _ => Ok(()),
    }
}

impl OpDef for LinearAttention {
    fn arity(&self) -> (usize, usize) {
        let n = self.input_count();
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let (hq, hkv) = (self.q_num_heads, self.kv_num_heads);
        if hq < 1 || hkv < 1 || hq % hkv != 0 {
            return Err(attr_err(
                "q_num_heads",
                format!("{hq} must be a positive multiple of kv_num_heads {hkv}"),
            ));
        }
        let d = cx.expect_dtype(0, FLOATS)?;
        for port in 0..3 {
            cx.expect_same_dtype(port, 0)?;
            cx.expect_rank(port, 3)?;
        }
        let q = cx.shape(0).0.clone();
        let (b, t) = (q[0].clone(), q[1].clone());
        let dk = per_head(&q[2], hq, 0)?;
        let dv = per_head(&cx.shape(2).0[2], hkv, 2)?;
        for port in [1, 2] {
            expect_dim(cx, port, 0, &b)?;
            expect_dim(cx, port, 1, &t)?;
        }
        expect_dim(cx, 1, 2, &Dim::Known(hkv).mul(&dk))?;
        let p = self.ports();
        let state = Shape(vec![b.clone(), Dim::Known(hkv), dk.clone(), dv.clone()]);
        let state_dtype = match p.past {
            Some(port) => {
                let sd = cx.expect_dtype(port, FLOATS)?;
                cx.expect_rank(port, 4)?;
                for (axis, want) in state.0.iter().enumerate() {
                    expect_dim(cx, port, axis, want)?;
                }
                sd
            }
            None => d,
        };
        for (port, per_kv) in [(p.decay, Some(&dk)), (p.beta, None)] {
            let Some(port) = port else { continue };
            cx.expect_same_dtype(port, 0)?;
            cx.expect_rank(port, 3)?;
            expect_dim(cx, port, 0, &b)?;
            expect_dim(cx, port, 1, &t)?;
            if let Some(last) = cx.shape(port).0[2].known() {
                let ok = last == hkv
                    || match per_kv {
                        Some(dk) => dk.known().is_none_or(|k| last == hkv * k),
                        None => last == 1,
                    };
                if !ok {
                    return Err(value_err(
                        port,
                        format!("last dim {last} is neither kv_num_heads nor its allowed multiple"),
                    ));
                }
            }
        }
        Ok(vec![
            TensorType::new(d, Shape(vec![b, t, Dim::Known(hq).mul(&dv)])),
            TensorType::new(state_dtype, state),
        ])
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

    fn t(d: DType, dims: &[usize]) -> TensorType {
        TensorType::known(d, dims)
    }

    fn op(rule: LinearUpdateRule, has_past: bool) -> LinearAttention {
        LinearAttention {
            q_num_heads: 8,
            kv_num_heads: 4,
            scale: None,
            update_rule: rule,
            has_past,
        }
    }

    #[test]
    fn linear_attention_gqa_shapes() {
        let f = DType::F16;
        let ins = [
            t(f, &[2, 5, 64]),
            t(f, &[2, 5, 32]),
            t(f, &[2, 5, 48]),
            t(DType::F32, &[2, 4, 8, 12]),
            t(f, &[2, 5, 4]),
            t(f, &[2, 5, 1]),
        ];
        let o = op(LinearUpdateRule::GatedDelta, true);
        let p = o.ports();
        assert_eq!((p.past, p.decay, p.beta), (Some(3), Some(4), Some(5)));
        let out = infer(o, &ins).unwrap();
        assert_eq!(out[0], t(f, &[2, 5, 96]));
        assert_eq!(out[1], t(DType::F32, &[2, 4, 8, 12]));
    }

    #[test]
    fn linear_attention_checks_operands() {
        let f = DType::F32;
        let qkv = [t(f, &[1, 3, 16]), t(f, &[1, 3, 8]), t(f, &[1, 3, 8])];
        let out = infer(op(LinearUpdateRule::Linear, false), &qkv).unwrap();
        assert_eq!(out[0], t(f, &[1, 3, 16]));
        assert_eq!(out[1], t(f, &[1, 4, 2, 2]));
        let mut bad_key = qkv.to_vec();
        bad_key[1] = t(f, &[1, 3, 12]);
        assert!(infer(op(LinearUpdateRule::Linear, false), &bad_key).is_err());
        let mut gated = qkv.to_vec();
        gated.push(t(f, &[1, 3, 5]));
        assert!(infer(op(LinearUpdateRule::Gated, false), &gated).is_err());
        gated[3] = t(f, &[1, 3, 8]);
        assert!(infer(op(LinearUpdateRule::Gated, false), &gated).is_ok());
        let heads = LinearAttention {
            q_num_heads: 6,
            ..op(LinearUpdateRule::Linear, false)
        };
        assert!(infer(heads, &qkv).is_err());
    }
}
