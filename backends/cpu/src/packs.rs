//! Constant operands prepared for kernels (weight panels packed for the
//! microkernels, quantized weights widened to integers), shared by every
//! plan that a store is given: a session plans its model once per set of
//! input shapes, and each plan built its own copy of every packed weight.
//! A text recognizer called with a new line width each time repacked the
//! whole model at each width (a bidirectional int8 LSTM tagger: 41 ms of a
//! 43 ms first run at a new length went to its weights), and every shape
//! kept held a copy.
//!
//! An entry is keyed by what was made (a kernel family's name and the
//! parameters its layout depends on) and by the identity of the constant
//! tensors it was made from: the address and length of their bytes, their
//! dtype and dims. Tensor bytes are immutable and shared, so a specialized
//! graph's weights are the model's own bytes; constants a pass computes
//! anew for each shape are new bytes, and miss. The entry holds clones of
//! its sources, so no other tensor can take their address while it lives,
//! and what was made weakly: it lives while some plan uses it.

use std::any::Any;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};

use rlx_ir::{DType, Tensor};

/// Prepared constant operands, by what they were made from.
#[derive(Default)]
pub struct Packs {
    entries: Mutex<HashMap<Key, Entry>>,
}

#[derive(PartialEq, Eq, Hash)]
struct Key {
    what: &'static str,
    params: Vec<usize>,
    sources: Vec<Source>,
}

#[derive(PartialEq, Eq, Hash)]
struct Source {
    addr: usize,
    len: usize,
    dtype: DType,
    dims: Vec<usize>,
}

impl Source {
    fn of(t: &Tensor) -> Source {
        let b = t.bytes();
        Source {
            addr: b.as_ptr() as usize,
            len: b.len(),
            dtype: t.dtype(),
            dims: t.dims().to_vec(),
        }
    }
}

struct Entry {
    /// Kept so that no other tensor takes the sources' addresses.
    _sources: Vec<Tensor>,
    made: Weak<dyn Any + Send + Sync>,
}

impl Packs {
    pub fn new() -> Packs {
        Packs::default()
    }

    /// What `make` makes of `sources` for `what` with `params`: the value a
    /// plan made before, while some plan still holds it, or made now.
    /// `None` (nothing cached) where `make` gives none.
    pub fn get_or_make<T: Any + Send + Sync>(
        &self,
        what: &'static str,
        params: &[usize],
        sources: &[&Tensor],
        make: impl FnOnce() -> Option<T>,
    ) -> Option<Arc<T>> {
        let key = Key {
            what,
            params: params.to_vec(),
            sources: sources.iter().map(|t| Source::of(t)).collect(),
        };
        let found = self
            .lock()
            .get(&key)
            .and_then(|e| e.made.upgrade())
            .and_then(|made| made.downcast::<T>().ok());
        if found.is_some() {
            return found;
        }
        // Made without the lock: another plan may make the same value
        // meanwhile, and the later one is kept.
        let made = Arc::new(make()?);
        let weak: Weak<dyn Any + Send + Sync> = {
            let any: Arc<dyn Any + Send + Sync> = made.clone();
            Arc::downgrade(&any)
        };
        let mut entries = self.lock();
        entries.retain(|_, e| e.made.strong_count() > 0);
        entries.insert(
            key,
            Entry {
                _sources: sources.iter().map(|t| (*t).clone()).collect(),
                made: weak,
            },
        );
        Some(made)
    }

    /// How many prepared values some plan still holds.
    pub fn live(&self) -> usize {
        self.lock()
            .values()
            .filter(|e| e.made.strong_count() > 0)
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One constant operand and where what a kernel prepares of it is kept:
/// in a store, by the tensor's identity, or nowhere (made for one plan:
/// tests, and kernels built outside a plan).
#[derive(Clone, Copy)]
pub struct Keep<'a> {
    at: Option<(&'a Packs, &'a Tensor)>,
}

impl<'a> Keep<'a> {
    /// Kept in `packs`, made from `source`.
    pub fn of(packs: &'a Packs, source: &'a Tensor) -> Keep<'a> {
        Keep {
            at: Some((packs, source)),
        }
    }

    /// Made for the caller alone.
    pub fn nowhere() -> Keep<'static> {
        Keep { at: None }
    }

    /// [`Packs::get_or_make`] with this operand as the one source.
    pub fn get_or_make<T: Any + Send + Sync>(
        &self,
        what: &'static str,
        params: &[usize],
        make: impl FnOnce() -> Option<T>,
    ) -> Option<Arc<T>> {
        match self.at {
            Some((packs, source)) => packs.get_or_make(what, params, &[source], make),
            None => make().map(Arc::new),
        }
    }
}

impl std::fmt::Debug for Packs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packs({} live)", self.live())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(v: &[f32]) -> Tensor {
        Tensor::from_f32(&[v.len()], v).unwrap()
    }

    #[test]
    fn made_once_while_held() {
        let packs = Packs::new();
        let w = weights(&[1.0, 2.0, 3.0]);
        let mut calls = 0;
        let mut make = || {
            calls += 1;
            Some(w.as_slice::<f32>().unwrap().iter().sum::<f32>())
        };
        let a = packs.get_or_make("sum", &[1], &[&w], &mut make).unwrap();
        let b = packs
            .get_or_make("sum", &[1], &[&w.clone()], &mut make)
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, 6.0);
        // Other parameters, other bytes of equal value, another name: made.
        packs.get_or_make("sum", &[2], &[&w], &mut make).unwrap();
        packs
            .get_or_make("sum", &[1], &[&weights(&[1.0, 2.0, 3.0])], &mut make)
            .unwrap();
        packs.get_or_make("total", &[1], &[&w], &mut make).unwrap();
        assert_eq!(calls, 4);
    }

    #[test]
    fn dropped_with_the_last_plan_and_remade() {
        let packs = Packs::new();
        let w = weights(&[4.0]);
        let a = packs
            .get_or_make("x", &[], &[&w], || Some(vec![1u8]))
            .unwrap();
        assert_eq!(packs.live(), 1);
        drop(a);
        assert_eq!(packs.live(), 0);
        let mut made = false;
        packs.get_or_make("x", &[], &[&w], || {
            made = true;
            Some(vec![2u8])
        });
        assert!(made);
    }

    #[test]
    fn same_bytes_other_dims_differ() {
        let packs = Packs::new();
        let w = weights(&[1.0, 2.0, 3.0, 4.0]);
        let r = w.reshaped(vec![2, 2]).unwrap();
        let a = packs.get_or_make("x", &[], &[&w], || Some(1u32)).unwrap();
        let b = packs.get_or_make("x", &[], &[&r], || Some(2u32)).unwrap();
        assert_eq!((*a, *b), (1, 2));
    }

    #[test]
    fn nothing_kept_when_nothing_made() {
        let packs = Packs::new();
        let w = weights(&[1.0]);
        assert!(packs.get_or_make::<u8>("x", &[], &[&w], || None).is_none());
        assert_eq!(packs.live(), 0);
    }
}
