//! A product with a one-hot matrix (`simplify`): `matmul(cast(equal(ids,
//! r)), table)`, where `r` is the constant `start, start + 1, ..,
//! start + n - 1` along the last axis, `ids` has size 1 there, and `table` is
//! a constant `[n, d]` of finite floats, picks rows of the table. jax2tf
//! writes an embedding lookup so (`one_hot(ids) @ table`): the one-hot
//! tensor of `n` floats a position is made, cast and multiplied, where a row
//! per position is read.
//!
//! The rewrite gathers from the table widened by a zero row at each end, at
//! `clip(ids, start - 1, start + n) - (start - 1)` (the ids' last axis
//! squeezed away): an id outside the range reads a zero row, as its one-hot
//! row (all zeros) gives in the product. Symbolic dims stay symbolic.
//! Exact: the product sums one `1 * w` and zeros (`0 * w` is 0 for a finite
//! `w`, which is why the table must be finite).

use rlx_ir::ops::{Binary, BinaryKind, Clip, CompareKind, Gather, Squeeze};
use rlx_ir::{Bytes, DType, Graph, NodeId, Op, Tensor, Value};

use crate::manager::PassContext;
use crate::rewrite::{add_op, const_of, constant, remove_dead, replace_root, union_origin};

/// Rewrites the matmul `id` when its left operand is such a one-hot matrix;
/// returns the rule that applied.
pub fn one_hot_product(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
) -> Result<Option<&'static str>, String> {
    let Some(m) = find(g, cx, id) else {
        return Ok(None);
    };
    let (lo, hi) = (m.start - 1, m.start + m.n as i64);
    let bound = |v: i64| match m.id_dtype {
        DType::I64 => Tensor::from_i64(&[], &[v]),
        _ => Tensor::from_slice::<i32>(DType::I32, &[], &[v as i32]),
    };
    let (lo_t, hi_t) = (
        bound(lo).map_err(|e| e.to_string())?,
        bound(hi).map_err(|e| e.to_string())?,
    );
    let origin = union_origin(g, &[id, m.cast, m.equal]);
    let name = g.node(id).name.clone();
    let c = |g: &mut Graph, cx: &mut PassContext, what: &str, t: Tensor| {
        constant(g, cx.weights, &format!("{name}.{what}"), origin.clone(), t)
    };
    let last = c(
        g,
        cx,
        "axis",
        Tensor::from_i64(&[1], &[-1]).map_err(|e| e.to_string())?,
    );
    let lo_v = c(g, cx, "lo", lo_t);
    let hi_v = c(g, cx, "hi", hi_t);
    let table = c(g, cx, "rows", m.padded);
    // [.., 1] ids -> [..]: the gather then makes the product's [.., d].
    let ids = add_op(
        g,
        cx.weights,
        Squeeze {},
        &name,
        origin.clone(),
        &[m.ids, last],
    )?;
    let clipped = add_op(
        g,
        cx.weights,
        Clip {},
        &name,
        origin.clone(),
        &[Value::of(ids), lo_v, hi_v],
    )?;
    let sub = Binary {
        kind: BinaryKind::Sub,
    };
    let index = add_op(
        g,
        cx.weights,
        sub,
        &name,
        origin.clone(),
        &[Value::of(clipped), lo_v],
    )?;
    let cast = m.cast;
    replace_root(
        g,
        cx.weights,
        id,
        Gather { axis: 0 },
        &[table, Value::of(index)],
        origin,
    )?;
    remove_dead(g, &[cast]);
    Ok(Some("simplify.one-hot-product"))
}

/// What a matched one-hot product is made of.
struct OneHot {
    /// The ids (`[.., 1]`), their integer dtype, the range's first value
    /// and length.
    ids: Value,
    id_dtype: DType,
    start: i64,
    n: usize,
    /// The table with a zero row before and after it (`[n + 2, d]`).
    padded: Tensor,
    cast: NodeId,
    equal: NodeId,
}

fn find(g: &Graph, cx: &PassContext, id: NodeId) -> Option<OneHot> {
    let Op::MatMul(_) = g.node(id).op else {
        return None;
    };
    let ins = g.inputs_of(id);
    let (&a, &w) = (ins.first()?, ins.get(1)?);
    let cast = a.node;
    let Op::Cast(c) = &g.node(cast).op else {
        return None;
    };
    let table = const_of(g, cx.weights, w)?;
    let (&[n, d], dt) = (table.dims(), table.dtype()) else {
        return None;
    };
    if c.to != dt || !dt.is_float() || n == 0 || !all_finite(&table)? {
        return None;
    }
    let x = g.inputs_of(cast)[0];
    let equal = x.node;
    if g.ty(x).dtype != DType::Bool {
        return None;
    }
    let Op::Compare(cmp) = &g.node(equal).op else {
        return None;
    };
    if cmp.kind != CompareKind::Equal {
        return None;
    }
    let pair = g.inputs_of(equal);
    // The range on either side.
    let (ids, range) = [(pair[0], pair[1]), (pair[1], pair[0])]
        .into_iter()
        .find_map(|(i, r)| Some((i, const_of(g, cx.weights, r)?)))?;
    let id_dtype = g.ty(ids).dtype;
    if !matches!(id_dtype, DType::I64 | DType::I32) || range.dtype() != id_dtype {
        return None;
    }
    // The range along the last axis only, no wider than the ids' rank.
    let id_shape = &g.ty(ids).shape;
    let r_dims = range.dims();
    if id_shape.0.last().and_then(|d| d.known()) != Some(1)
        || r_dims.last() != Some(&n)
        || r_dims.len() > id_shape.rank()
        || r_dims[..r_dims.len() - 1].iter().any(|&k| k != 1)
    {
        return None;
    }
    let values = range.to_i64_vec()?;
    let start = *values.first()?;
    // Bounds and offsets far inside either integer type.
    let limit = i64::from(i32::MAX) / 2;
    if start.abs() > limit || n as i64 > limit {
        return None;
    }
    if values.iter().zip(start..).any(|(&v, want)| v != want) {
        return None;
    }
    let row = d * dt.size();
    let mut bytes = vec![0u8; (n + 2) * row];
    bytes[row..(n + 1) * row].copy_from_slice(table.bytes());
    let padded = Tensor::new(dt, vec![n + 2, d], Bytes::copy_from(&bytes)).ok()?;
    Some(OneHot {
        ids,
        id_dtype,
        start,
        n,
        padded,
        cast,
        equal,
    })
}

/// Whether every element of a float tensor is finite (f32 read in place: a
/// vocabulary's table is large).
fn all_finite(t: &Tensor) -> Option<bool> {
    if t.dtype() == DType::F32 {
        let finite = |b: &[u8]| {
            b.try_into()
                .is_ok_and(|w| f32::from_le_bytes(w).is_finite())
        };
        return Some(t.bytes().chunks_exact(4).all(finite));
    }
    Some(t.to_f64_vec()?.iter().all(|v| v.is_finite()))
}

#[cfg(test)]
mod tests {
    use rlx_ir::analysis::infer_graph;
    use rlx_ir::text::parse_graph;
    use rlx_ir::{Op, Weights};

    use crate::manager::{Pass, PassContext};
    use crate::simplify::Simplify;

    fn simplified(body: &str) -> rlx_ir::Graph {
        let src = format!("rlx-ir 2\ngraph {{\n{body}}}\n");
        let mut g = parse_graph(&src).unwrap();
        infer_graph(&mut g, None).unwrap();
        let mut w = Weights::default();
        let mut cx = PassContext::new(&mut w);
        Simplify.run(&mut g, &mut cx).unwrap();
        g
    }

    fn ops(g: &rlx_ir::Graph) -> Vec<&'static str> {
        g.topo_order()
            .unwrap()
            .into_iter()
            .map(|id| g.node(id).op.name())
            .filter(|n| !matches!(*n, "input" | "constant" | "weight"))
            .collect()
    }

    const ONE_HOT: &str = "  %0 = input \"ids\" : i64[2,3,1]\n  %1 = constant i64[4] [RANGE] : i64[4]\n  %2 = equal(%0, %1) : bool[2,3,4]\n  %3 = cast(%2) {to=f32, saturate=true, round_mode=up} : f32[2,3,4]\n  %4 = constant f32[4,2] [1, 2, 3, 4, 5, 6, 7, TABLE] : f32[4,2]\n  %5 = matmul(%3, %4) : f32[2,3,2]\n  output \"y\" = %5\n";

    #[test]
    fn a_product_with_a_one_hot_range_gathers_rows() {
        let g = simplified(&ONE_HOT.replace("RANGE", "3, 4, 5, 6").replace("TABLE", "8"));
        assert_eq!(ops(&g), ["squeeze", "clip", "sub", "gather"]);
        let gather = g
            .topo_order()
            .unwrap()
            .into_iter()
            .find(|&id| matches!(g.node(id).op, Op::Gather(_)))
            .unwrap();
        assert_eq!(
            g.node(gather).outputs[0].shape.as_known().unwrap(),
            [2, 3, 2]
        );
    }

    #[test]
    fn other_ranges_and_tables_keep_the_product() {
        // Not consecutive, or a table with an infinity (0 * inf is NaN).
        for (range, table) in [("0, 2, 1, 3", "8"), ("0, 1, 2, 3", "inf")] {
            let g = simplified(&ONE_HOT.replace("RANGE", range).replace("TABLE", table));
            assert!(
                ops(&g).contains(&"matmul"),
                "{range} / {table}: {:?}",
                ops(&g)
            );
        }
    }
}
