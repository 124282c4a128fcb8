//! LayerNorm and RmsNorm over trailing axes: a workgroup tree reduction per row.

use rlx_ir::{DType, Op};

use super::{axis, u32_of, Cx, LResult};

const SRC: &str = include_str!("../../../../kernels/wgsl/norm.wgsl");

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, eps, rms) = match &cx.node.op {
        Op::LayerNorm(l) => (l.axis, l.epsilon, false),
        Op::RmsNorm(r) => (r.axis, r.epsilon, true),
        op => return Err(format!("`{}` is not a norm", op.name())),
    };
    let (x, scale, y) = (
        cx.input(0)?.clone(),
        cx.input(1)?.clone(),
        cx.output(0)?.clone(),
    );
    let bias = cx.ins.get(2).cloned();
    if x.dtype != DType::F32 || scale.dtype != DType::F32 {
        return Err(format!("normalization on {} has no wgpu kernel", x.dtype));
    }
    let a = axis(ax, x.dims.len())?;
    let len: usize = x.dims.get(a..).unwrap_or(&[]).iter().product();
    // Scale and bias broadcast over the normalized dims: they must be a
    // trailing block (numpy broadcasting of a suffix), which repeats with its size.
    let period = |o: &super::Operand| -> LResult<usize> {
        let n = o.numel();
        let tail: usize = x.dims[x.dims.len().saturating_sub(o.dims.len())..]
            .iter()
            .product();
        let dense = o.dims.iter().skip_while(|&&d| d == 1).count();
        let tail_dense: usize = x.dims[x.dims.len().saturating_sub(dense)..]
            .iter()
            .product();
        if n == 0 || len % n != 0 || (n != tail_dense && n != 1 && n != tail) {
            return Err("scale/bias that do not broadcast as a suffix have no wgpu kernel".into());
        }
        Ok(n)
    };
    let sl = period(&scale)?;
    let bl = match &bias {
        Some(b) => period(b)?,
        None => 1,
    };
    let rows = x.numel() / len.max(1);
    let p = vec![
        u32_of(rows, "rows")?,
        u32_of(len, "row length")?,
        eps.to_bits(),
        u32::from(rms),
        u32::from(bias.is_some()),
        u32_of(sl, "scale size")?,
        u32_of(bl, "bias size")?,
        u32::from(cx.outs.len() == 3),
    ];
    let pipe = cx.pipeline("norm.tree64", SRC);
    let br = bias.as_ref().map_or(scale.range(), |b| b.range());
    let stat = |i: usize| cx.outs.get(i).map_or(y.range(), |o| o.range());
    let ops = vec![x.range(), scale.range(), br, y.range(), stat(1), stat(2)];
    cx.dispatch(pipe, ops, p, rows as u64);
    Ok(())
}
