//! Control flow with subgraphs: If, Loop and Scan.
//!
//! Subgraphs capture outer values explicitly: every value a body reads from the
//! enclosing graph is an extra input of the op and an `input` of the body, after
//! the op's own operands. Bodies are complete graphs with their own numbering.

use super::{attr_err, InferCx, InferError, OpDef};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::graph::Graph;
use crate::op_attrs;
use crate::shape::{Shape, TensorType};

op_attrs! {
    /// Runs one branch; inputs `cond` then the captures both branches take.
    pub struct If {
        pub then_branch: Graph,
        pub else_branch: Graph,
    }
}

op_attrs! {
    /// A branch the importer could not map or type (an `If` whose condition is
    /// only known at run time, as ONNX Runtime checks a branch only when it
    /// runs): running it fails with `reason`, which names the ONNX node.
    /// Its outputs keep the types it was created with.
    pub struct Refused {
        pub reason: String,
    }
}

impl OpDef for Refused {
    fn arity(&self) -> (usize, usize) {
        (0, 0)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        Ok(cx.prior.to_vec())
    }
}

fn output_types(g: &Graph) -> Vec<TensorType> {
    g.outputs().iter().map(|o| g.ty(o.value).clone()).collect()
}

/// True if every output of `g` comes from a [`Refused`] node: a branch that
/// can only fail, whose types say nothing.
pub fn is_refusal(g: &Graph) -> bool {
    !g.outputs().is_empty()
        && g.outputs()
            .iter()
            .all(|o| matches!(g.node(o.value.node).op, super::Op::Refused(_)))
}

impl If {
    /// True if some output has a different rank in the two branches: its type
    /// is only known once the condition is. A refused branch has no say.
    pub fn rank_varies(&self) -> bool {
        if is_refusal(&self.then_branch) || is_refusal(&self.else_branch) {
            return false;
        }
        let (t, e) = (self.then_branch.outputs(), self.else_branch.outputs());
        t.iter().zip(e).any(|(a, b)| {
            self.then_branch.ty(a.value).rank() != self.else_branch.ty(b.value).rank()
        })
    }
}

impl OpDef for If {
    fn arity(&self) -> (usize, usize) {
        let n = 1 + self.then_branch.inputs().len();
        (n, n)
    }
    /// The condition decides output ranks when they vary: sessions then bind
    /// the inputs it derives from, so the `if` folds to its branch.
    fn value_ports(&self) -> &'static [usize] {
        if self.rank_varies() {
            &[0]
        } else {
            &[]
        }
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[DType::Bool])?;
        if self.then_branch.inputs().len() != self.else_branch.inputs().len() {
            return Err(attr_err(
                "else_branch",
                "both branches must take the same captures",
            ));
        }
        let t = output_types(&self.then_branch);
        let e = output_types(&self.else_branch);
        if t.len() != e.len() {
            return Err(attr_err(
                "else_branch",
                format!("{} outputs, the then branch has {}", e.len(), t.len()),
            ));
        }
        if let Some(a) = t
            .iter()
            .zip(&e)
            .find(|(a, b)| a.dtype != b.dtype || a.kind.unwrapped() != b.kind.unwrapped())
        {
            return Err(InferError::Mismatch {
                what: "If branch output dtypes",
                a: a.0.to_string(),
                b: a.1.to_string(),
            });
        }
        // A known condition gives the taken branch's types exactly, and a
        // refused branch (which only fails) the other's.
        if let Some([c]) = cx.ints(0).as_deref() {
            return Ok(if *c != 0 { t } else { e });
        }
        if is_refusal(&self.else_branch) {
            return Ok(t);
        }
        if is_refusal(&self.then_branch) {
            return Ok(e);
        }
        // A value in one branch and an optional in the other make an optional.
        let kinds: Vec<_> = t
            .iter()
            .zip(&e)
            .map(|(a, b)| {
                if a.kind == b.kind {
                    a.kind
                } else {
                    a.kind.optional()
                }
            })
            .collect();
        let mut out = Vec::new();
        for (i, (a, b)) in t.into_iter().zip(e).enumerate() {
            let a = a.with_kind(kinds[i]);
            if a.shape == b.shape {
                out.push(a);
            } else if a.rank() == b.rank() {
                let s = a
                    .shape
                    .0
                    .iter()
                    .zip(&b.shape.0)
                    .enumerate()
                    .map(|(j, (x, y))| if x == y { x.clone() } else { cx.fresh(i, j) })
                    .collect();
                out.push(TensorType::new(a.dtype, Shape(s)).with_kind(a.kind));
            } else {
                // The rank is decided at run time. The then branch's rank
                // stands in, with every dim a run-time one: the graph runs in
                // the dynamic interpreter, which infers each node again from
                // the tensors it gets, unless specialization folds the
                // condition first.
                out.push(TensorType::new(a.dtype, cx.fresh_shape(i, a.rank())?).with_kind(a.kind));
            }
        }
        Ok(out)
    }
}

op_attrs! {
    /// A loop. Inputs: trip count `M` (i64 scalar), `cond` (bool scalar), the
    /// `num_carried` loop-carried values, then captures. The body takes
    /// `(iteration, cond, carried..., captures...)` and returns
    /// `(cond, carried..., scan outputs...)`; the op returns the final carried
    /// values and each scan output stacked along a new first axis.
    pub struct Loop {
        pub body: Graph,
        pub num_carried: i64,
    }
}

impl Loop {
    /// True if the body passes its `cond` input through (or returns constant
    /// true), so the loop runs exactly `M` times when started with `cond` true.
    pub fn runs_full_trip(&self) -> bool {
        let Some(out) = self.body.outputs().first() else {
            return false;
        };
        if self.body.inputs().get(1) == Some(&out.value.node) {
            return true;
        }
        match &self.body.node(out.value.node).op {
            crate::ops::Op::Constant(c) => c.value.to_i64_vec().is_some_and(|v| v == [1]),
            _ => false,
        }
    }
}

impl OpDef for Loop {
    fn arity(&self) -> (usize, usize) {
        let n = self.body.inputs().len();
        (n, n)
    }
    fn value_ports(&self) -> &'static [usize] {
        &[0, 1]
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let k = count(self.num_carried, "num_carried", cx.inputs.len())?;
        let body_out = output_types(&self.body);
        if body_out.len() < 1 + k {
            return Err(attr_err(
                "body",
                "the body returns fewer values than it carries",
            ));
        }
        let trip = match (cx.ints(0), cx.value(1).and_then(|v| v.as_i64s())) {
            (Some(m), Some(c))
                if m.len() == 1 && c == [1] && m[0] < (1 << 40) && self.runs_full_trip() =>
            {
                Dim::Known(m[0].max(0))
            }
            (Some(m), _) if m.len() == 1 && m[0] <= 0 => Dim::Known(0),
            (_, Some(c)) if c == [0] => Dim::Known(0),
            _ => cx.fresh(k, 0),
        };
        let mut out = Vec::new();
        for i in 0..k {
            // Carried values keep their initial type when the body preserves it.
            let init = cx.ty(2 + i).clone();
            let b = &body_out[1 + i];
            if b.dtype != init.dtype {
                return Err(InferError::Mismatch {
                    what: "loop-carried dtype",
                    a: init.to_string(),
                    b: b.to_string(),
                });
            }
            // An optional carried in may come back as its value (a
            // sequence): the body's kind is what later iterations carry.
            out.push(if b.shape == init.shape && b.kind == init.kind {
                init
            } else {
                TensorType::new(init.dtype, cx.fresh_shape(i, b.rank())?).with_kind(b.kind)
            });
        }
        for t in &body_out[1 + k..] {
            let mut s = vec![trip.clone()];
            s.extend(t.shape.0.iter().cloned());
            out.push(TensorType::new(t.dtype, Shape(s)));
        }
        Ok(out)
    }
}

op_attrs! {
    /// A scan. Inputs: `num_state` initial states, `num_scan_inputs` scanned
    /// tensors, then captures. The body takes `(states..., scan slices..., captures...)`
    /// and returns `(states..., scan output slices...)`.
    pub struct Scan {
        pub body: Graph,
        pub num_state: i64,
        pub num_scan_inputs: i64,
        pub scan_input_directions: Vec<i64>,
        pub scan_output_directions: Vec<i64>,
        pub scan_input_axes: Vec<i64>,
        pub scan_output_axes: Vec<i64>,
    }
}

/// A count attribute as a size no larger than the node's `inputs`.
fn count(v: i64, name: &'static str, inputs: usize) -> Result<usize, InferError> {
    usize::try_from(v)
        .ok()
        .filter(|&n| n <= inputs)
        .ok_or_else(|| {
            attr_err(
                name,
                format!("{v} is not a count of at most {inputs} inputs"),
            )
        })
}

impl OpDef for Scan {
    fn arity(&self) -> (usize, usize) {
        let n = self.body.inputs().len();
        (n, n)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let ns = count(self.num_state, "num_state", cx.inputs.len())?;
        let ni = count(self.num_scan_inputs, "num_scan_inputs", cx.inputs.len())?;
        if ni == 0 || cx.inputs.len() < ns + ni {
            return Err(attr_err(
                "num_scan_inputs",
                "needs at least one scanned input",
            ));
        }
        let ax0 = self.scan_input_axes.first().copied().unwrap_or(0);
        let r0 = cx.rank(ns);
        let ax0 = super::norm_axis(ax0, r0)?;
        let len = cx.shape(ns).0[ax0].clone();
        let body_out = output_types(&self.body);
        if body_out.len() < ns {
            return Err(attr_err(
                "body",
                "the body returns fewer values than the state",
            ));
        }
        let mut out: Vec<TensorType> = (0..ns).map(|i| cx.ty(i).clone()).collect();
        for (j, t) in body_out[ns..].iter().enumerate() {
            let axis = self.scan_output_axes.get(j).copied().unwrap_or(0);
            let axis = super::norm_axis(axis, t.rank() + 1)?;
            let mut s = t.shape.0.clone();
            s.insert(axis, len.clone());
            out.push(TensorType::new(t.dtype, Shape(s)));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod count_tests {
    use crate::text::parse_graph;

    /// The golden loop_counter graph with `num_carried` replaced.
    fn loop_with(carried: &str) -> String {
        format!(
            "rlx-ir 2\ngraph {{\n  %0 = input \"x\" : f32[3]\n  %1 = constant i64[] [4] : i64[]\n  %2 = constant bool[] [true] : bool[]\n  %3 = constant f32[3] [0.0, 0.0, 0.0] : f32[3]\n  %4:2 = loop(%1, %2, %3, %0) {{body=graph {{\n    %0 = input \"i\" : i64[]\n    %1 = input \"cond\" : bool[]\n    %2 = input \"acc\" : f32[3]\n    %3 = input \"x\" : f32[3]\n    %4 = cast(%0) {{to=f32, saturate=true, round_mode=up}} : f32[]\n    %5 = mul(%3, %4) : f32[3]\n    %6 = add(%2, %5) : f32[3]\n    output \"cond_out\" = %1\n    output \"acc_out\" = %6\n    output \"scan_out\" = %6\n  }}, num_carried={carried}}} : (f32[3], f32[4,3])\n  output \"final\" = %4.0\n  output \"partials\" = %4.1\n}}\n"
        )
    }

    #[test]
    fn negative_or_oversized_counts_are_errors() {
        let check = |carried: &str| {
            let mut g = parse_graph(&loop_with(carried)).map_err(|e| e.to_string())?;
            crate::analysis::infer_graph(&mut g, None).map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        };
        assert!(check("1").is_ok());
        for bad in ["-1", "-9223372036854775808", "99"] {
            let e = check(bad).unwrap_err();
            assert!(e.contains("num_carried"), "{bad}: {e}");
        }
    }
}
