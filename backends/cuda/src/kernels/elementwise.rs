//! Element-wise kernels on CUDA, generated per node: unary, binary, compare,
//! logical, where, cast, clip, gelu and whole `elementwise_region` programs.
//! rlx-gpu builds the node's expression tree and its parameters
//! (`kernels::elementwise`) and prints it as CUDA (`elementwise::cuda`, with
//! the helpers of `kernels/cuda/elementwise.cuh`); this file names each
//! distinct source by a stable hash of it (nodes of the same function, dtypes
//! and indexing share a module) and launches it.

use rlx_gpu::kernels::elementwise::cuda::{self, Indexing};
use rlx_gpu::kernels::elementwise::{build, params, Elementwise, Geometry};
use rlx_ir::{DType, Node, TensorType};

use super::{Cx, LResult, PRELUDE};

/// Threads per block.
const BLOCK: u64 = 256;

/// The entry point of every generated module.
const ENTRY: &str = "elementwise";

/// Whether the node's expression prints as CUDA (and its dtypes load and store).
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let dtypes: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
    let e = build(&node.op, &dtypes)?;
    let g = Geometry::new(&[], &vec![&[][..]; e.inputs.len()])?;
    let p = params(&g, &e.lits)?;
    cuda::kernel(&e, Indexing::Strided(0), &p.layout, ENTRY).map(|_| ())
}

/// How `g` indexes: contiguous when no input broadcasts.
fn indexing(g: &Geometry) -> Indexing {
    if g.rank() <= 1 && g.strides.iter().all(|s| s.iter().all(|&x| x == 1)) {
        Indexing::Contiguous
    } else {
        Indexing::Strided(g.rank())
    }
}

/// FNV-1a, 64 bits: stable across Rust releases, so module names (and the
/// NVRTC cache) stay put.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The complete module source of `e` over `g`, and its name.
pub fn module(e: &Elementwise, g: &Geometry) -> LResult<(String, String)> {
    let p = params(g, &e.lits)?;
    let body = cuda::kernel(e, indexing(g), &p.layout, ENTRY)?;
    let src = format!("{PRELUDE}\n{body}");
    let name = format!("elementwise_{}_{:016x}", e.op, fnv1a(&src));
    Ok((name, src))
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let out = cx.output(0)?.clone();
    let dtypes: Vec<DType> = cx.io.ins.iter().map(|o| o.dtype).collect();
    let e = build(&cx.node.op, &dtypes)?;
    let ins: Vec<&[usize]> = cx.io.ins.iter().map(|o| o.dims.as_slice()).collect();
    let g = Geometry::new(&out.dims, &ins)?;
    let p = params(&g, &e.lits)?;
    let (name, src) = module(&e, &g)?;
    let m = cx.modules.generated(&name, || src);
    let mut ranges = vec![out.range()];
    ranges.extend(cx.io.ins.iter().map(|o| o.range()));
    let per = cuda::elements_per_thread(&e, indexing(&g));
    let blocks = (g.n as u64).div_ceil(per).div_ceil(BLOCK);
    cx.kernel(m, ENTRY, blocks, BLOCK as u32, ranges, p);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts_are_strided_and_plain_maps_contiguous() {
        let g = Geometry::new(&[2, 3], &[&[2, 3], &[2, 3]]).unwrap();
        assert_eq!(indexing(&g), Indexing::Contiguous);
        let g = Geometry::new(&[2, 3], &[&[2, 3], &[3]]).unwrap();
        assert_eq!(indexing(&g), Indexing::Strided(2));
        let g = Geometry::new(&[], &[&[], &[]]).unwrap();
        assert_eq!(indexing(&g), Indexing::Contiguous);
    }
}
