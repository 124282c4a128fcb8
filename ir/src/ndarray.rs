//! `ndarray` interop (feature `ndarray`), as users of tract expect: arrays
//! and views convert into tensors (copied into row-major order), tensors
//! into owned arrays or borrowed views of their dtype.

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use crate::element::Element;
use crate::tensor::{Tensor, TensorError};

impl<S, D, T> TryFrom<&ArrayBase<S, D>> for Tensor
where
    S: Data<Elem = T>,
    D: Dimension,
    T: Element,
{
    type Error = TensorError;

    fn try_from(a: &ArrayBase<S, D>) -> Result<Tensor, TensorError> {
        match a.as_slice() {
            Some(s) => Tensor::from_values(a.shape(), s),
            None => Tensor::from_values(a.shape(), &a.iter().copied().collect::<Vec<T>>()),
        }
    }
}

impl Tensor {
    /// The elements as an owned array of the tensor's shape.
    pub fn to_array<T: Element>(&self) -> Result<ArrayD<T>, TensorError> {
        Ok(self.array_view::<T>()?.to_owned())
    }

    /// The elements as a borrowed array view (no copy).
    pub fn array_view<T: Element>(&self) -> Result<ArrayViewD<'_, T>, TensorError> {
        let v = self.values::<T>()?;
        ArrayViewD::from_shape(IxDyn(self.dims()), v)
            .map_err(|_| TensorError::TooLarge(self.dims().to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn arrays_and_tensors_convert_both_ways() {
        let a = ndarray::Array::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as f32);
        let t = Tensor::try_from(&a).unwrap();
        assert_eq!((t.dtype(), t.dims()), (DType::F32, &[2, 3][..]));
        assert_eq!(t.to_array::<f32>().unwrap(), a.into_dyn());
        // A transposed view is copied in row-major order of its own shape.
        let b = ndarray::Array::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as i64);
        let tt = Tensor::try_from(&b.t()).unwrap();
        assert_eq!(tt.values::<i64>().unwrap(), &[0, 3, 1, 4, 2, 5]);
        // The dtype is checked, not only the element size.
        assert!(matches!(
            tt.to_array::<f64>(),
            Err(TensorError::DType { .. })
        ));
    }
}
