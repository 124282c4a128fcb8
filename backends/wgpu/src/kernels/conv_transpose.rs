//! ConvTranspose (1-D to 3-D, groups, dilations, pads, output padding and
//! shape): the gather form in `wgsl/conv_transpose.wgsl`, one invocation per
//! output element, so no scatter and no atomics.

use rlx_ir::ops::ConvTranspose;
use rlx_ir::DType;

use super::{u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/conv_transpose.wgsl");

pub fn lower(cx: &mut Cx, ct: &ConvTranspose) -> LResult<()> {
    let (x, w, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2).cloned();
    if x.dtype != DType::F32 || w.dtype != DType::F32 {
        return Err(format!(
            "conv_transpose on {} has no wgpu kernel (f32 only)",
            x.dtype
        ));
    }
    let sp = x.dims.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || w.dims.len() != x.dims.len() || y.dims.len() != x.dims.len() {
        return Err(format!(
            "conv_transpose over {sp} spatial dims has no wgpu kernel (1-D to 3-D)"
        ));
    }
    let (c, m) = (x.dims[1], y.dims[1]);
    let groups = usize::try_from(ct.group).unwrap_or(0).max(1);
    if c % groups != 0 || m % groups != 0 || w.dims[0] != c || w.dims[1] * groups != m {
        return Err(format!(
            "weights {:?} do not fit {c} input and {m} output channels in {groups} groups",
            w.dims
        ));
    }
    let input: Vec<i64> = x.dims[2..].iter().map(|&d| d as i64).collect();
    let kernel: Vec<i64> = w.dims[2..].iter().map(|&d| d as i64).collect();
    let (pads, out) = ct.resolve(&input, &kernel);
    if out.iter().zip(&y.dims[2..]).any(|(&a, &b)| a != b as i64) {
        return Err(format!(
            "output sizes {out:?} differ from the planned {:?}",
            &y.dims[2..]
        ));
    }
    let mut params = vec![
        u32_of(y.numel(), "output size")?,
        u32_of(c, "channels")?,
        u32_of(m, "channels")?,
        u32_of(groups, "groups")?,
        u32::from(bias.is_some()),
    ];
    // Spatial dims right-aligned into 3 (leading ones are size 1).
    for d in 0..3 {
        let Some(i) = (d + sp).checked_sub(3) else {
            params.extend([1, 1, 1, 1, 1, 0]);
            continue;
        };
        let at = |v: &[i64], dflt: i64| v.get(i).copied().unwrap_or(dflt);
        let word = |v: i64, what: &str| {
            u32::try_from(v).map_err(|_| format!("{what} {v} is out of range"))
        };
        params.push(u32_of(x.dims[2 + i], "an input size")?);
        params.push(u32_of(y.dims[2 + i], "an output size")?);
        params.push(u32_of(w.dims[2 + i], "a kernel size")?);
        params.push(word(at(&ct.strides, 1), "stride")?.max(1));
        params.push(word(at(&ct.dilations, 1), "dilation")?.max(1));
        // Signed: an output_shape beyond the full size makes the begin pad negative.
        let pad = i32::try_from(pads.get(i).copied().unwrap_or(0))
            .map_err(|_| "a pad is out of range".to_string())?;
        params.push(pad as u32);
    }
    let pipe = cx.pipeline("conv_transpose.gather", SRC);
    let b = bias.as_ref().map_or(y.range(), |b| b.range());
    cx.dispatch_items(
        pipe,
        vec![y.range(), x.range(), w.range(), b],
        params,
        y.numel() as u64,
    );
    Ok(())
}
