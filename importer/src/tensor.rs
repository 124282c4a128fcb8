//! `TensorProto` -> [`Tensor`]: every dtype, `raw_data` and the typed fields, and
//! external data confined to the model's directory and memory-mapped.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rlx_ir::tensor::{checked_numel, AlignedBuf};
use rlx_ir::{Bytes, DType, Tensor, TensorType, ValueKind};

use crate::error::TensorError;
use crate::proto::{MapProto, OptionalProto, SequenceProto, TensorProto};

/// Resolves and memory-maps external data files, once per file.
#[derive(Default)]
pub struct ExternalData {
    base: Option<PathBuf>,
    maps: HashMap<PathBuf, Arc<memmap2::Mmap>>,
}

impl ExternalData {
    /// External data resolved relative to `base` (the model's directory);
    /// `None` refuses all external data.
    pub fn new(base: Option<PathBuf>) -> ExternalData {
        ExternalData {
            base,
            maps: HashMap::new(),
        }
    }

    fn read(&mut self, name: &str, tp: &TensorProto) -> Result<Bytes, TensorError> {
        let mut location = None;
        let mut offset = 0u64;
        let mut length = None;
        for e in &tp.external_data {
            let v = e.value.clone().unwrap_or_default();
            let bad = |k: &str| TensorError::Data {
                name: name.into(),
                reason: format!("external data `{k}` is not a number: `{v}`"),
            };
            match e.key.as_deref().unwrap_or_default() {
                "location" => location = Some(v.clone()),
                "offset" => offset = v.parse().map_err(|_| bad("offset"))?,
                "length" => length = Some(v.parse::<u64>().map_err(|_| bad("length"))?),
                _ => {}
            }
        }
        let location = location.ok_or_else(|| TensorError::Data {
            name: name.into(),
            reason: "external data without a location".into(),
        })?;
        let refuse = |reason: &str| TensorError::ExternalPath {
            name: name.into(),
            location: location.clone(),
            reason: reason.into(),
        };
        let base = self.base.clone().ok_or_else(|| {
            refuse("the model was not loaded from a file, so it has no directory")
        })?;
        let rel = Path::new(&location);
        if rel.is_absolute() || location.starts_with('/') || location.starts_with('\\') {
            return Err(refuse("absolute paths are not allowed"));
        }
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
            || location.contains("..")
        {
            return Err(refuse("the path must stay inside the model's directory"));
        }
        let path = base.join(rel);
        let canon_base = base
            .canonicalize()
            .map_err(|e| refuse(&format!("model directory: {e}")))?;
        let canon = path.canonicalize().map_err(|e| TensorError::ExternalData {
            name: name.into(),
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if !canon.starts_with(&canon_base) {
            return Err(refuse("the path resolves outside the model's directory"));
        }
        // Only a regular file: opening a FIFO or a device would block or
        // read without end.
        if !std::fs::metadata(&canon).is_ok_and(|m| m.is_file()) {
            return Err(refuse("the path is not a regular file"));
        }
        let map = match self.maps.get(&canon) {
            Some(m) => m.clone(),
            None => {
                let f = std::fs::File::open(&canon).map_err(|e| TensorError::ExternalData {
                    name: name.into(),
                    path: canon.clone(),
                    reason: e.to_string(),
                })?;
                // SAFETY: the map is read-only; the file is not modified by this process.
                let m =
                    unsafe { memmap2::Mmap::map(&f) }.map_err(|e| TensorError::ExternalData {
                        name: name.into(),
                        path: canon.clone(),
                        reason: e.to_string(),
                    })?;
                let m = Arc::new(m);
                self.maps.insert(canon.clone(), m.clone());
                m
            }
        };
        let size = map.len() as u64;
        let len = length.unwrap_or(size.saturating_sub(offset));
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= size)
            .ok_or_else(|| TensorError::ExternalData {
                name: name.into(),
                path: canon.clone(),
                reason: format!("offset {offset} + length {len} exceeds the file size {size}"),
            })?;
        Ok(Bytes::from_mmap(map, offset as usize..end as usize))
    }
}

/// Decodes a tensor. `ext` resolves external data.
pub fn tensor_from_proto(tp: &TensorProto, ext: &mut ExternalData) -> Result<Tensor, TensorError> {
    let name = tp.name.clone().unwrap_or_default();
    let code = tp.data_type.unwrap_or(0);
    let dtype = DType::from_onnx_code(code).ok_or_else(|| TensorError::DType {
        name: name.clone(),
        code,
    })?;
    let data_err = |reason: String| TensorError::Data {
        name: name.clone(),
        reason,
    };
    if tp.segment.is_some() {
        return Err(data_err("segmented tensors are not supported".into()));
    }
    let mut dims = Vec::with_capacity(tp.dims.len());
    for &d in &tp.dims {
        dims.push(usize::try_from(d).map_err(|_| data_err(format!("negative dim {d}")))?);
    }
    let n = checked_numel(&dims).map_err(|e| data_err(e.to_string()))?;
    if dtype == DType::Str {
        if tp.string_data.len() != n {
            return Err(data_err(format!(
                "string{dims:?} needs {n} strings, has {}",
                tp.string_data.len()
            )));
        }
        let strings = tp
            .string_data
            .iter()
            .map(|b| {
                String::from_utf8(b.clone()).map_err(|_| data_err("a string is not UTF-8".into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Tensor::from_strings(&dims, strings).map_err(|e| data_err(e.to_string()));
    }
    let packed_len = n
        .checked_mul(dtype.packed_bits())
        .ok_or_else(|| data_err("too large".into()))?
        .div_ceil(8);
    let external = tp.data_location == Some(1) || !tp.external_data.is_empty();
    let raw: Option<Bytes> = if external {
        Some(ext.read(&name, tp)?)
    } else {
        tp.raw_data.as_ref().map(|r| Bytes::copy_from(r))
    };
    let storage = n
        .checked_mul(dtype.size())
        .ok_or_else(|| data_err("too large".into()))?;
    if let Some(raw) = raw {
        if raw.len() != packed_len {
            return Err(data_err(format!(
                "{dtype}{dims:?} needs {packed_len} bytes, has {}",
                raw.len()
            )));
        }
        let bytes = if dtype.packed_bits() < 8 {
            unpack_sub_byte(dtype, raw.as_slice(), n)
        } else {
            raw
        };
        return Tensor::new(dtype, dims, bytes).map_err(|e| data_err(e.to_string()));
    }
    // Check the typed field's length before allocating anything.
    let (have, need) = match dtype {
        DType::F32 => (tp.float_data.len(), n),
        DType::F64 => (tp.double_data.len(), n),
        DType::I64 => (tp.int64_data.len(), n),
        DType::U32 | DType::U64 => (tp.uint64_data.len(), n),
        d if d.packed_bits() < 8 => (tp.int32_data.len(), n.div_ceil(8 / d.packed_bits())),
        _ => (tp.int32_data.len(), n),
    };
    if have != need {
        return Err(data_err(format!(
            "{dtype}{dims:?} needs {need} values in its typed field, which has {have}"
        )));
    }
    let mut buf = AlignedBuf::zeroed(storage);
    let out = buf.as_mut_bytes();
    match dtype {
        DType::F32 => out.copy_from_slice(bytemuck::cast_slice(&tp.float_data)),
        DType::F64 => out.copy_from_slice(bytemuck::cast_slice(&tp.double_data)),
        DType::I64 => out.copy_from_slice(bytemuck::cast_slice(&tp.int64_data)),
        DType::U32 | DType::U64 => {
            for (i, &v) in tp.uint64_data.iter().enumerate() {
                let b = v.to_le_bytes();
                out[i * dtype.size()..(i + 1) * dtype.size()].copy_from_slice(&b[..dtype.size()]);
            }
        }
        d if d.packed_bits() < 8 => {
            let packed: Vec<u8> = tp.int32_data.iter().map(|&v| v as u8).collect();
            let un = unpack_sub_byte(d, &packed, n);
            out.copy_from_slice(un.as_slice());
        }
        _ => {
            // One element per int32 for the 8- and 16-bit types, bool, (b)float16 and float8.
            let sz = dtype.size();
            for (i, &v) in tp.int32_data.iter().enumerate() {
                out[i * sz..(i + 1) * sz].copy_from_slice(&v.to_le_bytes()[..sz]);
            }
        }
    }
    Tensor::new(dtype, dims, buf.freeze()).map_err(|e| data_err(e.to_string()))
}

/// Decodes a serialized `TensorProto` (a `.pb` file of the ONNX test layout).
pub fn tensor_from_pb(bytes: &[u8]) -> Result<Tensor, TensorError> {
    use prost::Message;
    let tp = TensorProto::decode(bytes).map_err(|e| TensorError::Data {
        name: String::new(),
        reason: format!("not a TensorProto: {e}"),
    })?;
    tensor_from_proto(&tp, &mut ExternalData::new(None))
}

/// Decodes a serialized value of type `ty`: a `TensorProto` for a tensor, a
/// `SequenceProto` for a sequence, an `OptionalProto` for an optional (the
/// ONNX test layout's files for sequence- and optional-typed values).
pub fn value_from_pb(bytes: &[u8], ty: &TensorType) -> Result<Tensor, TensorError> {
    use prost::Message;
    let bad = |what: &str, e: String| TensorError::Data {
        name: String::new(),
        reason: format!("not a {what}: {e}"),
    };
    match ty.kind {
        ValueKind::Tensor => tensor_from_pb(bytes),
        ValueKind::Sequence => {
            let sp =
                SequenceProto::decode(bytes).map_err(|e| bad("SequenceProto", e.to_string()))?;
            sequence_from_proto(&sp, ty.dtype)
        }
        ValueKind::MapSequence { key } => {
            let sp =
                SequenceProto::decode(bytes).map_err(|e| bad("SequenceProto", e.to_string()))?;
            let maps = sp
                .map_values
                .iter()
                .map(|m| map_from_proto(m, key, ty.dtype))
                .collect::<Result<Vec<_>, _>>()?;
            Tensor::map_sequence(key, ty.dtype, maps)
                .map_err(|e| bad("sequence of maps", e.to_string()))
        }
        ValueKind::Map { key } => {
            let mp = MapProto::decode(bytes).map_err(|e| bad("MapProto", e.to_string()))?;
            map_from_proto(&mp, key, ty.dtype)
        }
        ValueKind::Optional | ValueKind::OptionalSequence => {
            let op =
                OptionalProto::decode(bytes).map_err(|e| bad("OptionalProto", e.to_string()))?;
            let mut ext = ExternalData::new(None);
            match (&op.tensor_value, &op.sequence_value, ty.kind) {
                (Some(t), None, ValueKind::Optional) => tensor_from_proto(t, &mut ext),
                (None, Some(s), ValueKind::OptionalSequence) => sequence_from_proto(s, ty.dtype),
                (None, None, k) => Ok(Tensor::none(ty.dtype, k)),
                _ => Err(bad(
                    &format!("OptionalProto of {ty}"),
                    "it holds another kind of value".into(),
                )),
            }
        }
    }
}

/// A map from `key` to scalars of `dtype`: its keys (`keys` or
/// `string_keys`) and a sequence of scalar values.
fn map_from_proto(mp: &MapProto, key: DType, dtype: DType) -> Result<Tensor, TensorError> {
    let err = |reason: String| TensorError::Data {
        name: mp.name.clone().unwrap_or_default(),
        reason,
    };
    let keys = if key == DType::Str {
        let s = mp
            .string_keys
            .iter()
            .map(|b| String::from_utf8(b.clone()).map_err(|_| err("a key is not UTF-8".into())))
            .collect::<Result<Vec<_>, _>>()?;
        Tensor::from_strings(&[s.len()], s)
    } else {
        Tensor::from_i64(&[mp.keys.len()], &mp.keys)
    }
    .map_err(|e| err(e.to_string()))?;
    let seq = mp
        .values
        .as_ref()
        .ok_or_else(|| err("a map without values".into()))?;
    let mut ext = ExternalData::new(None);
    let mut bytes = Vec::new();
    for t in &seq.tensor_values {
        let v = tensor_from_proto(t, &mut ext)?;
        if v.dtype() != dtype || v.numel() != 1 {
            return Err(err(format!("a map value is {}, not one {dtype}", v.ty())));
        }
        bytes.extend_from_slice(v.bytes());
    }
    let n = seq.tensor_values.len();
    let values =
        Tensor::new(dtype, vec![n], Bytes::copy_from(&bytes)).map_err(|e| err(e.to_string()))?;
    Tensor::map(keys, values).map_err(|e| err(e.to_string()))
}

/// A sequence of tensors of `dtype` (the declared one, for empty sequences).
fn sequence_from_proto(sp: &SequenceProto, dtype: DType) -> Result<Tensor, TensorError> {
    let err = |reason: String| TensorError::Data {
        name: sp.name.clone().unwrap_or_default(),
        reason,
    };
    if !sp.sequence_values.is_empty() || !sp.map_values.is_empty() || !sp.optional_values.is_empty()
    {
        return Err(err("only sequences of tensors are supported".into()));
    }
    let mut ext = ExternalData::new(None);
    let elems = sp
        .tensor_values
        .iter()
        .map(|t| tensor_from_proto(t, &mut ext))
        .collect::<Result<Vec<_>, _>>()?;
    Tensor::sequence(dtype, elems).map_err(|e| err(e.to_string()))
}

/// Unpacks 4-bit or 2-bit elements (LSB first) into one byte each, sign-extending
/// the signed integer types.
pub fn unpack_sub_byte(dtype: DType, packed: &[u8], n: usize) -> Bytes {
    let bits = dtype.packed_bits();
    let per = 8 / bits;
    let mask = (1u8 << bits) - 1;
    let mut buf = AlignedBuf::zeroed(n);
    let out = buf.as_mut_bytes();
    for (i, o) in out.iter_mut().enumerate() {
        let v = (packed[i / per] >> ((i % per) * bits)) & mask;
        *o = match dtype {
            DType::I4 | DType::I2 => (((v << (8 - bits)) as i8) >> (8 - bits)) as u8,
            _ => v,
        };
    }
    buf.freeze()
}

/// Packs one-byte-per-element sub-byte values back into ONNX's packed form.
pub fn pack_sub_byte(dtype: DType, values: &[u8]) -> Vec<u8> {
    let bits = dtype.packed_bits();
    let per = 8 / bits;
    let mask = (1u8 << bits) - 1;
    let mut out = vec![0u8; values.len().div_ceil(per)];
    for (i, &v) in values.iter().enumerate() {
        out[i / per] |= (v & mask) << ((i % per) * bits);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: i32, dims: &[i64]) -> TensorProto {
        TensorProto {
            data_type: Some(dtype),
            dims: dims.to_vec(),
            name: Some("t".into()),
            ..Default::default()
        }
    }

    #[test]
    fn typed_and_raw_fields() {
        let mut ext = ExternalData::new(None);
        let mut p = proto(1, &[2]);
        p.float_data = vec![1.5, -2.0];
        assert_eq!(
            tensor_from_proto(&p, &mut ext)
                .unwrap()
                .as_slice::<f32>()
                .unwrap(),
            &[1.5, -2.0]
        );
        let mut p = proto(10, &[2]);
        p.int32_data = vec![0x3c00, 0xc000];
        let t = tensor_from_proto(&p, &mut ext).unwrap();
        assert_eq!(t.to_f64_vec().unwrap(), vec![1.0, -2.0]);
        let mut p = proto(7, &[3]);
        p.raw_data = Some([1i64, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect());
        assert_eq!(
            tensor_from_proto(&p, &mut ext)
                .unwrap()
                .to_i64_vec()
                .unwrap(),
            vec![1, -2, 3]
        );
    }

    #[test]
    fn sub_byte_types_unpack_and_pack() {
        let mut ext = ExternalData::new(None);
        let mut p = proto(22, &[3]);
        p.raw_data = Some(vec![0x9f, 0x07]);
        let t = tensor_from_proto(&p, &mut ext).unwrap();
        assert_eq!(t.to_i64_vec().unwrap(), vec![-1, -7, 7]);
        let bytes: Vec<u8> = t.bytes().to_vec();
        assert_eq!(pack_sub_byte(DType::I4, &bytes), vec![0x9f, 0x07]);
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let mut ext = ExternalData::new(None);
        let mut p = proto(1, &[3]);
        p.float_data = vec![1.0];
        assert!(tensor_from_proto(&p, &mut ext).is_err());
        let mut p = proto(1, &[-1]);
        p.float_data = vec![];
        assert!(tensor_from_proto(&p, &mut ext).is_err());
        // Huge dims with little data fail before allocating.
        for dims in [
            &[1i64 << 62][..],
            &[1 << 31, 1 << 31, 4],
            &[1 << 40, 1 << 40],
        ] {
            let p = proto(1, dims);
            assert!(tensor_from_proto(&p, &mut ext).is_err());
            let mut p = proto(22, dims);
            p.raw_data = Some(vec![0; 4]);
            assert!(tensor_from_proto(&p, &mut ext).is_err());
        }
        // Strings: as many as the dims say, UTF-8.
        let mut p = proto(8, &[2]);
        assert!(tensor_from_proto(&p, &mut ext).is_err());
        p.string_data = vec![b"ab".to_vec(), vec![0xff]];
        assert!(tensor_from_proto(&p, &mut ext).is_err());
        p.string_data[1] = "日本".as_bytes().to_vec();
        let t = tensor_from_proto(&p, &mut ext).unwrap();
        assert_eq!(t.strings().unwrap(), ["ab", "日本"]);
        let p = proto(0, &[1]);
        assert!(matches!(
            tensor_from_proto(&p, &mut ext),
            Err(TensorError::DType { code: 0, .. })
        ));
    }
}
