//! The `attention` kernel family: ONNX (opset 23) scaled dot-product
//! attention with grouped-query heads, 3-D or 4-D operands read in place
//! through their strides ([`Heads`]), bool or float masks broadcast by
//! strides ([`mask_strides`]), causality, softcap, per-batch key lengths and
//! the QK output. [`params`] fills the kernel's [`AttentionParams`]; a KV
//! cache is concatenated by the backend before the kernel runs.

use rlx_ir::ops::Attention;

use crate::geometry::{strides, u32_of, LResult};

crate::kernel_params! {
    /// One launch row per (batch, query head, query row).
    pub struct AttentionParams {
        /// Query heads.
        pub hq: u32,
        /// Query heads per key/value head.
        pub group: u32,
        /// Query rows.
        pub sq: u32,
        /// Keys (cache and new).
        pub keys: u32,
        /// Query/key head size.
        pub dk: u32,
        /// Value head size.
        pub dv: u32,
        /// Q element strides (batch, head, row).
        pub q_s: [u32; 3],
        /// K element strides (batch, head, row).
        pub k_s: [u32; 3],
        /// V element strides (batch, head, row).
        pub v_s: [u32; 3],
        /// Y element strides (batch, head, row).
        pub y_s: [u32; 3],
        /// Mask element strides (batch, head, query, key); 0 broadcasts.
        pub mask_s: [u32; 4],
        /// Keys the mask covers (later keys are masked out).
        pub mask_len: u32,
        /// 1 mask, 2 bool mask, 4 causal, 8 nonpad lengths, 16 nonpad is
        /// i64, 32 QK output, 64 the query offset is `nonpad[b] - sq`.
        pub flags: u32,
        /// Cached keys before the new ones: the first query row's position
        /// (unless flag 64).
        pub past: u32,
        /// Key window left and right of the query position (-1: unbounded).
        pub left: i32,
        pub right: i32,
        /// qk_matmul_output_mode (0-3).
        pub mode: u32,
        /// Score scale.
        pub scale: f32,
        /// Softcap (0: none).
        pub softcap: f32,
        /// Launch rows (`b * hq * sq`).
        pub rows: u32,
    }
}

/// The operands, in launch order (absent ones repeat `y`).
pub const ATTENTION_OPERANDS: &[&str] = &["y", "q", "k", "v", "mask", "nonpad", "qk"];

/// `[B, heads, seq, head]` geometry and element strides (b, h, s) of an
/// operand, 4-D as it is or 3-D `[B, seq, heads * head]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heads {
    pub b: usize,
    pub h: usize,
    pub s: usize,
    pub d: usize,
    pub st: [usize; 3],
}

impl From<rlx_ir::ops::HeadView> for Heads {
    /// The geometry of a view (its offset aside).
    fn from(v: rlx_ir::ops::HeadView) -> Heads {
        let [b, h, s, d] = v.dims;
        Heads {
            b,
            h,
            s,
            d,
            st: v.strides,
        }
    }
}

impl Heads {
    /// The geometry of an operand of `dims`; `heads` splits a 3-D one.
    pub fn of(dims: &[usize], heads: i64, what: &str) -> LResult<Heads> {
        Ok(Heads::from(rlx_ir::ops::HeadView::dense(
            dims, heads, what,
        )?))
    }

    /// Operand `i` (0 Q, 1 K, 2 V) of `a`, an input of `dims`: through its
    /// view if the attention has views (with the element where it starts),
    /// else as the input lies (starting at 0).
    pub fn operand(
        a: &rlx_ir::ops::Attention,
        i: usize,
        dims: &[usize],
    ) -> LResult<(Heads, usize)> {
        let v = a.operand_view(i, dims)?;
        Ok((Heads::from(v), v.offset))
    }

    /// A dense `[b, h, s, d]` value.
    pub fn dense(b: usize, h: usize, s: usize, d: usize) -> Heads {
        Heads {
            b,
            h,
            s,
            d,
            st: [h * s * d, s * d, d],
        }
    }

    /// Whether the value is laid out `[b, h, s, d]` densely.
    pub fn is_dense(&self) -> bool {
        self.st == [self.h * self.s * self.d, self.s * self.d, self.d]
    }
}

/// Checks that Q, K and V fit together (batch, shared key heads, head sizes).
pub fn check_heads(q: Heads, k: Heads, v: Heads) -> LResult<()> {
    if k.b != q.b || v.b != q.b || k.h != v.h || k.s != v.s || k.d != q.d {
        return Err(format!(
            "Q [{}, {}, {}, {}], K [{}, {}, {}, {}] and V [{}, {}, {}, {}] do not fit together",
            q.b, q.h, q.s, q.d, k.b, k.h, k.s, k.d, v.b, v.h, v.s, v.d
        ));
    }
    if k.h == 0 || q.h % k.h != 0 {
        return Err(format!(
            "{} query heads do not share {} key heads",
            q.h, k.h
        ));
    }
    Ok(())
}

/// The mask's element strides over `[b, hq, sq, len]` (0 where it
/// broadcasts) and `len`, its last dim (at most `keys`).
pub fn mask_strides(
    dims: &[usize],
    b: usize,
    hq: usize,
    sq: usize,
    keys: usize,
) -> LResult<([usize; 4], usize)> {
    let len = dims.last().copied().unwrap_or(keys);
    let refuse =
        || format!("attention mask {dims:?} does not broadcast to [{b}, {hq}, {sq}, {keys}]");
    if dims.len() > 4 || len > keys {
        return Err(refuse());
    }
    let full = [b, hq, sq, len];
    let pad = 4 - dims.len();
    let st = strides(dims);
    let mut out = [0; 4];
    for (i, &d) in dims.iter().enumerate() {
        let f = full[pad + i];
        if d != 1 && d != f {
            return Err(refuse());
        }
        out[pad + i] = if d == 1 { 0 } else { st[i] };
    }
    Ok((out, len))
}

/// What the kernel reads besides Q, K and V.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extras {
    /// Mask strides and length, and whether it is bool.
    pub mask: Option<([usize; 4], usize, bool)>,
    /// Per-batch key lengths; `true`: stored as i64.
    pub nonpad: Option<bool>,
    /// The QK output is written.
    pub qk: bool,
    /// Cached keys before the new ones.
    pub past: usize,
    /// The operands are f64 (the kernel computes in f64).
    pub f64: bool,
}

/// The kernel parameters of `a` over `q`, the keys and values it reads `k`
/// and `v` (the cache included), and the output `y`.
pub fn params(
    a: &Attention,
    q: Heads,
    k: Heads,
    v: Heads,
    y: Heads,
    x: Extras,
) -> LResult<AttentionParams> {
    let w = |v: usize| u32_of(v, "an attention size");
    let ws = |v: [usize; 3]| -> LResult<[u32; 3]> { Ok([w(v[0])?, w(v[1])?, w(v[2])?]) };
    let mut flags = 0u32;
    let (mut mask_s, mut mask_len) = ([0u32; 4], 0);
    if let Some((st, len, is_bool)) = x.mask {
        flags |= 1 | (u32::from(is_bool) << 1);
        for (o, s) in mask_s.iter_mut().zip(st) {
            *o = w(s)?;
        }
        mask_len = u32_of(len, "a mask length")?;
    }
    if a.is_causal {
        flags |= 4;
    }
    if let Some(wide) = x.nonpad {
        flags |= 8 | (u32::from(wide) << 4);
        // An external cache: query rows sit at the end of each batch's keys.
        if !a.has_past {
            flags |= 64;
        }
    }
    let window = |w: i64, side: &str| {
        i32::try_from(w).map_err(|_| format!("the {side} key window {w} is out of range"))
    };
    if a.softmax_precision == Some(rlx_ir::DType::F64) && !x.f64 {
        return Err(
            "softmax_precision=double over non-f64 inputs runs on the CPU backend only".into(),
        );
    }
    if x.qk {
        flags |= 32;
    }
    let mode = match a.qk_matmul_output_mode {
        m @ 0..=3 => m as u32,
        m => return Err(format!("qk_matmul_output_mode {m} is not one of 0-3")),
    };
    if k.h == 0 {
        return Err("attention without key heads".into());
    }
    Ok(AttentionParams {
        hq: w(q.h)?,
        group: w(q.h / k.h)?,
        sq: w(q.s)?,
        keys: w(k.s)?,
        dk: w(q.d)?,
        dv: w(v.d)?,
        q_s: ws(q.st)?,
        k_s: ws(k.st)?,
        v_s: ws(v.st)?,
        y_s: ws(y.st)?,
        mask_s,
        mask_len,
        flags,
        past: u32_of(x.past, "the cache length")?,
        left: window(a.left_window_size, "left")?,
        right: window(a.right_window_size, "right")?,
        mode,
        scale: a.scale.unwrap_or(1.0 / (q.d as f32).sqrt()),
        softcap: a.softcap,
        rows: w(q.b * q.h * q.s)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_d_operands_split_heads() {
        let h = Heads::of(&[2, 5, 12], 3, "Q").unwrap();
        assert_eq!((h.b, h.h, h.s, h.d), (2, 3, 5, 4));
        assert_eq!(h.st, [60, 4, 12]);
        assert!(!h.is_dense());
        assert!(Heads::of(&[2, 5, 12], 5, "Q").is_err());
        assert!(Heads::of(&[2, 3, 5, 4], 0, "K").unwrap().is_dense());
    }

    #[test]
    fn masks_broadcast_and_heads_group() {
        assert_eq!(
            mask_strides(&[5, 7], 2, 3, 5, 7).unwrap(),
            ([0, 0, 7, 1], 7)
        );
        assert!(mask_strides(&[4, 7], 2, 3, 5, 7).is_err());
        let q = Heads::dense(2, 4, 5, 8);
        let k = Heads::dense(2, 2, 7, 8);
        check_heads(q, k, k).unwrap();
        assert!(check_heads(q, Heads::dense(2, 3, 7, 8), Heads::dense(2, 3, 7, 8)).is_err());
    }
}
