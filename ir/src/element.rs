//! Rust element types of tensors: each maps to exactly one [`DType`], so
//! typed reads and writes check the dtype, not only the element size.

use bytemuck::Pod;

use crate::dtype::DType;
use crate::tensor::{Tensor, TensorError};

/// A Rust type that holds one element of a tensor of [`Element::DTYPE`].
pub trait Element: Pod {
    const DTYPE: DType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Element for $t {
            const DTYPE: DType = DType::$d;
        })*
    };
}

elements! {
    f32 => F32, f64 => F64, half::f16 => F16, half::bf16 => BF16,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
}

impl Tensor {
    /// A tensor of `T::DTYPE` from values in row-major order.
    pub fn from_values<T: Element>(dims: &[usize], values: &[T]) -> Result<Tensor, TensorError> {
        Tensor::from_slice(T::DTYPE, dims, values)
    }

    /// The elements, when the tensor's dtype is `T::DTYPE`.
    pub fn values<T: Element>(&self) -> Result<&[T], TensorError> {
        if self.dtype() != T::DTYPE {
            return Err(TensorError::DType {
                expected: T::DTYPE,
                got: self.dtype(),
            });
        }
        self.as_slice()
    }
}
