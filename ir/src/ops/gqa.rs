//! com.microsoft GroupQueryAttention: attention whose keys and values come
//! from a per-sequence cache (ONNX Runtime's decoder op for LLMs). Query head
//! `n` reads KV head `n / (num_heads / kv_num_heads)`; each batch entry has
//! its own length (`seqlens_k`, the valid length minus one), and the new keys
//! and values are written into the present cache after that entry's past.
//!
//! Ports: query `[B, S, N*H]`, key and value `[B, S, Nkv*H]`, seqlens_k
//! (i32 `[B]`), total_sequence_length (i32 scalar), then, as the flags say,
//! past key and value `[B, Nkv, P, H]`, the rotary cos and sin caches
//! `[positions, R/2]`, position ids (i64 `[B, S]`), an attention bias
//! `[B|1, N|1, S, total]` and per-head sink logits `[N]`. Outputs: the
//! attention `[B, S, N*H]` and the present key and value
//! `[B, Nkv, max(total, P), H]`.

use super::{attr_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::op_attrs;
use crate::shape::{Shape, TensorType};

op_attrs! {
    /// See the module documentation. `scale` 0 means `1/sqrt(H)`; `softcap`
    /// 0 means none; `local_window_size` -1 means no window (else each query
    /// sees that many keys, itself included).
    pub struct GroupQueryAttention {
        pub num_heads: i64,
        pub kv_num_heads: i64,
        pub scale: f32,
        pub softcap: f32,
        pub local_window_size: i64,
        pub causal: bool,
        pub rotary: bool,
        pub rotary_interleaved: bool,
        pub smooth_softmax: bool,
        pub has_past: bool,
        pub has_position_ids: bool,
        pub has_bias: bool,
        pub has_sink: bool,
    }
}

/// Input ports of the optional operands, by the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GqaPorts {
    pub past: Option<usize>,
    pub rotary: Option<usize>,
    pub position_ids: Option<usize>,
    pub bias: Option<usize>,
    pub sink: Option<usize>,
    pub count: usize,
}

impl GroupQueryAttention {
    pub fn ports(&self) -> GqaPorts {
        let mut next = 5;
        let mut take = |on: bool, n: usize| {
            on.then(|| {
                next += n;
                next - n
            })
        };
        let past = take(self.has_past, 2);
        let rotary = take(self.rotary, 2);
        let position_ids = take(self.has_position_ids, 1);
        let bias = take(self.has_bias, 1);
        let sink = take(self.has_sink, 1);
        GqaPorts {
            past,
            rotary,
            position_ids,
            bias,
            sink,
            count: next,
        }
    }

    /// Query heads per KV head.
    pub fn group(&self) -> Result<usize, String> {
        let (n, kv) = (self.num_heads, self.kv_num_heads);
        if n <= 0 || kv <= 0 || n % kv != 0 {
            return Err(format!(
                "num_heads {n} is not a positive multiple of kv_num_heads {kv}"
            ));
        }
        Ok((n / kv) as usize)
    }
}

impl OpDef for GroupQueryAttention {
    fn arity(&self) -> (usize, usize) {
        let n = self.ports().count;
        (n, n)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[4]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        self.group().map_err(|e| attr_err("num_heads", e))?;
        let d = cx.expect_dtype(0, &[DType::F32, DType::F16])?;
        for p in [1, 2] {
            cx.expect_same_dtype(p, 0)?;
        }
        for p in 0..3 {
            cx.expect_rank(p, 3)?;
        }
        cx.expect_dtype(3, &[DType::I32])?;
        cx.expect_dtype(4, &[DType::I32])?;
        let q = cx.shape(0).0.clone();
        let kvd = cx.shape(1).0[2].clone();
        let (b, hidden) = (q[0].clone(), q[2].clone());
        let h = match hidden.known() {
            Some(w) if w % self.num_heads == 0 => Dim::Known(w / self.num_heads),
            Some(w) => {
                return Err(attr_err(
                    "num_heads",
                    format!(
                        "{w} query features do not split into {} heads",
                        self.num_heads
                    ),
                ))
            }
            None => cx.fresh(1, 3),
        };
        if let (Some(k), Some(hh)) = (kvd.known(), h.known()) {
            if k != hh * self.kv_num_heads {
                return Err(attr_err(
                    "kv_num_heads",
                    format!(
                        "{k} key features are not {} heads of {hh}",
                        self.kv_num_heads
                    ),
                ));
            }
        }
        let ports = self.ports();
        let past_len = match ports.past {
            Some(p) => {
                cx.expect_rank(p, 4)?;
                cx.expect_same_dtype(p, 0)?;
                cx.expect_same_dtype(p + 1, 0)?;
                cx.shape(p).0[2].clone()
            }
            None => Dim::Known(0),
        };
        let total = cx.ints(4).and_then(|v| v.first().copied());
        let present = match (total, past_len.known()) {
            (Some(t), Some(p)) => Dim::Known(t.max(p)),
            _ => cx.fresh(1, 2),
        };
        let cache = Shape(vec![b, Dim::Known(self.kv_num_heads), present, h]);
        Ok(vec![
            TensorType::new(d, Shape(q)),
            TensorType::new(d, cache.clone()),
            TensorType::new(d, cache),
        ])
    }
}
