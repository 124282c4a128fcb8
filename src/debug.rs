//! Debug runs: a session run that also keeps every intermediate tensor, each
//! with the ONNX nodes it came from, through a typed option of the run
//! rather than a separate code path (`rlx-onnx compare` is built on it).

use rlx_cpu::tensor::{TensorMut, TensorRef};
use rlx_ir::{DType, Tensor};

use crate::error::{Error, Result};
use crate::session::{Executable, Session};

/// What a debug run keeps besides the outputs.
#[derive(Debug, Clone, Default)]
pub struct DebugOptions {
    /// Keep every step's outputs.
    pub capture: bool,
    /// A test hook that breaks a kernel on purpose: the step whose origin
    /// includes this ONNX node adds one to the first element of each output
    /// (so that tests can check that `compare` finds it). CPU target only.
    #[doc(hidden)]
    pub fault: Option<String>,
}

/// One intermediate tensor of a debug run.
#[derive(Debug, Clone)]
pub struct Intermediate {
    /// The RLX node (CPU step) that computed it.
    pub node: String,
    /// The ONNX nodes that node came from.
    pub origin: Vec<String>,
    /// Which output of the node.
    pub port: usize,
    pub tensor: Tensor,
}

/// The result of [`Session::run_debug`].
#[derive(Debug, Clone)]
pub struct DebugRun {
    pub outputs: Vec<Tensor>,
    /// In the order the steps ran.
    pub intermediates: Vec<Intermediate>,
    /// Whether intermediates were kept (`capture`). On the CPU they are the
    /// outputs of every step as it ran; on wgpu and CUDA, every node's output
    /// exposed as an extra graph output of the same optimized graph.
    pub captured: bool,
}

impl Session {
    /// Runs like [`Session::run`], keeping what `opts` asks for.
    pub fn run_debug(&self, inputs: &[(&str, &Tensor)], opts: &DebugOptions) -> Result<DebugRun> {
        let ordered = self.order(inputs)?;
        let exec = self.executable(&ordered)?;
        let mut kept = Vec::new();
        let mut keep = |node: &str, origin: &[String], port: usize, t: Tensor| {
            if opts.capture {
                kept.push(Intermediate {
                    node: node.to_string(),
                    origin: origin.to_vec(),
                    port,
                    tensor: t,
                });
            }
        };
        let faulty = |origin: &[String]| {
            opts.fault
                .as_ref()
                .is_some_and(|f| origin.iter().any(|o| o == f))
        };
        let outputs = match &*exec {
            Executable::Planned(p) => {
                let refs: Vec<TensorRef> = ordered.iter().map(|t| TensorRef::of(t)).collect();
                let mut failed = None;
                let mut observe = |step: &rlx_cpu::plan::Step, outs: &mut [TensorMut]| {
                    for (port, o) in outs.iter_mut().enumerate() {
                        if faulty(&step.origin) {
                            perturb(o.dtype, o.bytes);
                        }
                        if opts.capture {
                            let view = TensorRef {
                                dtype: o.dtype,
                                dims: o.dims,
                                bytes: o.bytes,
                            };
                            match view.to_tensor() {
                                Ok(t) => keep(&step.name, &step.origin, port, t),
                                Err(e) => failed = Some(e.to_string()),
                            }
                        }
                    }
                };
                let out = self
                    .threads
                    .run(|| p.run_observed(&refs, &mut observe))
                    .map_err(Error::from)?;
                if let Some(e) = failed {
                    return Err(Error::Run(rlx_cpu::RunError::Internal(e)));
                }
                out
            }
            Executable::Dynamic {
                graph,
                weights,
                cache,
            } => {
                let mut observe = |node: &rlx_ir::Node, outs: &mut [Tensor]| {
                    for (port, t) in outs.iter_mut().enumerate() {
                        if faulty(&node.origin) {
                            let mut bytes = t.bytes().to_vec();
                            perturb(t.dtype(), &mut bytes);
                            let data = rlx_ir::Bytes::copy_from(&bytes);
                            if let Ok(p) = Tensor::new(t.dtype(), t.dims().to_vec(), data) {
                                *t = p;
                            }
                        }
                        keep(&node.name, &node.origin, port, t.clone());
                    }
                };
                self.threads
                    .run(|| {
                        rlx_cpu::dynamic::run_graph_observed(
                            graph,
                            weights,
                            ordered.iter().map(|t| (*t).clone()).collect(),
                            cache,
                            Some(&mut observe),
                        )
                    })
                    .map_err(Error::from)?
            }
            Executable::Gpu(_) | Executable::Split(_) => {
                if opts.fault.is_some() {
                    return Err(Error::Debug(
                        "the fault hook of debug runs works on the cpu target".into(),
                    ));
                }
                if !opts.capture {
                    return Ok(DebugRun {
                        outputs: self.run(inputs)?,
                        intermediates: Vec::new(),
                        captured: false,
                    });
                }
                return self.run_exposed(&ordered);
            }
        };
        Ok(DebugRun {
            outputs,
            intermediates: kept,
            captured: opts.capture,
        })
    }
}

impl Session {
    /// A GPU run whose every top-level node output is also a graph output:
    /// the optimized graph of these inputs gets one more output per value,
    /// is planned like any other (not cached) and run; the extra outputs are
    /// the intermediates. Memory is not reused for them, which a debug run
    /// can afford.
    fn run_exposed(&self, ordered: &[&Tensor]) -> Result<DebugRun> {
        let (mut g, weights, concrete) = self.specialized_for(ordered)?;
        let real = g.outputs().len();
        let mut exposed = Vec::new();
        for id in g.topo_order()? {
            let node = g.node(id);
            if node.op.is_leaf() {
                continue;
            }
            for port in 0..node.outputs.len() {
                exposed.push((id, node.name.clone(), node.origin.clone(), port));
            }
        }
        for (k, (id, _, _, port)) in exposed.iter().enumerate() {
            g.add_output(format!("debug.{k}"), rlx_ir::Value::new(*id, *port as u16))?;
        }
        let exec = self.plan_graph(g, weights, concrete)?;
        let mut all = self.threads.run(|| exec.run(ordered))?;
        let intermediates = all
            .split_off(real)
            .into_iter()
            .zip(exposed)
            .map(|(tensor, (_, node, origin, port))| Intermediate {
                node,
                origin,
                port,
                tensor,
            })
            .collect();
        Ok(DebugRun {
            outputs: all,
            intermediates,
            captured: true,
        })
    }
}

/// Adds one to the first element (flips the first bool).
fn perturb(dtype: DType, bytes: &mut [u8]) {
    fn bump<const N: usize>(b: &mut [u8], f: impl Fn([u8; N]) -> [u8; N]) {
        if let Some(first) = b.get_mut(..N) {
            if let Ok(a) = <[u8; N]>::try_from(&*first) {
                first.copy_from_slice(&f(a));
            }
        }
    }
    match dtype {
        DType::F32 => bump::<4>(bytes, |a| (f32::from_le_bytes(a) + 1.0).to_le_bytes()),
        DType::F64 => bump::<8>(bytes, |a| (f64::from_le_bytes(a) + 1.0).to_le_bytes()),
        DType::F16 => bump::<2>(bytes, |a| {
            half::f16::from_f32(half::f16::from_le_bytes(a).to_f32() + 1.0).to_le_bytes()
        }),
        DType::I64 => bump::<8>(bytes, |a| {
            i64::from_le_bytes(a).wrapping_add(1).to_le_bytes()
        }),
        DType::I32 => bump::<4>(bytes, |a| {
            i32::from_le_bytes(a).wrapping_add(1).to_le_bytes()
        }),
        DType::Bool => bump::<1>(bytes, |a| [u8::from(a[0] == 0)]),
        _ => bump::<1>(bytes, |a| [a[0].wrapping_add(1)]),
    }
}
