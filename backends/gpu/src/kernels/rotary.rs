//! The `rotary_embedding` kernel family: rotary position embeddings over
//! head vectors, from cos/sin caches indexed by position (or by
//! `position_ids`). The parameter struct and the checks every GPU backend
//! shares.

use rlx_ir::ops::RotaryEmbedding;
use rlx_ir::DType;

use crate::geometry::{u32_of, LResult};

crate::kernel_params! {
    /// RotaryEmbedding over head vectors of `head` features.
    pub struct RotaryParams {
        /// Elements.
        pub count: u32,
        pub head: u32,
        pub heads: u32,
        pub seq: u32,
        /// Rotated pairs (rotary_embedding_dim / 2).
        pub half: u32,
        pub interleaved: u32,
        /// 1: `[B, H, S, D]` input, 0: `[B, S, H*D]`.
        pub four: u32,
        pub has_ids: u32,
        /// 1: i64 position ids, 0: i32.
        pub ids_wide: u32,
        /// Rows of the cos/sin caches.
        pub cache_rows: u32,
    }
}

/// The operand names of the rotary kernel, in launch order (`ids` is the
/// input itself when there are no position ids).
pub const ROTARY_OPERANDS: &[&str] = &["x", "cos", "sin", "ids", "y"];

/// The parameters of `r` over an input of `x` dims, caches of `cos` and
/// `sin` dims, position ids of (elements, dtype) when given, and `count`
/// output elements; an error names what does not fit.
pub fn rotary_params(
    r: &RotaryEmbedding,
    x: &[usize],
    cos: &[usize],
    sin: &[usize],
    ids: Option<(usize, DType)>,
    count: usize,
) -> LResult<RotaryParams> {
    let (b, h, s, d, four) = match *x {
        [b, h, s, d] => (b, h, s, d, true),
        [b, s, hidden] => {
            let h = r.num_heads.max(0) as usize;
            if h == 0 || hidden % h != 0 {
                return Err(format!(
                    "hidden size {hidden} is not a multiple of num_heads {}",
                    r.num_heads
                ));
            }
            (b, h, s, hidden / h, false)
        }
        _ => return Err(format!("rotary input must be 3-D or 4-D, got {x:?}")),
    };
    let rd = if r.rotary_embedding_dim > 0 {
        r.rotary_embedding_dim as usize
    } else {
        d
    };
    if rd > d || rd % 2 != 0 {
        return Err(format!(
            "rotary_embedding_dim {rd} must be even and at most the head size {d}"
        ));
    }
    let half = rd / 2;
    if sin != cos || cos.last() != Some(&half) {
        return Err(format!(
            "cos/sin caches {cos:?}, {sin:?} must end in {half}"
        ));
    }
    let cache_rows = match ids {
        Some((n, _)) => {
            if cos.len() != 2 || n != b * s {
                return Err(format!(
                    "{n} position ids with cache {cos:?} for input {x:?}"
                ));
            }
            cos[0]
        }
        None => {
            if cos != [b, s, half] {
                return Err(format!(
                    "without position_ids the caches must be [{b}, {s}, {half}], got {cos:?}"
                ));
            }
            b * s
        }
    };
    if cache_rows == 0 {
        return Err("rotary_embedding with an empty cache".into());
    }
    Ok(RotaryParams {
        count: u32_of(count, "rotary output")?,
        head: u32_of(d, "head size")?,
        heads: u32_of(h, "heads")?,
        seq: u32_of(s, "sequence")?,
        half: half as u32,
        interleaved: u32::from(r.interleaved),
        four: u32::from(four),
        has_ids: u32::from(ids.is_some()),
        ids_wide: u32::from(ids.is_some_and(|(_, d)| d == DType::I64)),
        cache_rows: u32_of(cache_rows, "cache rows")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rot(dim: i64, heads: i64) -> RotaryEmbedding {
        RotaryEmbedding {
            interleaved: false,
            rotary_embedding_dim: dim,
            num_heads: heads,
        }
    }

    #[test]
    fn rotary_views_three_and_four_d_inputs() {
        let p = rotary_params(
            &rot(0, 0),
            &[1, 2, 3, 8],
            &[5, 4],
            &[5, 4],
            Some((3, DType::I64)),
            48,
        )
        .unwrap();
        assert_eq!((p.head, p.heads, p.seq, p.half, p.four), (8, 2, 3, 4, 1));
        assert_eq!((p.has_ids, p.ids_wide, p.cache_rows), (1, 1, 5));
        let p = rotary_params(&rot(4, 2), &[1, 3, 16], &[1, 3, 2], &[1, 3, 2], None, 48).unwrap();
        assert_eq!(
            (p.head, p.heads, p.half, p.four, p.cache_rows),
            (8, 2, 2, 0, 3)
        );
        assert!(rotary_params(&rot(0, 3), &[1, 3, 16], &[1, 3, 2], &[1, 3, 2], None, 48).is_err());
        assert!(rotary_params(&rot(6, 2), &[1, 3, 16], &[1, 3, 3], &[1, 3, 2], None, 48).is_err());
    }
}
