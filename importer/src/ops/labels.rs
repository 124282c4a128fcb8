//! Class labels of the ai.onnx.ml classifiers: integers (`classlabels_ints` /
//! `classlabels_int64s`) or strings (`classlabels_strings`), and the label
//! tensor picked by each row's winning class index.

use rlx_ir::ops::{Gather, StringMap};
use rlx_ir::{Tensor, Value};

use crate::ctx::NodeCtx;
use crate::error::MapError;

pub(crate) enum Labels {
    Ints(Vec<i64>),
    Strings(Vec<String>),
}

impl Labels {
    /// The node's labels: `classlabels_strings`, or the integer attribute `ints`.
    pub fn read(cx: &mut NodeCtx, ints: &str) -> Result<Labels, MapError> {
        match (cx.attr_strings("classlabels_strings")?, cx.attr_ints(ints)?) {
            (Some(s), None) => Ok(Labels::Strings(s)),
            (None, Some(i)) => Ok(Labels::Ints(i)),
            (Some(_), Some(_)) => Err(MapError::Attr {
                name: "classlabels_strings".into(),
                reason: format!("given with {ints}; a classifier has one kind of label"),
            }),
            (None, None) => Err(MapError::Attr {
                name: ints.into(),
                reason: "is required (or classlabels_strings)".into(),
            }),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Labels::Ints(v) => v.len(),
            Labels::Strings(v) => v.len(),
        }
    }

    /// The label of each class index in `winner` (i64).
    pub fn pick(&self, cx: &mut NodeCtx, winner: Value) -> Result<Value, MapError> {
        let bad = |e: rlx_ir::tensor::TensorError| MapError::Unsupported(e.to_string());
        match self {
            Labels::Ints(v) => {
                let table = cx.const_i64(v);
                cx.add1(Gather { axis: 0 }, &[table, winner])
            }
            Labels::Strings(v) => {
                let idx: Vec<i64> = (0..v.len() as i64).collect();
                let map = StringMap {
                    keys: Tensor::from_i64(&[v.len()], &idx).map_err(bad)?,
                    values: Tensor::from_strings(&[v.len()], v.clone()).map_err(bad)?,
                    default: Tensor::from_strings(&[], vec![String::new()]).map_err(bad)?,
                };
                cx.add1(map, &[winner])
            }
        }
    }
}
