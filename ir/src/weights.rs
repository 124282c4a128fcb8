//! The weight store: named tensors referenced by `weight` nodes.

use std::collections::BTreeMap;

use crate::tensor::Tensor;

/// Named weights, kept out of the graph so dumps stay readable and artifacts
/// stay zero-copy. Iteration is in name order.
#[derive(Debug, Clone, Default)]
pub struct Weights {
    map: BTreeMap<String, Tensor>,
}

impl Weights {
    pub fn new() -> Weights {
        Weights::default()
    }

    pub fn insert(&mut self, name: impl Into<String>, t: Tensor) {
        self.map.insert(name.into(), t);
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.map.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn remove(&mut self, name: &str) -> Option<Tensor> {
        self.map.remove(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Total bytes of all weights.
    pub fn total_bytes(&self) -> usize {
        self.map.values().map(|t| t.bytes().len()).sum()
    }

    /// `base`, or `base_N`, whichever is not taken.
    pub fn unique_name(&self, base: &str) -> String {
        if !self.contains(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !self.contains(n))
            .unwrap_or_default()
    }

    /// Drops weights no name in `used` refers to.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.map.retain(|k, _| keep(k));
    }
}
