//! The `.rlx` artifact: a compiled model that loads without parsing ONNX.
//!
//! Layout (little-endian):
//!
//! ```text
//! 0   magic "RLXONNX\0"
//! 8   u32 format version, u32 reserved (0)
//! 16  u64 payload length, u32 CRC-32 of the payload, u32 reserved (0)
//! 32  payload: u32 section count, then per section u32 kind, u64 offset, u64 length
//!     (offsets from the file start), then the sections:
//!       1 meta    text lines `key=value` (target, opt level, precision, fallback,
//!                 bindings, producer)
//!       2 graph   the IR text form
//!       3 weights index: u32 count, per weight: u32 name length, name,
//!                 i32 dtype code, u32 rank, u64 dims..., u64 offset, u64 length,
//!                 then (version 2) u8 encoding: 0 the bytes as they are;
//!                 1 f16 values of an f32 weight; 2 8-bit integers of an f32
//!                 weight, then u8 signed, i32 axis (-1: per tensor), u32
//!                 count, per slice f32 scale and i32 zero point (see
//!                 [`crate::narrow`]); 3 8-bit integers of an i16/i32/i64
//!                 weight, then u8 signed. Weights with the same bytes share
//!                 them.
//!       4 data    weight bytes, each at a 64-byte aligned file offset
//!       5 ptx     optional (CUDA kernels compiled ahead of time): u32 arch
//!                 length, arch, u32 count, per module: u64 source key,
//!                 u64 length, PTX text
//!       6 model   optional (the ONNX model's metadata): i64 model version (i64::MAX: none),
//!                 u32 count, per entry: u32 key length, key, u32 value
//!                 length, value; keys `field:NAME` for the named fields
//!                 (producer, domain, descriptions, graph name), `prop:KEY`
//!                 for `metadata_props`, in file order
//!       7 outputs optional (the shapes the ONNX model declares for its
//!                 outputs): u32 count, per output: u32 name length, name,
//!                 u32 rank (u32::MAX: no shape), per dim: u8 kind (0 a
//!                 value: i64; 1 a name: u32 length, name; 2 unknown)
//! ```
//!
//! Readers ignore section kinds they do not know.
//!
//! Every offset and length is checked; a corrupt or truncated file is an error.
//! Loading reads the file into memory (weights stored as they are point into
//! that buffer); [`LoadMode::Map`] memory-maps it instead.

use std::path::Path;
use std::sync::Arc;

use rlx_importer::DeclaredDim;
use rlx_ir::text::{parse_graph, print_graph};
use rlx_ir::{Bindings, Bytes, DType, Tensor, Weights};
use rlx_passes::OptLevel;

use rlx_cuda::compile::Prebuilt;

use crate::compile::{CompiledModel, Fallback, Precision, Target};
use crate::narrow::{self, Encoding};

const MAGIC: &[u8; 8] = b"RLXONNX\0";
/// Version of the artifact layout; bumped on any incompatible change.
/// Version 2 added weight encodings; version 1 files still load.
pub const FORMAT_VERSION: u32 = 2;
const HEADER: usize = 32;
const ALIGN: usize = 64;

/// Why an artifact cannot be read or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArtifactError {
    #[error("not an rlx artifact (bad magic)")]
    Magic,
    #[error(
        "artifact format version {0} is not supported (this build reads 1 to {FORMAT_VERSION})"
    )]
    Version(u32),
    #[error("the artifact is truncated: {0}")]
    Truncated(&'static str),
    #[error("checksum mismatch: the artifact is corrupt")]
    Checksum,
    #[error("malformed artifact: {0}")]
    Malformed(String),
    #[error("cannot {action} `{path}`: {reason}")]
    Io {
        action: &'static str,
        path: String,
        reason: String,
    },
}

fn malformed(s: impl Into<String>) -> ArtifactError {
    ArtifactError::Malformed(s.into())
}

/// How an artifact is written.
#[derive(Debug, Clone, Copy)]
pub struct SaveOptions {
    /// Store f32 weights that have an exact 8-bit or f16 form (weights the
    /// model stored narrow) in that form, decoded when the artifact loads,
    /// so that the artifact is no larger than the model [default: on]. Off,
    /// every weight is stored as computed and borrowed from the file when
    /// it loads.
    pub narrow_weights: bool,
    /// What happens to a file at the destination [default: replaced].
    pub existing: crate::files::Existing,
}

impl Default for SaveOptions {
    fn default() -> SaveOptions {
        SaveOptions {
            narrow_weights: true,
            existing: crate::files::Existing::Replace,
        }
    }
}

/// The artifact's bytes, with the default [`SaveOptions`].
pub fn to_bytes(m: &CompiledModel) -> Vec<u8> {
    to_bytes_with(m, &SaveOptions::default())
}

/// One weight as stored: its encoding and bytes.
fn stored<'t>(t: &'t Tensor, opts: &SaveOptions) -> (Option<Encoding>, std::borrow::Cow<'t, [u8]>) {
    if let Some(strings) = t.strings() {
        return (None, string_bytes(strings).into());
    }
    match opts.narrow_weights.then(|| narrow::encode(t)).flatten() {
        Some((e, b)) => (Some(e), b.into()),
        None => (None, t.bytes().into()),
    }
}

/// A string weight's bytes: each string as its UTF-8 length (u32) and bytes.
fn string_bytes(strings: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in strings {
        out.extend((s.len() as u32).to_le_bytes());
        out.extend(s.as_bytes());
    }
    out
}

/// The `n` strings of [`string_bytes`]; `None` when the bytes are not that.
fn strings_from(b: &[u8], n: usize) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    for _ in 0..n {
        let len = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
        at += 4;
        let s = std::str::from_utf8(b.get(at..at.checked_add(len)?)?).ok()?;
        out.push(s.to_string());
        at += len;
    }
    (at == b.len()).then_some(out)
}

fn encoding_bytes(e: Option<&Encoding>) -> Vec<u8> {
    let mut out = Vec::new();
    match e {
        None => out.push(0),
        Some(Encoding::F16) => out.push(1),
        Some(Encoding::Int8 { signed }) => {
            out.push(3);
            out.push(u8::from(*signed));
        }
        Some(Encoding::Affine {
            signed,
            axis,
            scales,
            zero_points,
        }) => {
            out.push(2);
            out.push(u8::from(*signed));
            out.extend(axis.map_or(-1, |a| a as i32).to_le_bytes());
            out.extend((scales.len() as u32).to_le_bytes());
            for (s, z) in scales.iter().zip(zero_points) {
                out.extend(s.to_le_bytes());
                out.extend(z.to_le_bytes());
            }
        }
    }
    out
}

pub fn to_bytes_with(m: &CompiledModel, opts: &SaveOptions) -> Vec<u8> {
    let mut meta = format!(
        "target={}\nopt_level={}\nproducer={}\n",
        m.target,
        opt_name(m.opt_level),
        m.producer.replace('\n', " ")
    );
    if m.precision != Precision::Exact {
        meta.push_str(&format!("precision={}\n", m.precision));
    }
    if m.fallback != Fallback::Refuse {
        meta.push_str(&format!("fallback={}\n", m.fallback));
    }
    let mut binds: Vec<_> = m.bindings.iter().collect();
    binds.sort();
    for (k, v) in binds {
        meta.push_str(&format!("bind={k}={v}\n"));
    }
    let graph = print_graph(&m.graph);
    // Weight data offsets are decided after the index size is known.
    let weights: Vec<(&str, &Tensor)> = m.weights.iter().collect();
    let stored: Vec<_> = weights.iter().map(|(_, t)| stored(t, opts)).collect();
    let encodings: Vec<Vec<u8>> = stored
        .iter()
        .map(|(e, _)| encoding_bytes(e.as_ref()))
        .collect();
    let mut index = Vec::new();
    index.extend((weights.len() as u32).to_le_bytes());
    let index_len: usize = 4 + weights
        .iter()
        .zip(&encodings)
        .map(|((n, t), e)| 4 + n.len() + 4 + 4 + 8 * t.dims().len() + 16 + e.len())
        .sum::<usize>();
    let ptx = m.cuda_ptx.as_ref().map(ptx_section);
    let model = metadata_section(&m.metadata);
    let declared = outputs_section(&m.metadata.outputs);
    let section_count = 5 + usize::from(ptx.is_some()) + usize::from(declared.is_some());
    let table_len = 4 + section_count * 20;
    let meta_off = HEADER + table_len;
    let graph_off = meta_off + meta.len();
    let index_off = graph_off + graph.len();
    let data_off = (index_off + index_len).next_multiple_of(ALIGN);
    let mut data = Vec::new();
    // Identical stored bytes are written once (an unrolled recurrence folds
    // the same constant into every step).
    let mut written: std::collections::HashMap<(u32, usize), Vec<usize>> = Default::default();
    for (((name, t), (_, bytes)), enc) in weights.iter().zip(&stored).zip(&encodings) {
        let key = (crc32fast::hash(bytes), bytes.len());
        let same = written.get(&key).and_then(|offs| {
            offs.iter()
                .copied()
                .find(|&o| &data[o - data_off..o - data_off + bytes.len()] == &bytes[..])
        });
        let at = match same {
            Some(o) => o,
            None => {
                let at = (data_off + data.len()).next_multiple_of(ALIGN);
                data.resize(at - data_off, 0);
                data.extend_from_slice(bytes);
                written.entry(key).or_default().push(at);
                at
            }
        };
        index.extend((name.len() as u32).to_le_bytes());
        index.extend(name.as_bytes());
        index.extend(t.dtype().onnx_code().to_le_bytes());
        index.extend((t.dims().len() as u32).to_le_bytes());
        for &d in t.dims() {
            index.extend((d as u64).to_le_bytes());
        }
        index.extend((at as u64).to_le_bytes());
        index.extend((bytes.len() as u64).to_le_bytes());
        index.extend(enc);
    }
    let ptx_off = data_off + data.len();
    let mut sections = vec![
        (1u32, meta_off, meta.len()),
        (2, graph_off, graph.len()),
        (3, index_off, index.len()),
        (4, data_off, data.len()),
    ];
    let model_off = ptx_off + ptx.as_ref().map_or(0, Vec::len);
    if let Some(p) = &ptx {
        sections.push((5, ptx_off, p.len()));
    }
    sections.push((6, model_off, model.len()));
    let declared_off = model_off + model.len();
    if let Some(d) = &declared {
        sections.push((7, declared_off, d.len()));
    }
    let mut out = Vec::with_capacity(declared_off + declared.as_ref().map_or(0, Vec::len));
    out.extend(MAGIC);
    out.extend(FORMAT_VERSION.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out.extend([0u8; 16]);
    out.extend((sections.len() as u32).to_le_bytes());
    for (kind, off, len) in sections {
        out.extend(kind.to_le_bytes());
        out.extend((off as u64).to_le_bytes());
        out.extend((len as u64).to_le_bytes());
    }
    out.extend(meta.as_bytes());
    out.extend(graph.as_bytes());
    out.extend(&index);
    out.resize(data_off, 0);
    out.extend(&data);
    if let Some(p) = &ptx {
        out.extend(p);
    }
    out.extend(&model);
    if let Some(d) = &declared {
        out.extend(d);
    }
    let payload_len = (out.len() - HEADER) as u64;
    let crc = crc32fast::hash(&out[HEADER..]);
    out[16..24].copy_from_slice(&payload_len.to_le_bytes());
    out[24..28].copy_from_slice(&crc.to_le_bytes());
    out
}

fn metadata_section(m: &rlx_importer::Metadata) -> Vec<u8> {
    let fields = m.fields();
    let entries: Vec<(String, &str)> = fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (format!("field:{k}"), *v))
        .chain(
            m.custom
                .iter()
                .map(|(k, v)| (format!("prop:{k}"), v.as_str())),
        )
        .collect();
    let mut b = Vec::new();
    // No version is stored as i64::MAX (ONNX Runtime's value for it).
    b.extend(m.version.unwrap_or(i64::MAX).to_le_bytes());
    b.extend((entries.len() as u32).to_le_bytes());
    for (k, v) in &entries {
        b.extend((k.len() as u32).to_le_bytes());
        b.extend(k.as_bytes());
        b.extend((v.len() as u32).to_le_bytes());
        b.extend(v.as_bytes());
    }
    b
}

fn read_metadata(r: &mut Reader) -> Result<rlx_importer::Metadata, ArtifactError> {
    let mut m = rlx_importer::Metadata {
        version: Some(r.u64()? as i64).filter(|&v| v != i64::MAX),
        ..Default::default()
    };
    let count = r.u32()?;
    for _ in 0..count {
        let mut text = |what: &str| -> Result<String, ArtifactError> {
            let n = r.u32()? as usize;
            std::str::from_utf8(r.take(n)?)
                .map(str::to_string)
                .map_err(|_| malformed(format!("a metadata {what} is not UTF-8")))
        };
        let key = text("key")?;
        let value = text("value")?;
        if let Some(p) = key.strip_prefix("prop:") {
            m.custom.push((p.to_string(), value));
        } else if !key
            .strip_prefix("field:")
            .is_some_and(|f| m.set_field(f, value))
        {
            return Err(malformed(format!("unknown metadata key `{key}`")));
        }
    }
    Ok(m)
}

fn outputs_section(outputs: &[(String, Option<Vec<DeclaredDim>>)]) -> Option<Vec<u8>> {
    if outputs.is_empty() {
        return None;
    }
    let mut b = Vec::new();
    b.extend((outputs.len() as u32).to_le_bytes());
    for (name, dims) in outputs {
        b.extend((name.len() as u32).to_le_bytes());
        b.extend(name.as_bytes());
        let Some(dims) = dims else {
            b.extend(u32::MAX.to_le_bytes());
            continue;
        };
        b.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            match d {
                DeclaredDim::Value(v) => {
                    b.push(0);
                    b.extend(v.to_le_bytes());
                }
                DeclaredDim::Param(p) => {
                    b.push(1);
                    b.extend((p.len() as u32).to_le_bytes());
                    b.extend(p.as_bytes());
                }
                DeclaredDim::Unknown => b.push(2),
            }
        }
    }
    Some(b)
}

type DeclaredOutputs = Vec<(String, Option<Vec<DeclaredDim>>)>;

fn read_outputs(r: &mut Reader) -> Result<DeclaredOutputs, ArtifactError> {
    let text = |r: &mut Reader| -> Result<String, ArtifactError> {
        let n = r.u32()? as usize;
        std::str::from_utf8(r.take(n)?)
            .map(str::to_string)
            .map_err(|_| malformed("a declared output name is not UTF-8"))
    };
    let count = r.u32()?;
    let mut out = Vec::new();
    for _ in 0..count {
        let name = text(r)?;
        let rank = r.u32()?;
        if rank == u32::MAX {
            out.push((name, None));
            continue;
        }
        let mut dims = Vec::new();
        for _ in 0..rank {
            dims.push(match r.take(1)?[0] {
                0 => DeclaredDim::Value(r.u64()? as i64),
                1 => DeclaredDim::Param(text(r)?),
                2 => DeclaredDim::Unknown,
                k => return Err(malformed(format!("declared dim kind {k}"))),
            });
        }
        out.push((name, Some(dims)));
    }
    Ok(out)
}

fn ptx_section(p: &Prebuilt) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend((p.arch.len() as u32).to_le_bytes());
    b.extend(p.arch.as_bytes());
    b.extend((p.modules.len() as u32).to_le_bytes());
    for (key, ptx) in &p.modules {
        b.extend(key.to_le_bytes());
        b.extend((ptx.len() as u64).to_le_bytes());
        b.extend(ptx.as_bytes());
    }
    b
}

fn read_ptx(r: &mut Reader) -> Result<Prebuilt, ArtifactError> {
    let text = |bytes: &[u8], what: &str| {
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| malformed(format!("{what} is not UTF-8")))
    };
    let n = r.u32()? as usize;
    let arch = text(r.take(n)?, "the PTX architecture")?;
    let count = r.u32()?;
    let mut modules = std::collections::BTreeMap::new();
    for _ in 0..count {
        let key = r.u64()?;
        let len = usize::try_from(r.u64()?).map_err(|_| malformed("a PTX length"))?;
        modules.insert(key, text(r.take(len)?, "PTX")?);
    }
    Ok(Prebuilt { arch, modules })
}

fn opt_name(o: OptLevel) -> &'static str {
    match o {
        OptLevel::O0 => "O0",
        OptLevel::O1 => "O1",
        OptLevel::O2 => "O2",
    }
}

/// Writes the artifact atomically: a temporary file next to `path`, renamed
/// over it only when complete.
pub fn save(m: &CompiledModel, path: &Path) -> Result<(), ArtifactError> {
    save_with(m, path, &SaveOptions::default())
}

/// Writes an artifact with `opts` (through a temporary file created
/// exclusively and renamed into place, so that a failed write leaves an
/// existing file as it was and a planted symlink is not followed).
pub fn save_with(m: &CompiledModel, path: &Path, opts: &SaveOptions) -> Result<(), ArtifactError> {
    let bytes = to_bytes_with(m, opts);
    crate::files::write_file(path, &bytes, opts.existing).map_err(|e| ArtifactError::Io {
        action: "write",
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// How an artifact file is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMode {
    /// Read into memory [default]: the model owns its bytes, and the file
    /// may be replaced, changed or truncated afterwards.
    #[default]
    Read,
    /// Memory-map the file: loading is instant, weights are borrowed from
    /// the page cache and shared between processes. The file must not be
    /// modified or truncated while the model lives (on Unix, truncation
    /// kills the process with SIGBUS when a weight is next read).
    Map,
}

/// Loads an artifact file into memory ([`LoadMode::Read`]).
pub fn load(path: &Path) -> Result<CompiledModel, ArtifactError> {
    load_with(path, LoadMode::Read)
}

/// Loads an artifact file as `mode` says.
pub fn load_with(path: &Path, mode: LoadMode) -> Result<CompiledModel, ArtifactError> {
    let io = |action: &'static str, e: std::io::Error| ArtifactError::Io {
        action,
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    // A FIFO would block the open, a device would not end: only a regular
    // file is read.
    if !std::fs::metadata(path)
        .map_err(|e| io("open", e))?
        .is_file()
    {
        return Err(io("open", std::io::Error::other("not a regular file")));
    }
    let mut f = std::fs::File::open(path).map_err(|e| io("open", e))?;
    let all = match mode {
        LoadMode::Read => {
            use std::io::Read;
            let len = f.metadata().map_err(|e| io("read", e))?.len();
            let len = usize::try_from(len).map_err(|_| malformed("the file is too large"))?;
            let mut buf = rlx_ir::tensor::AlignedBuf::zeroed(len);
            f.read_exact(buf.as_mut_bytes())
                .map_err(|e| io("read", e))?;
            if f.read(&mut [0u8; 1]).map_err(|e| io("read", e))? != 0 {
                return Err(malformed("the file grew while it was read"));
            }
            buf.freeze()
        }
        LoadMode::Map => {
            // SAFETY: a read-only map; LoadMode::Map documents that the file
            // must not change while the model lives.
            let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| io("map", e))?;
            let len = map.len();
            Bytes::from_mmap(Arc::new(map), 0..len)
        }
    };
    parse(&all)
}

/// Loads from bytes (e.g. `include_bytes!`); copies them into aligned memory.
pub fn from_bytes(data: &[u8]) -> Result<CompiledModel, ArtifactError> {
    parse(&Bytes::copy_from(data))
}

/// Loads from static bytes without copying when they are 8-byte aligned.
pub fn from_static(data: &'static [u8]) -> Result<CompiledModel, ArtifactError> {
    parse(&Bytes::from_static(data))
}

/// Every weight node of `g` (and of its bodies) names a stored weight of
/// exactly its type: an artifact is untrusted input, and kernels trust the
/// graph's types.
fn check_weights(g: &rlx_ir::Graph, weights: &Weights) -> Result<(), ArtifactError> {
    for id in g.node_ids() {
        let node = g.node(id);
        if let rlx_ir::Op::Weight(w) = &node.op {
            let t = weights
                .get(&w.name)
                .ok_or_else(|| malformed(format!("weight `{}` is not stored", w.name)))?;
            let ty = &node.outputs[0];
            if ty.shape.as_known().as_deref() != Some(t.dims()) || ty.dtype != t.dtype() {
                return Err(malformed(format!(
                    "weight `{}` is stored as {}{:?}; the graph reads {ty}",
                    w.name,
                    t.dtype(),
                    t.dims()
                )));
            }
        }
        for sub in node.op.subgraphs() {
            check_weights(sub, weights)?;
        }
    }
    Ok(())
}

/// The encoding tag (and parameters) of a version-2 weight entry.
fn read_encoding(r: &mut Reader) -> Result<Option<Encoding>, String> {
    let tag = r.take(1).map_err(|e| e.to_string())?[0];
    match tag {
        0 => Ok(None),
        1 => Ok(Some(Encoding::F16)),
        2 => {
            let signed = r.take(1).map_err(|e| e.to_string())?[0] != 0;
            let axis = r.u32().map_err(|e| e.to_string())? as i32;
            let n = r.u32().map_err(|e| e.to_string())? as usize;
            if n > r.b.len().saturating_sub(r.at) / 8 {
                return Err(format!("{n} slices run past the index"));
            }
            let mut scales = Vec::with_capacity(n);
            let mut zero_points = Vec::with_capacity(n);
            for _ in 0..n {
                scales.push(f32::from_bits(r.u32().map_err(|e| e.to_string())?));
                zero_points.push(r.u32().map_err(|e| e.to_string())? as i32);
            }
            let axis = match axis {
                -1 => None,
                a if a >= 0 => Some(a as usize),
                a => return Err(format!("axis {a}")),
            };
            Ok(Some(Encoding::Affine {
                signed,
                axis,
                scales,
                zero_points,
            }))
        }
        3 => Ok(Some(Encoding::Int8 {
            signed: r.take(1).map_err(|e| e.to_string())?[0] != 0,
        })),
        t => Err(format!("unknown weight encoding {t}")),
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], ArtifactError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(ArtifactError::Truncated("a field runs past its section"))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, ArtifactError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().map_err(|_| malformed("u32"))?,
        ))
    }
    fn u64(&mut self) -> Result<u64, ArtifactError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().map_err(|_| malformed("u64"))?,
        ))
    }
}

fn parse(all: &Bytes) -> Result<CompiledModel, ArtifactError> {
    let b = all.as_slice();
    if b.len() < 8 || &b[..8] != MAGIC {
        return Err(ArtifactError::Magic);
    }
    if b.len() < HEADER {
        return Err(ArtifactError::Truncated("the header is incomplete"));
    }
    let mut r = Reader { b, at: 8 };
    let version = r.u32()?;
    if !(1..=FORMAT_VERSION).contains(&version) {
        return Err(ArtifactError::Version(version));
    }
    if r.u32()? != 0 {
        return Err(malformed("a reserved header field is not zero"));
    }
    let payload_len = r.u64()? as usize;
    let crc = r.u32()?;
    if r.u32()? != 0 {
        return Err(malformed("a reserved header field is not zero"));
    }
    if HEADER.checked_add(payload_len) != Some(b.len()) {
        return Err(ArtifactError::Truncated(
            "the file is shorter or longer than its header says",
        ));
    }
    if crc32fast::hash(&b[HEADER..]) != crc {
        return Err(ArtifactError::Checksum);
    }
    let mut r = Reader { b, at: HEADER };
    let count = r.u32()?;
    let mut sections = std::collections::HashMap::new();
    for _ in 0..count.min(64) {
        let kind = r.u32()?;
        let off = r.u64()? as usize;
        let len = r.u64()? as usize;
        if off.checked_add(len).is_none_or(|e| e > b.len()) {
            return Err(malformed(format!("section {kind} lies outside the file")));
        }
        sections.insert(kind, (off, len));
    }
    let section = |k: u32| {
        sections
            .get(&k)
            .copied()
            .ok_or_else(|| malformed(format!("section {k} is missing")))
    };
    let text = |k: u32| -> Result<&str, ArtifactError> {
        let (o, l) = section(k)?;
        std::str::from_utf8(&b[o..o + l])
            .map_err(|_| malformed(format!("section {k} is not UTF-8")))
    };
    let mut target = None;
    let mut opt_level = None;
    let mut producer = String::new();
    let mut precision = Precision::Exact;
    let mut fallback = Fallback::Refuse;
    let mut bindings = Bindings::new();
    for line in text(1)?.lines() {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| malformed(format!("meta line `{line}`")))?;
        match k {
            "target" => {
                target =
                    Some(Target::parse(v).map_err(|_| malformed(format!("unknown target `{v}`")))?)
            }
            "opt_level" => {
                opt_level =
                    Some(OptLevel::parse(v).ok_or_else(|| malformed(format!("opt level `{v}`")))?)
            }
            "producer" => producer = v.to_string(),
            "precision" => {
                precision =
                    Precision::parse(v).ok_or_else(|| malformed(format!("precision `{v}`")))?
            }
            "fallback" => {
                fallback = Fallback::parse(v).ok_or_else(|| malformed(format!("fallback `{v}`")))?
            }
            "bind" => {
                let (n, x) = v
                    .rsplit_once('=')
                    .ok_or_else(|| malformed(format!("binding `{v}`")))?;
                bindings.insert(
                    n.to_string(),
                    x.parse().map_err(|_| malformed(format!("binding `{v}`")))?,
                );
            }
            _ => return Err(malformed(format!("unknown meta key `{k}`"))),
        }
    }
    let graph = parse_graph(text(2)?).map_err(|e| malformed(format!("graph: {e}")))?;
    let (io, il) = section(3)?;
    let mut r = Reader {
        b: &b[..io + il],
        at: io,
    };
    let n = r.u32()?;
    let mut weights = Weights::new();
    for _ in 0..n {
        let nl = r.u32()? as usize;
        let name = std::str::from_utf8(r.take(nl)?)
            .map_err(|_| malformed("weight name"))?
            .to_string();
        let code = r.u32()? as i32;
        let dtype = DType::from_onnx_code(code)
            .ok_or_else(|| malformed(format!("weight `{name}` dtype {code}")))?;
        let rank = r.u32()? as usize;
        if rank > 64 {
            return Err(malformed(format!("weight `{name}` rank {rank}")));
        }
        let dims = (0..rank)
            .map(|_| r.u64().map(|d| d as usize))
            .collect::<Result<Vec<_>, _>>()?;
        let off = r.u64()? as usize;
        let len = r.u64()? as usize;
        if off.checked_add(len).is_none_or(|e| e > b.len()) {
            return Err(malformed(format!("weight `{name}` lies outside the file")));
        }
        let encoding = if version >= 2 {
            read_encoding(&mut r).map_err(|e| malformed(format!("weight `{name}`: {e}")))?
        } else {
            None
        };
        let t = match encoding {
            None if dtype == DType::Str => {
                let n = rlx_ir::tensor::checked_numel(&dims)
                    .map_err(|e| malformed(format!("weight `{name}`: {e}")))?;
                let strings = strings_from(&b[off..off + len], n)
                    .ok_or_else(|| malformed(format!("weight `{name}`: bad strings")))?;
                Tensor::from_strings(&dims, strings)
                    .map_err(|e| malformed(format!("weight `{name}`: {e}")))?
            }
            None => Tensor::new(dtype, dims, all.slice(off..off + len))
                .map_err(|e| malformed(format!("weight `{name}`: {e}")))?,
            Some(e) => narrow::decode(&e, dtype, &dims, &b[off..off + len])
                .map_err(|e| malformed(format!("weight `{name}`: {e}")))?,
        };
        weights.insert(name, t);
    }
    check_weights(&graph, &weights)?;
    rlx_ir::verify(&graph, Some(&weights)).map_err(|e| malformed(format!("graph: {e}")))?;
    let cuda_ptx = match sections.get(&5).copied() {
        Some((o, l)) => Some(read_ptx(&mut Reader {
            b: &b[..o + l],
            at: o,
        })?),
        None => None,
    };
    let mut metadata = match sections.get(&6).copied() {
        Some((o, l)) => read_metadata(&mut Reader {
            b: &b[..o + l],
            at: o,
        })?,
        None => rlx_importer::Metadata::default(),
    };
    if let Some((o, l)) = sections.get(&7).copied() {
        metadata.outputs = read_outputs(&mut Reader {
            b: &b[..o + l],
            at: o,
        })?;
    }
    Ok(CompiledModel {
        graph,
        weights,
        target: target.ok_or_else(|| malformed("no target"))?,
        opt_level: opt_level.ok_or_else(|| malformed("no opt level"))?,
        bindings,
        producer,
        metadata,
        precision,
        fallback,
        cuda_ptx,
        limits: crate::Limits::default(),
    })
}
