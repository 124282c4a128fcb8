//! Ahead-of-time CUDA kernels: a model compiled for CUDA with static input
//! shapes is planned once more at convert time and every kernel module of
//! its schedule compiled by NVRTC; the PTX travels in the `.rlx` artifact
//! (section 5), so a session on the artifact loads it and compiles nothing.

use rlx_cuda::compile::{CompileOptions, Compiler, Prebuilt};
use rlx_ir::Tensor;

use crate::compile::{CompiledModel, Target};
use crate::error::{Error, Result};
use crate::session::{Session, SessionOptions};

impl CompiledModel {
    /// Compiles the CUDA kernels of this model's schedule for `arch`
    /// (compute capability, e.g. `(9, 0)`) and keeps them in the model;
    /// returns how many modules. The model must target CUDA and have
    /// static input shapes; NVRTC must be loadable.
    pub fn prebuild_cuda(&mut self, arch: (i32, i32), opts: &CompileOptions) -> Result<usize> {
        let unsupported = |why: String| Error::Cuda(rlx_cuda::CudaError::Unsupported(why));
        if self.target != Target::Cuda {
            return Err(unsupported(format!(
                "kernels are prebuilt for the cuda target, not {}",
                self.target
            )));
        }
        let mut inputs = Vec::new();
        for &id in self.graph.inputs() {
            let n = self.graph.node(id);
            let t = &n.outputs[0];
            let dims = t.shape.as_known().ok_or_else(|| {
                unsupported(format!(
                    "input `{}` has symbolic dims {}: bind them (--bind) to prebuild kernels",
                    n.name, t.shape
                ))
            })?;
            inputs.push((n.name.clone(), Tensor::zeros(t.dtype, &dims)?));
        }
        let session = Session::new(self.clone(), SessionOptions { threads: 1 })?;
        let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let schedule = session.cuda_schedule(&named)?;
        let compiler = Compiler::new(arch, opts)?;
        let built = Prebuilt::build(&compiler, &schedule.modules)?;
        let n = built.modules.len();
        self.cuda_ptx = Some(built);
        Ok(n)
    }
}
