//! `.npy` files (numpy's array format) through the `npyz` crate, for the
//! command line's inputs and outputs; unicode string arrays (`<U`) by hand,
//! and sequences as `.npz` archives of their elements.

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
    let bytes = crate::files::read_regular(path).map_err(|e| NpyError::Io {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    from_bytes(&bytes, &p)
}

/// Reads every array of an `.npz` archive (numpy's `savez`, compressed or
/// not), by name (the `.npy` suffix dropped), in archive order.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Tensor)>, NpyError> {
    let p = path.display().to_string();
    let file = crate::files::open_regular(path).map_err(|e| NpyError::Io {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    npz_from(file, &p, MAX_NPZ_BYTES)
}

/// Reads the bytes of an `.npz` archive; `name` names them in errors.
pub fn npz_from_bytes(bytes: &[u8], name: &str) -> Result<Vec<(String, Tensor)>, NpyError> {
    npz_from(std::io::Cursor::new(bytes), name, MAX_NPZ_BYTES)
}

/// The most bytes the arrays of one archive may inflate to together (8
/// GiB, what [`crate::Limits`]'s default tensor size takes in f32): a
/// deflate stream that claims more, or many that add up to more, are
/// refused instead of filling memory.
pub const MAX_NPZ_BYTES: u64 = 8 << 30;

/// The arrays of an archive whose arrays inflate to at most `limit` bytes.
fn npz_from<R: std::io::Read + std::io::Seek>(
    reader: R,
    p: &str,
    limit: u64,
) -> Result<Vec<(String, Tensor)>, NpyError> {
    let io = |reason: String| NpyError::Io {
        path: p.to_string(),
        reason,
    };
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| io(e.to_string()))?;
    let mut out = Vec::new();
    // What the arrays read so far took; each entry may take the rest.
    let mut taken = 0u64;
    for i in 0..zip.len() {
        let entry = zip.by_index(i).map_err(|e| io(e.to_string()))?;
        let name = entry.name().to_string();
        let budget = limit - taken;
        // The size the archive declares is reserved up front, as a
        // fallible allocation: a bomb past the memory at hand is an error,
        // not an abort (the read below still stops at the bound).
        let declared = entry.size().min(budget);
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(declared as usize).map_err(|_| {
            io(format!(
                "`{name}` declares {declared} bytes: more memory than there is"
            ))
        })?;
        let mut limited = std::io::Read::take(entry, budget + 1);
        std::io::Read::read_to_end(&mut limited, &mut bytes).map_err(|e| io(e.to_string()))?;
        if bytes.len() as u64 > budget {
            return Err(io(format!(
                "the arrays inflate to more than {limit} bytes (at `{name}`)"
            )));
        }
        taken += bytes.len() as u64;
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
    // A Fortran-order array's data is the C-order data of its transpose:
    // read that (reversed dims), then reverse the axes back.
    let fortran = file.order() == npyz::Order::Fortran;
    let mut dims: Vec<usize> = file.shape().iter().map(|&d| d as usize).collect();
    if fortran {
        dims.reverse();
    }
    let t = read_c_order(bytes, file, dims, &p)?;
    if fortran && t.dims().len() > 1 {
        return reverse_axes(&t).map_err(|reason| NpyError::Io { path: p, reason });
    }
    Ok(t)
}

/// `t` with its axes in reverse order (the transpose numpy's `.T` gives),
/// its elements moved into C order.
fn reverse_axes(t: &Tensor) -> Result<Tensor, String> {
    let dims = t.dims();
    let out_dims: Vec<usize> = dims.iter().rev().copied().collect();
    let n: usize = dims.iter().product();
    // Element i of the output (C order over out_dims) is, in `t`, at the
    // index whose digits are i's reversed.
    let mut strides = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    let source = |mut i: usize| {
        let mut at = 0;
        for (k, &d) in out_dims.iter().enumerate().rev() {
            at += (i % d) * strides[dims.len() - 1 - k];
            i /= d;
        }
        at
    };
    if let Some(strings) = t.strings() {
        let v = (0..n).map(|i| strings[source(i)].clone()).collect();
        return Tensor::from_strings(&out_dims, v).map_err(|e| e.to_string());
    }
    let es = t.dtype().size();
    let src = t.bytes();
    let mut out = Vec::with_capacity(src.len());
    for i in 0..n {
        let at = source(i) * es;
        out.extend_from_slice(&src[at..at + es]);
    }
    Tensor::new(t.dtype(), out_dims, rlx_ir::tensor::Bytes::copy_from(&out))
        .map_err(|e| e.to_string())
}

/// The array of an `.npy` file whose data is in C order over `dims`.
fn read_c_order(
    bytes: &[u8],
    file: npyz::NpyFile<&[u8]>,
    dims: Vec<usize>,
    name: &str,
) -> Result<Tensor, NpyError> {
    let p = name.to_string();
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
    if let Some(width) = descr.strip_prefix("<U") {
        return unicode(bytes, &dims, width, &p);
    }
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

/// Numpy's fixed-width unicode strings (`<U{width}`: `width` UTF-32
/// code points per element, NUL-padded), the data being the file's tail.
fn unicode(bytes: &[u8], dims: &[usize], width: &str, p: &str) -> Result<Tensor, NpyError> {
    let io = |reason: String| NpyError::Io {
        path: p.to_string(),
        reason,
    };
    let width: usize = width
        .parse()
        .map_err(|_| io(format!("bad unicode width `{width}`")))?;
    let n: usize = dims.iter().product();
    let need = n
        .checked_mul(width)
        .and_then(|c| c.checked_mul(4))
        .filter(|&b| b <= bytes.len())
        .ok_or_else(|| {
            io(format!(
                "{n} strings of {width} characters do not fit the file"
            ))
        })?;
    let data = &bytes[bytes.len() - need..];
    // A String costs 24 bytes before its text: checked as a fallible
    // allocation, since 4-byte cells (or none, `<U0`) make 6x (or more).
    let mut out: Vec<String> = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| io(format!("{n} strings: more memory than there is")))?;
    if width == 0 {
        // A width of 0 holds only empty strings.
        out.resize(n, String::new());
    }
    for cell in data.chunks_exact(4 * width.max(1)).take(n) {
        out.push(
            cell.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .take_while(|&c| c != 0)
                .map(|c| char::from_u32(c).ok_or_else(|| io(format!("U+{c:X} is no character"))))
                .collect::<Result<String, _>>()?,
        );
    }
    Tensor::from_strings(dims, out).map_err(|e| io(e.to_string()))
}

/// An `.npy` file of unicode strings (`<U{longest}`).
fn unicode_bytes(t: &Tensor, strings: &[String]) -> Vec<u8> {
    let width = strings
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
        .max(1);
    let shape = match t.dims() {
        [d] => format!("({d},)"),
        d => format!(
            "({})",
            d.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header =
        format!("{{'descr': '<U{width}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + header + newline: a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for s in strings {
        let mut k = 0;
        for c in s.chars() {
            out.extend_from_slice(&(c as u32).to_le_bytes());
            k += 1;
        }
        out.extend(std::iter::repeat_n(0u8, 4 * (width - k)));
    }
    out
}

/// A sequence of maps as JSON: a list of objects, keys as strings, values as
/// numbers (`null` where not finite).
pub fn maps_to_json(maps: &[Tensor]) -> Result<String, NpyError> {
    let bad = |m: &Tensor| NpyError::Io {
        path: "(memory)".into(),
        reason: format!("{m:?} is not a map of numbers"),
    };
    let mut out = String::from("[");
    for (i, m) in maps.iter().enumerate() {
        let (keys, values) = m.map_entries().ok_or_else(|| bad(m))?;
        let keys: Vec<String> = match (keys.strings(), keys.to_i64_vec()) {
            (Some(s), _) => s.to_vec(),
            (None, Some(v)) => v.iter().map(i64::to_string).collect(),
            _ => return Err(bad(m)),
        };
        // f32 values print as f32 (shortest round trip), not widened.
        let values: Vec<String> = match values.as_slice::<f32>() {
            Ok(v) if values.dtype() == DType::F32 => v
                .iter()
                .map(|x| json_number(*x as f64, format!("{x}")))
                .collect(),
            _ => values
                .to_f64_vec()
                .or_else(|| {
                    values
                        .to_i64_vec()
                        .map(|v| v.into_iter().map(|x| x as f64).collect())
                })
                .ok_or_else(|| bad(m))?
                .into_iter()
                .map(|x| json_number(x, format!("{x}")))
                .collect(),
        };
        out.push_str(if i == 0 { "\n  {" } else { ",\n  {" });
        for (j, (k, v)) in keys.iter().zip(&values).enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            out.push_str(&crate::trace::json_string(k));
            out.push_str(": ");
            out.push_str(v);
        }
        out.push('}');
    }
    out.push_str("\n]\n");
    Ok(out)
}

/// `text` for a finite number, JSON's `null` otherwise.
fn json_number(v: f64, text: String) -> String {
    if v.is_finite() {
        text
    } else {
        "null".into()
    }
}

/// A sequence as the bytes of an `.npz` archive: its elements in order, as
/// `arr_0.npy`, `arr_1.npy`, ... (what numpy's `savez(*arrays)` writes).
pub fn sequence_to_npz(elements: &[Tensor]) -> Result<Vec<u8>, NpyError> {
    let io = |e: String| NpyError::Io {
        path: "(memory)".into(),
        reason: e,
    };
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (i, e) in elements.iter().enumerate() {
        zip.start_file(format!("arr_{i}.npy"), options)
            .map_err(|e| io(e.to_string()))?;
        std::io::Write::write_all(&mut zip, &to_bytes(e)?).map_err(|e| io(e.to_string()))?;
    }
    let cursor = zip.finish().map_err(|e| io(e.to_string()))?;
    Ok(cursor.into_inner())
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
    if let Some(strings) = t.strings() {
        return Ok(unicode_bytes(t, strings));
    }
    if !t.is_plain() {
        return Err(NpyError::Io {
            path: "(memory)".into(),
            reason: format!("{t:?} is no tensor: write sequences with sequence_to_npz"),
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.npy` file of `header` (padded as numpy pads it) and `data`.
    fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut h = header.to_string();
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(data);
        b
    }

    /// `np.asfortranarray(np.arange(24).reshape(2, 3, 4))` reads as the
    /// array it is, in C order.
    #[test]
    fn fortran_order_arrays_read_as_their_values() {
        let (d0, d1, d2) = (2usize, 3usize, 4usize);
        // Fortran order: the first index varies fastest.
        let mut data = Vec::new();
        for k in 0..d2 {
            for j in 0..d1 {
                for i in 0..d0 {
                    data.extend_from_slice(&(((i * d1 + j) * d2 + k) as i32).to_le_bytes());
                }
            }
        }
        let f = npy(
            "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }",
            &data,
        );
        let t = from_bytes(&f, "f.npy").unwrap();
        assert_eq!(t.dims(), &[2, 3, 4]);
        let want: Vec<i32> = (0..24).collect();
        assert_eq!(t.values::<i32>().unwrap(), &want[..]);
        // Strings too.
        let mut data = Vec::new();
        for s in ["a", "c", "b", "d"] {
            let mut cell = [0u8; 4];
            cell[..].copy_from_slice(&(s.chars().next().unwrap() as u32).to_le_bytes());
            data.extend_from_slice(&cell);
        }
        let f = npy(
            "{'descr': '<U1', 'fortran_order': True, 'shape': (2, 2), }",
            &data,
        );
        let t = from_bytes(&f, "s.npy").unwrap();
        assert_eq!(t.strings().unwrap(), ["a", "b", "c", "d"]);
    }

    /// The bound holds for the archive: entries each under it that add up
    /// to more are refused as one that is over it alone.
    #[test]
    fn an_archive_inflating_past_the_bound_is_refused() {
        use std::io::Write;
        let zeros = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1024,), }",
            &[0; 4096],
        );
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let deflated = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for name in ["a.npy", "b.npy", "c.npy"] {
            w.start_file(name, deflated).unwrap();
            w.write_all(&zeros).unwrap();
        }
        let archive = w.finish().unwrap().into_inner();
        let each = zeros.len() as u64;
        let read = |limit| npz_from(std::io::Cursor::new(&archive[..]), "z.npz", limit);
        assert_eq!(read(3 * each).unwrap().len(), 3);
        let e = read(3 * each - 1).unwrap_err().to_string();
        assert!(
            e.contains("inflate to more than") && e.contains("`c.npy`"),
            "{e}"
        );
        assert!(read(each / 2).unwrap_err().to_string().contains("`a.npy`"));
    }
}
