//! String ops, evaluated node by node on tensors that hold Rust strings.

use std::collections::HashMap;

use rlx_ir::ops::{CaseChange, Op};
use rlx_ir::{DType, Node, Tensor};

use super::layout::strides;
use crate::kernel::{EvalCx, KernelError};

fn internal(e: impl ToString) -> KernelError {
    KernelError::Internal(e.to_string())
}

fn strings(inputs: &[Tensor], port: usize) -> Result<&[String], KernelError> {
    inputs[port]
        .strings()
        .ok_or_else(|| KernelError::Value(format!("input {port} is not a string tensor")))
}

fn bools(dims: &[usize], v: &[bool]) -> Result<Tensor, KernelError> {
    let b: Vec<u8> = v.iter().map(|&x| u8::from(x)).collect();
    Tensor::from_slice(DType::Bool, dims, &b).map_err(internal)
}

/// Numpy broadcasting of two shapes: the output dims, and for each output
/// element the flat index of the element of `a` and of `b` it reads
/// (computed per element, not stored: 16 bytes an element would outgrow
/// the output). The output's size is checked against the run's limits.
struct Broadcast {
    dims: Vec<usize>,
    pa: Vec<usize>,
    pb: Vec<usize>,
    sa: Vec<usize>,
    sb: Vec<usize>,
    so: Vec<usize>,
}

impl Broadcast {
    fn new(a: &[usize], b: &[usize], cx: &EvalCx) -> Result<Broadcast, KernelError> {
        let r = a.len().max(b.len());
        let pad = |d: &[usize]| -> Vec<usize> {
            let mut v = vec![1; r - d.len()];
            v.extend_from_slice(d);
            v
        };
        let (pa, pb) = (pad(a), pad(b));
        let mut dims = Vec::with_capacity(r);
        for (&x, &y) in pa.iter().zip(&pb) {
            dims.push(match (x, y) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => {
                    return Err(KernelError::Value(format!(
                        "shapes {a:?} and {b:?} do not broadcast"
                    )))
                }
            });
        }
        cx.check_elements(&dims)?;
        let (sa, sb, so) = (strides(&pa), strides(&pb), strides(&dims));
        Ok(Broadcast {
            dims,
            pa,
            pb,
            sa,
            sb,
            so,
        })
    }

    fn len(&self) -> usize {
        self.dims.iter().product()
    }

    /// The elements of `a` and `b` output element `i` reads.
    fn pair(&self, i: usize) -> (usize, usize) {
        let (mut ia, mut ib) = (0, 0);
        for d in 0..self.dims.len() {
            let c = (i / self.so[d]) % self.dims[d];
            if self.pa[d] != 1 {
                ia += c * self.sa[d];
            }
            if self.pb[d] != 1 {
                ib += c * self.sb[d];
            }
        }
        (ia, ib)
    }
}

pub fn concat(_: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let (a, b) = (strings(inputs, 0)?, strings(inputs, 1)?);
    let bc = Broadcast::new(inputs[0].dims(), inputs[1].dims(), cx)?;
    let v = (0..bc.len())
        .map(|k| {
            let (i, j) = bc.pair(k);
            format!("{}{}", a[i], b[j])
        })
        .collect();
    Ok(vec![Tensor::from_strings(&bc.dims, v).map_err(internal)?])
}

pub fn equal(_: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let (a, b) = (strings(inputs, 0)?, strings(inputs, 1)?);
    let bc = Broadcast::new(inputs[0].dims(), inputs[1].dims(), cx)?;
    let v: Vec<bool> = (0..bc.len())
        .map(|k| {
            let (i, j) = bc.pair(k);
            a[i] == b[j]
        })
        .collect();
    Ok(vec![bools(&bc.dims, &v)?])
}

pub fn normalizer(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::StringNormalizer(op) = &node.op else {
        return Err(internal("not string_normalizer"));
    };
    let x = strings(inputs, 0)?;
    let fold = |s: &str| {
        if op.case_sensitive {
            s.to_string()
        } else {
            s.to_lowercase()
        }
    };
    let stops: std::collections::HashSet<String> = op.stopwords.iter().map(|s| fold(s)).collect();
    let mut kept: Vec<String> = x
        .iter()
        .filter(|s| !stops.contains(&fold(s)))
        .map(|s| match op.case_change {
            CaseChange::Lower => s.to_lowercase(),
            CaseChange::Upper => s.to_uppercase(),
            CaseChange::Keep => s.clone(),
        })
        .collect();
    if kept.is_empty() {
        kept.push(String::new());
    }
    let dims = if inputs[0].dims().len() == 2 {
        vec![1, kept.len()]
    } else {
        vec![kept.len()]
    };
    Ok(vec![Tensor::from_strings(&dims, kept).map_err(internal)?])
}

pub fn split(node: &Node, inputs: &[Tensor], cx: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::StringSplit(op) = &node.op else {
        return Err(internal("not string_split"));
    };
    let x = strings(inputs, 0)?;
    let max = op.maxsplit.and_then(|m| usize::try_from(m).ok());
    let pieces: Vec<Vec<String>> = x
        .iter()
        .map(|s| {
            if op.delimiter.is_empty() {
                // Runs of whitespace separate; leading and trailing ones make no pieces.
                let mut out: Vec<String> = Vec::new();
                let mut rest = s.trim_start();
                while !rest.is_empty() {
                    if max.is_some_and(|m| out.len() == m) {
                        out.push(rest.to_string());
                        break;
                    }
                    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                    out.push(rest[..end].to_string());
                    rest = rest[end..].trim_start();
                }
                out
            } else {
                match max {
                    Some(m) => s
                        .splitn(m + 1, op.delimiter.as_str())
                        .map(String::from)
                        .collect(),
                    None => s.split(op.delimiter.as_str()).map(String::from).collect(),
                }
            }
        })
        .collect();
    let k = pieces.iter().map(Vec::len).max().unwrap_or(0);
    let mut dims = inputs[0].dims().to_vec();
    dims.push(k);
    // Every row is padded to the longest: one string of many pieces makes
    // the output as large as the input times that count.
    cx.check_elements(&dims)?;
    let mut flat = Vec::with_capacity(pieces.len() * k);
    let mut counts = Vec::with_capacity(pieces.len());
    for p in pieces {
        counts.push(p.len() as i64);
        let n = p.len();
        flat.extend(p);
        flat.extend(std::iter::repeat_n(String::new(), k - n));
    }
    Ok(vec![
        Tensor::from_strings(&dims, flat).map_err(internal)?,
        Tensor::from_i64(inputs[0].dims(), &counts).map_err(internal)?,
    ])
}

pub fn regex_full_match(
    node: &Node,
    inputs: &[Tensor],
    _: &EvalCx,
) -> Result<Vec<Tensor>, KernelError> {
    let Op::RegexFullMatch(op) = &node.op else {
        return Err(internal("not regex_full_match"));
    };
    let re = super::re2::full_match(&op.pattern)
        .map_err(|e| KernelError::Value(format!("pattern `{}`: {e}", op.pattern)))?;
    let x = strings(inputs, 0)?;
    let v: Vec<bool> = x.iter().map(|s| re.is_match(s)).collect();
    Ok(vec![bools(inputs[0].dims(), &v)?])
}

/// A table key: strings by value, numbers by their bits widened to 64.
#[derive(PartialEq, Eq, Hash)]
enum Key {
    Text(String),
    Int(i64),
    Float(u64),
}

fn keys_of(t: &Tensor) -> Result<Vec<Key>, KernelError> {
    if let Some(s) = t.strings() {
        return Ok(s.iter().map(|s| Key::Text(s.clone())).collect());
    }
    if t.dtype().is_float() {
        let v = t.to_f64_vec().ok_or(KernelError::DType(t.dtype()))?;
        // -0.0 and 0.0 are one key; NaN keys match NaN.
        return Ok(v
            .iter()
            .map(|&f| Key::Float(if f == 0.0 { 0 } else { f.to_bits() }))
            .collect());
    }
    let v = t.to_i64_vec().ok_or(KernelError::DType(t.dtype()))?;
    Ok(v.into_iter().map(Key::Int).collect())
}

/// Elements `idx` of a 1-D tensor, shaped `dims`.
fn pick(t: &Tensor, idx: &[usize], dims: &[usize]) -> Result<Tensor, KernelError> {
    if let Some(s) = t.strings() {
        let v = idx.iter().map(|&i| s[i].clone()).collect();
        return Tensor::from_strings(dims, v).map_err(internal);
    }
    super::data::gather_slices(t, None, idx)?
        .reshaped(dims.to_vec())
        .map_err(internal)
}

pub fn map(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::StringMap(op) = &node.op else {
        return Err(internal("not string_map"));
    };
    op.validate().map_err(KernelError::Value)?;
    if inputs[0].dtype() != op.keys.dtype() {
        return Err(KernelError::Value(format!(
            "input of {} for keys of {}",
            inputs[0].dtype(),
            op.keys.dtype()
        )));
    }
    // Values followed by the default: index `n` is the default.
    let n = op.values.numel();
    let table: HashMap<Key, usize> = keys_of(&op.keys)?
        .into_iter()
        .enumerate()
        .rev()
        .map(|(i, k)| (k, i))
        .collect();
    let all = match (op.values.strings(), op.default.strings()) {
        (Some(v), Some(d)) => {
            let mut v = v.to_vec();
            v.extend_from_slice(d);
            Tensor::from_strings(&[n + 1], v).map_err(internal)?
        }
        (None, None) => {
            let mut b = op.values.bytes().to_vec();
            b.extend_from_slice(op.default.bytes());
            Tensor::new(op.values.dtype(), vec![n + 1], rlx_ir::Bytes::copy_from(&b))
                .map_err(internal)?
        }
        _ => {
            return Err(KernelError::Value(
                "values and default differ in dtype".into(),
            ))
        }
    };
    let idx: Vec<usize> = keys_of(&inputs[0])?
        .into_iter()
        .map(|k| table.get(&k).copied().unwrap_or(n))
        .collect();
    Ok(vec![pick(&all, &idx, inputs[0].dims())?])
}
