//! The bytes of a slice of a row-major tensor along one axis, as spans: what
//! a partial read of a tensor (on the host or on a device) copies.

use crate::tensor::{AlignedBuf, Tensor, TensorError};
use crate::DType;

/// The byte spans of a slice of a row-major tensor along one axis:
/// `count` spans of `width` bytes, the first at `offset`, each `pitch` after
/// the one before (one span when the slice is contiguous).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spans {
    pub offset: usize,
    pub width: usize,
    pub pitch: usize,
    pub count: usize,
}

impl Spans {
    /// Bytes the spans hold together.
    pub fn bytes(&self) -> usize {
        self.width * self.count
    }
}

/// The spans of `start..end` along `axis` of a `dtype` tensor of `dims`,
/// and the dims of the slice; `Err` says why the slice does not fit.
pub fn slice_spans(
    dtype: DType,
    dims: &[usize],
    axis: usize,
    start: usize,
    end: usize,
) -> Result<(Spans, Vec<usize>), String> {
    let extent = *dims
        .get(axis)
        .ok_or_else(|| format!("axis {axis} of a rank-{} tensor", dims.len()))?;
    if start > end || end > extent {
        return Err(format!(
            "{start}..{end} along axis {axis} of extent {extent}"
        ));
    }
    let inner: usize = dims[axis + 1..].iter().product::<usize>() * dtype.size();
    let outer: usize = dims[..axis].iter().product();
    let mut out = dims.to_vec();
    out[axis] = end - start;
    let width = (end - start) * inner;
    let spans = if outer <= 1 || start == 0 && end == extent {
        Spans {
            offset: start * inner,
            width: width * outer.max(1),
            pitch: extent * inner,
            count: usize::from(outer > 0 && width > 0),
        }
    } else {
        Spans {
            offset: start * inner,
            width,
            pitch: extent * inner,
            count: if width == 0 { 0 } else { outer },
        }
    };
    Ok((spans, out))
}

impl Tensor {
    /// Indices `range` along `axis`, copied into a tensor of their own.
    pub fn slice_axis(
        &self,
        axis: usize,
        range: std::ops::Range<usize>,
    ) -> Result<Tensor, TensorError> {
        if !self.is_plain() {
            return Err(TensorError::Slice(format!(
                "a {} is not a tensor of numbers",
                self.ty()
            )));
        }
        let (spans, dims) = slice_spans(self.dtype(), self.dims(), axis, range.start, range.end)
            .map_err(TensorError::Slice)?;
        let mut out = AlignedBuf::try_zeroed(spans.bytes())
            .ok_or_else(|| TensorError::TooLarge(dims.clone()))?;
        let src = self.bytes();
        for (i, row) in out
            .as_mut_bytes()
            .chunks_mut(spans.width.max(1))
            .enumerate()
        {
            let at = spans.offset + i * spans.pitch;
            row.copy_from_slice(&src[at..at + row.len()]);
        }
        Tensor::new(self.dtype(), dims, out.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn a_slice_along_the_first_axis_is_one_span() {
        let (s, dims) = slice_spans(DType::F32, &[4, 3], 0, 1, 3).unwrap();
        assert_eq!(dims, [2, 3]);
        assert_eq!((s.offset, s.bytes(), s.count), (12, 24, 1));
    }

    #[test]
    fn a_slice_along_an_inner_axis_is_one_span_per_outer_index() {
        // The last position's logits of [batch 2, seq 5, vocab 7].
        let (s, dims) = slice_spans(DType::F32, &[2, 5, 7], 1, 4, 5).unwrap();
        assert_eq!(dims, [2, 1, 7]);
        assert_eq!(
            s,
            Spans {
                offset: 4 * 7 * 4,
                width: 7 * 4,
                pitch: 5 * 7 * 4,
                count: 2
            }
        );
    }

    #[test]
    fn a_whole_or_empty_slice_and_bad_ranges() {
        let (s, _) = slice_spans(DType::U8, &[2, 3], 1, 0, 3).unwrap();
        assert_eq!((s.offset, s.width, s.count), (0, 6, 1));
        let (s, dims) = slice_spans(DType::U8, &[2, 3], 1, 2, 2).unwrap();
        assert_eq!((s.count, dims), (0, vec![2, 0]));
        assert!(slice_spans(DType::U8, &[2, 3], 2, 0, 1).is_err());
        assert!(slice_spans(DType::U8, &[2, 3], 1, 2, 4).is_err());
        assert!(slice_spans(DType::U8, &[2, 3], 1, 2, 1).is_err());
    }

    #[test]
    fn a_host_slice_holds_the_elements_of_its_range() {
        let v: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let t = Tensor::from_f32(&[2, 3, 2], &v).unwrap();
        let s = t.slice_axis(1, 2..3).unwrap();
        assert_eq!(s.dims(), [2, 1, 2]);
        assert_eq!(s.as_slice::<f32>().unwrap(), [4.0, 5.0, 10.0, 11.0]);
        assert!(t.slice_axis(3, 0..1).is_err());
    }
}
