//! Max, average and lp pooling (1-D to 3-D) and LRN lowerings.

use rlx_ir::ops::{resolve_pads, Lrn, Pool, PoolKind};
use rlx_ir::DType;

use super::{u32_of, Cx, LResult};

const POOL: &str = include_str!("../../../../kernels/wgsl/pool.wgsl");
const LRN: &str = include_str!("../../../../kernels/wgsl/lrn.wgsl");

pub fn lower(cx: &mut Cx, p: &Pool) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    if x.dtype != DType::F32 {
        return Err(format!("pooling on {} has no wgpu kernel", x.dtype));
    }
    let kind = match p.kind {
        PoolKind::Max if cx.outs.len() == 1 => 0,
        PoolKind::Avg => 1,
        PoolKind::Max => return Err("max pooling with indices has no wgpu kernel".into()),
        PoolKind::Lp => 2,
    };
    let sp = x.dims.len().saturating_sub(2);
    if !(1..=3).contains(&sp) {
        return Err(format!(
            "{sp}-D pooling has no wgpu kernel (1-D to 3-D only)"
        ));
    }
    let ones = vec![1i64; sp];
    let st = if p.strides.is_empty() {
        ones.clone()
    } else {
        p.strides.clone()
    };
    let dl = if p.dilations.is_empty() {
        ones.clone()
    } else {
        p.dilations.clone()
    };
    let xs: Vec<i64> = x.dims[2..].iter().map(|&d| d as i64).collect();
    let pads = if p.pads.is_empty() && p.auto_pad == rlx_ir::ops::AutoPad::NotSet {
        vec![0; 2 * sp]
    } else {
        resolve_pads(p.auto_pad, &p.pads, &xs, &p.kernel_shape, &st, &dl)
    };
    if pads.len() != 2 * sp || p.kernel_shape.len() != sp || st.len() != sp || dl.len() != sp {
        return Err("pool attributes do not match the spatial rank".into());
    }
    // Fewer than 3 spatial axes run with unit leading axes.
    let three = |v: &[i64], fill: i64| -> Vec<i64> {
        let mut o = vec![fill; 3 - sp];
        o.extend_from_slice(v);
        o
    };
    let outs: Vec<i64> = y.dims[2..].iter().map(|&d| d as i64).collect();
    let begin = three(&pads[..sp], 0);
    let ext: Vec<i64> = three(&xs, 1)
        .iter()
        .zip(three(&pads[sp..], 0))
        .map(|(a, b)| a + b)
        .collect();
    let n = y.numel();
    let mut params = vec![u32_of(n, "output size")?];
    for group in [
        three(&xs, 1),
        three(&outs, 1),
        three(&p.kernel_shape, 1),
        three(&st, 1),
        three(&dl, 1),
        begin,
        ext,
    ] {
        for v in group {
            params.push(
                u32::try_from(v).map_err(|_| format!("pool geometry value {v} is out of range"))?,
            );
        }
    }
    params.push(kind);
    params.push(u32::from(p.count_include_pad));
    params.push((p.p as f32).to_bits());
    let pipe = cx.pipeline("pool.3d", POOL);
    cx.dispatch_items(pipe, vec![x.range(), y.range()], params, n as u64);
    Ok(())
}

pub fn lower_lrn(cx: &mut Cx, l: &Lrn) -> LResult<()> {
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    if x.dtype != DType::F32 || x.dims.len() < 2 {
        return Err(format!(
            "lrn on {} of rank {} has no wgpu kernel",
            x.dtype,
            x.dims.len()
        ));
    }
    let size = usize::try_from(l.size)
        .map_err(|_| "lrn size must be positive")?
        .max(1);
    let lo = (size - 1) / 2;
    let hi = size - 1 - lo;
    let n = y.numel();
    let c = x.dims[1];
    let s: usize = x.dims[2..].iter().product();
    let params = vec![
        u32_of(n, "output size")?,
        u32_of(c, "channels")?,
        u32_of(s, "spatial size")?,
        u32_of(lo, "lrn size")?,
        u32_of(hi, "lrn size")?,
        (l.alpha / size as f32).to_bits(),
        l.beta.to_bits(),
        l.bias.to_bits(),
    ];
    let pipe = cx.pipeline("lrn", LRN);
    cx.dispatch_items(pipe, vec![x.range(), y.range()], params, n as u64);
    Ok(())
}
