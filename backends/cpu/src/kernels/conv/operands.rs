//! A convolution's operands: the optional bias, and f16/bf16 operands run
//! through f32 copies.

use rlx_ir::DType;

use crate::kernel::KernelError;
use crate::kernels::matmul::widen;
use crate::tensor::{TensorMut, TensorRef};

pub(super) fn bias<'a, T: bytemuck::Pod>(
    ins: &[TensorRef<'a>],
) -> Result<Option<&'a [T]>, KernelError> {
    ins.get(2).map(|b| b.slice::<T>()).transpose()
}

/// Runs `f` on f32 copies of an f16/bf16 convolution's input, weights and
/// bias (in `scratch`), then narrows its f32 output into `out`; `f` gets the
/// rest of `scratch`.
pub(super) fn widened(
    ins: &[TensorRef],
    out: &mut TensorMut,
    scratch: &mut [u8],
    f: impl FnOnce(&[f32], &[f32], Option<&[f32]>, &mut [f32], &mut [u8]) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    let (nx, nw, ny) = (ins[0].numel(), ins[1].numel(), out.numel());
    let nb = ins.get(2).map_or(0, |b| b.numel());
    let (wide, rest) = scratch.split_at_mut(4 * (nx + nw + ny + nb));
    let all: &mut [f32] =
        bytemuck::try_cast_slice_mut(wide).map_err(|e| KernelError::Internal(e.to_string()))?;
    let (fx, r) = all.split_at_mut(nx);
    let (fw, r) = r.split_at_mut(nw);
    let (fb, fy) = r.split_at_mut(nb);
    widen(&ins[0], fx)?;
    widen(&ins[1], fw)?;
    if let Some(b) = ins.get(2) {
        widen(b, fb)?;
    }
    f(fx, fw, (nb > 0).then_some(&*fb), fy, rest)?;
    narrow(fy, out)
}

/// Narrows f32 results into an f16/bf16 output.
pub fn narrow(src: &[f32], out: &mut TensorMut) -> Result<(), KernelError> {
    match out.dtype {
        DType::F16 => out
            .slice::<half::f16>()?
            .iter_mut()
            .zip(src)
            .for_each(|(o, v)| *o = half::f16::from_f32(*v)),
        DType::BF16 => out
            .slice::<half::bf16>()?
            .iter_mut()
            .zip(src)
            .for_each(|(o, v)| *o = half::bf16::from_f32(*v)),
        d => return Err(KernelError::DType(d)),
    }
    Ok(())
}
