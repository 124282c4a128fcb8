//! Tensors with owned, shared or memory-mapped bytes.
//!
//! A [`Tensor`] is a dtype, a concrete shape and a byte buffer. Buffers are shared
//! (cloning a tensor never copies its bytes) and always aligned to 8 bytes, so any
//! element type can be viewed in place.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytemuck::Pod;

use crate::dtype::DType;
use crate::shape::{Shape, TensorType, ValueKind};

/// Why a tensor could not be built or viewed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    #[error("{dtype}{dims:?} needs {expected} bytes, got {got}")]
    ByteLength {
        dtype: DType,
        dims: Vec<usize>,
        expected: usize,
        got: usize,
    },
    #[error("cannot view {dtype} elements as a type of {size} bytes")]
    ElementSize { dtype: DType, size: usize },
    #[error("shape {0:?} has too many elements")]
    TooLarge(Vec<usize>),
    #[error("the tensor holds {got}, not {expected}")]
    DType { expected: DType, got: DType },
    #[error("{got} strings for a tensor of shape {dims:?}")]
    Count { dims: Vec<usize>, got: usize },
    #[error("slice: {0}")]
    Slice(String),
    #[error("a sequence of {expected} cannot hold a {got}")]
    Element {
        expected: TensorType,
        got: TensorType,
    },
}

/// Backing storage of a tensor's bytes.
enum Storage {
    /// 8-byte aligned owned bytes (a `Vec<u64>` viewed as bytes).
    Owned {
        words: Vec<u64>,
        len: usize,
    },
    Mapped(Arc<memmap2::Mmap>),
    Static(&'static [u8]),
    /// Bytes another owner keeps alive (a numpy array lent to a run).
    Lent(Box<dyn AsRef<[u8]> + Send + Sync>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Owned { words, len } => &bytemuck::cast_slice(words)[..*len],
            Storage::Mapped(m) => &m[..],
            Storage::Static(s) => s,
            Storage::Lent(owner) => (**owner).as_ref(),
        }
    }
}

/// Shared, immutable, 8-byte aligned bytes.
#[derive(Clone)]
pub struct Bytes {
    storage: Arc<Storage>,
    range: Range<usize>,
}

impl Bytes {
    /// Copies `data` into a new aligned buffer.
    pub fn copy_from(data: &[u8]) -> Bytes {
        let mut b = AlignedBuf::zeroed(data.len());
        b.as_mut_bytes().copy_from_slice(data);
        b.freeze()
    }

    /// A window of a memory map; copies when the window is not aligned.
    pub fn from_mmap(map: Arc<memmap2::Mmap>, range: Range<usize>) -> Bytes {
        let slice = &map[range.clone()];
        if (slice.as_ptr() as usize) % 8 != 0 {
            return Bytes::copy_from(slice);
        }
        Bytes {
            storage: Arc::new(Storage::Mapped(map)),
            range,
        }
    }

    /// Borrows static bytes (e.g. from `include_bytes!`); copies when unaligned.
    pub fn from_static(data: &'static [u8]) -> Bytes {
        if (data.as_ptr() as usize) % 8 != 0 {
            return Bytes::copy_from(data);
        }
        Bytes {
            storage: Arc::new(Storage::Static(data)),
            range: 0..data.len(),
        }
    }

    /// Borrows the bytes `owner` holds, without a copy, for as long as
    /// these bytes (and their slices) live; copies when they are not 8-byte
    /// aligned. `owner.as_ref()` must give the same bytes every time.
    pub fn from_owner(owner: impl AsRef<[u8]> + Send + Sync + 'static) -> Bytes {
        let data = owner.as_ref();
        if (data.as_ptr() as usize) % 8 != 0 {
            return Bytes::copy_from(data);
        }
        let len = data.len();
        Bytes {
            storage: Arc::new(Storage::Lent(Box::new(owner))),
            range: 0..len,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.storage.bytes()[self.range.clone()]
    }

    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// A sub-range of these bytes, sharing storage when aligned.
    pub fn slice(&self, range: Range<usize>) -> Bytes {
        let abs = self.range.start + range.start..self.range.start + range.end;
        if (self.storage.bytes()[abs.clone()].as_ptr() as usize) % 8 != 0 {
            return Bytes::copy_from(&self.storage.bytes()[abs]);
        }
        Bytes {
            storage: self.storage.clone(),
            range: abs,
        }
    }
}

/// A mutable, 8-byte aligned byte buffer.
pub struct AlignedBuf {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            words: vec![0u64; len.div_ceil(8)],
            len,
        }
    }

    /// `len` zero bytes, or `None` when the memory cannot be had.
    pub fn try_zeroed(len: usize) -> Option<AlignedBuf> {
        let mut words = Vec::new();
        words.try_reserve_exact(len.div_ceil(8)).ok()?;
        words.resize(len.div_ceil(8), 0);
        Some(AlignedBuf { words, len })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn freeze(self) -> Bytes {
        let len = self.len;
        Bytes {
            storage: Arc::new(Storage::Owned {
                words: self.words,
                len,
            }),
            range: 0..len,
        }
    }
}

/// A dense row-major tensor with a concrete shape.
///
/// Like ONNX Runtime's `OrtValue`, a `Tensor` is also how the values that are
/// not byte tensors travel: a string tensor (dtype `string`, its elements
/// held as Rust strings), a sequence of tensors, and an optional without a
/// value. [`Tensor::kind`] says which; their [`Tensor::bytes`] are empty, and
/// only the ops made for them (run node by node) look inside.
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    dims: Vec<usize>,
    data: Bytes,
    held: Held,
}

/// What a tensor holds besides its bytes.
#[derive(Clone)]
enum Held {
    Bytes,
    Strings(Arc<[String]>),
    /// Elements, and the key dtype when they are maps.
    Sequence(Arc<[Tensor]>, Option<DType>),
    /// A map: 1-D keys (integers or strings) and values of equal length.
    Map(Arc<(Tensor, Tensor)>),
    /// An optional without a value, of this kind (optional or optional sequence).
    Absent(ValueKind),
}

/// Number of elements of `dims`, or an error on overflow.
pub fn checked_numel(dims: &[usize]) -> Result<usize, TensorError> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| TensorError::TooLarge(dims.to_vec()))
}

impl Tensor {
    pub fn new(dtype: DType, dims: Vec<usize>, data: Bytes) -> Result<Tensor, TensorError> {
        let expected = checked_numel(&dims)?
            .checked_mul(dtype.size())
            .ok_or_else(|| TensorError::TooLarge(dims.clone()))?;
        if data.len() != expected {
            return Err(TensorError::ByteLength {
                dtype,
                dims,
                expected,
                got: data.len(),
            });
        }
        if dtype == DType::Str {
            return Err(TensorError::DType {
                expected: DType::U8,
                got: DType::Str,
            });
        }
        Ok(Tensor {
            dtype,
            dims,
            data,
            held: Held::Bytes,
        })
    }

    /// A string tensor.
    pub fn from_strings(dims: &[usize], values: Vec<String>) -> Result<Tensor, TensorError> {
        let n = checked_numel(dims)?;
        if values.len() != n {
            return Err(TensorError::Count {
                dims: dims.to_vec(),
                got: values.len(),
            });
        }
        Ok(Tensor {
            dtype: DType::Str,
            dims: dims.to_vec(),
            data: Bytes::copy_from(&[]),
            held: Held::Strings(values.into()),
        })
    }

    /// A sequence of tensors of `dtype` (strings included; no nested sequences).
    pub fn sequence(dtype: DType, elements: Vec<Tensor>) -> Result<Tensor, TensorError> {
        Tensor::sequence_of(dtype, None, elements)
    }

    /// A sequence of maps from `key` to scalars of `dtype`.
    pub fn map_sequence(
        key: DType,
        dtype: DType,
        maps: Vec<Tensor>,
    ) -> Result<Tensor, TensorError> {
        Tensor::sequence_of(dtype, Some(key), maps)
    }

    fn sequence_of(
        dtype: DType,
        key: Option<DType>,
        elements: Vec<Tensor>,
    ) -> Result<Tensor, TensorError> {
        let want = match key {
            Some(key) => ValueKind::Map { key },
            None => ValueKind::Tensor,
        };
        if let Some(e) = elements
            .iter()
            .find(|e| e.dtype != dtype || e.kind() != want)
        {
            return Err(TensorError::Element {
                expected: TensorType::new(dtype, Shape::scalar()).with_kind(ValueKind::Tensor),
                got: e.ty(),
            });
        }
        Ok(Tensor {
            dtype,
            dims: Vec::new(),
            data: Bytes::copy_from(&[]),
            held: Held::Sequence(elements.into(), key),
        })
    }

    /// A map from `keys` (1-D integers or strings) to `values` (1-D, as many).
    pub fn map(keys: Tensor, values: Tensor) -> Result<Tensor, TensorError> {
        let ok = keys.dims().len() == 1
            && values.dims() == keys.dims()
            && keys.kind() == ValueKind::Tensor
            && values.is_plain()
            && (keys.dtype == DType::Str || keys.dtype.is_int());
        if !ok {
            return Err(TensorError::Element {
                expected: TensorType::new(values.dtype, Shape::scalar())
                    .with_kind(ValueKind::Map { key: keys.dtype }),
                got: values.ty(),
            });
        }
        Ok(Tensor {
            dtype: values.dtype,
            dims: Vec::new(),
            data: Bytes::copy_from(&[]),
            held: Held::Map(Arc::new((keys, values))),
        })
    }

    /// The keys and values of a map.
    pub fn map_entries(&self) -> Option<(&Tensor, &Tensor)> {
        match &self.held {
            Held::Map(kv) => Some((&kv.0, &kv.1)),
            _ => None,
        }
    }

    /// An optional without a value, of `dtype`; `kind` is the optional's kind
    /// ([`ValueKind::Optional`] or [`ValueKind::OptionalSequence`]).
    pub fn none(dtype: DType, kind: ValueKind) -> Tensor {
        Tensor {
            dtype,
            dims: Vec::new(),
            data: Bytes::copy_from(&[]),
            held: Held::Absent(kind.optional()),
        }
    }

    /// What this value is: a tensor (numbers or strings), a sequence, or an
    /// optional without a value.
    pub fn kind(&self) -> ValueKind {
        match &self.held {
            Held::Bytes | Held::Strings(_) => ValueKind::Tensor,
            Held::Sequence(_, None) => ValueKind::Sequence,
            Held::Sequence(_, Some(key)) => ValueKind::MapSequence { key: *key },
            Held::Map(kv) => ValueKind::Map { key: kv.0.dtype },
            Held::Absent(k) => *k,
        }
    }

    /// True for a tensor with bytes (not strings, a sequence or an absent optional).
    pub fn is_plain(&self) -> bool {
        matches!(self.held, Held::Bytes)
    }

    /// The elements of a string tensor.
    pub fn strings(&self) -> Option<&[String]> {
        match &self.held {
            Held::Strings(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of a sequence.
    pub fn elements(&self) -> Option<&[Tensor]> {
        match &self.held {
            Held::Sequence(s, _) => Some(s),
            _ => None,
        }
    }

    /// True for an optional without a value.
    pub fn is_none(&self) -> bool {
        matches!(self.held, Held::Absent(_))
    }

    /// A tensor of zero bytes (all-zero values for every dtype).
    pub fn zeros(dtype: DType, dims: &[usize]) -> Result<Tensor, TensorError> {
        let n = checked_numel(dims)?
            .checked_mul(dtype.size())
            .ok_or_else(|| TensorError::TooLarge(dims.to_vec()))?;
        Tensor::new(dtype, dims.to_vec(), AlignedBuf::zeroed(n).freeze())
    }

    /// A tensor from typed values; `T`'s size must match `dtype`.
    pub fn from_slice<T: Pod>(
        dtype: DType,
        dims: &[usize],
        values: &[T],
    ) -> Result<Tensor, TensorError> {
        if std::mem::size_of::<T>() != dtype.size() {
            return Err(TensorError::ElementSize {
                dtype,
                size: std::mem::size_of::<T>(),
            });
        }
        Tensor::new(
            dtype,
            dims.to_vec(),
            Bytes::copy_from(bytemuck::cast_slice(values)),
        )
    }

    pub fn from_i64(dims: &[usize], values: &[i64]) -> Result<Tensor, TensorError> {
        Tensor::from_slice(DType::I64, dims, values)
    }

    pub fn from_f32(dims: &[usize], values: &[f32]) -> Result<Tensor, TensorError> {
        Tensor::from_slice(DType::F32, dims, values)
    }

    pub fn scalar_i64(v: i64) -> Tensor {
        Tensor {
            dtype: DType::I64,
            dims: Vec::new(),
            data: Bytes::copy_from(&v.to_le_bytes()),
            held: Held::Bytes,
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// The value's type. A sequence's shape is its elements' common shape,
    /// with a symbol (`?0`, `?1`, ...) where they differ; an absent optional's
    /// shape is a scalar's.
    pub fn ty(&self) -> TensorType {
        match &self.held {
            Held::Sequence(_, Some(key)) => TensorType::new(self.dtype, Shape::scalar())
                .with_kind(ValueKind::MapSequence { key: *key }),
            Held::Sequence(elems, None) => {
                let dims = elems.first().map_or(&[][..], |e| e.dims());
                let shape = (0..dims.len())
                    .map(|i| {
                        let d = dims[i];
                        if elems
                            .iter()
                            .all(|e| e.dims().get(i) == Some(&d) && e.dims().len() == dims.len())
                        {
                            crate::Dim::from(d)
                        } else {
                            crate::Dim::sym(&format!("?{i}"))
                        }
                    })
                    .collect();
                TensorType::new(self.dtype, Shape(shape)).with_kind(ValueKind::Sequence)
            }
            _ => TensorType::new(self.dtype, Shape::known(&self.dims)).with_kind(self.kind()),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// The elements as `T`; `T` must have the dtype's size.
    pub fn as_slice<T: Pod>(&self) -> Result<&[T], TensorError> {
        if std::mem::size_of::<T>() != self.dtype.size() {
            return Err(TensorError::ElementSize {
                dtype: self.dtype,
                size: std::mem::size_of::<T>(),
            });
        }
        Ok(bytemuck::cast_slice(self.bytes()))
    }

    /// The same elements with another shape of equal element count.
    pub fn reshaped(&self, dims: Vec<usize>) -> Result<Tensor, TensorError> {
        match &self.held {
            Held::Strings(s) => Tensor::from_strings(&dims, s.to_vec()),
            _ => Tensor::new(self.dtype, dims, self.data.clone()),
        }
    }

    /// Integer elements widened to i64 (bool as 0/1); `None` for floats.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        let b = self.bytes();
        let v: Vec<i64> = match self.dtype {
            DType::I64 => bytemuck::cast_slice::<u8, i64>(b).to_vec(),
            DType::I32 => bytemuck::cast_slice::<u8, i32>(b)
                .iter()
                .map(|&x| x as i64)
                .collect(),
            DType::I16 => bytemuck::cast_slice::<u8, i16>(b)
                .iter()
                .map(|&x| x as i64)
                .collect(),
            DType::I8 | DType::I4 | DType::I2 => b.iter().map(|&x| x as i8 as i64).collect(),
            DType::U8 | DType::U4 | DType::U2 | DType::Bool => {
                b.iter().map(|&x| x as i64).collect()
            }
            DType::U16 => bytemuck::cast_slice::<u8, u16>(b)
                .iter()
                .map(|&x| x as i64)
                .collect(),
            DType::U32 => bytemuck::cast_slice::<u8, u32>(b)
                .iter()
                .map(|&x| x as i64)
                .collect(),
            DType::U64 => bytemuck::cast_slice::<u8, u64>(b)
                .iter()
                .map(|&x| x as i64)
                .collect(),
            _ => return None,
        };
        Some(v)
    }

    /// Float elements widened to f64, for the standard float dtypes.
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        let b = self.bytes();
        Some(match self.dtype {
            DType::F32 => bytemuck::cast_slice::<u8, f32>(b)
                .iter()
                .map(|&x| x as f64)
                .collect(),
            DType::F64 => bytemuck::cast_slice::<u8, f64>(b).to_vec(),
            DType::F16 => bytemuck::cast_slice::<u8, half::f16>(b)
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            DType::BF16 => bytemuck::cast_slice::<u8, half::bf16>(b)
                .iter()
                .map(|x| x.to_f64())
                .collect(),
            _ => return None,
        })
    }

    /// Bitwise equality of dtype, shape and bytes (and of strings, elements).
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        let held = match (&self.held, &other.held) {
            (Held::Bytes, Held::Bytes) => true,
            (Held::Strings(a), Held::Strings(b)) => a == b,
            (Held::Sequence(a, ka), Held::Sequence(b, kb)) => {
                ka == kb && a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.bit_eq(y))
            }
            (Held::Map(a), Held::Map(b)) => a.0.bit_eq(&b.0) && a.1.bit_eq(&b.1),
            (Held::Absent(a), Held::Absent(b)) => a == b,
            _ => false,
        };
        held && self.dtype == other.dtype
            && self.dims == other.dims
            && self.bytes() == other.bytes()
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.bit_eq(other)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.held {
            Held::Bytes => write!(
                f,
                "Tensor({}{:?}, {} bytes)",
                self.dtype,
                self.dims,
                self.data.len()
            ),
            Held::Strings(s) => write!(f, "Tensor(string{:?}, {s:?})", self.dims),
            Held::Sequence(e, None) => write!(f, "Sequence({}, {e:?})", self.dtype),
            Held::Sequence(e, Some(k)) => write!(f, "Sequence(map({k}) {}, {e:?})", self.dtype),
            Held::Map(kv) => write!(f, "Map({:?} -> {:?})", kv.0, kv.1),
            Held::Absent(k) => write!(f, "None({}{})", k.prefix(), self.dtype),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_views() {
        let t = Tensor::from_f32(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert!(t.as_slice::<f64>().is_err());
        assert_eq!(t.reshaped(vec![4]).unwrap().dims(), &[4]);
        assert!(t.reshaped(vec![3]).is_err());
    }

    #[test]
    fn byte_length_checked() {
        let e = Tensor::new(DType::I64, vec![3], Bytes::copy_from(&[0u8; 16])).unwrap_err();
        assert!(matches!(
            e,
            TensorError::ByteLength {
                expected: 24,
                got: 16,
                ..
            }
        ));
        assert!(Tensor::zeros(DType::F32, &[usize::MAX, 2]).is_err());
    }

    #[test]
    fn int_widening() {
        let t = Tensor::from_slice(DType::I32, &[2], &[-1i32, 7]).unwrap();
        assert_eq!(t.to_i64_vec().unwrap(), vec![-1, 7]);
    }

    #[test]
    fn lent_bytes_are_not_copied() {
        let words: Vec<u64> = vec![1, 2, 3];
        struct Owner(Vec<u64>);
        impl AsRef<[u8]> for Owner {
            fn as_ref(&self) -> &[u8] {
                bytemuck::cast_slice(&self.0)
            }
        }
        let ptr = words.as_ptr() as *const u8;
        let b = Bytes::from_owner(Owner(words));
        assert_eq!(b.as_slice().as_ptr(), ptr);
        assert_eq!(b.len(), 24);
        assert_eq!(b.slice(8..16).as_slice(), &2u64.to_le_bytes());
    }
}
