//! The `cast` kernel family: Cast where either side is a float8, float4,
//! E8M0 or 2-/4-bit integer dtype (stored a byte per element), and BitCast
//! (a byte copy). The standard dtype pairs are element-wise kernels.

use rlx_ir::ops::{Cast, RoundMode};
use rlx_ir::DType;

use crate::geometry::{u32_of, LResult};

crate::kernel_params! {
    /// One thread per element (per byte, or per word when aligned, for a
    /// bitcast).
    pub struct CastParams {
        /// Elements (bytes for a bitcast).
        pub n: u32,
        /// The source dtype's ONNX code.
        pub src: u32,
        /// The destination dtype's ONNX code.
        pub dst: u32,
        /// 1: out-of-range values saturate (float8 destinations).
        pub saturate: u32,
        /// E8M0 rounding: 0 nearest, 1 up, 2 down.
        pub round: u32,
    }
}

/// The operand names of the cast kernels, in launch order.
pub const CAST_OPERANDS: &[&str] = &["x", "y"];

/// Whether a cast between `from` and `to` needs the cast family (a
/// non-standard dtype on either side) rather than an element-wise kernel.
pub fn is_special(from: DType, to: DType) -> bool {
    !from.is_standard() || !to.is_standard()
}

/// The parameters of `c` over `n` elements of `from`.
pub fn cast_params(c: &Cast, from: DType, n: usize) -> LResult<CastParams> {
    let code = |d: DType| u32::try_from(d.onnx_code()).map_err(|_| format!("dtype {d}"));
    Ok(CastParams {
        n: u32_of(n, "elements")?,
        src: code(from)?,
        dst: code(c.to)?,
        saturate: u32::from(c.saturate),
        round: match c.round_mode {
            RoundMode::Nearest => 0,
            RoundMode::Up => 1,
            RoundMode::Down => 2,
        },
    })
}
