//! Transformer ops: scaled dot-product Attention (MHA/GQA/MQA, masks, KV cache)
//! and rotary position embedding.

use super::{attr_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::op_attrs;
use crate::shape::{Shape, TensorType};

const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

op_attrs! {
    /// ONNX Attention. Inputs `Q`, `K`, `V`, then `attn_mask` if `has_mask`,
    /// `past_key`, `past_value` if `has_past`, `nonpad_kv_seqlen` if `has_nonpad`.
    /// Q/K/V are `[B, heads, seq, head_dim]`, or `[B, seq, heads*head_dim]` with
    /// the head counts given. Outputs `Y`, then up to `present_key`,
    /// `present_value` and the QK product (`num_outputs` in all).
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
        let q = heads_view(cx.shape(0), self.q_num_heads, 0)?;
        let k = heads_view(cx.shape(1), self.kv_num_heads, 1)?;
        let v = heads_view(cx.shape(2), self.kv_num_heads, 2)?;
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
        let y = if cx.rank(0) == 4 {
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
