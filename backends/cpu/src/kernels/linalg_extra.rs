//! Einsum and Det.
//!
//! Einsum runs two-operand products that are matrix products in disguise
//! (batch, row, column and contracted labels, no diagonals)
//! through GEMM; every other equation is summed directly over the label index
//! space. Det factors each matrix by LU with partial pivoting in f64.

use rlx_ir::ops::Einsum;
use rlx_ir::Op;

use super::gemm::{gemm, GemmElem};
use super::layout::{par_fill, strides};
use super::num::{AnyNum, Real};
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::with_dtype;

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    match spec.op() {
        Op::Einsum(_) => Ok(fn_kernel(spec, einsum)),
        Op::Det(_) => Ok(fn_kernel(spec, det)),
        op => Err(KernelError::Internal(format!(
            "{} is not einsum or det",
            op.name()
        ))),
    }
}

/// An equation bound to concrete operand shapes.
struct Plan {
    /// Output labels first, then the summed ones.
    labels: Vec<char>,
    sizes: Vec<usize>,
    n_out: usize,
    /// Per operand and label: the element stride (0 where absent or broadcast).
    strides: Vec<Vec<usize>>,
    /// Per operand and label: how many of its axes carry the label at full size.
    uses: Vec<Vec<usize>>,
}

fn plan(e: &Einsum, ins: &[TensorRef]) -> Result<Plan, KernelError> {
    let ranks: Vec<usize> = ins.iter().map(|t| t.rank()).collect();
    let spec = e
        .spec(&ranks)
        .map_err(|e| KernelError::Value(e.to_string()))?;
    let mut labels = Vec::new();
    for &c in &spec.output {
        if labels.contains(&c) {
            return Err(KernelError::Value(format!(
                "einsum output label `{c}` repeats"
            )));
        }
        labels.push(c);
    }
    let n_out = labels.len();
    for &c in spec.inputs.iter().flatten() {
        if !labels.contains(&c) {
            labels.push(c);
        }
    }
    let at = |c: char| labels.iter().position(|&l| l == c).unwrap_or(0);
    let mut sizes = vec![1usize; labels.len()];
    for (t, ls) in ins.iter().zip(&spec.inputs) {
        for (&c, &d) in ls.iter().zip(t.dims) {
            let k = at(c);
            if d != 1 {
                if sizes[k] != 1 && sizes[k] != d {
                    return Err(KernelError::Value(format!(
                        "einsum label `{c}` has sizes {} and {d}",
                        sizes[k]
                    )));
                }
                sizes[k] = d;
            }
        }
    }
    let mut all_strides = Vec::new();
    let mut all_uses = Vec::new();
    for (t, ls) in ins.iter().zip(&spec.inputs) {
        let st = strides(t.dims);
        let mut s = vec![0usize; labels.len()];
        let mut u = vec![0usize; labels.len()];
        for (p, &c) in ls.iter().enumerate() {
            let k = at(c);
            if t.dims[p] == sizes[k] {
                s[k] += st[p];
                u[k] += 1;
            }
        }
        all_strides.push(s);
        all_uses.push(u);
    }
    Ok(Plan {
        labels,
        sizes,
        n_out,
        strides: all_strides,
        uses: all_uses,
    })
}

fn einsum(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Einsum(e) = op else {
        return Err(KernelError::Internal("not einsum".into()));
    };
    let p = plan(e, ins)?;
    let out = &mut outs[0];
    if out.dims != &p.sizes[..p.n_out] {
        return Err(KernelError::Internal(format!(
            "einsum output {:?} where the equation gives {:?}",
            out.dims,
            &p.sizes[..p.n_out]
        )));
    }
    let d = out.dtype;
    if d.is_float() && ins.len() == 2 {
        if let Some(g) = matmul_groups(&p) {
            return with_dtype!(d, T => einsum_gemm::<T>(&p, &g, ins, out), float);
        }
    }
    with_dtype!(d, T => {
        let xs: Vec<&[T]> = ins.iter().map(|t| t.slice::<T>()).collect::<Result<_, _>>()?;
        einsum_direct(&p, &xs, out.slice::<T>()?, d.is_float());
        Ok(())
    }, num)
}

/// `out[o] = Σ_s Π_k x_k[...]` over the summed labels.
fn einsum_direct<T: AnyNum>(p: &Plan, xs: &[&[T]], out: &mut [T], float: bool) {
    let nl = p.labels.len();
    let n_sum: usize = p.sizes[p.n_out..].iter().product();
    par_fill(out, |o| {
        let mut coord = vec![0usize; nl];
        let mut rem = o;
        for d in (0..p.n_out).rev() {
            coord[d] = rem % p.sizes[d];
            rem /= p.sizes[d];
        }
        let (mut fa, mut ia) = (0f64, 0i128);
        for s in 0..n_sum {
            let mut rem = s;
            for d in (p.n_out..nl).rev() {
                coord[d] = rem % p.sizes[d];
                rem /= p.sizes[d];
            }
            let (mut fp, mut ip) = (1f64, 1i128);
            for (x, st) in xs.iter().zip(&p.strides) {
                let off: usize = coord.iter().zip(st).map(|(c, s)| c * s).sum();
                if float {
                    fp *= x[off].as_f64();
                } else {
                    ip = ip.wrapping_mul(x[off].as_i128());
                }
            }
            fa += fp;
            ia = ia.wrapping_add(ip);
        }
        if float {
            T::of_f64(fa)
        } else {
            T::of_i128(ia)
        }
    });
}

/// Label indices of a two-operand product seen as batched `[m×k]·[k×n]`.
struct Groups {
    batch: Vec<usize>,
    m: Vec<usize>,
    n: Vec<usize>,
    k: Vec<usize>,
}

/// The product's label groups, or None when the equation is not a plain
/// (batched) matrix product: a diagonal, or a label summed within one operand.
/// An operand that broadcasts a label (size 1) simply does not vary along it.
fn matmul_groups(p: &Plan) -> Option<Groups> {
    let mut g = Groups {
        batch: vec![],
        m: vec![],
        n: vec![],
        k: vec![],
    };
    for l in 0..p.labels.len() {
        if p.sizes[l] == 1 {
            continue;
        }
        let (ua, ub) = (p.uses[0][l], p.uses[1][l]);
        if ua > 1 || ub > 1 {
            return None;
        }
        let out = l < p.n_out;
        match (out, ua == 1, ub == 1) {
            (true, true, true) => g.batch.push(l),
            (true, true, false) => g.m.push(l),
            (true, false, true) => g.n.push(l),
            (false, true, true) => g.k.push(l),
            _ => return None,
        }
    }
    Some(g)
}

/// Copies the elements of `src` addressed by the labels `ls` (in that order)
/// into a contiguous buffer in the compute type.
fn pack<T: Real>(src: &[T], p: &Plan, st: &[usize], ls: &[usize]) -> Vec<T::C> {
    let n: usize = ls.iter().map(|&l| p.sizes[l]).product();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut rem = i;
        let mut off = 0;
        for &l in ls.iter().rev() {
            off += (rem % p.sizes[l]) * st[l];
            rem /= p.sizes[l];
        }
        out.push(src[off].up());
    }
    out
}

fn einsum_gemm<T: Real>(
    p: &Plan,
    g: &Groups,
    ins: &[TensorRef],
    out: &mut TensorMut,
) -> Result<(), KernelError>
where
    T::C: GemmElem,
{
    let size = |ls: &[usize]| ls.iter().map(|&l| p.sizes[l]).product::<usize>();
    let (nb, m, n, k) = (size(&g.batch), size(&g.m), size(&g.n), size(&g.k));
    let a_order: Vec<usize> = g.batch.iter().chain(&g.m).chain(&g.k).copied().collect();
    let b_order: Vec<usize> = g.batch.iter().chain(&g.k).chain(&g.n).copied().collect();
    let a = pack(ins[0].slice::<T>()?, p, &p.strides[0], &a_order);
    let b = pack(ins[1].slice::<T>()?, p, &p.strides[1], &b_order);
    let mut c = vec![<T::C as GemmElem>::ZERO; nb * m * n];
    for bi in 0..nb {
        gemm(
            m,
            n,
            k,
            &a[bi * m * k..],
            k,
            &b[bi * k * n..],
            n,
            &mut c[bi * m * n..],
            n,
            false,
        );
    }
    // Strides of each label in `c`, laid out [batch, m, n].
    let mut cs = vec![0usize; p.labels.len()];
    let mut s = 1;
    for &l in g.batch.iter().chain(&g.m).chain(&g.n).rev() {
        cs[l] = s;
        s *= p.sizes[l];
    }
    let sizes = &p.sizes[..p.n_out];
    par_fill(out.slice::<T>()?, |o| {
        let mut rem = o;
        let mut off = 0;
        for d in (0..sizes.len()).rev() {
            off += (rem % sizes[d]) * cs[d];
            rem /= sizes[d];
        }
        T::down(c[off])
    });
    Ok(())
}

/// The determinant of an `n×n` row-major matrix, by LU with partial pivoting.
fn lu_det(mut a: Vec<f64>, n: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..n {
        let mut p = c;
        for r in c + 1..n {
            if a[r * n + c].abs() > a[p * n + c].abs() {
                p = r;
            }
        }
        let piv = a[p * n + c];
        if piv == 0.0 {
            return 0.0;
        }
        if p != c {
            for j in 0..n {
                a.swap(p * n + j, c * n + j);
            }
            det = -det;
        }
        det *= piv;
        for r in c + 1..n {
            let f = a[r * n + c] / piv;
            for j in c + 1..n {
                a[r * n + j] -= f * a[c * n + j];
            }
        }
    }
    det
}

fn det_typed<T: Real>(x: &TensorRef, n: usize, out: &mut TensorMut) -> Result<(), KernelError> {
    let src = x.slice::<T>()?;
    par_fill(out.slice::<T>()?, |b| {
        let m = src[b * n * n..(b + 1) * n * n]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        T::from_f64(lu_det(m, n))
    });
    Ok(())
}

fn det(_: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let x = &ins[0];
    let r = x.rank();
    let (rows, cols) = (x.dims[r - 2], x.dims[r - 1]);
    if rows != cols {
        return Err(KernelError::Value(format!(
            "det needs square matrices, got {rows}x{cols}"
        )));
    }
    with_dtype!(x.dtype, T => det_typed::<T>(x, rows, &mut outs[0]), float)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::DType;

    fn run_einsum(eq: &str, ins: &[TensorRef], out_dims: &[usize]) -> Vec<f32> {
        let op = Op::Einsum(Einsum {
            equation: eq.into(),
        });
        let n: usize = out_dims.iter().product();
        let mut out = vec![0f32; n];
        let mut outs = [TensorMut {
            dtype: DType::F32,
            dims: out_dims,
            bytes: bytemuck::cast_slice_mut(&mut out),
        }];
        einsum(&op, ins, &mut outs).unwrap();
        out
    }

    fn t<'a>(dims: &'a [usize], v: &'a [f32]) -> TensorRef<'a> {
        TensorRef {
            dtype: DType::F32,
            dims,
            bytes: bytemuck::cast_slice(v),
        }
    }

    #[test]
    fn einsum_matmul_transpose_trace() {
        let a = [1f32, 2., 3., 4., 5., 6.]; // 2x3
        let b = [1f32, 0., 0., 1., 1., 1.]; // 3x2
                                            // [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]
        assert_eq!(
            run_einsum("ij,jk->ik", &[t(&[2, 3], &a), t(&[3, 2], &b)], &[2, 2]),
            [4., 5., 10., 11.]
        );
        // Output transposed: [[4,10],[5,11]].
        assert_eq!(
            run_einsum("ij,jk->ki", &[t(&[2, 3], &a), t(&[3, 2], &b)], &[2, 2]),
            [4., 10., 5., 11.]
        );
        assert_eq!(
            run_einsum("ij->ji", &[t(&[2, 3], &a)], &[3, 2]),
            [1., 4., 2., 5., 3., 6.]
        );
        let sq = [1f32, 2., 3., 4.];
        assert_eq!(run_einsum("ii", &[t(&[2, 2], &sq)], &[]), [5.]);
        assert_eq!(run_einsum("ij->i", &[t(&[2, 3], &a)], &[2]), [6., 15.]);
    }

    #[test]
    fn det_of_small_matrices() {
        assert_eq!(lu_det(vec![1., 2., 3., 4.], 2), -2.0);
        // Needs a row swap: [[0,1],[1,0]] has det -1.
        assert_eq!(lu_det(vec![0., 1., 1., 0.], 2), -1.0);
        let d = lu_det(vec![2., 0., 1., 1., 3., 2., 1., 1., 1.], 3);
        // 2*(3-2) - 0 + 1*(1-3) = 0
        assert!(d.abs() < 1e-12);
        assert_eq!(lu_det(vec![], 0), 1.0);
    }
}
