//! CUDA kernel families: each family's source file in `kernels/cuda/`, the
//! parameter structs it reads (printed from their rlx-gpu [`Layout`]s, with
//! `static_assert`s of size and offsets, so host and kernel cannot drift),
//! and its lowering. [`Modules`] collects the modules a schedule uses.

pub mod control;
pub mod matmul;

use rlx_gpu::Layout;

use crate::schedule::Module;

/// Shared by every module.
pub const PRELUDE: &str = include_str!("../../../../kernels/cuda/prelude.cuh");

/// A kernel family: its module name, its source, and the parameter structs
/// its entry points take.
pub struct Family {
    pub name: &'static str,
    pub source: &'static str,
    pub layouts: fn() -> Vec<Layout>,
}

/// Every family with a CUDA source, for tests that compile them all.
pub const FAMILIES: &[&Family] = &[&control::FAMILY];

/// The complete source of a family's module: the prelude, each parameter
/// struct and its checks, then the kernels.
pub fn module_source(f: &Family) -> String {
    let mut s = String::from(PRELUDE);
    for l in (f.layouts)() {
        s.push('\n');
        s.push_str(&l.cuda());
        s.push_str(&l.cuda_checks());
    }
    s.push('\n');
    s.push_str(f.source);
    s
}

/// The modules of a schedule, each added once, in first-use order.
#[derive(Debug, Default)]
pub struct Modules {
    modules: Vec<Module>,
}

impl Modules {
    /// The index of `f`'s module, adding it on first use.
    pub fn of(&mut self, f: &Family) -> usize {
        if let Some(i) = self.modules.iter().position(|m| m.name == f.name) {
            return i;
        }
        self.modules.push(Module {
            name: f.name.to_string(),
            source: module_source(f),
        });
        self.modules.len() - 1
    }

    pub fn into_vec(self) -> Vec<Module> {
        self.modules
    }
}
