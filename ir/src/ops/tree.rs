//! Decision-tree ensembles (ai.onnx.ml TreeEnsemble, TreeEnsembleRegressor and
//! TreeEnsembleClassifier): a forest of binary trees whose reached leaves add
//! weighted entries to per-target scores.

use super::{attr_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::{attr_enum, op_attrs};

attr_enum! {
    /// How a tree node compares its feature `x` with the split value `s`
    /// (`member`: `x` is one of the node's set members).
    pub enum TreeBranch {
        Leq = "leq", Lt = "lt", Gte = "gte", Gt = "gt", Eq = "eq", Neq = "neq",
        Member = "member",
    }
}

attr_enum! {
    /// How the weights the trees give one target combine (`average` divides
    /// the sum by the number of trees).
    pub enum TreeAggregate { Sum = "sum", Average = "average", Min = "min", Max = "max" }
}

op_attrs! {
    /// A forest over rows `x: [N, F]` giving `[N, n_targets]` in x's dtype.
    /// Children and roots name a node (`>= 0`) or a leaf `l` as `-1 - l`. A
    /// node sends a row to its true child when `x[feature] <branch> split`
    /// holds, or when the feature is NaN and `nan_true`. Member nodes test
    /// `members[member_starts[i]..member_starts[i + 1]]` (`member_starts` has
    /// one more entry than there are nodes, or is empty without member
    /// nodes). Leaf `l` adds the entries `leaf_starts[l]..leaf_starts[l + 1]`
    /// of (`leaf_targets`, `leaf_weights`). A target no reached leaf names is 0.
    pub struct TreeEnsemble {
        pub n_targets: i64,
        pub aggregate: TreeAggregate,
        pub roots: Vec<i64>,
        pub features: Vec<i64>,
        pub branches: Vec<TreeBranch>,
        pub splits: Vec<f64>,
        pub true_children: Vec<i64>,
        pub false_children: Vec<i64>,
        pub nan_true: Vec<bool>,
        pub member_starts: Vec<i64>,
        pub members: Vec<f64>,
        pub leaf_starts: Vec<i64>,
        pub leaf_targets: Vec<i64>,
        pub leaf_weights: Vec<f64>,
    }
}

/// The child or root encoding of leaf `l`.
pub fn tree_leaf(l: usize) -> i64 {
    -1 - l as i64
}

impl TreeEnsemble {
    /// Nodes (non-leaf) in the forest.
    pub fn nodes(&self) -> usize {
        self.features.len()
    }

    /// Leaves in the forest.
    pub fn leaves(&self) -> usize {
        self.leaf_starts.len().saturating_sub(1)
    }

    /// Checks that every index is in range and the arrays agree in length;
    /// `features` is the row length when known.
    pub fn validate(&self, features: Option<usize>) -> Result<(), String> {
        let (m, l) = (self.nodes(), self.leaves());
        if self.n_targets < 1 {
            return Err(format!("n_targets {} is not positive", self.n_targets));
        }
        for (name, len) in [
            ("branches", self.branches.len()),
            ("splits", self.splits.len()),
            ("true_children", self.true_children.len()),
            ("false_children", self.false_children.len()),
            ("nan_true", self.nan_true.len()),
        ] {
            if len != m {
                return Err(format!("{name} has {len} entries for {m} nodes"));
            }
        }
        if self.roots.is_empty() {
            return Err("the forest has no trees".into());
        }
        let child = |c: i64| -> bool {
            if c >= 0 {
                (c as usize) < m
            } else {
                ((-1 - c) as usize) < l
            }
        };
        if let Some(bad) = self
            .roots
            .iter()
            .chain(&self.true_children)
            .chain(&self.false_children)
            .find(|&&c| !child(c))
        {
            return Err(format!("child {bad} names no node or leaf"));
        }
        if let Some(f) = self
            .features
            .iter()
            .find(|&&f| f < 0 || features.is_some_and(|n| f as usize >= n))
        {
            return Err(format!("feature {f} is outside the row"));
        }
        let starts_ok = |s: &[i64], n: usize, len: usize| {
            s.len() == n + 1
                && s[0] == 0
                && s[n] as usize == len
                && s.windows(2).all(|w| w[0] <= w[1])
        };
        if !starts_ok(&self.leaf_starts, l, self.leaf_targets.len())
            || self.leaf_weights.len() != self.leaf_targets.len()
        {
            return Err("leaf entry ranges do not cover the leaf targets and weights".into());
        }
        if let Some(t) = self
            .leaf_targets
            .iter()
            .find(|&&t| t < 0 || t >= self.n_targets)
        {
            return Err(format!(
                "leaf target {t} is not below n_targets {}",
                self.n_targets
            ));
        }
        let has_members = self.branches.contains(&TreeBranch::Member);
        if has_members && !starts_ok(&self.member_starts, m, self.members.len()) {
            return Err("set member ranges do not cover the members".into());
        }
        Ok(())
    }
}

impl OpDef for TreeEnsemble {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, &[DType::F32, DType::F64, DType::F16])?;
        cx.expect_rank(0, 2)?;
        let x = &cx.shape(0).0;
        let features = x[1].known().map(|f| f as usize);
        self.validate(features)
            .map_err(|e| attr_err("tree_ensemble", &e))?;
        Ok(vec![TensorType::new(
            d,
            Shape(vec![x[0].clone(), Dim::Known(self.n_targets)]),
        )])
    }
}

#[cfg(test)]
mod tests {
    use crate::text::{parse_graph, print_graph};

    const STUMP: &str = "tree_ensemble(%0) {n_targets=2, aggregate=sum, roots=[0], features=[1], branches=[member], splits=[0.0], true_children=[-1], false_children=[-2], nan_true=[false], member_starts=[0, 2], members=[1.5, 3.0], leaf_starts=[0, 1, 3], leaf_targets=[0, 0, 1], leaf_weights=[0.25, -1.0, 2.0]}";

    fn graph(op: &str) -> String {
        format!("rlx-ir 2\ngraph {{\n  %0 = input \"x\" : f32[N,2]\n  %1 = {op} : f32[N,2]\n  output \"y\" = %1\n}}\n")
    }

    fn checked(op: &str) -> Result<(), String> {
        let mut g = parse_graph(&graph(op)).map_err(|e| e.to_string())?;
        crate::analysis::infer_graph(&mut g, None).map_err(|e| e.to_string())?;
        Ok(())
    }

    #[test]
    fn a_forest_round_trips_and_checks() {
        let src = graph(STUMP);
        assert_eq!(print_graph(&parse_graph(&src).unwrap()), src);
        assert!(checked(STUMP).is_ok());
    }

    #[test]
    fn malformed_forests_are_errors() {
        let bad = |from: &str, to: &str| checked(&STUMP.replace(from, to)).unwrap_err();
        assert!(bad("true_children=[-1]", "true_children=[-3]").contains("names no node"));
        assert!(bad("features=[1]", "features=[2]").contains("outside the row"));
        assert!(bad("leaf_targets=[0, 0, 1]", "leaf_targets=[0, 0, 2]").contains("not below"));
        assert!(bad("member_starts=[0, 2]", "member_starts=[0, 3]").contains("set member"));
        assert!(bad("roots=[0]", "roots=[]").contains("no trees"));
    }
}
