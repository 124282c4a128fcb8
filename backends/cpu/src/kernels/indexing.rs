//! Indexing: Gather, GatherElements, GatherND, ScatterElements, ScatterND (with
//! their reductions), OneHot, Trilu and ReverseSequence.
//!
//! Negative indices count from the end of their axis; an index outside
//! `[-n, n)` is an error value, never a panic. Pure moves copy raw elements of
//! the dtype's width, so they work for every dtype; scatter reductions need
//! arithmetic and take the standard numeric dtypes.

use rlx_ir::ops::ScatterReduction;
use rlx_ir::{DType, Op};

use super::layout::{axis, par_fill, par_rows, strides};
use super::num::AnyNum;
use crate::kernel::{fn_kernel, Kernel, KernelError, Spec};
use crate::tensor::{TensorMut, TensorRef};
use crate::{with_dtype, with_width};

pub fn build(spec: &Spec) -> Result<Box<dyn Kernel>, KernelError> {
    let f: fn(&Op, &[TensorRef], &mut [TensorMut]) -> Result<(), KernelError> = match spec.op() {
        Op::Gather(_) => gather,
        Op::GatherElements(_) => gather_elements,
        Op::GatherNd(_) => gather_nd,
        Op::ScatterElements(_) => scatter_elements,
        Op::ScatterNd(_) => scatter_nd,
        Op::OneHot(_) => one_hot,
        Op::Trilu(_) => trilu,
        Op::ReverseSequence(_) => reverse_sequence,
        op => {
            return Err(KernelError::Internal(format!(
                "{} is not an indexing op",
                op.name()
            )))
        }
    };
    Ok(fn_kernel(spec, f))
}

fn internal(what: &str) -> KernelError {
    KernelError::Internal(format!("not {what}"))
}

/// Index `i` into an axis of `n` elements, negative counting from the end.
pub fn wrap_index(i: i64, n: usize) -> Result<usize, KernelError> {
    let n_i = n as i64;
    let j = if i < 0 { i + n_i } else { i };
    if (0..n_i).contains(&j) {
        Ok(j as usize)
    } else {
        Err(KernelError::Value(format!(
            "index {i} is out of range for an axis of size {n}"
        )))
    }
}

fn wrap_all(idx: &[i64], n: usize) -> Result<Vec<usize>, KernelError> {
    idx.iter().map(|&i| wrap_index(i, n)).collect()
}

fn gather(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Gather(g) = op else {
        return Err(internal("gather"));
    };
    let x = &ins[0];
    let a = axis(g.axis, x.rank());
    let n = x.dims[a];
    let inner: usize = x.dims[a + 1..].iter().product();
    let idx = wrap_all(&ins[1].to_i64s()?, n)?;
    let k = idx.len();
    if k == 0 || inner == 0 {
        return Ok(());
    }
    with_width!(x.dtype, T => {
        let src = x.slice::<T>()?;
        par_rows(outs[0].slice::<T>()?, inner, |r, row| {
            let s = ((r / k) * n + idx[r % k]) * inner;
            row.copy_from_slice(&src[s..s + inner]);
        });
        Ok(())
    })
}

/// The offset in `x` (strides `xs`) of element `i` of an `idx_dims` tensor,
/// with the coordinate along `a` left out.
fn offset_without(mut i: usize, idx_dims: &[usize], xs: &[usize], a: usize) -> usize {
    let mut off = 0;
    for d in (0..idx_dims.len()).rev() {
        let n = idx_dims[d].max(1);
        if d != a {
            off += (i % n) * xs[d];
        }
        i /= n;
    }
    off
}

/// Checks that the indices of an elements op fit the data outside `axis`.
fn check_fits(idx: &[usize], data: &[usize], a: usize) -> Result<(), KernelError> {
    if idx.len() != data.len()
        || idx
            .iter()
            .zip(data)
            .enumerate()
            .any(|(d, (i, x))| d != a && i > x)
    {
        return Err(KernelError::Value(format!(
            "indices of shape {idx:?} do not fit data of shape {data:?} off axis {a}"
        )));
    }
    Ok(())
}

fn gather_elements(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::GatherElements(g) = op else {
        return Err(internal("gather_elements"));
    };
    let (x, ind) = (&ins[0], &ins[1]);
    let a = axis(g.axis, x.rank());
    check_fits(ind.dims, x.dims, a)?;
    let idx = wrap_all(&ind.to_i64s()?, x.dims[a])?;
    let xs = strides(x.dims);
    let dims = ind.dims;
    with_width!(x.dtype, T => {
        let src = x.slice::<T>()?;
        par_fill(outs[0].slice::<T>()?, |i| {
            src[offset_without(i, dims, &xs, a) + idx[i] * xs[a]]
        });
        Ok(())
    })
}

/// Offsets into `data` of the slices that the last dim of `indices` addresses,
/// after `b` batch dims; returns them with the slice length.
fn nd_offsets(
    data: &[usize],
    ind_dims: &[usize],
    ind: &[i64],
    b: usize,
) -> Result<(Vec<usize>, usize), KernelError> {
    let r = ind_dims.len();
    let k = ind_dims[r - 1];
    if b + k > data.len() || data[..b] != ind_dims[..b] {
        return Err(KernelError::Value(format!(
            "indices of shape {ind_dims:?} do not address data of shape {data:?} with {b} batch dims"
        )));
    }
    let ds = strides(data);
    let slice: usize = data[b + k..].iter().product();
    let per_batch: usize = data[b..].iter().product();
    let tuples = if k == 0 {
        ind_dims[..r - 1].iter().product()
    } else {
        ind.len() / k
    };
    let per_batch_tuples = tuples / ind_dims[..b].iter().product::<usize>().max(1);
    let mut offs = Vec::with_capacity(tuples);
    for j in 0..tuples {
        let mut off = (j / per_batch_tuples.max(1)) * per_batch;
        for t in 0..k {
            off += wrap_index(ind[j * k + t], data[b + t])? * ds[b + t];
        }
        offs.push(off);
    }
    Ok((offs, slice))
}

fn gather_nd(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::GatherNd(g) = op else {
        return Err(internal("gather_nd"));
    };
    let x = &ins[0];
    let (offs, slice) = nd_offsets(
        x.dims,
        ins[1].dims,
        &ins[1].to_i64s()?,
        g.batch_dims as usize,
    )?;
    if slice == 0 || offs.is_empty() {
        return Ok(());
    }
    with_width!(x.dtype, T => {
        let src = x.slice::<T>()?;
        par_rows(outs[0].slice::<T>()?, slice, |r, row| {
            row.copy_from_slice(&src[offs[r]..offs[r] + slice]);
        });
        Ok(())
    })
}

/// `a (op) b` for a scatter reduction.
fn combine<T: AnyNum>(r: ScatterReduction, float: bool, a: T, b: T) -> T {
    let (x, y) = (a.as_f64(), b.as_f64());
    match r {
        ScatterReduction::None => b,
        ScatterReduction::Add if float => T::of_f64(x + y),
        ScatterReduction::Add => T::of_i128(a.as_i128().wrapping_add(b.as_i128())),
        ScatterReduction::Mul if float => T::of_f64(x * y),
        ScatterReduction::Mul => T::of_i128(a.as_i128().wrapping_mul(b.as_i128())),
        ScatterReduction::Max if x.is_nan() || y.is_nan() => T::of_f64(f64::NAN),
        ScatterReduction::Max => {
            if b > a {
                b
            } else {
                a
            }
        }
        ScatterReduction::Min if x.is_nan() || y.is_nan() => T::of_f64(f64::NAN),
        ScatterReduction::Min => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}

/// Copies `data` to `out`, then applies `updates[j*len..][..len]` at each
/// `targets[j]` in order (later writes win for `none`).
fn scatter_apply(
    r: ScatterReduction,
    data: &TensorRef,
    updates: &TensorRef,
    targets: &[usize],
    len: usize,
    out: &mut TensorMut,
) -> Result<(), KernelError> {
    if updates.numel() != targets.len() * len {
        return Err(KernelError::Value(format!(
            "{} updates for {} targets of {len} elements",
            updates.numel(),
            targets.len()
        )));
    }
    out.bytes.copy_from_slice(data.bytes);
    if r == ScatterReduction::None {
        return with_width!(data.dtype, T => {
            let (u, o) = (updates.slice::<T>()?, out.slice::<T>()?);
            for (j, &t) in targets.iter().enumerate() {
                o[t..t + len].copy_from_slice(&u[j * len..(j + 1) * len]);
            }
            Ok(())
        });
    }
    if data.dtype == DType::Bool {
        return Err(KernelError::Unsupported(format!(
            "scatter reduction `{}` on bool",
            r.name()
        )));
    }
    let float = data.dtype.is_float();
    with_dtype!(data.dtype, T => {
        let (u, o) = (updates.slice::<T>()?, out.slice::<T>()?);
        for (j, &t) in targets.iter().enumerate() {
            for e in 0..len {
                o[t + e] = combine(r, float, o[t + e], u[j * len + e]);
            }
        }
        Ok(())
    }, num)
}

fn scatter_elements(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ScatterElements(s) = op else {
        return Err(internal("scatter_elements"));
    };
    let (x, ind, upd) = (&ins[0], &ins[1], &ins[2]);
    let a = axis(s.axis, x.rank());
    check_fits(ind.dims, x.dims, a)?;
    if ind.dims != upd.dims {
        return Err(KernelError::Value(format!(
            "indices {:?} and updates {:?} differ in shape",
            ind.dims, upd.dims
        )));
    }
    let idx = wrap_all(&ind.to_i64s()?, x.dims[a])?;
    let xs = strides(x.dims);
    let targets: Vec<usize> = (0..idx.len())
        .map(|i| offset_without(i, ind.dims, &xs, a) + idx[i] * xs[a])
        .collect();
    scatter_apply(s.reduction, x, upd, &targets, 1, &mut outs[0])
}

fn scatter_nd(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ScatterNd(s) = op else {
        return Err(internal("scatter_nd"));
    };
    let (x, ind, upd) = (&ins[0], &ins[1], &ins[2]);
    if ind.rank() == 0 {
        return Err(KernelError::Value(
            "scatter_nd indices need rank >= 1".into(),
        ));
    }
    let (targets, len) = nd_offsets(x.dims, ind.dims, &ind.to_i64s()?, 0)?;
    scatter_apply(s.reduction, x, upd, &targets, len, &mut outs[0])
}

fn one_hot(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::OneHot(h) = op else {
        return Err(internal("one_hot"));
    };
    let ind = &ins[0];
    let idx: Vec<i64> = if ind.dtype.is_float() {
        ind.to_f64s()?.into_iter().map(|v| v as i64).collect()
    } else {
        ind.to_i64s()?
    };
    let out = &mut outs[0];
    let a = axis(h.axis, out.dims.len());
    let depth = out.dims[a];
    let inner: usize = out.dims[a + 1..].iter().product();
    let values = &ins[2];
    if values.numel() != 2 {
        return Err(KernelError::Value(format!(
            "one_hot values need 2 elements, got {}",
            values.numel()
        )));
    }
    // Indices in [-depth, depth) select a position; others give all `off`.
    let d = depth as i64;
    let pos: Vec<Option<usize>> = idx
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + d } else { i };
            (0..d).contains(&j).then_some(j as usize)
        })
        .collect();
    with_width!(out.dtype, T => {
        let v = values.slice::<T>()?;
        let (off, on) = (v[0], v[1]);
        par_fill(out.slice::<T>()?, |i| {
            let (o, rest) = (i / (depth * inner), i % (depth * inner));
            let (k, r) = (rest / inner, rest % inner);
            if pos[o * inner + r] == Some(k) { on } else { off }
        });
        Ok(())
    })
}

fn trilu(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::Trilu(t) = op else {
        return Err(internal("trilu"));
    };
    let x = &ins[0];
    let k = match ins.get(1) {
        Some(k) => *k
            .to_i64s()?
            .first()
            .ok_or_else(|| KernelError::Value("trilu k is empty".into()))?,
        None => 0,
    };
    let r = x.rank();
    let (rows, cols) = (x.dims[r - 2], x.dims[r - 1]);
    let upper = t.upper;
    if x.numel() == 0 {
        return Ok(());
    }
    with_width!(x.dtype, T => {
        let src = x.slice::<T>()?;
        par_rows(outs[0].slice::<T>()?, cols, |row_i, row| {
            let i = (row_i % rows) as i64;
            let base = row_i * cols;
            for (j, v) in row.iter_mut().enumerate() {
                let diff = j as i64 - i;
                let keep = if upper { diff >= k } else { diff <= k };
                *v = if keep { src[base + j] } else { T::default() };
            }
        });
        Ok(())
    })
}

fn reverse_sequence(op: &Op, ins: &[TensorRef], outs: &mut [TensorMut]) -> Result<(), KernelError> {
    let Op::ReverseSequence(rs) = op else {
        return Err(internal("reverse_sequence"));
    };
    let x = &ins[0];
    let (ba, ta) = (axis(rs.batch_axis, x.rank()), axis(rs.time_axis, x.rank()));
    let (nb, nt) = (x.dims[ba], x.dims[ta]);
    let lens = ins[1].to_i64s()?;
    if lens.len() != nb {
        return Err(KernelError::Value(format!(
            "{} sequence lengths for a batch of {nb}",
            lens.len()
        )));
    }
    if let Some(&l) = lens.iter().find(|&&l| l < 0 || l as usize > nt) {
        return Err(KernelError::Value(format!(
            "sequence length {l} is outside [0, {nt}]"
        )));
    }
    let st = strides(x.dims);
    with_width!(x.dtype, T => {
        let src = x.slice::<T>()?;
        par_fill(outs[0].slice::<T>()?, |i| {
            let (b, t) = ((i / st[ba]) % nb, (i / st[ta]) % nt);
            let l = lens[b] as usize;
            if t < l {
                src[i - t * st[ta] + (l - 1 - t) * st[ta]]
            } else {
                src[i]
            }
        });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::{Gather, GatherNd, OneHot, ScatterElements, Trilu};

    fn f32s(v: &[f32]) -> &[u8] {
        bytemuck::cast_slice(v)
    }

    fn run(
        op: &Op,
        ins: &[TensorRef],
        out_dt: DType,
        out_dims: &[usize],
    ) -> Result<Vec<u8>, KernelError> {
        let n: usize = out_dims.iter().product();
        let mut buf = vec![0u8; n * out_dt.size()];
        {
            let mut outs = [TensorMut {
                dtype: out_dt,
                dims: out_dims,
                bytes: &mut buf,
            }];
            let f = match op {
                Op::Gather(_) => gather,
                Op::GatherNd(_) => gather_nd,
                Op::ScatterElements(_) => scatter_elements,
                Op::OneHot(_) => one_hot,
                Op::Trilu(_) => trilu,
                _ => unreachable!(),
            };
            f(op, ins, &mut outs)?;
        }
        Ok(buf)
    }

    fn t<'a>(dtype: DType, dims: &'a [usize], bytes: &'a [u8]) -> TensorRef<'a> {
        TensorRef { dtype, dims, bytes }
    }

    #[test]
    fn gather_wraps_negative_and_rejects_out_of_range() {
        let x = [1f32, 2., 3., 4., 5., 6.];
        let idx = [-1i64, 0];
        let op = Op::Gather(Gather { axis: 1 });
        let ins = [
            t(DType::F32, &[2, 3], f32s(&x)),
            t(DType::I64, &[2], bytemuck::cast_slice(&idx)),
        ];
        let out = run(&op, &ins, DType::F32, &[2, 2]).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&out), &[3., 1., 6., 4.]);
        let bad = [3i64];
        let ins = [
            t(DType::F32, &[2, 3], f32s(&x)),
            t(DType::I64, &[1], bytemuck::cast_slice(&bad)),
        ];
        assert!(matches!(
            run(&op, &ins, DType::F32, &[2, 1]),
            Err(KernelError::Value(_))
        ));
    }

    #[test]
    fn gather_nd_with_batch_dims() {
        // data [2,2,2], indices [2,1,1] with batch_dims 1: out[b] = data[b, idx[b]].
        let x = [0f32, 1., 2., 3., 4., 5., 6., 7.];
        let idx = [1i64, 0];
        let op = Op::GatherNd(GatherNd { batch_dims: 1 });
        let ins = [
            t(DType::F32, &[2, 2, 2], f32s(&x)),
            t(DType::I64, &[2, 1], bytemuck::cast_slice(&idx)),
        ];
        let out = run(&op, &ins, DType::F32, &[2, 2]).unwrap();
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&out), &[2., 3., 4., 5.]);
    }

    #[test]
    fn scatter_elements_adds_duplicates() {
        let x = [1f32, 2., 3., 4., 5.];
        let idx = [1i64, 1, -1];
        let u = [10f32, 20., 30.];
        let op = Op::ScatterElements(ScatterElements {
            axis: 0,
            reduction: ScatterReduction::Add,
        });
        let ins = [
            t(DType::F32, &[5], f32s(&x)),
            t(DType::I64, &[3], bytemuck::cast_slice(&idx)),
            t(DType::F32, &[3], f32s(&u)),
        ];
        let out = run(&op, &ins, DType::F32, &[5]).unwrap();
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(&out),
            &[1., 32., 3., 4., 35.]
        );
    }

    #[test]
    fn one_hot_off_for_out_of_range() {
        let idx = [1i64, -1, 7];
        let vals = [0f32, 5.];
        let op = Op::OneHot(OneHot { axis: -1 });
        let depth = [3i64];
        let ins = [
            t(DType::I64, &[3], bytemuck::cast_slice(&idx)),
            t(DType::I64, &[], bytemuck::cast_slice(&depth)),
            t(DType::F32, &[2], f32s(&vals)),
        ];
        let out = run(&op, &ins, DType::F32, &[3, 3]).unwrap();
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(&out),
            &[0., 5., 0., 0., 0., 5., 0., 0., 0.]
        );
    }

    #[test]
    fn trilu_lower_with_offset() {
        let x = [1f32, 2., 3., 4., 5., 6., 7., 8., 9.];
        let k = [-1i64];
        let op = Op::Trilu(Trilu { upper: false });
        let ins = [
            t(DType::F32, &[3, 3], f32s(&x)),
            t(DType::I64, &[], bytemuck::cast_slice(&k)),
        ];
        let out = run(&op, &ins, DType::F32, &[3, 3]).unwrap();
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(&out),
            &[0., 0., 0., 4., 0., 0., 7., 8., 0.]
        );
    }
}
