//! Borrowed tensor views the kernels read and write, and dtype dispatch.

use bytemuck::Pod;
use rlx_ir::{DType, Tensor};

use crate::kernel::KernelError;

/// A read-only view of a tensor's bytes.
#[derive(Clone, Copy)]
pub struct TensorRef<'a> {
    pub dtype: DType,
    pub dims: &'a [usize],
    pub bytes: &'a [u8],
}

/// A writable view of a tensor's bytes.
pub struct TensorMut<'a> {
    pub dtype: DType,
    pub dims: &'a [usize],
    pub bytes: &'a mut [u8],
}

fn size_err(dtype: DType, want: usize) -> KernelError {
    KernelError::Internal(format!("{dtype} viewed as {want}-byte elements"))
}

impl<'a> TensorRef<'a> {
    pub fn of(t: &'a Tensor) -> TensorRef<'a> {
        TensorRef {
            dtype: t.dtype(),
            dims: t.dims(),
            bytes: t.bytes(),
        }
    }

    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The elements as `T` (which must have the dtype's size).
    pub fn slice<T: Pod>(&self) -> Result<&'a [T], KernelError> {
        if std::mem::size_of::<T>() != self.dtype.size() {
            return Err(size_err(self.dtype, std::mem::size_of::<T>()));
        }
        bytemuck::try_cast_slice(self.bytes)
            .map_err(|e| KernelError::Internal(format!("misaligned tensor view: {e}")))
    }

    /// Integer elements widened to i64 (for shape-like operands).
    pub fn to_i64s(&self) -> Result<Vec<i64>, KernelError> {
        Ok(match self.dtype {
            DType::I64 => self.slice::<i64>()?.to_vec(),
            DType::I32 => self.slice::<i32>()?.iter().map(|&v| v as i64).collect(),
            DType::I16 => self.slice::<i16>()?.iter().map(|&v| v as i64).collect(),
            DType::I8 => self.slice::<i8>()?.iter().map(|&v| v as i64).collect(),
            DType::U8 | DType::Bool => self.bytes.iter().map(|&v| v as i64).collect(),
            DType::U16 => self.slice::<u16>()?.iter().map(|&v| v as i64).collect(),
            DType::U32 => self.slice::<u32>()?.iter().map(|&v| v as i64).collect(),
            DType::U64 => self.slice::<u64>()?.iter().map(|&v| v as i64).collect(),
            d => return Err(KernelError::Value(format!("expected integers, got {d}"))),
        })
    }

    /// Float (or integer) elements widened to f64.
    pub fn to_f64s(&self) -> Result<Vec<f64>, KernelError> {
        Ok(match self.dtype {
            DType::F32 => self.slice::<f32>()?.iter().map(|&v| v as f64).collect(),
            DType::F64 => self.slice::<f64>()?.to_vec(),
            DType::F16 => self
                .slice::<half::f16>()?
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            DType::BF16 => self
                .slice::<half::bf16>()?
                .iter()
                .map(|v| v.to_f64())
                .collect(),
            _ => self.to_i64s()?.into_iter().map(|v| v as f64).collect(),
        })
    }

    /// An owned copy.
    pub fn to_tensor(&self) -> Result<Tensor, KernelError> {
        Tensor::new(
            self.dtype,
            self.dims.to_vec(),
            rlx_ir::Bytes::copy_from(self.bytes),
        )
        .map_err(|e| KernelError::Internal(e.to_string()))
    }
}

impl<'a> TensorMut<'a> {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn slice<T: Pod>(&mut self) -> Result<&mut [T], KernelError> {
        if std::mem::size_of::<T>() != self.dtype.size() {
            return Err(size_err(self.dtype, std::mem::size_of::<T>()));
        }
        bytemuck::try_cast_slice_mut(self.bytes)
            .map_err(|e| KernelError::Internal(format!("misaligned tensor view: {e}")))
    }
}

impl TensorMut<'_> {
    /// Stores one value per element, converted like Cast: floats round to
    /// nearest, integers truncate toward zero.
    pub fn store_f64s(&mut self, vals: &[f64]) -> Result<(), KernelError> {
        if vals.len() != self.numel() {
            return Err(KernelError::Internal(format!(
                "{} values for {} elements",
                vals.len(),
                self.numel()
            )));
        }
        match self.dtype {
            DType::F32 => {
                for (o, &v) in self.slice::<f32>()?.iter_mut().zip(vals) {
                    *o = v as f32;
                }
            }
            DType::F64 => self.slice::<f64>()?.copy_from_slice(vals),
            d => {
                let round = rlx_ir::ops::RoundMode::Nearest;
                for (i, &v) in vals.iter().enumerate() {
                    crate::kernels::cast::write(
                        d,
                        self.bytes,
                        i,
                        crate::kernels::cast::Val::Float(v),
                        false,
                        round,
                    );
                }
            }
        }
        Ok(())
    }
}

/// Runs `$body` with `$T` bound to the Rust type of a dtype from the listed
/// groups: `float` (f32, f64, f16, bf16), `int` (i8..i64, u8..u64), `bool` (u8).
/// Other dtypes give `$err`.
#[macro_export]
macro_rules! with_dtype {
    ($d:expr, $T:ident => $body:expr, float) => {
        match $d {
            rlx_ir::DType::F32 => {
                type $T = f32;
                $body
            }
            rlx_ir::DType::F64 => {
                type $T = f64;
                $body
            }
            rlx_ir::DType::F16 => {
                type $T = half::f16;
                $body
            }
            rlx_ir::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            d => Err($crate::kernel::KernelError::DType(d)),
        }
    };
    ($d:expr, $T:ident => $body:expr, int) => {
        match $d {
            rlx_ir::DType::I8 => {
                type $T = i8;
                $body
            }
            rlx_ir::DType::I16 => {
                type $T = i16;
                $body
            }
            rlx_ir::DType::I32 => {
                type $T = i32;
                $body
            }
            rlx_ir::DType::I64 => {
                type $T = i64;
                $body
            }
            rlx_ir::DType::U8 => {
                type $T = u8;
                $body
            }
            rlx_ir::DType::U16 => {
                type $T = u16;
                $body
            }
            rlx_ir::DType::U32 => {
                type $T = u32;
                $body
            }
            rlx_ir::DType::U64 => {
                type $T = u64;
                $body
            }
            d => Err($crate::kernel::KernelError::DType(d)),
        }
    };
    ($d:expr, $T:ident => $body:expr, num) => {
        match $d {
            rlx_ir::DType::F32 => {
                type $T = f32;
                $body
            }
            rlx_ir::DType::F64 => {
                type $T = f64;
                $body
            }
            rlx_ir::DType::F16 => {
                type $T = half::f16;
                $body
            }
            rlx_ir::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            rlx_ir::DType::I8 => {
                type $T = i8;
                $body
            }
            rlx_ir::DType::I16 => {
                type $T = i16;
                $body
            }
            rlx_ir::DType::I32 => {
                type $T = i32;
                $body
            }
            rlx_ir::DType::I64 => {
                type $T = i64;
                $body
            }
            rlx_ir::DType::U8 => {
                type $T = u8;
                $body
            }
            rlx_ir::DType::U16 => {
                type $T = u16;
                $body
            }
            rlx_ir::DType::U32 => {
                type $T = u32;
                $body
            }
            rlx_ir::DType::U64 => {
                type $T = u64;
                $body
            }
            d => Err($crate::kernel::KernelError::DType(d)),
        }
    };
}

/// Runs `$body` with `$T` bound to an unsigned integer type of the dtype's size,
/// for ops that only move bytes (gather, transpose, concat, ...).
#[macro_export]
macro_rules! with_width {
    ($d:expr, $T:ident => $body:expr) => {
        match $d.size() {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            8 => {
                type $T = u64;
                $body
            }
            _ => Err($crate::kernel::KernelError::DType($d)),
        }
    };
}
