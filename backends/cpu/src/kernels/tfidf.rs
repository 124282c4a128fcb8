//! TfIdfVectorizer: n-gram counts per row, over integer or string tokens.
//!
//! The pool's n-grams (and every prefix of them, so a walk can stop at the
//! first token no n-gram continues with) go into one hash map at build time;
//! each row is then walked once per skip distance, as ONNX Runtime does.

use std::collections::HashMap;

use rlx_ir::ops::{Op, TfIdfMode, TfIdfVectorizer};
use rlx_ir::{Node, Tensor};

use crate::kernel::{EvalCx, KernelError};

/// A token: integers widened to i64, strings by value.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Token {
    Int(i64),
    Text(String),
}

fn tokens(t: &Tensor) -> Result<Vec<Token>, KernelError> {
    if let Some(s) = t.strings() {
        return Ok(s.iter().cloned().map(Token::Text).collect());
    }
    t.to_i64_vec()
        .map(|v| v.into_iter().map(Token::Int).collect())
        .ok_or(KernelError::DType(t.dtype()))
}

/// The pool as a map from n-gram to its output column (`None` for a prefix
/// that is no counted n-gram itself).
fn pool_map(op: &TfIdfVectorizer) -> Result<HashMap<Vec<Token>, Option<usize>>, KernelError> {
    let pool = tokens(&op.pool)?;
    let mut map: HashMap<Vec<Token>, Option<usize>> = HashMap::new();
    let mut id = 0usize;
    for (i, &start) in op.ngram_counts.iter().enumerate() {
        let n = i + 1;
        let end = op
            .ngram_counts
            .get(i + 1)
            .map_or(pool.len(), |&e| e as usize);
        let grams = (end - start as usize) / n;
        let counted = (op.min_gram..=op.max_gram).contains(&(n as i64));
        for g in 0..grams {
            if counted {
                let at = start as usize + g * n;
                let gram = &pool[at..at + n];
                for k in 1..n {
                    map.entry(gram[..k].to_vec()).or_insert(None);
                }
                let col = op.ngram_indexes.get(id).ok_or_else(|| {
                    KernelError::Value(format!("no ngram_indexes entry for n-gram {id}"))
                })?;
                map.insert(gram.to_vec(), Some(*col as usize));
            }
            id += 1;
        }
    }
    Ok(map)
}

pub fn tfidf(node: &Node, inputs: &[Tensor], _: &EvalCx) -> Result<Vec<Tensor>, KernelError> {
    let Op::TfIdfVectorizer(op) = &node.op else {
        return Err(KernelError::Internal("not tfidf_vectorizer".into()));
    };
    op.validate().map_err(KernelError::Value)?;
    let map = pool_map(op)?;
    let x = &inputs[0];
    let toks = tokens(x)?;
    let (rows, c) = match x.dims() {
        [b, c] => (*b, *c),
        [c] => (1, *c),
        [] => (1, 1),
        d => {
            return Err(KernelError::Value(format!(
                "input of shape {d:?}, expected [C] or [B, C]"
            )))
        }
    };
    let cols = op.columns();
    let mut counts = vec![0u32; rows * cols];
    let (min, max) = (op.min_gram as usize, op.max_gram as usize);
    for r in 0..rows {
        let row = &toks[r * c..(r + 1) * c];
        let out = &mut counts[r * cols..(r + 1) * cols];
        let mut first = min;
        for skip in 1..=op.max_skip as usize + 1 {
            for start in 0..row.len() {
                if start + skip * (first - 1) >= row.len() {
                    break;
                }
                let mut gram: Vec<Token> = Vec::with_capacity(max);
                let mut at = start;
                while gram.len() < max && at < row.len() {
                    gram.push(row[at].clone());
                    match map.get(&gram) {
                        None => break,
                        Some(Some(col)) if gram.len() >= first => out[*col] += 1,
                        Some(_) => {}
                    }
                    at += skip;
                }
            }
            // Unigrams count once, not once per skip distance.
            if first == 1 {
                first = 2;
                if first > max {
                    break;
                }
            }
        }
    }
    let y: Vec<f32> = counts
        .iter()
        .enumerate()
        .map(|(i, &f)| {
            let w = op.weights.get(i % cols.max(1)).copied();
            match (op.mode, w) {
                (TfIdfMode::Tf, _) => f as f32,
                (TfIdfMode::Idf, Some(w)) => {
                    if f > 0 {
                        w
                    } else {
                        0.0
                    }
                }
                (TfIdfMode::Idf, None) => {
                    if f > 0 {
                        1.0
                    } else {
                        0.0
                    }
                }
                (TfIdfMode::TfIdf, Some(w)) => w * f as f32,
                (TfIdfMode::TfIdf, None) => f as f32,
            }
        })
        .collect();
    let dims = if x.dims().len() == 2 {
        vec![rows, cols]
    } else {
        vec![cols]
    };
    Ok(vec![
        Tensor::from_f32(&dims, &y).map_err(|e| KernelError::Internal(e.to_string()))?
    ])
}
