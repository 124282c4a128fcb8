//! TreeEnsemble: each row walks every tree of the forest from its root to a
//! leaf; the leaves' weighted entries combine per target (sum, average, min
//! or max) in f64. The forest is laid out once, at build, as flat node
//! records.

use rlx_ir::ops::{TreeAggregate, TreeBranch, TreeEnsemble};
use rlx_ir::Op;

use crate::kernel::{Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::TreeEnsemble(t) => Ok(Box::new(Forest::new(t)?)),
        op => Err(KernelError::Internal(format!(
            "{} is not a tree ensemble",
            op.name()
        ))),
    }
}

struct NodeRec {
    feature: usize,
    branch: TreeBranch,
    split: f64,
    /// True and false child: a node (`>= 0`) or a leaf `-1 - l`.
    children: [i64; 2],
    nan_true: bool,
    members: std::ops::Range<usize>,
}

struct Forest {
    nodes: Vec<NodeRec>,
    roots: Vec<i64>,
    members: Vec<f64>,
    leaf_starts: Vec<usize>,
    leaf_targets: Vec<usize>,
    leaf_weights: Vec<f64>,
    n_targets: usize,
    aggregate: TreeAggregate,
    label: String,
}

impl Forest {
    fn new(t: &TreeEnsemble) -> Result<Forest, KernelError> {
        t.validate(None).map_err(KernelError::Value)?;
        let nodes = (0..t.nodes())
            .map(|i| NodeRec {
                feature: t.features[i] as usize,
                branch: t.branches[i],
                split: t.splits[i],
                children: [t.true_children[i], t.false_children[i]],
                nan_true: t.nan_true[i],
                members: if t.branches[i] == TreeBranch::Member {
                    t.member_starts[i] as usize..t.member_starts[i + 1] as usize
                } else {
                    0..0
                },
            })
            .collect();
        Ok(Forest {
            nodes,
            roots: t.roots.clone(),
            members: t.members.clone(),
            leaf_starts: t.leaf_starts.iter().map(|&s| s as usize).collect(),
            leaf_targets: t.leaf_targets.iter().map(|&s| s as usize).collect(),
            leaf_weights: t.leaf_weights.clone(),
            n_targets: t.n_targets as usize,
            aggregate: t.aggregate,
            label: format!("tree_ensemble {} trees, {} nodes", t.roots.len(), t.nodes()),
        })
    }

    /// The leaf a row reaches from `root`; a path longer than the node count
    /// means a cycle (a malformed model) and is an error.
    fn leaf(&self, row: &[f64], root: i64) -> Result<usize, KernelError> {
        let mut at = root;
        for _ in 0..=self.nodes.len() {
            if at < 0 {
                return Ok((-1 - at) as usize);
            }
            let n = &self.nodes[at as usize];
            let x = *row.get(n.feature).ok_or_else(|| {
                KernelError::Value(format!(
                    "feature {} is outside rows of {}",
                    n.feature,
                    row.len()
                ))
            })?;
            let go_true = if x.is_nan() {
                n.nan_true
            } else {
                match n.branch {
                    TreeBranch::Leq => x <= n.split,
                    TreeBranch::Lt => x < n.split,
                    TreeBranch::Gte => x >= n.split,
                    TreeBranch::Gt => x > n.split,
                    TreeBranch::Eq => x == n.split,
                    TreeBranch::Neq => x != n.split,
                    TreeBranch::Member => self.members[n.members.clone()].contains(&x),
                }
            };
            at = n.children[usize::from(!go_true)];
        }
        Err(KernelError::Value(
            "a tree of the ensemble has a cycle".into(),
        ))
    }

    /// The targets of one row.
    fn row(&self, row: &[f64], out: &mut [f64]) -> Result<(), KernelError> {
        let mut seen = vec![false; self.n_targets];
        out.fill(0.0);
        for &root in &self.roots {
            let l = self.leaf(row, root)?;
            for e in self.leaf_starts[l]..self.leaf_starts[l + 1] {
                let (t, w) = (self.leaf_targets[e], self.leaf_weights[e]);
                let o = &mut out[t];
                *o = match (self.aggregate, seen[t]) {
                    (TreeAggregate::Sum | TreeAggregate::Average, _) | (_, false) => {
                        if seen[t] {
                            *o + w
                        } else {
                            w
                        }
                    }
                    (TreeAggregate::Min, true) => o.min(w),
                    (TreeAggregate::Max, true) => o.max(w),
                };
                seen[t] = true;
            }
        }
        if self.aggregate == TreeAggregate::Average {
            let n = self.roots.len() as f64;
            out.iter_mut().for_each(|v| *v /= n);
        }
        Ok(())
    }
}

impl Kernel for Forest {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn run(
        &self,
        ins: &[TensorRef],
        outs: &mut [TensorMut],
        _: &mut [u8],
    ) -> Result<(), KernelError> {
        let x = &ins[0];
        let [n, f] = *x.dims else {
            return Err(KernelError::Value(format!(
                "tree ensemble rows must be 2-D, got {:?}",
                x.dims
            )));
        };
        let xs = x.to_f64s()?;
        let t = self.n_targets;
        let mut ys = vec![0f64; n * t];
        if f > 0 && crate::par::parallel() {
            // Rows in a few tasks per thread; the first error wins.
            let per = n.div_ceil(4 * crate::par::threads()).max(1);
            let failed = std::sync::Mutex::new(None);
            crate::par::chunks_mut(&mut ys, per * t, |c, outs| {
                for (k, out) in outs.chunks_mut(t).enumerate() {
                    let r = c * per + k;
                    if let Err(e) = self.row(&xs[r * f..(r + 1) * f], out) {
                        failed
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                        return;
                    }
                }
            });
            if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
                return Err(e);
            }
        } else if f > 0 {
            for (row, out) in xs.chunks(f).zip(ys.chunks_mut(t)) {
                self.row(row, out)?;
            }
        } else {
            for out in ys.chunks_mut(t) {
                self.row(&[], out)?;
            }
        }
        outs[0].store_f64s(&ys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::tree_leaf;

    /// One stump per feature: `x[f] <= 0` gives leaf 2f (weight f+1 to
    /// target 0), else leaf 2f+1 (weight 10(f+1) to target 1).
    fn stumps(aggregate: TreeAggregate) -> Forest {
        let t = TreeEnsemble {
            n_targets: 2,
            aggregate,
            roots: vec![0, 1],
            features: vec![0, 1],
            branches: vec![TreeBranch::Leq; 2],
            splits: vec![0.0; 2],
            true_children: vec![tree_leaf(0), tree_leaf(2)],
            false_children: vec![tree_leaf(1), tree_leaf(3)],
            nan_true: vec![true, false],
            member_starts: vec![],
            members: vec![],
            leaf_starts: vec![0, 1, 2, 3, 4],
            leaf_targets: vec![0, 1, 0, 1],
            leaf_weights: vec![1.0, 10.0, 2.0, 20.0],
        };
        Forest::new(&t).unwrap()
    }

    #[test]
    fn rows_walk_to_their_leaves_and_aggregate() {
        let f = stumps(TreeAggregate::Sum);
        let mut out = [0.0; 2];
        f.row(&[-1.0, -1.0], &mut out).unwrap();
        assert_eq!(out, [3.0, 0.0]);
        f.row(&[1.0, -1.0], &mut out).unwrap();
        assert_eq!(out, [2.0, 10.0]);
        // NaN follows nan_true: true in tree 0, false in tree 1.
        f.row(&[f64::NAN, f64::NAN], &mut out).unwrap();
        assert_eq!(out, [1.0, 20.0]);
        let f = stumps(TreeAggregate::Max);
        f.row(&[-1.0, -1.0], &mut out).unwrap();
        assert_eq!(out, [2.0, 0.0]);
        let f = stumps(TreeAggregate::Average);
        f.row(&[1.0, 1.0], &mut out).unwrap();
        assert_eq!(out, [0.0, 15.0]);
    }

    #[test]
    fn a_cycle_is_an_error_not_a_hang() {
        let mut f = stumps(TreeAggregate::Sum);
        f.nodes[0].children = [0, 0];
        assert!(f.row(&[1.0, 1.0], &mut [0.0; 2]).is_err());
    }
}
