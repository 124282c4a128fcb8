//! `.npy` files (numpy's array format) through the `npyz` crate, for the
//! command line's inputs and outputs.

use std::path::Path;

use npyz::WriterBuilder;
use rlx_ir::{DType, Tensor};

/// Why an `.npy` file cannot be read or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NpyError {
    #[error("`{path}`: {reason}")]
    Io { path: String, reason: String },
    #[error("`{path}`: numpy dtype `{descr}` is not supported")]
    DType { path: String, descr: String },
    #[error("`{path}`: Fortran-order arrays are not supported")]
    Order { path: String },
    #[error("dtype {0} has no .npy representation")]
    NoNpy(DType),
}

fn tensor<T: npyz::Deserialize + bytemuck::Pod>(
    file: npyz::NpyFile<&[u8]>,
    d: DType,
    dims: &[usize],
    path: &str,
) -> Result<Tensor, NpyError> {
    let v: Vec<T> = file.into_vec().map_err(|e| NpyError::Io {
        path: path.into(),
        reason: e.to_string(),
    })?;
    Tensor::from_slice(d, dims, &v).map_err(|e| NpyError::Io {
        path: path.into(),
        reason: e.to_string(),
    })
}

/// Reads an `.npy` file.
pub fn read(path: &Path) -> Result<Tensor, NpyError> {
    let p = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| NpyError::Io {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    from_bytes(&bytes, &p)
}

/// Reads every array of an `.npz` archive (numpy's `savez`, compressed or
/// not), by name (the `.npy` suffix dropped), in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Tensor)>, NpyError> {
    let p = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| NpyError::Io {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    npz_from(file, &p)
}

/// Reads the bytes of an `.npz` archive; `name` names them in errors.
pub fn npz_from_bytes(bytes: &[u8], name: &str) -> Result<Vec<(String, Tensor)>, NpyError> {
    npz_from(std::io::Cursor::new(bytes), name)
}

/// The most bytes one array of an archive may inflate to (8 GiB, what
/// [`crate::Limits`]'s default tensor size takes in f32): a deflate stream
/// that claims more is refused instead of filling memory.
pub const MAX_NPZ_ENTRY_BYTES: u64 = 8 << 30;

fn npz_from<R: std::io::Read + std::io::Seek>(
    reader: R,
    p: &str,
) -> Result<Vec<(String, Tensor)>, NpyError> {
    let io = |reason: String| NpyError::Io {
        path: p.to_string(),
        reason,
    };
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| io(e.to_string()))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let entry = zip.by_index(i).map_err(|e| io(e.to_string()))?;
        let name = entry.name().to_string();
        let mut bytes = Vec::new();
        let mut limited = std::io::Read::take(entry, MAX_NPZ_ENTRY_BYTES + 1);
        std::io::Read::read_to_end(&mut limited, &mut bytes).map_err(|e| io(e.to_string()))?;
        if bytes.len() as u64 > MAX_NPZ_ENTRY_BYTES {
            return Err(io(format!(
                "`{name}` inflates to more than {MAX_NPZ_ENTRY_BYTES} bytes"
            )));
        }
        let array = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        out.push((array, from_bytes(&bytes, &format!("{p}:{name}"))?));
    }
    Ok(out)
}

/// The deepest bracket nesting a header may have: numpy's headers are a
/// flat dict (structured dtypes nest a few lists), and `npyz`'s header
/// parser takes time exponential in the depth (found by fuzzing).
const MAX_HEADER_NESTING: usize = 8;

/// The header text of `.npy` bytes, if they have one.
fn header_text(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(b"\x93NUMPY")?;
    let (&major, rest) = rest.split_first()?;
    let rest = rest.get(1..)?;
    let (len, rest) = if major == 1 {
        (
            u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize,
            rest.get(2..)?,
        )
    } else {
        (
            u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize,
            rest.get(4..)?,
        )
    };
    Some(&rest[..len.min(rest.len())])
}

/// The bracket nesting depth of a header.
fn header_nesting(header: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for &c in header {
        match c {
            b'{' | b'[' | b'(' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Whether the header's `'shape'` tuple holds a dim or an element count
/// past 64 bits (`npyz` multiplies the dims unchecked: found by fuzzing).
fn shape_overflows(header: &[u8]) -> bool {
    let key = b"'shape'";
    let Some(at) = header.windows(key.len()).position(|w| w == key) else {
        return false;
    };
    let rest = &header[at + key.len()..];
    let (Some(open), Some(close)) = (
        rest.iter().position(|&c| c == b'('),
        rest.iter().position(|&c| c == b')'),
    ) else {
        return false;
    };
    if close < open {
        return false;
    }
    let mut n = 1u64;
    for part in rest[open + 1..close].split(|&c| c == b',') {
        let text = String::from_utf8_lossy(part);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match text.parse::<u64>().ok().and_then(|d| n.checked_mul(d)) {
            Some(m) => n = m,
            None => return true,
        }
    }
    false
}

/// Reads the bytes of an `.npy` file; `name` names them in errors.
pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Tensor, NpyError> {
    let p = name.to_string();
    if let Some(header) = header_text(bytes) {
        let depth = header_nesting(header);
        if depth > MAX_HEADER_NESTING {
            return Err(NpyError::Io {
                path: p,
                reason: format!(
                    "the header nests brackets {depth} deep (numpy writes at most a few levels)"
                ),
            });
        }
        if shape_overflows(header) {
            return Err(NpyError::Io {
                path: p,
                reason: "the header's shape has more elements than 64 bits count".into(),
            });
        }
    }
    let file = npyz::NpyFile::new(&bytes[..]).map_err(|e| NpyError::Io {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    if file.order() != npyz::Order::C {
        return Err(NpyError::Order { path: p });
    }
    let dims: Vec<usize> = file.shape().iter().map(|&d| d as usize).collect();
    // The header's shape must fit the bytes that follow it: a header that
    // claims gigabytes must not make the reader allocate them.
    let claimed = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(file.dtype().num_bytes().unwrap_or(1).max(1)));
    if claimed.is_none_or(|c| c > bytes.len()) {
        return Err(NpyError::Io {
            path: p,
            reason: format!(
                "the header's shape {dims:?} does not fit the file's {} bytes",
                bytes.len()
            ),
        });
    }
    let descr = match file.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => format!("{other:?}"),
    };
    match descr.as_str() {
        "<f4" => tensor::<f32>(file, DType::F32, &dims, &p),
        "<f8" => tensor::<f64>(file, DType::F64, &dims, &p),
        "<f2" => tensor::<half::f16>(file, DType::F16, &dims, &p),
        "|i1" => tensor::<i8>(file, DType::I8, &dims, &p),
        "<i2" => tensor::<i16>(file, DType::I16, &dims, &p),
        "<i4" => tensor::<i32>(file, DType::I32, &dims, &p),
        "<i8" => tensor::<i64>(file, DType::I64, &dims, &p),
        "|u1" => tensor::<u8>(file, DType::U8, &dims, &p),
        "<u2" => tensor::<u16>(file, DType::U16, &dims, &p),
        "<u4" => tensor::<u32>(file, DType::U32, &dims, &p),
        "<u8" => tensor::<u64>(file, DType::U64, &dims, &p),
        "|b1" => {
            let v: Vec<bool> = file.into_vec().map_err(|e| NpyError::Io {
                path: p.clone(),
                reason: e.to_string(),
            })?;
            let b: Vec<u8> = v.into_iter().map(u8::from).collect();
            Tensor::from_slice(DType::Bool, &dims, &b).map_err(|e| NpyError::Io {
                path: p.clone(),
                reason: e.to_string(),
            })
        }
        _ => Err(NpyError::DType { path: p, descr }),
    }
}

fn typed_bytes<T: npyz::Serialize + npyz::AutoSerialize + bytemuck::Pod>(
    t: &Tensor,
) -> std::io::Result<Vec<u8>> {
    let shape: Vec<u64> = t.dims().iter().map(|&d| d as u64).collect();
    let mut out = Vec::new();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&shape)
        .writer(&mut out)
        .begin_nd()?;
    let data: &[T] = bytemuck::cast_slice(t.bytes());
    w.extend(data.iter().copied())?;
    w.finish()?;
    Ok(out)
}

fn bool_bytes(t: &Tensor) -> std::io::Result<Vec<u8>> {
    let shape: Vec<u64> = t.dims().iter().map(|&d| d as u64).collect();
    let mut out = Vec::new();
    let mut w = npyz::WriteOptions::<bool>::new()
        .default_dtype()
        .shape(&shape)
        .writer(&mut out)
        .begin_nd()?;
    w.extend(t.bytes().iter().map(|&b| b != 0))?;
    w.finish()?;
    Ok(out)
}

/// A tensor as the bytes of an `.npy` file.
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>, NpyError> {
    let bytes = match t.dtype() {
        DType::F32 => typed_bytes::<f32>(t),
        DType::F64 => typed_bytes::<f64>(t),
        DType::F16 => typed_bytes::<half::f16>(t),
        DType::I8 => typed_bytes::<i8>(t),
        DType::I16 => typed_bytes::<i16>(t),
        DType::I32 => typed_bytes::<i32>(t),
        DType::I64 => typed_bytes::<i64>(t),
        DType::U8 => typed_bytes::<u8>(t),
        DType::U16 => typed_bytes::<u16>(t),
        DType::U32 => typed_bytes::<u32>(t),
        DType::U64 => typed_bytes::<u64>(t),
        DType::Bool => bool_bytes(t),
        d => return Err(NpyError::NoNpy(d)),
    };
    bytes.map_err(|e| NpyError::Io {
        path: "(memory)".into(),
        reason: e.to_string(),
    })
}

/// Writes a tensor as `.npy` (replacing the file at `path`, through a
/// temporary file: see [`crate::files::write_file`]).
pub fn write(path: &Path, t: &Tensor) -> Result<(), NpyError> {
    let bytes = to_bytes(t)?;
    crate::files::write_file(path, &bytes, crate::files::Existing::Replace).map_err(|e| {
        NpyError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
    })
}
