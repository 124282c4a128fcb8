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
        let o = out.slice::<T>()?;
        if d.is_float() {
            let xs = ins
                .iter()
                .map(|t| Ok(t.slice::<T>()?.iter().map(|v| v.as_f64()).collect()))
                .collect::<Result<Vec<Vec<f64>>, KernelError>>()?;
            for (o, v) in o.iter_mut().zip(einsum_direct(&p, xs)?) {
                *o = T::of_f64(v);
            }
        } else {
            let xs = ins
                .iter()
                .map(|t| Ok(t.slice::<T>()?.iter().map(|v| v.as_i128()).collect()))
                .collect::<Result<Vec<Vec<i128>>, KernelError>>()?;
            for (o, v) in o.iter_mut().zip(einsum_direct(&p, xs)?) {
                *o = T::of_i128(v);
            }
        }
        Ok(())
    }, num)
}

/// The most multiply-adds one contraction step does (about a minute):
/// past it the equation is refused, naming its size, rather than run for
/// hours.
const MAX_DIRECT_WORK: u64 = 1 << 36;

/// Accumulation in f64 for floats, wrapping i128 for integers.
trait Acc: Copy + Send + Sync {
    const ZERO: Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

impl Acc for f64 {
    const ZERO: f64 = 0.0;
    fn add(self, o: f64) -> f64 {
        self + o
    }
    fn mul(self, o: f64) -> f64 {
        self * o
    }
}

impl Acc for i128 {
    const ZERO: i128 = 0;
    fn add(self, o: i128) -> i128 {
        self.wrapping_add(o)
    }
    fn mul(self, o: i128) -> i128 {
        self.wrapping_mul(o)
    }
}

/// The product of `sizes`, or None past u64.
fn count(sizes: &[usize]) -> Option<u64> {
    sizes.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64))
}

/// One operand over the plan's labels: its values and per-label strides.
struct Operand<V> {
    values: Vec<V>,
    strides: Vec<usize>,
}

/// The most values one intermediate of a contraction holds.
const MAX_INTERMEDIATE: u64 = 1 << 27;

/// `a` (times `b`, if given) summed over `summed`, laid out over `keep`
/// (row-major, in label order): one step of a contraction.
fn contract<V: Acc>(
    p: &Plan,
    a: &Operand<V>,
    b: Option<&Operand<V>>,
    keep: &[usize],
    summed: &[usize],
    last: bool,
) -> Result<Operand<V>, KernelError> {
    let ks: Vec<usize> = keep.iter().map(|&l| p.sizes[l]).collect();
    let ss: Vec<usize> = summed.iter().map(|&l| p.sizes[l]).collect();
    let labels = |ls: &[usize]| ls.iter().map(|&l| p.labels[l]).collect::<String>();
    let (nk, ns) = (count(&ks), count(&ss));
    let work = nk.zip(ns).and_then(|(k, s)| k.checked_mul(s));
    // The last step makes the output, whose size the graph declared: only
    // the steps before it are bounded in size.
    let too_big = !last && nk.is_none_or(|k| k > MAX_INTERMEDIATE);
    if work.is_none_or(|w| w > MAX_DIRECT_WORK) || too_big {
        let show = |n: Option<u64>| n.map_or("more than 2^64".to_string(), |n| n.to_string());
        return Err(KernelError::Unsupported(format!(
            "this einsum sums {} terms (labels `{}`) for each of {} values (labels `{}`): past \
             {MAX_DIRECT_WORK} multiply-adds or {MAX_INTERMEDIATE} values a step is not run",
            show(ns),
            labels(summed),
            show(nk),
            labels(keep)
        )));
    }
    let (nk, ns) = (ks.iter().product::<usize>(), ss.iter().product::<usize>());
    let offset = |x: &Operand<V>, ls: &[usize], sizes: &[usize], mut i: usize| {
        let mut off = 0;
        for (&l, &d) in ls.iter().zip(sizes).rev() {
            off += (i % d) * x.strides[l];
            i /= d;
        }
        off
    };
    let mut values = vec![V::ZERO; nk];
    par_fill(&mut values, |i| {
        let (ba, bb) = (
            offset(a, keep, &ks, i),
            b.map_or(0, |b| offset(b, keep, &ks, i)),
        );
        let mut acc = V::ZERO;
        for s in 0..ns {
            let mut v = a.values[ba + offset(a, summed, &ss, s)];
            if let Some(b) = b {
                v = v.mul(b.values[bb + offset(b, summed, &ss, s)]);
            }
            acc = acc.add(v);
        }
        acc
    });
    let mut strides = vec![0usize; p.labels.len()];
    let mut st = 1;
    for (&l, &d) in keep.iter().zip(&ks).rev() {
        strides[l] = st;
        st *= d;
    }
    Ok(Operand { values, strides })
}

/// `out[o] = Σ_s Π_k x_k[...]` over the summed labels, as a contraction:
/// each operand first sums the labels only it has (`i,j,k,l->` is four
/// sums and a product, not a sum over i*j*k*l terms), then operands are
/// multiplied in pairwise from the left, each step summing the labels no
/// later operand and not the output needs (`ab,bc,cd,da->` is a chain of
/// matrix products, not a sum over a*b*c*d). A step past the work bound is
/// refused, naming its labels.
fn einsum_direct<V: Acc>(p: &Plan, xs: Vec<Vec<V>>) -> Result<Vec<V>, KernelError> {
    let nl = p.labels.len();
    // An empty label: an empty output, or sums of no terms.
    if p.sizes.contains(&0) {
        return Ok(vec![V::ZERO; p.sizes[..p.n_out].iter().product()]);
    }
    let ops: Vec<Operand<V>> = xs
        .into_iter()
        .zip(&p.strides)
        .map(|(values, st)| Operand {
            values,
            strides: st.clone(),
        })
        .collect();
    let varies = |x: &Operand<V>, l: usize| x.strides[l] != 0 && p.sizes[l] > 1;
    let needed_after =
        |l: usize, rest: &[Operand<V>]| l < p.n_out || rest.iter().any(|x| varies(x, l));
    let mut acc: Option<Operand<V>> = None;
    for k in 0..ops.len() {
        let x = &ops[k];
        let (others, rest) = (&ops, &ops[k + 1..]);
        // Labels only this operand has, that the output does not keep.
        let own: Vec<usize> = (p.n_out..nl)
            .filter(|&l| {
                varies(x, l)
                    && others
                        .iter()
                        .enumerate()
                        .all(|(j, o)| j == k || !varies(o, l))
            })
            .collect();
        let x = if own.is_empty() {
            None
        } else {
            let keep: Vec<usize> = (0..nl)
                .filter(|&l| varies(x, l) && !own.contains(&l))
                .collect();
            Some(contract(p, x, None, &keep, &own, false)?)
        };
        let x = x.as_ref().unwrap_or(&ops[k]);
        acc = Some(match &acc {
            None => Operand {
                values: x.values.clone(),
                strides: x.strides.clone(),
            },
            Some(a) => {
                let both = |l: usize| varies(a, l) || varies(x, l);
                let keep: Vec<usize> = (0..nl)
                    .filter(|&l| both(l) && needed_after(l, rest))
                    .collect();
                let summed: Vec<usize> = (0..nl)
                    .filter(|&l| both(l) && !needed_after(l, rest))
                    .collect();
                contract(p, a, Some(x), &keep, &summed, false)?
            }
        });
    }
    let Some(acc) = acc else {
        return Err(KernelError::Value("einsum without operands".into()));
    };
    // The result over every output label, in order; what is still summed.
    let keep: Vec<usize> = (0..p.n_out).collect();
    let summed: Vec<usize> = (p.n_out..nl).filter(|&l| varies(&acc, l)).collect();
    Ok(contract(p, &acc, None, &keep, &summed, true)?.values)
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
    fn labels_one_operand_has_are_summed_inside_it() {
        // i,j,k,l-> over four 1000-vectors: four sums and a product.
        let v: Vec<f32> = (0..1000).map(|i| (i % 7) as f32 - 3.0).collect();
        let s: f32 = v.iter().sum();
        let x = t(&[1000], &v);
        let got = run_einsum(
            "i,j,k,l->",
            &[x, t(&[1000], &v), t(&[1000], &v), t(&[1000], &v)],
            &[],
        );
        assert_eq!(got, [s * s * s * s]);
        // Mixed: a label shared (j) and one own label each (i, k).
        let a = [1f32, 2., 3., 4., 5., 6.]; // i=2, j=3
        let b = [1f32, 1., 2., 2., 3., 3.]; // j=3, k=2
                                            // sum_i a[i,j] = [5,7,9]; sum_k b[j,k] = [2,4,6]; dot = 10+28+54.
        assert_eq!(
            run_einsum("ij,jk->", &[t(&[2, 3], &a), t(&[3, 2], &b)], &[]),
            [92.]
        );
    }

    #[test]
    fn chains_contract_pairwise_and_huge_sums_are_refused_not_wrapped() {
        // Five 8192-long labels, one per operand: 2^65 terms summed
        // directly (a count that wrapped to 0), five sums here.
        let v: Vec<f32> = (0..8192)
            .map(|i| if i % 2 == 0 { 0.5 } else { 0.25 })
            .collect();
        let x = t(&[8192], &v);
        let s = 8192.0 * 0.375f32;
        let got = run_einsum(
            "a,b,c,d,e->",
            &[
                x,
                t(&[8192], &v),
                t(&[8192], &v),
                t(&[8192], &v),
                t(&[8192], &v),
            ],
            &[],
        );
        assert!((got[0] / s.powi(5) - 1.0).abs() < 1e-6, "{got:?}");
        // The trace of a chain of four 60x60 products, against matrix algebra.
        let m: Vec<f32> = (0..3600).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let id: Vec<f32> = (0..3600)
            .map(|i| if i % 61 == 0 { 1.0 } else { 0.0 })
            .collect();
        let (mt, it) = (t(&[60, 60], &m), t(&[60, 60], &id));
        let trace: f32 = (0..60).map(|i| m[i * 61]).sum();
        assert_eq!(
            run_einsum(
                "ab,bc,cd,da->",
                &[mt, t(&[60, 60], &id), it, t(&[60, 60], &id)],
                &[]
            ),
            [trace]
        );
        // A step that would sum 2^65 terms is refused before it reads a
        // value (where the count once wrapped to 0 and gave 0).
        let p = Plan {
            labels: "abcde".chars().collect(),
            sizes: vec![8192; 5],
            n_out: 0,
            strides: vec![],
            uses: vec![],
        };
        let a = Operand::<f64> {
            values: vec![],
            strides: vec![1; 5],
        };
        let e = contract(&p, &a, None, &[], &[0, 1, 2, 3, 4], true)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("sums more than 2^64 terms (labels `abcde`)"),
            "{e}"
        );
    }

    #[test]
    fn empty_labels_give_zeros_or_nothing() {
        let e: [f32; 0] = [];
        let one = [1f32];
        assert_eq!(
            run_einsum("i,i,i->", &[t(&[0], &e), t(&[0], &e), t(&[0], &e)], &[]),
            [0.]
        );
        assert_eq!(
            run_einsum(
                "ij,jk,k->i",
                &[t(&[2, 0], &e), t(&[0, 1], &e), t(&[1], &one)],
                &[2]
            ),
            [0., 0.]
        );
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
