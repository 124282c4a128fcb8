//! Declarative graph patterns and the rule driver of the fusion passes.
//!
//! A [`Pat`] is a tree over op names: `op("add", [op("matmul", [any("a"),
//! any("b")]), any("bias")]).commutative()` matches `add(matmul(a, b), bias)`
//! in either operand order and binds `a`, `b`, `bias`. A name bound twice must
//! bind the same value. A [`Rule`] pairs a named pattern with a rewrite; the
//! driver tries every rule at every node, requires the matched inner nodes to
//! be read only inside the match, and repeats until nothing applies.

use std::collections::{BTreeMap, HashSet};

use rlx_ir::{Graph, NodeId, Op, Value};

use crate::manager::{PassContext, PassError};
use crate::rewrite::{finish, only_used_within, remove_dead};

/// Which ops a pattern node accepts.
#[derive(Clone, Copy)]
pub enum OpTest {
    /// By text name (`add`, `matmul`, `reduce_mean`).
    Name(&'static str),
    /// Any of these names.
    Names(&'static [&'static str]),
    /// A predicate on the op (attributes included).
    Pred(fn(&Op) -> bool),
}

impl OpTest {
    fn accepts(&self, op: &Op) -> bool {
        match self {
            OpTest::Name(n) => op.name() == *n,
            OpTest::Names(ns) => ns.contains(&op.name()),
            OpTest::Pred(f) => f(op),
        }
    }
}

/// A pattern over values.
#[derive(Clone)]
pub enum Pat {
    /// Any value, bound to a name.
    Any(&'static str),
    /// A constant or weight, bound to a name.
    Leaf(&'static str),
    /// Output 0 of a one-output node whose op passes `test`, with exactly
    /// these inputs.
    Node {
        bind: Option<&'static str>,
        test: OpTest,
        args: Vec<Pat>,
        commutative: bool,
    },
}

/// `any("x")`: binds any value.
pub fn any(name: &'static str) -> Pat {
    Pat::Any(name)
}

/// `leaf("c")`: binds a constant or weight.
pub fn leaf(name: &'static str) -> Pat {
    Pat::Leaf(name)
}

/// A node named `name` with these inputs.
pub fn op<const N: usize>(name: &'static str, args: [Pat; N]) -> Pat {
    Pat::Node {
        bind: None,
        test: OpTest::Name(name),
        args: args.into(),
        commutative: false,
    }
}

/// A node whose op is any of `names`.
pub fn one_of<const N: usize>(names: &'static [&'static str], args: [Pat; N]) -> Pat {
    Pat::Node {
        bind: None,
        test: OpTest::Names(names),
        args: args.into(),
        commutative: false,
    }
}

/// A node whose op satisfies `f`.
pub fn op_if<const N: usize>(f: fn(&Op) -> bool, args: [Pat; N]) -> Pat {
    Pat::Node {
        bind: None,
        test: OpTest::Pred(f),
        args: args.into(),
        commutative: false,
    }
}

impl Pat {
    /// Binds the matched node under `name`.
    pub fn bind(mut self, name: &'static str) -> Pat {
        if let Pat::Node { bind, .. } = &mut self {
            *bind = Some(name);
        }
        self
    }

    /// A two-input node whose inputs may come in either order.
    pub fn commutative(mut self) -> Pat {
        if let Pat::Node { commutative, .. } = &mut self {
            *commutative = true;
        }
        self
    }
}

/// What a pattern bound.
#[derive(Debug, Clone, Default)]
pub struct Match {
    pub values: BTreeMap<&'static str, Value>,
    pub nodes: BTreeMap<&'static str, NodeId>,
    /// Every matched node (not `any`/`leaf` bindings), root first.
    pub inner: Vec<NodeId>,
}

impl Match {
    /// The value bound to `name` (a pattern bug if absent: rules only ask for
    /// names their pattern binds).
    pub fn v(&self, name: &str) -> Value {
        self.values[name]
    }

    pub fn n(&self, name: &str) -> NodeId {
        self.nodes[name]
    }

    pub fn root(&self) -> NodeId {
        self.inner[0]
    }
}

fn bind_value(m: &mut Match, name: &'static str, v: Value) -> bool {
    match m.values.get(name) {
        Some(old) => *old == v,
        None => {
            m.values.insert(name, v);
            true
        }
    }
}

fn go(g: &Graph, p: &Pat, v: Value, m: &mut Match) -> bool {
    match p {
        Pat::Any(name) => bind_value(m, name, v),
        Pat::Leaf(name) => {
            g.node(v.node).op.is_leaf()
                && !matches!(g.node(v.node).op, Op::Input(_))
                && bind_value(m, name, v)
        }
        Pat::Node {
            bind,
            test,
            args,
            commutative,
        } => {
            let node = g.node(v.node);
            if v.port != 0 || node.outputs.len() != 1 || !test.accepts(&node.op) {
                return false;
            }
            let ins = g.inputs_of(v.node);
            if ins.len() != args.len() {
                return false;
            }
            if let Some(b) = bind {
                match m.nodes.get(b) {
                    Some(old) if *old != v.node => return false,
                    _ => {
                        m.nodes.insert(b, v.node);
                    }
                }
            }
            if !m.inner.contains(&v.node) {
                m.inner.push(v.node);
            }
            let saved = m.clone();
            if args.iter().zip(&ins).all(|(a, x)| go(g, a, *x, m)) {
                return true;
            }
            if *commutative && args.len() == 2 {
                *m = saved;
                return go(g, &args[0], ins[1], m) && go(g, &args[1], ins[0], m);
            }
            false
        }
    }
}

/// Matches `p` at output 0 of `root`.
pub fn matches(g: &Graph, p: &Pat, root: NodeId) -> Option<Match> {
    let mut m = Match::default();
    go(g, p, Value::of(root), &mut m).then_some(m)
}

/// What a rewrite returns: `Ok(false)` when the match does not qualify after all.
pub type RewriteFn = fn(&mut Graph, &mut PassContext, &Match) -> Result<bool, String>;

/// A named pattern and its rewrite. The name is what the statistics count.
pub struct Rule {
    pub name: &'static str,
    pub pattern: Pat,
    pub rewrite: RewriteFn,
}

/// Applies `rules` everywhere until none applies (at most 16 sweeps);
/// returns how many rewrites applied.
pub fn apply_rules(
    g: &mut Graph,
    cx: &mut PassContext,
    pass: &'static str,
    rules: &[Rule],
) -> Result<usize, PassError> {
    let mut total = 0;
    for _round in 0..16 {
        let mut applied = 0;
        // Consumers first, so that the largest match at a root wins.
        let order = g.topo_order().map_err(|e| PassError::graph(pass, e))?;
        for id in order.into_iter().rev() {
            for rule in rules {
                if !g.contains(id) {
                    break;
                }
                let Some(m) = matches(g, &rule.pattern, id) else {
                    continue;
                };
                let set: HashSet<NodeId> = m.inner.iter().copied().collect();
                if !only_used_within(g, &m.inner[1..], &set) {
                    continue;
                }
                let done = (rule.rewrite)(g, cx, &m).map_err(|reason| PassError::Node {
                    pass,
                    node: g.get(id).map_or(String::new(), |n| n.name.clone()),
                    origin: g.get(id).map_or(String::new(), |n| n.origin_text()),
                    reason,
                })?;
                if done {
                    applied += 1;
                    cx.count(rule.name);
                    remove_dead(g, &m.inner);
                    break;
                }
            }
        }
        total += applied;
        if applied == 0 {
            break;
        }
    }
    if total > 0 {
        finish(g, cx, pass)?;
    }
    Ok(total)
}
