//! OneHot on CUDA (`kernels/cuda/one_hot.cu`): one thread per output
//! element, the on/off values read on the device, any index dtype.

use rlx_gpu::kernels::one_hot::{one_hot_params, OneHotParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, num_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "one_hot",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/one_hot.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![OneHotParams::LAYOUT]
}

/// The entry name of index dtype `d` (bool reads as u8, as on the CPU).
fn index_name(d: DType) -> Option<&'static str> {
    if d == DType::Bool {
        return Some("u8");
    }
    num_name(d)
}

fn width(d: DType) -> Option<&'static str> {
    Some(match d.size() {
        1 => "b1",
        2 => "b2",
        4 => "b4",
        8 => "b8",
        _ => return None,
    })
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let i = dtype_of(inputs, 0)?;
    let v = dtype_of(inputs, 2)?;
    if index_name(i).is_none() || width(v).is_none() {
        return Err(format!(
            "`{}` with {i} indices and {v} values has no cuda kernel",
            node.op.name()
        ));
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::OneHot(h) = &cx.node.op else {
        return Err(format!("`{}` is not a one_hot", cx.node.op.name()));
    };
    let (idx, values, y) = (
        cx.input(0)?.clone(),
        cx.input(2)?.clone(),
        cx.output(0)?.clone(),
    );
    if values.numel() != 2 {
        return Err(format!(
            "one_hot values need 2 elements, got {}",
            values.numel()
        ));
    }
    let p = one_hot_params(&y.dims, h.axis)?;
    let entry = format!(
        "one_hot_{}_{}",
        index_name(idx.dtype).ok_or("index dtype")?,
        width(y.dtype).ok_or("value dtype")?
    );
    let m = cx.modules.of(&SOURCE);
    let ops = vec![idx.range(), values.range(), y.range()];
    cx.items(m, &entry, u64::from(p.n), ops, &p);
    Ok(())
}
