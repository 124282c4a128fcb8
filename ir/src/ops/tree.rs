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
        self.reached().map(|_| ())
    }

    /// The nodes and leaves a walk from the roots reaches (`(nodes,
    /// leaves)`, a flag each), or an error naming a node that is its own
    /// descendant: a cycle, down which a row would never reach a leaf.
    /// Subtrees shared between trees are allowed. Children must be in
    /// range ([`TreeEnsemble::validate`] checks them first).
    pub fn reached(&self) -> Result<(Vec<bool>, Vec<bool>), String> {
        const UNSEEN: u8 = 0;
        const ON_PATH: u8 = 1;
        const DONE: u8 = 2;
        let (m, l) = (self.nodes(), self.leaves());
        let mut state = vec![UNSEEN; m];
        let mut leaves = vec![false; l];
        // An explicit stack (a chain of 10^5 nodes is a valid tree): each
        // entry a node and how many of its children were visited.
        let mut stack: Vec<(usize, u8)> = Vec::new();
        let mut visit = |c: i64, stack: &mut Vec<(usize, u8)>, state: &mut [u8]| {
            if c < 0 {
                if let Some(f) = leaves.get_mut((-1 - c) as usize) {
                    *f = true;
                }
                return Ok(());
            }
            let i = c as usize;
            match state.get(i) {
                Some(&UNSEEN) => {
                    state[i] = ON_PATH;
                    stack.push((i, 0));
                    Ok(())
                }
                Some(&ON_PATH) => Err(format!("node {i} is its own descendant (a cycle)")),
                _ => Ok(()),
            }
        };
        for &r in &self.roots {
            visit(r, &mut stack, &mut state)?;
            while let Some(top) = stack.last_mut() {
                let (i, k) = *top;
                if k == 2 {
                    state[i] = DONE;
                    stack.pop();
                    continue;
                }
                top.1 += 1;
                let c = if k == 0 {
                    self.true_children[i]
                } else {
                    self.false_children[i]
                };
                visit(c, &mut stack, &mut state)?;
            }
        }
        Ok((state.into_iter().map(|s| s == DONE).collect(), leaves))
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
        // The stump's node as its own true child: a row would never leave it.
        assert!(bad("true_children=[-1]", "true_children=[0]").contains("a cycle"));
    }

    #[test]
    fn shared_subtrees_and_deep_chains_are_trees() {
        // Two trees rooted at the same node.
        assert!(checked(&STUMP.replace("roots=[0]", "roots=[0, 0]")).is_ok());
        // A chain of 100,000 nodes, each sending rows on or to the leaf:
        // walked without recursion.
        let n = 100_000usize;
        let t = super::TreeEnsemble {
            n_targets: 1,
            aggregate: super::TreeAggregate::Sum,
            roots: vec![0],
            features: vec![0; n],
            branches: vec![super::TreeBranch::Leq; n],
            splits: vec![0.5; n],
            true_children: (1..=n as i64)
                .map(|c| if c == n as i64 { -1 } else { c })
                .collect(),
            false_children: vec![-1; n],
            nan_true: vec![false; n],
            member_starts: Vec::new(),
            members: Vec::new(),
            leaf_starts: vec![0, 1],
            leaf_targets: vec![0],
            leaf_weights: vec![1.0],
        };
        let (nodes, leaves) = t.reached().unwrap();
        assert!(nodes.iter().all(|&r| r) && leaves == [true]);
    }
}
