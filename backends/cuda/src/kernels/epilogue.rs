//! The epilogue kernel (`kernels/cuda/epilogue.cu`): `y = act(y + bias)` in
//! place after a cuDNN convolution or a cuBLASLt GEMM, for the biases and
//! activations their fused epilogues lack. The bias broadcasts by strides
//! over y's collapsed dims.

use rlx_gpu::geometry::{broadcast_strides, collapse, strides, u32_of, LResult};
use rlx_gpu::{Layout, Params, Range};
use rlx_ir::ops::Activation;
use rlx_ir::DType;

use super::{Cx, Source};

pub const SOURCE: Source = Source {
    name: "epilogue",
    source: concat!(include_str!("../../../../kernels/cuda/epilogue.cu")),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![EpilogueParams::LAYOUT]
}

/// The most collapsed dims the bias broadcasts over.
pub const MAX_RANK: usize = 6;

rlx_gpu::kernel_params! {
    /// `y[i] = act(y[i] + bias[at(i)])` over `n` elements; `at` walks y's
    /// collapsed `dims` with the bias's strides `bias_s`.
    pub struct EpilogueParams {
        /// Elements of y.
        pub n: u32,
        /// Collapsed dims in use.
        pub rank: u32,
        pub dims: [u32; 6],
        pub bias_s: [u32; 6],
        /// Bit 0: add the bias.
        pub flags: u32,
        /// 0 none, 1 relu, 2 sigmoid, 3 tanh, 4 gelu (erf), 5 gelu (tanh), 6 silu.
        pub act: u32,
    }
}

/// The kernel's activation code.
pub fn act_code(a: Activation) -> u32 {
    match a {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Sigmoid => 2,
        Activation::Tanh => 3,
        Activation::GeluErf => 4,
        Activation::GeluTanh => 5,
        Activation::Silu => 6,
    }
}

/// The entry point of a float dtype.
pub fn entry(d: DType) -> LResult<&'static str> {
    Ok(match d {
        DType::F32 => "epilogue_f32",
        DType::F64 => "epilogue_f64",
        DType::F16 => "epilogue_f16",
        DType::BF16 => "epilogue_bf16",
        d => return Err(format!("a fused epilogue on {d} has no cuda kernel")),
    })
}

/// The parameters for y of `y_dims` and a bias of `bias_dims` (broadcast
/// against y), if any.
pub fn params(
    y_dims: &[usize],
    bias_dims: Option<&[usize]>,
    act: Activation,
) -> LResult<EpilogueParams> {
    let ys = strides(y_dims);
    let bs = match bias_dims {
        Some(b) => broadcast_strides(b, y_dims)?,
        None => vec![0; y_dims.len()],
    };
    let (dims, st) = collapse(y_dims, &[ys, bs]);
    if dims.len() > MAX_RANK {
        return Err(format!(
            "a bias broadcast over {} collapsed dims (at most {MAX_RANK})",
            dims.len()
        ));
    }
    let mut p = EpilogueParams {
        n: u32_of(y_dims.iter().product(), "an epilogue size")?,
        rank: dims.len() as u32,
        flags: u32::from(bias_dims.is_some()),
        act: act_code(act),
        ..EpilogueParams::default()
    };
    for (i, (&d, &s)) in dims.iter().zip(&st[1]).enumerate() {
        p.dims[i] = u32_of(d, "a dim")?;
        p.bias_s[i] = u32_of(s, "a bias stride")?;
    }
    Ok(p)
}

/// Emits the epilogue over `y` (unless there is nothing to do).
pub fn emit(
    cx: &mut Cx,
    dtype: DType,
    y: Range,
    y_dims: &[usize],
    bias: Option<(Range, &[usize])>,
    act: Activation,
) -> LResult<()> {
    if bias.is_none() && act == Activation::None {
        return Ok(());
    }
    let p = params(y_dims, bias.map(|b| b.1), act)?;
    let entry = entry(dtype)?;
    let m = cx.modules.of(&SOURCE);
    let blocks = u64::from(p.n).div_ceil(256).clamp(1, 65535 * 16);
    cx.kernel_params(m, entry, blocks, 256, vec![y, bias.map_or(y, |b| b.0)], &p);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_bias_collapses_to_three_dims() {
        let p = params(&[2, 8, 5, 5], Some(&[1, 8, 1, 1]), Activation::Relu).unwrap();
        assert_eq!(p.rank, 3);
        assert_eq!(&p.dims[..3], &[2, 8, 25]);
        assert_eq!(&p.bias_s[..3], &[0, 1, 0]);
        assert_eq!((p.flags, p.act, p.n), (1, 1, 400));
        let p = params(&[4, 6], None, Activation::Silu).unwrap();
        assert_eq!((p.rank, p.flags, p.act), (1, 0, 6));
    }
}
