//! A product with a one-hot matrix (`simplify`) picks rows of the table:
//! - `matmul(cast(equal(ids, r)), table)`, where `r` is the constant
//!   `start, start + 1, .., start + n - 1` along the last axis and `ids` has
//!   size 1 there: how jax2tf writes an embedding lookup
//!   (`one_hot(ids) @ table`);
//! - `matmul(onehot(ids, n, [0, 1]), table)` (a cast between allowed), the
//!   ONNX op over the last axis: how tf2onnx writes Keras' `tf.one_hot`
//!   followed by a dense layer. Negative ids count from the end, as OneHot's
//!   do.
//!
//! `table` is a constant `[n, d]` of finite floats. The one-hot tensor of `n`
//! floats a position is made (and cast) and multiplied, where a row a
//! position is read. The rewrite gathers from the table padded with zero
//! rows at `clip(ids, lo, hi) + shift`: an id outside the range reads a zero
//! row, as its all-zero one-hot row gives in the product (for OneHot the
//! table is laid out twice, `[0; W; W; 0]`, so negative ids need no select).
//! Exact: the product sums one `1 * w` and zeros (`0 * w` is 0 for a finite
//! `w`, which is why the table must be finite). Symbolic dims stay symbolic.

use rlx_ir::ops::{Binary, BinaryKind, Clip, CompareKind, Gather, Squeeze};
use rlx_ir::{Bytes, DType, Graph, NodeId, Op, Tensor, Value};

use crate::manager::PassContext;
use crate::rewrite::{add_op, const_of, constant, remove_dead, replace_root, union_origin};

/// Largest padded table the rewrite makes, in elements (a copy of the table
/// is kept: OneHot's twice).
const MAX_TABLE: usize = 1 << 24;

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
    let scalar = |v: i64| match m.id_dtype {
        DType::I64 => Tensor::from_i64(&[], &[v]),
        _ => Tensor::from_slice::<i32>(DType::I32, &[], &[v as i32]),
    };
    let (lo, hi, shift) = (
        scalar(m.lo).map_err(|e| e.to_string())?,
        scalar(m.hi).map_err(|e| e.to_string())?,
        scalar(m.shift).map_err(|e| e.to_string())?,
    );
    let origin = union_origin(g, &m.matched);
    let name = g.node(id).name.clone();
    let c = |g: &mut Graph, cx: &mut PassContext, what: &str, t: Tensor| {
        constant(g, cx.weights, &format!("{name}.{what}"), origin.clone(), t)
    };
    let lo_v = c(g, cx, "lo", lo);
    let hi_v = c(g, cx, "hi", hi);
    let shift_v = c(g, cx, "shift", shift);
    let table = c(g, cx, "rows", m.padded);
    let mut ids = m.ids;
    if m.squeeze {
        // [.., 1] ids -> [..]: the gather then makes the product's [.., d].
        let axis = Tensor::from_i64(&[1], &[-1]).map_err(|e| e.to_string())?;
        let last = c(g, cx, "axis", axis);
        ids = Value::of(add_op(
            g,
            cx.weights,
            Squeeze {},
            &name,
            origin.clone(),
            &[ids, last],
        )?);
    }
    let clipped = add_op(
        g,
        cx.weights,
        Clip {},
        &name,
        origin.clone(),
        &[ids, lo_v, hi_v],
    )?;
    let add = Binary {
        kind: BinaryKind::Add,
    };
    let index = add_op(
        g,
        cx.weights,
        add,
        &name,
        origin.clone(),
        &[Value::of(clipped), shift_v],
    )?;
    replace_root(
        g,
        cx.weights,
        id,
        Gather { axis: 0 },
        &[table, Value::of(index)],
        origin,
    )?;
    remove_dead(g, &m.matched[1..]);
    Ok(Some("simplify.one-hot-product"))
}

/// A matched one-hot product: the row of the padded table an id reads is
/// `clip(id, lo, hi) + shift`.
struct Lookup {
    /// The ids, and whether their last axis (of size 1) is squeezed away.
    ids: Value,
    squeeze: bool,
    id_dtype: DType,
    lo: i64,
    hi: i64,
    shift: i64,
    padded: Tensor,
    /// The matmul, then the nodes of the one-hot matrix.
    matched: Vec<NodeId>,
}

fn find(g: &Graph, cx: &PassContext, id: NodeId) -> Option<Lookup> {
    let Op::MatMul(_) = g.node(id).op else {
        return None;
    };
    let ins = g.inputs_of(id);
    let (&a, &w) = (ins.first()?, ins.get(1)?);
    let table = const_of(g, cx.weights, w)?;
    let (&[n, _], dt) = (table.dims(), table.dtype()) else {
        return None;
    };
    if !dt.is_float() || n == 0 || !all_finite(&table)? {
        return None;
    }
    // The one-hot matrix, through a cast to the table's dtype or in it.
    let mut matched = vec![id];
    let mut x = a;
    if let Op::Cast(c) = &g.node(x.node).op {
        if c.to != dt {
            return None;
        }
        matched.push(x.node);
        x = g.inputs_of(x.node)[0];
    } else if g.ty(x).dtype != dt {
        return None;
    }
    matched.push(x.node);
    match &g.node(x.node).op {
        Op::Compare(cmp) if cmp.kind == CompareKind::Equal => {
            equal_range(g, cx, x.node, &table, matched)
        }
        Op::OneHot(o) => one_hot_op(g, cx, x.node, o.axis, &table, matched),
        _ => None,
    }
}

/// `equal(ids, start..start + n)` along the last axis: rows `start - 1`
/// (zeros), the table, `start + n` (zeros).
fn equal_range(
    g: &Graph,
    cx: &PassContext,
    equal: NodeId,
    table: &Tensor,
    matched: Vec<NodeId>,
) -> Option<Lookup> {
    let n = table.dims()[0];
    let pair = g.inputs_of(equal);
    // The range on either side.
    let (ids, range) = [(pair[0], pair[1]), (pair[1], pair[0])]
        .into_iter()
        .find_map(|(i, r)| Some((i, const_of(g, cx.weights, r)?)))?;
    let id_dtype = int_ids(g, ids)?;
    if range.dtype() != id_dtype {
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
    if start.abs() > LIMIT || n as i64 > LIMIT {
        return None;
    }
    if values.iter().zip(start..).any(|(&v, want)| v != want) {
        return None;
    }
    Some(Lookup {
        ids,
        squeeze: true,
        id_dtype,
        lo: start - 1,
        hi: start + n as i64,
        shift: 1 - start,
        padded: padded(table, 1)?,
        matched,
    })
}

/// `onehot(ids, n, [0, 1])` over the last axis: rows zeros, the table (ids
/// `-n..0`), the table again (`0..n`), zeros.
fn one_hot_op(
    g: &Graph,
    cx: &PassContext,
    node: NodeId,
    axis: i64,
    table: &Tensor,
    matched: Vec<NodeId>,
) -> Option<Lookup> {
    let n = table.dims()[0];
    let ins = g.inputs_of(node);
    let (ids, depth, values) = (ins[0], ins[1], ins[2]);
    let id_dtype = int_ids(g, ids)?;
    let rank = g.ty(ids).shape.rank() as i64;
    if axis != -1 && axis != rank {
        return None;
    }
    let depth = const_of(g, cx.weights, depth)?.to_f64_vec().or_else(|| {
        let v = const_of(g, cx.weights, depth)?.to_i64_vec()?;
        Some(v.into_iter().map(|x| x as f64).collect())
    })?;
    let values = const_of(g, cx.weights, values)?.to_f64_vec()?;
    if depth[..] != [n as f64] || values[..] != [0.0, 1.0] || n as i64 > LIMIT {
        return None;
    }
    let n = n as i64;
    Some(Lookup {
        ids,
        squeeze: false,
        id_dtype,
        lo: -n - 1,
        hi: n,
        shift: n + 1,
        padded: padded(table, 2)?,
        matched,
    })
}

/// The dtype of ids the rewrite indexes with (i64 or i32).
fn int_ids(g: &Graph, ids: Value) -> Option<DType> {
    let d = g.ty(ids).dtype;
    matches!(d, DType::I64 | DType::I32).then_some(d)
}

/// Bounds and offsets far inside either integer type.
const LIMIT: i64 = i32::MAX as i64 / 4;

/// `copies` of the table between a zero row before and after, or `None`
/// past [`MAX_TABLE`] elements.
fn padded(table: &Tensor, copies: usize) -> Option<Tensor> {
    let (&[n, d], dt) = (table.dims(), table.dtype()) else {
        return None;
    };
    let rows = copies * n + 2;
    if rows.checked_mul(d)? > MAX_TABLE {
        return None;
    }
    let row = d * dt.size();
    let mut bytes = vec![0u8; rows * row];
    for k in 0..copies {
        let at = (1 + k * n) * row;
        bytes[at..at + n * row].copy_from_slice(table.bytes());
    }
    Tensor::new(dt, vec![rows, d], Bytes::copy_from(&bytes)).ok()
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
        assert_eq!(ops(&g), ["squeeze", "clip", "add", "gather"]);
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

    const ONE_HOT_OP: &str = "  %0 = input \"ids\" : i64[2,3]\n  %1 = constant i64[] [4] : i64[]\n  %2 = constant f32[2] [VALUES] : f32[2]\n  %3 = one_hot(%0, %1, %2) {axis=-1} : f32[2,3,4]\n  %4 = constant f32[4,2] [1, 2, 3, 4, 5, 6, 7, 8] : f32[4,2]\n  %5 = matmul(%3, %4) : f32[2,3,2]\n  output \"y\" = %5\n";

    #[test]
    fn a_product_with_a_one_hot_op_gathers_rows() {
        let g = simplified(&ONE_HOT_OP.replace("VALUES", "0, 1"));
        assert_eq!(ops(&g), ["clip", "add", "gather"]);
        // Off values other than 0 keep the product.
        let g = simplified(&ONE_HOT_OP.replace("VALUES", "1, 0"));
        assert!(ops(&g).contains(&"matmul"), "{:?}", ops(&g));
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
