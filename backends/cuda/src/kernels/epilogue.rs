//! The epilogue kernels (`kernels/cuda/epilogue.cu`): `y = act(y + bias +
//! residual)` in place after a cuDNN convolution or a cuBLASLt GEMM, for the
//! biases, residuals and activations their fused epilogues lack. A bias per
//! channel over 16-byte-aligned data runs in 16-byte vectors
//! (`channel_epilogue_*`); any other broadcast by strides over y's collapsed
//! dims, an element per thread (`epilogue_*`).

use rlx_gpu::geometry::{broadcast_strides, collapse, strides, u32_of, LResult};
use rlx_gpu::{Layout, Params, Range};
use rlx_ir::ops::Activation;
use rlx_ir::DType;

use super::{Cx, Source};

pub const SOURCE: Source = Source {
    name: "epilogue",
    source: concat!(
        include_str!("../../../../kernels/cuda/activation.cuh"),
        include_str!("../../../../kernels/cuda/epilogue.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![EpilogueParams::LAYOUT, ChannelEpilogueParams::LAYOUT]
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
        /// Bit 0: add the bias; bit 1: add the residual.
        pub flags: u32,
        /// 0 none, 1 relu, 2 sigmoid, 3 tanh, 4 gelu (erf), 5 gelu (tanh), 6 silu.
        pub act: u32,
    }
}

rlx_gpu::kernel_params! {
    /// `y = act(y + bias[channel] + residual)` over y `[outer, channels,
    /// inner]` in 16-byte vectors.
    pub struct ChannelEpilogueParams {
        /// 16-byte vectors of y.
        pub vectors: u32,
        /// Elements per channel run (at least the vector, or 1).
        pub inner: u32,
        pub channels: u32,
        /// Bit 0: add the bias; bit 1: add the residual; bit 2: inner is 1
        /// and a vector spans channels.
        pub flags: u32,
        /// As [`EpilogueParams::act`].
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
        Activation::HardSwish => 7,
        Activation::Relu6 => 8,
    }
}

/// The entry points' dtype suffix.
pub fn suffix(d: DType) -> LResult<&'static str> {
    Ok(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        d => return Err(format!("a fused epilogue on {d} has no cuda kernel")),
    })
}

/// The parameters for y of `y_dims` and a bias of `bias_dims` (broadcast
/// against y), if any.
pub fn params(
    y_dims: &[usize],
    bias_dims: Option<&[usize]>,
    residual: bool,
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
        flags: u32::from(bias_dims.is_some()) | u32::from(residual) << 1,
        act: act_code(act),
        ..EpilogueParams::default()
    };
    for (i, (&d, &s)) in dims.iter().zip(&st[1]).enumerate() {
        p.dims[i] = u32_of(d, "a dim")?;
        p.bias_s[i] = u32_of(s, "a bias stride")?;
    }
    Ok(p)
}

/// The vector form of `p`, where y's collapsed dims have the bias along one
/// of them (or no bias) in runs of at least `per` elements (or of one, with
/// whole vectors of channels), y divides into vectors of `per` elements and
/// every operand starts on 16 bytes.
pub fn channel_params(
    p: &EpilogueParams,
    per: u32,
    aligned: bool,
) -> Option<ChannelEpilogueParams> {
    if !aligned || per == 0 || p.n % per != 0 {
        return None;
    }
    let rank = p.rank as usize;
    let (dims, bs) = (&p.dims[..rank], &p.bias_s[..rank]);
    let bias = p.flags & 1 != 0;
    // The one dim the bias walks with stride 1 (none: the bias is a scalar).
    let (channels, inner) = match bs.iter().filter(|&&s| s != 0).count() {
        _ if !bias => (1, p.n),
        0 => (1, p.n),
        1 => {
            let at = bs.iter().position(|&s| s != 0)?;
            if bs[at] != 1 {
                return None;
            }
            (dims[at], dims[at + 1..].iter().product())
        }
        _ => return None,
    };
    let spans = inner == 1 && channels % per == 0;
    if !spans && inner < per {
        return None;
    }
    Some(ChannelEpilogueParams {
        vectors: p.n / per,
        inner,
        channels,
        flags: (p.flags & 3) | u32::from(spans) << 2,
        act: p.act,
    })
}

/// Emits the epilogue over `y` (unless there is nothing to do): the bias
/// broadcast from `bias` (its range and dims), then `residual` (y's shape),
/// then `act`.
pub fn emit(
    cx: &mut Cx,
    dtype: DType,
    y: Range,
    y_dims: &[usize],
    bias: Option<(Range, &[usize])>,
    residual: Option<Range>,
    act: Activation,
) -> LResult<()> {
    if bias.is_none() && residual.is_none() && act == Activation::None {
        return Ok(());
    }
    let p = params(y_dims, bias.map(|b| b.1), residual.is_some(), act)?;
    let suffix = suffix(dtype)?;
    let m = cx.modules.of(&SOURCE);
    let operands = vec![y, bias.map_or(y, |b| b.0), residual.unwrap_or(y)];
    let aligned = operands.iter().all(|r| r.offset % 16 == 0);
    let per = (16 / dtype.size()) as u32;
    if let Some(v) = channel_params(&p, per, aligned) {
        let blocks = u64::from(v.vectors).div_ceil(256).clamp(1, 65535 * 16);
        let entry = format!("channel_epilogue_{suffix}");
        cx.kernel_params(m, &entry, blocks, 256, operands, &v);
        return Ok(());
    }
    let blocks = u64::from(p.n).div_ceil(256).clamp(1, 65535 * 16);
    cx.kernel_params(m, &format!("epilogue_{suffix}"), blocks, 256, operands, &p);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_bias_collapses_to_three_dims() {
        let p = params(&[2, 8, 5, 5], Some(&[1, 8, 1, 1]), false, Activation::Relu).unwrap();
        assert_eq!(p.rank, 3);
        assert_eq!(&p.dims[..3], &[2, 8, 25]);
        assert_eq!(&p.bias_s[..3], &[0, 1, 0]);
        assert_eq!((p.flags, p.act, p.n), (1, 1, 400));
        let p = params(&[4, 6], None, true, Activation::Silu).unwrap();
        assert_eq!((p.rank, p.flags, p.act), (1, 2, 6));
    }

    #[test]
    fn vectors_need_whole_channel_runs_or_whole_channel_vectors() {
        // A conv's bias: channel runs of 16 positions, 8 f16 per vector.
        let p = params(&[2, 8, 4, 4], Some(&[1, 8, 1, 1]), true, Activation::Relu).unwrap();
        let v = channel_params(&p, 8, true).unwrap();
        assert_eq!((v.vectors, v.inner, v.channels, v.flags), (32, 16, 8, 3));
        // Runs of 25: a vector meets two channels at most.
        let p = params(&[2, 8, 5, 5], Some(&[1, 8, 1, 1]), false, Activation::Relu).unwrap();
        let v = channel_params(&p, 8, true).unwrap();
        assert_eq!((v.vectors, v.inner, v.channels, v.flags), (50, 25, 8, 1));
        // Runs shorter than a vector, or data off 16 bytes: one by one.
        let p = params(&[2, 8, 3], Some(&[1, 8, 1]), false, Activation::Relu).unwrap();
        assert!(channel_params(&p, 8, true).is_none());
        let p = params(&[2, 8, 4, 4], Some(&[1, 8, 1, 1]), false, Activation::Relu).unwrap();
        assert!(channel_params(&p, 8, false).is_none());
        // A matmul's bias along the last dim: vectors span channels.
        let p = params(&[3, 16], Some(&[16]), false, Activation::None).unwrap();
        let v = channel_params(&p, 4, true).unwrap();
        assert_eq!((v.vectors, v.inner, v.channels, v.flags), (12, 1, 16, 5));
        // No bias: any length in whole vectors.
        let p = params(&[5, 8], None, true, Activation::Tanh).unwrap();
        let v = channel_params(&p, 8, true).unwrap();
        assert_eq!((v.vectors, v.channels, v.flags), (5, 1, 2));
    }
}
