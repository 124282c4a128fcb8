//! The mapper registry: (domain, op_type) -> mappers by the opset they start at.

use std::collections::HashMap;

use crate::ctx::NodeCtx;
use crate::error::MapError;

/// Maps one ONNX node into RLX nodes.
pub type Mapper = fn(&mut NodeCtx) -> Result<(), MapError>;

/// A mapper valid from opset `since` until the next entry's `since`.
#[derive(Clone, Copy)]
pub struct Entry {
    pub since: i64,
    pub mapper: Mapper,
}

/// All mappers, keyed by (domain, op_type). The default domain is `""`.
#[derive(Default)]
pub struct Registry {
    map: HashMap<(String, String), Vec<Entry>>,
}

/// Normalizes `ai.onnx` to the default domain `""`.
pub fn norm_domain(d: &str) -> &str {
    if d == "ai.onnx" {
        ""
    } else {
        d
    }
}

impl Registry {
    /// The registry of every mapper rlx-onnx has.
    pub fn standard() -> Registry {
        let mut r = Registry::default();
        crate::ops::register_all(&mut r);
        r
    }

    /// Registers a default-domain mapper from opset `since` on.
    pub fn add(&mut self, op_type: &str, since: i64, mapper: Mapper) {
        self.add_in("", op_type, since, mapper);
    }

    pub fn add_in(&mut self, domain: &str, op_type: &str, since: i64, mapper: Mapper) {
        let v = self
            .map
            .entry((domain.to_string(), op_type.to_string()))
            .or_default();
        v.push(Entry { since, mapper });
        v.sort_by_key(|e| e.since);
    }

    /// The mapper for `op_type` at `opset`: the entry with the greatest `since <= opset`.
    pub fn find(&self, domain: &str, op_type: &str, opset: i64) -> Option<Entry> {
        let v = self
            .map
            .get(&(norm_domain(domain).to_string(), op_type.to_string()))?;
        v.iter().rev().find(|e| e.since <= opset).copied()
    }

    /// True if any opset of `op_type` has a mapper.
    pub fn knows(&self, domain: &str, op_type: &str) -> bool {
        self.map
            .contains_key(&(norm_domain(domain).to_string(), op_type.to_string()))
    }

    /// Every registered (domain, op_type), sorted.
    pub fn ops(&self) -> Vec<(String, String)> {
        let mut v: Vec<_> = self.map.keys().cloned().collect();
        v.sort();
        v
    }
}
