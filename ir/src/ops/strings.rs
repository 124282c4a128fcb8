//! String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch,
//! Equal on strings, LabelEncoder with string keys or values, and
//! TfIdfVectorizer (on strings or integers). String
//! tensors hold Rust strings, so these run node by node on the CPU.

use super::{broadcast, value_err, InferCx, InferError, OpDef};
use crate::dtype::DType;
use crate::shape::{Shape, TensorType};
use crate::tensor::Tensor;
use crate::{attr_enum, op_attrs};

attr_enum! {
    /// The case StringNormalizer gives the strings it keeps.
    pub enum CaseChange { Lower = "lower", Upper = "upper", Keep = "keep" }
}

fn expect_strings(cx: &InferCx, port: usize) -> Result<(), InferError> {
    cx.expect_dtype(port, &[DType::Str]).map(|_| ())
}

/// Two string inputs broadcast to one output of `out`.
fn broadcast_strings(cx: &InferCx, out: DType) -> Result<Vec<TensorType>, InferError> {
    expect_strings(cx, 0)?;
    expect_strings(cx, 1)?;
    Ok(vec![TensorType::new(
        out,
        broadcast(cx.shape(0), cx.shape(1))?,
    )])
}

op_attrs! {
    /// Drops the `stopwords` (compared ignoring case unless `case_sensitive`)
    /// from a `[C]` or `[1, C]` string tensor and changes the case of the
    /// rest; an all-dropped input gives one empty string.
    pub struct StringNormalizer {
        pub case_change: CaseChange,
        pub case_sensitive: bool,
        pub stopwords: Vec<String>,
        pub locale: String,
    }
}

impl OpDef for StringNormalizer {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_strings(cx, 0)?;
        let s = cx.shape(0);
        let shape = match s.rank() {
            1 => Shape(vec![cx.fresh(0, 0)]),
            2 if s.0[0].known() == Some(1) => Shape(vec![s.0[0].clone(), cx.fresh(0, 1)]),
            _ => {
                return Err(value_err(
                    0,
                    format!("has shape {s}, expected [C] or [1, C]"),
                ))
            }
        };
        Ok(vec![TensorType::new(DType::Str, shape)])
    }
}

op_attrs! {
    /// Elementwise `a + b` of two string tensors, broadcasting.
    pub struct StringConcat {}
}

impl OpDef for StringConcat {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        broadcast_strings(cx, DType::Str)
    }
}

op_attrs! {
    /// Splits each string at `delimiter` (at runs of whitespace when empty,
    /// dropping empty pieces), at most `maxsplit` times. Outputs the pieces
    /// padded with empty strings to the most any element has (`[..., K]`) and
    /// each element's piece count (i64, the input's shape).
    pub struct StringSplit {
        pub delimiter: String,
        pub maxsplit: Option<i64>,
    }
}

impl OpDef for StringSplit {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_strings(cx, 0)?;
        let s = cx.shape(0);
        let mut pieces = s.0.clone();
        pieces.push(cx.fresh(0, s.rank()));
        Ok(vec![
            TensorType::new(DType::Str, Shape(pieces)),
            TensorType::new(DType::I64, s.clone()),
        ])
    }
}

op_attrs! {
    /// True where the whole string matches `pattern` (RE2 syntax).
    pub struct RegexFullMatch {
        pub pattern: String,
    }
}

impl OpDef for RegexFullMatch {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        expect_strings(cx, 0)?;
        Ok(vec![TensorType::new(DType::Bool, cx.shape(0).clone())])
    }
}

op_attrs! {
    /// Elementwise equality of two string tensors, broadcasting.
    pub struct StringEqual {}
}

impl OpDef for StringEqual {
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        broadcast_strings(cx, DType::Bool)
    }
}

op_attrs! {
    /// Maps each element through a table (ai.onnx.ml LabelEncoder where keys
    /// or values are strings): `keys[i]` to `values[i]`, anything else to
    /// `default`. `keys` and `values` are 1-D of equal length, `default` a
    /// scalar of the values' dtype; the output has the input's shape.
    pub struct StringMap {
        pub keys: Tensor,
        pub values: Tensor,
        pub default: Tensor,
    }
}

impl OpDef for StringMap {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        cx.expect_dtype(0, &[self.keys.dtype()])?;
        self.validate().map_err(|e| super::attr_err("values", e))?;
        Ok(vec![TensorType::new(
            self.values.dtype(),
            cx.shape(0).clone(),
        )])
    }
}

impl StringMap {
    /// Keys and values 1-D of one length, tensors (not sequences), the
    /// default one element of the values' dtype.
    pub fn validate(&self) -> Result<(), String> {
        let (k, v) = (self.keys.dims(), self.values.dims());
        let tensors = [&self.keys, &self.values, &self.default]
            .iter()
            .all(|t| t.kind() == crate::ValueKind::Tensor);
        if k.len() != 1
            || k != v
            || !tensors
            || self.default.dtype() != self.values.dtype()
            || self.default.numel() != 1
        {
            return Err(format!(
                "keys {k:?} and values {v:?} must be 1-D of one length, the default one value of the values' dtype"
            ));
        }
        Ok(())
    }
}

op_attrs! {
    /// ONNX Cast to or from strings. Numbers print as ONNX Runtime prints
    /// them: floats as C's `%.8g` (`INF`, `-INF`, `NaN`), integers in
    /// decimal, bools as `1` / `0`. Strings parse as C's `strtod` does
    /// (leading blanks, `INF`, `NaN`, hexadecimal) for floats, as decimal
    /// integers for integers.
    pub struct StringCast {
        pub to: DType,
    }
}

impl OpDef for StringCast {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let from = cx.dtype(0);
        let number = |d: DType| d.is_float() || d.is_int() || d == DType::Bool;
        let ok = match (from == DType::Str, self.to == DType::Str) {
            (true, false) => number(self.to),
            (false, true) => number(from),
            _ => false,
        };
        if !ok {
            return Err(InferError::DType {
                port: 0,
                got: from,
                expected: format!(
                    "strings to cast to {}, or numbers to cast to strings",
                    self.to
                ),
            });
        }
        Ok(vec![TensorType::new(self.to, cx.shape(0).clone())])
    }
}

/// True for the ops that take or make strings.
pub fn is_string_op(op: &super::Op) -> bool {
    use super::Op::*;
    matches!(
        op,
        StringNormalizer(_)
            | StringCast(_)
            | StringConcat(_)
            | StringSplit(_)
            | RegexFullMatch(_)
            | StringEqual(_)
            | StringMap(_)
            | TfIdfVectorizer(_)
    )
}

attr_enum! {
    /// What TfIdfVectorizer outputs per n-gram: its count, its weight where it
    /// occurs (1 without weights), or count times weight.
    pub enum TfIdfMode { Tf = "tf", Idf = "idf", TfIdf = "tfidf" }
}

op_attrs! {
    /// Counts the n-grams of `pool` in each row of a `[C]` or `[B, C]` input
    /// (integers or strings, matching `pool`'s dtype). `ngram_counts[n - 1]`
    /// is where the n-grams of length n start in `pool`; n-gram k (in pool
    /// order) is output column `ngram_indexes[k]`. N-grams of `min_gram` to
    /// `max_gram` items are counted, with up to `max_skip` items skipped
    /// between neighbours (the same skip throughout one n-gram); unigrams
    /// count once. Outputs f32 `[O]` or `[B, O]`, O = max(ngram_indexes) + 1.
    pub struct TfIdfVectorizer {
        pub mode: TfIdfMode,
        pub min_gram: i64,
        pub max_gram: i64,
        pub max_skip: i64,
        pub ngram_counts: Vec<i64>,
        pub ngram_indexes: Vec<i64>,
        pub pool: Tensor,
        pub weights: Vec<f32>,
    }
}

impl TfIdfVectorizer {
    /// Output columns.
    pub fn columns(&self) -> usize {
        self.ngram_indexes
            .iter()
            .max()
            .map_or(0, |&m| m.max(-1) + 1) as usize
    }

    /// Checks the attributes against each other.
    pub fn validate(&self) -> Result<(), String> {
        let pool = self.pool.numel() as i64;
        if self.pool.dims().len() != 1 {
            return Err("the pool must be 1-D".into());
        }
        if self.min_gram < 1 || self.max_gram < self.min_gram || self.max_skip < 0 {
            return Err(format!(
                "gram lengths {}..={} and skip {} are not valid",
                self.min_gram, self.max_gram, self.max_skip
            ));
        }
        if self.ngram_counts.windows(2).any(|w| w[0] > w[1])
            || self.ngram_counts.iter().any(|&c| c < 0 || c > pool)
        {
            return Err("ngram_counts must rise within the pool".into());
        }
        if self.ngram_indexes.iter().any(|&i| i < 0) {
            return Err("ngram_indexes must not be negative".into());
        }
        if !self.weights.is_empty() && self.weights.len() < self.columns() {
            return Err(format!(
                "{} weights for {} output columns",
                self.weights.len(),
                self.columns()
            ));
        }
        Ok(())
    }
}

impl OpDef for TfIdfVectorizer {
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        self.validate()
            .map_err(|e| super::attr_err("tfidf_vectorizer", e))?;
        let d = cx.dtype(0);
        let ok = match self.pool.dtype() {
            DType::Str => d == DType::Str,
            _ => matches!(d, DType::I32 | DType::I64),
        };
        if !ok {
            return Err(InferError::DType {
                port: 0,
                got: d,
                expected: format!("the pool's kind ({})", self.pool.dtype()),
            });
        }
        let cols = crate::dim::Dim::Known(self.columns() as i64);
        let s = cx.shape(0);
        let shape = match s.rank() {
            0 | 1 => Shape(vec![cols]),
            2 => Shape(vec![s.0[0].clone(), cols]),
            r => {
                return Err(InferError::Rank {
                    port: 0,
                    got: r,
                    expected: "1 or 2".into(),
                })
            }
        };
        Ok(vec![TensorType::new(DType::F32, shape)])
    }
}
