//! The `ai.onnx.ml` tree ensembles as one RLX `tree_ensemble` plus elementwise
//! ops: TreeEnsemble (opset 5), TreeEnsembleRegressor and
//! TreeEnsembleClassifier (opsets 1 and 3, integer labels).
//!
//! Where ONNX leaves the result open, ONNX Runtime's is taken: a target (or
//! class) that no reached leaf names is 0 and gets no base value, and a
//! two-class classifier follows ORT's binary rules (see [`binary_classes`]).

use std::collections::HashMap;

use rlx_ir::ops::{
    tree_leaf, ArgReduce, ArgReduceKind, BinaryKind as B, Compare, CompareKind, Concat, Expand,
    Gather, Reshape, ShapeOf, TreeAggregate, TreeBranch, TreeEnsemble, Unary, UnaryKind, Where,
};
use rlx_ir::{DType, Tensor, Value};

use super::labels::Labels;
use super::ml::{floats_f64, post_transform, post_transform_attr};
use super::{binary, cast, unsqueeze};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

const ML: &str = "ai.onnx.ml";

pub fn register(r: &mut Registry) {
    r.add_in(ML, "TreeEnsemble", 5, tree_ensemble);
    r.add_in(ML, "TreeEnsembleRegressor", 1, regressor);
    r.add_in(ML, "TreeEnsembleClassifier", 1, classifier);
}

fn bad(reason: impl Into<String>) -> MapError {
    MapError::Unsupported(reason.into())
}

fn required<T>(v: Option<T>, name: &str) -> Result<T, MapError> {
    v.ok_or_else(|| MapError::Attr {
        name: name.into(),
        reason: "is required".into(),
    })
}

/// A required float tensor attribute, widened to f64.
fn tensor_f64(cx: &mut NodeCtx, name: &str) -> Result<Vec<f64>, MapError> {
    required(cx.attr_t(name)?, name)?
        .to_f64_vec()
        .ok_or_else(|| bad(format!("{name} is not a float tensor")))
}

/// The rows `[N, F]` the trees read: f16, f32 or f64 as given, other dtypes as
/// f32 (as ORT casts them); a 1-D input is one row.
fn rows(cx: &mut NodeCtx) -> Result<Value, MapError> {
    let x = cx.req(0)?;
    let x = match cx.dtype(x) {
        DType::F32 | DType::F64 | DType::F16 => x,
        _ => cast(cx, x, DType::F32)?,
    };
    match cx.rank(x) {
        1 => unsqueeze(cx, x, &[0]),
        2 => Ok(x),
        r => Err(bad(format!(
            "an input of rank {r} (expected [N, F] or [F])"
        ))),
    }
}

/// Whether each target gets an entry from the leaves a row reaches.
enum Has {
    /// The same for every row, per target.
    Fixed(Vec<bool>),
    /// Per row: a bool `[N, targets]`.
    Rows(Value),
}

/// A forest and the weights each of its leaves holds, before lowering.
struct Forest {
    op: TreeEnsemble,
    /// Per tree, its leaves (to tell which targets every row reaches).
    tree_leaves: Vec<Vec<usize>>,
}

impl Forest {
    /// Which targets every row (`true`) or no row (`false`) reaches, or
    /// `None` for a target some rows reach and others do not.
    fn fixed_targets(&self) -> Vec<Option<bool>> {
        let op = &self.op;
        let targets_of =
            |l: usize| &op.leaf_targets[op.leaf_starts[l] as usize..op.leaf_starts[l + 1] as usize];
        (0..op.n_targets)
            .map(|t| {
                let always = self
                    .tree_leaves
                    .iter()
                    .any(|ls| !ls.is_empty() && ls.iter().all(|&l| targets_of(l).contains(&t)));
                let never = !op.leaf_targets.contains(&t);
                if always {
                    Some(true)
                } else if never {
                    Some(false)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Per row and target, whether a reached leaf names the target.
    fn has(&self, cx: &mut NodeCtx, x: Value) -> Result<Has, MapError> {
        let fixed = self.fixed_targets();
        if fixed.iter().all(Option::is_some) {
            return Ok(Has::Fixed(fixed.into_iter().flatten().collect()));
        }
        // Count the entries each row meets: the same forest with unit weights.
        let mut hits = self.op.clone();
        hits.aggregate = TreeAggregate::Sum;
        hits.leaf_weights.iter_mut().for_each(|w| *w = 1.0);
        let n = cx.add1(hits, &[x])?;
        let zero = cx.scalar(cx.dtype(n), 0.0)?;
        Ok(Has::Rows(cx.add1(
            Compare {
                kind: CompareKind::Greater,
            },
            &[n, zero],
        )?))
    }

    /// The aggregated scores `[N, targets]`.
    fn scores(&self, cx: &mut NodeCtx, x: Value) -> Result<Value, MapError> {
        cx.add1(self.op.clone(), &[x])
    }
}

/// TreeEnsemble (opset 5): nodes, leaves and set memberships in flat arrays.
fn tree_ensemble(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("nodes_hitrates");
    let features = required(cx.attr_ints("nodes_featureids")?, "nodes_featureids")?;
    let splits = tensor_f64(cx, "nodes_splits")?;
    let modes = required(cx.attr_t("nodes_modes")?, "nodes_modes")?
        .to_i64_vec()
        .ok_or_else(|| bad("nodes_modes is not an integer tensor"))?;
    let true_ids = required(cx.attr_ints("nodes_truenodeids")?, "nodes_truenodeids")?;
    let true_leafs = required(cx.attr_ints("nodes_trueleafs")?, "nodes_trueleafs")?;
    let false_ids = required(cx.attr_ints("nodes_falsenodeids")?, "nodes_falsenodeids")?;
    let false_leafs = required(cx.attr_ints("nodes_falseleafs")?, "nodes_falseleafs")?;
    let m = features.len();
    let nan_true = cx
        .attr_ints("nodes_missing_value_tracks_true")?
        .unwrap_or_else(|| vec![0; m]);
    let leaf_targets = required(cx.attr_ints("leaf_targetids")?, "leaf_targetids")?;
    let leaf_weights = tensor_f64(cx, "leaf_weights")?;
    let roots = required(cx.attr_ints("tree_roots")?, "tree_roots")?;
    let n_targets = required(cx.attr_i_opt("n_targets")?, "n_targets")?;
    let aggregate = match cx.attr_i("aggregate_function", 1)? {
        0 => TreeAggregate::Average,
        1 => TreeAggregate::Sum,
        2 => TreeAggregate::Min,
        3 => TreeAggregate::Max,
        a => return Err(bad(format!("aggregate_function {a}"))),
    };
    let post = match cx.attr_i("post_transform", 0)? {
        0 => "NONE",
        1 => "SOFTMAX",
        2 => "LOGISTIC",
        3 => "SOFTMAX_ZERO",
        4 => "PROBIT",
        p => return Err(bad(format!("post_transform {p}"))),
    };
    let lens = [
        splits.len(),
        modes.len(),
        true_ids.len(),
        true_leafs.len(),
        false_ids.len(),
        false_leafs.len(),
        nan_true.len(),
    ];
    if lens.iter().any(|&l| l != m) {
        return Err(bad(format!(
            "node attributes disagree in length: {m} features, then {lens:?}"
        )));
    }
    if leaf_weights.len() != leaf_targets.len() {
        return Err(bad("leaf_targetids and leaf_weights differ in length"));
    }
    let branches = modes
        .iter()
        .map(|&b| match b {
            0 => Ok(TreeBranch::Leq),
            1 => Ok(TreeBranch::Lt),
            2 => Ok(TreeBranch::Gte),
            3 => Ok(TreeBranch::Gt),
            4 => Ok(TreeBranch::Eq),
            5 => Ok(TreeBranch::Neq),
            6 => Ok(TreeBranch::Member),
            b => Err(bad(format!("node mode {b}"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Member nodes take the NaN-separated sets of membership_values in turn.
    let (mut member_starts, mut members) = (Vec::new(), Vec::new());
    if branches.contains(&TreeBranch::Member) {
        let values = tensor_f64(cx, "membership_values")?;
        let mut sets = values.split(|v| v.is_nan());
        member_starts.push(0);
        for b in &branches {
            if *b == TreeBranch::Member {
                let set = sets
                    .next()
                    .ok_or_else(|| bad("membership_values has fewer sets than member nodes"))?;
                members.extend_from_slice(set);
            }
            member_starts.push(members.len() as i64);
        }
    } else {
        cx.ignore_attr("membership_values");
    }
    let child = |id: i64, leaf: i64| -> Result<i64, MapError> {
        let i = usize::try_from(id).map_err(|_| bad(format!("child id {id}")))?;
        Ok(if leaf != 0 { tree_leaf(i) } else { id })
    };
    let true_children = (0..m)
        .map(|i| child(true_ids[i], true_leafs[i]))
        .collect::<Result<Vec<_>, _>>()?;
    let false_children = (0..m)
        .map(|i| child(false_ids[i], false_leafs[i]))
        .collect::<Result<Vec<_>, _>>()?;
    // A root whose two sides are the same leaf is a one-leaf tree.
    let roots = roots
        .iter()
        .map(|&r| {
            let i = usize::try_from(r).ok().filter(|&i| i < m);
            let i = i.ok_or_else(|| bad(format!("tree root {r} names no node")))?;
            Ok(
                if true_leafs[i] != 0 && false_leafs[i] != 0 && true_ids[i] == false_ids[i] {
                    true_children[i]
                } else {
                    r
                },
            )
        })
        .collect::<Result<Vec<_>, MapError>>()?;
    let op = TreeEnsemble {
        n_targets,
        aggregate,
        roots,
        features,
        branches,
        splits,
        true_children,
        false_children,
        nan_true: nan_true.iter().map(|&v| v != 0).collect(),
        member_starts,
        members,
        leaf_starts: (0..=leaf_targets.len() as i64).collect(),
        leaf_targets,
        leaf_weights,
    };
    op.validate(None).map_err(bad)?;
    let x = rows(cx)?;
    let y = cx.add1(op, &[x])?;
    let y = post_transform(cx, y, post)?;
    cx.set_output(0, y);
    Ok(())
}

/// The forest of TreeEnsembleRegressor/Classifier: nodes named by (tree id,
/// node id), leaves by mode `LEAF`, and `prefix`_{treeids,nodeids,ids,weights}
/// entries on the leaves; `n_targets` targets.
fn legacy_forest(cx: &mut NodeCtx, prefix: &str, n_targets: i64) -> Result<Forest, MapError> {
    cx.ignore_attr("nodes_hitrates");
    cx.ignore_attr("nodes_hitrates_as_tensor");
    let trees = required(cx.attr_ints("nodes_treeids")?, "nodes_treeids")?;
    let ids = required(cx.attr_ints("nodes_nodeids")?, "nodes_nodeids")?;
    let features = required(cx.attr_ints("nodes_featureids")?, "nodes_featureids")?;
    let modes = required(cx.attr_strings("nodes_modes")?, "nodes_modes")?;
    let values = required(floats_f64(cx, "nodes_values")?, "nodes_values")?;
    let true_ids = required(cx.attr_ints("nodes_truenodeids")?, "nodes_truenodeids")?;
    let false_ids = required(cx.attr_ints("nodes_falsenodeids")?, "nodes_falsenodeids")?;
    let n = trees.len();
    let nan_true = cx
        .attr_ints("nodes_missing_value_tracks_true")?
        .unwrap_or_else(|| vec![0; n]);
    let e_trees = required(cx.attr_ints(&format!("{prefix}_treeids"))?, "treeids")?;
    let e_nodes = required(cx.attr_ints(&format!("{prefix}_nodeids"))?, "nodeids")?;
    let e_ids = required(cx.attr_ints(&format!("{prefix}_ids"))?, "ids")?;
    let e_weights = required(floats_f64(cx, &format!("{prefix}_weights"))?, "weights")?;
    let lens = [
        ids.len(),
        features.len(),
        modes.len(),
        values.len(),
        true_ids.len(),
    ];
    if lens
        .iter()
        .chain([&false_ids.len(), &nan_true.len()])
        .any(|&l| l != n)
    {
        return Err(bad(format!(
            "node attributes disagree in length ({n} tree ids)"
        )));
    }
    let e = e_trees.len();
    if e_nodes.len() != e || e_ids.len() != e || e_weights.len() != e {
        return Err(bad(format!("{prefix} entry attributes disagree in length")));
    }
    // (tree, node id) -> position; branches and leaves numbered apart.
    let mut at = HashMap::new();
    // Per position: its encoding as a child (node index or `-1 - leaf`).
    let (mut encoded, mut leaf_of) = (vec![0i64; n], vec![None; n]);
    let (mut branches, mut leaf_tree) = (Vec::new(), Vec::new());
    for i in 0..n {
        if at.insert((trees[i], ids[i]), i).is_some() {
            return Err(bad(format!("tree {} repeats node id {}", trees[i], ids[i])));
        }
        if modes[i] == "LEAF" {
            leaf_of[i] = Some(leaf_tree.len());
            encoded[i] = tree_leaf(leaf_tree.len());
            leaf_tree.push(trees[i]);
        } else {
            let b = match modes[i].as_str() {
                "BRANCH_LEQ" => TreeBranch::Leq,
                "BRANCH_LT" => TreeBranch::Lt,
                "BRANCH_GTE" => TreeBranch::Gte,
                "BRANCH_GT" => TreeBranch::Gt,
                "BRANCH_EQ" => TreeBranch::Eq,
                "BRANCH_NEQ" => TreeBranch::Neq,
                m => return Err(bad(format!("node mode {m}"))),
            };
            encoded[i] = branches.len() as i64;
            branches.push((i, b));
        }
    }
    let encode = |i: usize| encoded[i];
    let find = |tree: i64, id: i64| -> Result<usize, MapError> {
        at.get(&(tree, id))
            .copied()
            .ok_or_else(|| bad(format!("tree {tree} has no node {id}")))
    };
    let (mut true_children, mut false_children) = (Vec::new(), Vec::new());
    let mut referenced = vec![false; n];
    for &(i, _) in &branches {
        let (t, f) = (find(trees[i], true_ids[i])?, find(trees[i], false_ids[i])?);
        referenced[t] = true;
        referenced[f] = true;
        true_children.push(encode(t));
        false_children.push(encode(f));
    }
    // Each tree's root: its first node that no branch points to.
    let mut roots: Vec<(i64, i64)> = Vec::new();
    for i in 0..n {
        if !referenced[i] && !roots.iter().any(|&(t, _)| t == trees[i]) {
            roots.push((trees[i], encode(i)));
        }
    }
    let mut tree_ids: Vec<i64> = trees.clone();
    tree_ids.sort_unstable();
    tree_ids.dedup();
    if roots.len() != tree_ids.len() {
        return Err(bad("a tree has no root (its nodes form a cycle)"));
    }
    // Leaf entries, grouped per leaf in entry order.
    let mut per_leaf: Vec<Vec<(i64, f64)>> = vec![Vec::new(); leaf_tree.len()];
    for k in 0..e {
        let i = find(e_trees[k], e_nodes[k])?;
        let l = leaf_of[i].ok_or_else(|| {
            bad(format!(
                "{prefix} entry {k} names node {} of tree {}, which is not a leaf",
                e_nodes[k], e_trees[k]
            ))
        })?;
        per_leaf[l].push((e_ids[k], e_weights[k]));
    }
    let mut leaf_starts = vec![0i64];
    let (mut leaf_targets, mut leaf_weights) = (Vec::new(), Vec::new());
    for entries in &per_leaf {
        for &(t, w) in entries {
            leaf_targets.push(t);
            leaf_weights.push(w);
        }
        leaf_starts.push(leaf_targets.len() as i64);
    }
    let tree_leaves = tree_ids
        .iter()
        .map(|&t| {
            (0..leaf_tree.len())
                .filter(|&l| leaf_tree[l] == t)
                .collect()
        })
        .collect();
    let op = TreeEnsemble {
        n_targets,
        aggregate: TreeAggregate::Sum,
        roots: roots.into_iter().map(|(_, r)| r).collect(),
        features: branches.iter().map(|&(i, _)| features[i]).collect(),
        branches: branches.iter().map(|&(_, b)| b).collect(),
        splits: branches.iter().map(|&(i, _)| values[i]).collect(),
        true_children,
        false_children,
        nan_true: branches.iter().map(|&(i, _)| nan_true[i] != 0).collect(),
        member_starts: Vec::new(),
        members: Vec::new(),
        leaf_starts,
        leaf_targets,
        leaf_weights,
    };
    op.validate(None).map_err(bad)?;
    // Every listed node is part of its tree: one its root does not reach
    // (a cycle among nodes no branch leads into from the root) is a
    // malformed tree, not a node to skip.
    let (nodes, leaves) = op.reached().map_err(bad)?;
    let unreached = branches
        .iter()
        .zip(&nodes)
        .find(|(_, &r)| !r)
        .map(|(&(i, _), _)| i)
        .or_else(|| {
            let l = leaves.iter().position(|&r| !r)?;
            leaf_of.iter().position(|&x| x == Some(l))
        });
    if let Some(i) = unreached {
        return Err(bad(format!(
            "node {} of tree {} is not reached from the tree's root",
            ids[i], trees[i]
        )));
    }
    Ok(Forest { op, tree_leaves })
}

/// `a` where `has`, else `b` (both `[N, 1]` or broadcastable).
fn pick(cx: &mut NodeCtx, has: &HasCol, a: Value, b: Value) -> Result<Value, MapError> {
    match has {
        HasCol::Fixed(true) => Ok(a),
        HasCol::Fixed(false) => Ok(b),
        HasCol::Rows(h) => cx.add1(Where {}, &[*h, a, b]),
    }
}

/// One target's [`Has`].
#[derive(Clone, Copy)]
enum HasCol {
    Fixed(bool),
    Rows(Value),
}

impl Has {
    fn col(&self, cx: &mut NodeCtx, t: usize) -> Result<HasCol, MapError> {
        Ok(match self {
            Has::Fixed(v) => HasCol::Fixed(v[t]),
            Has::Rows(h) => HasCol::Rows(column(cx, *h, t)?),
        })
    }

    /// `y` where the target was reached, else `other` (a scalar).
    fn select(&self, cx: &mut NodeCtx, y: Value, other: f64) -> Result<Value, MapError> {
        let other = cx.scalar(cx.dtype(y), other)?;
        let mask = match self {
            Has::Fixed(v) if v.iter().all(|&h| h) => return Ok(y),
            Has::Fixed(v) => {
                let bytes: Vec<u8> = v.iter().map(|&h| u8::from(h)).collect();
                let t = Tensor::new(DType::Bool, vec![v.len()], rlx_ir::Bytes::copy_from(&bytes))
                    .map_err(|e| bad(e.to_string()))?;
                cx.constant(t)
            }
            Has::Rows(h) => *h,
        };
        cx.add1(Where {}, &[mask, y, other])
    }
}

/// Column `t` of `[N, T]` as `[N, 1]`.
fn column(cx: &mut NodeCtx, v: Value, t: usize) -> Result<Value, MapError> {
    let i = cx.const_i64(&[t as i64]);
    cx.add1(Gather { axis: 1 }, &[v, i])
}

/// `base` as an f32 constant `[len]`.
fn base_const(cx: &mut NodeCtx, base: &[f64]) -> Result<Value, MapError> {
    let v: Vec<f32> = base.iter().map(|&b| b as f32).collect();
    let t = Tensor::from_f32(&[v.len()], &v).map_err(|e| bad(e.to_string()))?;
    Ok(cx.constant(t))
}

/// TreeEnsembleRegressor: `[N, n_targets]` f32, the aggregate plus the base
/// value of each target a reached leaf names (0 for the others), then the
/// post transform.
fn regressor(cx: &mut NodeCtx) -> Result<(), MapError> {
    let n_targets = required(cx.attr_i_opt("n_targets")?, "n_targets")?;
    let aggregate = cx.attr_choice(
        "aggregate_function",
        "SUM",
        &["SUM", "AVERAGE", "MIN", "MAX"],
    )?;
    let post = post_transform_attr(cx)?;
    let base = floats_f64(cx, "base_values")?.unwrap_or_default();
    if !base.is_empty() && base.len() != n_targets as usize {
        return Err(bad(format!(
            "{} base values for {n_targets} targets",
            base.len()
        )));
    }
    let mut forest = legacy_forest(cx, "target", n_targets)?;
    forest.op.aggregate = match aggregate.as_str() {
        "SUM" => TreeAggregate::Sum,
        "AVERAGE" => TreeAggregate::Average,
        "MIN" => TreeAggregate::Min,
        _ => TreeAggregate::Max,
    };
    let x = rows(cx)?;
    let y = forest.scores(cx, x)?;
    let mut y = cast(cx, y, DType::F32)?;
    if !base.is_empty() {
        let b = base_const(cx, &base)?;
        y = binary(cx, B::Add, y, b)?;
        let has = forest.has(cx, x)?;
        y = has.select(cx, y, 0.0)?;
    }
    let y = post_transform(cx, y, &post)?;
    cx.set_output(0, y);
    Ok(())
}

/// TreeEnsembleClassifier with integer or string labels: the label `[N]` and the
/// class scores `[N, classes]` (f32).
fn classifier(cx: &mut NodeCtx) -> Result<(), MapError> {
    let labels = Labels::read(cx, "classlabels_int64s")?;
    let post = post_transform_attr(cx)?;
    let base = floats_f64(cx, "base_values")?.unwrap_or_default();
    let c = labels.len();
    if c < 2 {
        return cx.unsupported(format!("a classifier of {c} class"));
    }
    let forest = legacy_forest(cx, "class", c as i64)?;
    let x = rows(cx)?;
    let s = forest.scores(cx, x)?;
    let s = cast(cx, s, DType::F32)?;
    let has = forest.has(cx, x)?;
    let mut labels = labels;
    let (winner, scores) = if c > 2 {
        many_classes(cx, s, &has, &base, &post)?
    } else {
        let ids = &forest.op.leaf_targets;
        let one_class = ids.iter().all(|&t| t == ids.first().copied().unwrap_or(0));
        let all_positive = forest.op.leaf_weights.iter().all(|&w| w >= 0.0);
        if !one_class {
            // ORT answers its default negative and positive labels here, 0
            // and 1, whatever the class labels are.
            if let Labels::Strings(_) = labels {
                return cx.unsupported(
                    "a two-class tree classifier with string labels whose leaves name both classes",
                );
            }
            labels = Labels::Ints(vec![0, 1]);
        }
        binary_classes(cx, s, &has, &base, &post, one_class, all_positive)?
    };
    let label = labels.pick(cx, winner)?;
    cx.set_output(0, label);
    cx.set_output(1, scores);
    Ok(())
}

/// Three or more classes: scores `post(s + base)`; the label is the best
/// class among those a reached leaf names (all of them once base values are
/// added), the first on ties.
fn many_classes(
    cx: &mut NodeCtx,
    s: Value,
    has: &Has,
    base: &[f64],
    post: &str,
) -> Result<(Value, Value), MapError> {
    let (scored, ranked) = if base.is_empty() {
        (s, has.select(cx, s, f64::NEG_INFINITY)?)
    } else {
        let b = base_const(cx, base)?;
        let z = binary(cx, B::Add, s, b)?;
        (z, z)
    };
    let winner = cx.add1(
        ArgReduce {
            kind: ArgReduceKind::Max,
            axis: 1,
            keepdims: false,
            select_last_index: false,
        },
        &[ranked],
    )?;
    Ok((winner, post_transform(cx, scored, post)?))
}

/// Two classes, as ONNX Runtime finalizes them. With sums `s0`, `s1`:
/// - base values `[b0, b1]`: a row that reached class 1 gets `p1 = b1 + s0`
///   and `p0 = -p1`; others `p0 = s0 + b0`, `p1 = b1`. One base value adds to
///   `p0`. A class no reached leaf names scores 0.
/// - When only one class id appears in the leaves (`one_class`), the label
///   is the second class if the positive weight (`p1` when class 1 was
///   reached, else `p0`) exceeds 0.5 (all weights `>= 0`) or 0; the scores
///   of a row without class 1 are `[1 - p0, p0]` (`[-p0, p0]` with negative
///   weights; LOGISTIC gives `[1 - σ(p0), σ(p0)]`).
/// - Otherwise the label is 1 when that weight exceeds 0, else 0 (ORT's
///   default labels, not the class labels).
fn binary_classes(
    cx: &mut NodeCtx,
    s: Value,
    has: &Has,
    base: &[f64],
    post: &str,
    one_class: bool,
    all_positive: bool,
) -> Result<(Value, Value), MapError> {
    if post == "PROBIT" {
        return cx.unsupported("post_transform PROBIT (no inverse erf)");
    }
    let (s0, s1) = (column(cx, s, 0)?, column(cx, s, 1)?);
    let (h0, h1) = (has.col(cx, 0)?, has.col(cx, 1)?);
    // A column of zeros (the score of a class no reached leaf names).
    let zero = cx.scalar(DType::F32, 0.0)?;
    let rows_shape = cx.add1(
        ShapeOf {
            start: 0,
            end: None,
        },
        &[s0],
    )?;
    let zero = cx.add1(Expand {}, &[zero, rows_shape])?;
    let (p0, p1, both) = match *base {
        [b0, b1] => {
            let (b0, b1) = (cx.scalar(DType::F32, b0)?, cx.scalar(DType::F32, b1)?);
            let reached = binary(cx, B::Add, b1, s0)?;
            let neg = cx.add1(
                Unary {
                    kind: UnaryKind::Neg,
                },
                &[reached],
            )?;
            let q0 = binary(cx, B::Add, s0, b0)?;
            let q1 = binary(cx, B::Add, s1, b1)?;
            let p1 = pick(cx, &h1, reached, q1)?;
            let p0 = pick(cx, &h1, neg, q0)?;
            (p0, p1, HasCol::Fixed(true))
        }
        [b0] => {
            let b0 = cx.scalar(DType::F32, b0)?;
            (binary(cx, B::Add, s0, b0)?, s1, h1)
        }
        [] => (s0, s1, h1),
        _ => return Err(bad(format!("{} base values for two classes", base.len()))),
    };
    if !one_class && !matches!(both, HasCol::Fixed(true)) {
        return cx.unsupported(
            "two classes that both appear in the leaves, a row that reaches no class-1 entry and \
             fewer than two base values (ONNX Runtime leaves that score undefined)",
        );
    }
    // The weight that decides the label.
    let w0 = pick(cx, &h0, p0, zero)?;
    let pos = pick(cx, &h1, p1, w0)?;
    let threshold = if one_class && all_positive { 0.5 } else { 0.0 };
    let t = cx.scalar(DType::F32, threshold)?;
    let second = cx.add1(
        Compare {
            kind: CompareKind::Greater,
        },
        &[pos, t],
    )?;
    let winner = cast(cx, second, DType::I64)?;
    let flat = cx.const_i64(&[-1]);
    let winner = cx.add1(Reshape { allowzero: false }, &[winner, flat])?;
    // Rows with both scores: the post transform of [w0, w1].
    let w1 = pick(cx, &h1, p1, zero)?;
    let pair = cx.add1(Concat { axis: 1 }, &[w0, w1])?;
    let pair = post_transform(cx, pair, post)?;
    let scores = match both {
        HasCol::Fixed(true) => pair,
        single => {
            // Rows with p0 alone: its complement (or negation) beside it.
            let p = if post == "LOGISTIC" {
                cx.add1(
                    Unary {
                        kind: UnaryKind::Sigmoid,
                    },
                    &[p0],
                )?
            } else {
                p0
            };
            let low = if post == "LOGISTIC" || all_positive {
                let one = cx.scalar(DType::F32, 1.0)?;
                binary(cx, B::Sub, one, p)?
            } else {
                cx.add1(
                    Unary {
                        kind: UnaryKind::Neg,
                    },
                    &[p],
                )?
            };
            let alone = cx.add1(Concat { axis: 1 }, &[low, p])?;
            pick(cx, &single, pair, alone)?
        }
    };
    Ok((winner, scores))
}
