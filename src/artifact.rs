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
//!       1 meta    text lines `key=value` (target, opt level, precision, bindings,
//!                 producer)
//!       2 graph   the IR text form
//!       3 weights index: u32 count, per weight: u32 name length, name,
//!                 i32 dtype code, u32 rank, u64 dims..., u64 offset, u64 length
//!       4 data    weight bytes, each at a 64-byte aligned file offset
//!       5 ptx     optional (CUDA kernels compiled ahead of time): u32 arch
//!                 length, arch, u32 count, per module: u64 source key,
//!                 u64 length, PTX text
//! ```
//!
//! Readers ignore section kinds they do not know.
//!
//! Every offset and length is checked; a corrupt or truncated file is an error.
//! Loading a file memory-maps it and the weights point into the map.

use std::path::Path;
use std::sync::Arc;

use rlx_ir::text::{parse_graph, print_graph};
use rlx_ir::{Bindings, Bytes, DType, Tensor, Weights};
use rlx_passes::OptLevel;

use rlx_cuda::compile::Prebuilt;

use crate::compile::{CompiledModel, Precision, Target};

const MAGIC: &[u8; 8] = b"RLXONNX\0";
/// Version of the artifact layout; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;
const HEADER: usize = 32;
const ALIGN: usize = 64;

/// Why an artifact cannot be read or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArtifactError {
    #[error("not an rlx artifact (bad magic)")]
    Magic,
    #[error("artifact format version {0} is not supported (this build reads {FORMAT_VERSION})")]
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

/// Serializes a compiled model.
pub fn to_bytes(m: &CompiledModel) -> Vec<u8> {
    let mut meta = format!(
        "target={}\nopt_level={}\nproducer={}\n",
        m.target,
        opt_name(m.opt_level),
        m.producer.replace('\n', " ")
    );
    if m.precision != Precision::Exact {
        meta.push_str(&format!("precision={}\n", m.precision));
    }
    let mut binds: Vec<_> = m.bindings.iter().collect();
    binds.sort();
    for (k, v) in binds {
        meta.push_str(&format!("bind={k}={v}\n"));
    }
    let graph = print_graph(&m.graph);
    // Weight data offsets are decided after the index size is known.
    let weights: Vec<(&str, &Tensor)> = m.weights.iter().collect();
    let mut index = Vec::new();
    index.extend((weights.len() as u32).to_le_bytes());
    let index_len: usize = 4 + weights
        .iter()
        .map(|(n, t)| 4 + n.len() + 4 + 4 + 8 * t.dims().len() + 16)
        .sum::<usize>();
    let ptx = m.cuda_ptx.as_ref().map(ptx_section);
    let section_count = if ptx.is_some() { 5 } else { 4 };
    let table_len = 4 + section_count * 20;
    let meta_off = HEADER + table_len;
    let graph_off = meta_off + meta.len();
    let index_off = graph_off + graph.len();
    let data_off = (index_off + index_len).next_multiple_of(ALIGN);
    let mut data = Vec::new();
    for (name, t) in &weights {
        let at = (data_off + data.len()).next_multiple_of(ALIGN);
        data.resize(at - data_off, 0);
        index.extend((name.len() as u32).to_le_bytes());
        index.extend(name.as_bytes());
        index.extend(t.dtype().onnx_code().to_le_bytes());
        index.extend((t.dims().len() as u32).to_le_bytes());
        for &d in t.dims() {
            index.extend((d as u64).to_le_bytes());
        }
        index.extend((at as u64).to_le_bytes());
        index.extend((t.bytes().len() as u64).to_le_bytes());
        data.extend_from_slice(t.bytes());
    }
    let ptx_off = data_off + data.len();
    let mut sections = vec![
        (1u32, meta_off, meta.len()),
        (2, graph_off, graph.len()),
        (3, index_off, index.len()),
        (4, data_off, data.len()),
    ];
    if let Some(p) = &ptx {
        sections.push((5, ptx_off, p.len()));
    }
    let mut out = Vec::with_capacity(ptx_off + ptx.as_ref().map_or(0, Vec::len));
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
    let payload_len = (out.len() - HEADER) as u64;
    let crc = crc32fast::hash(&out[HEADER..]);
    out[16..24].copy_from_slice(&payload_len.to_le_bytes());
    out[24..28].copy_from_slice(&crc.to_le_bytes());
    out
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
    let io = |action: &'static str, e: std::io::Error| ArtifactError::Io {
        action,
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let bytes = to_bytes(m);
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "artifact".into());
    let tmp = path.with_file_name(format!(".{file_name}.tmp{}", std::process::id()));
    std::fs::write(&tmp, &bytes).map_err(|e| io("write", e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("rename into", e)
    })
}

/// Loads an artifact file, memory-mapping it.
pub fn load(path: &Path) -> Result<CompiledModel, ArtifactError> {
    let f = std::fs::File::open(path).map_err(|e| ArtifactError::Io {
        action: "open",
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    // SAFETY: read-only map; the artifact is not modified while loaded.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| ArtifactError::Io {
        action: "map",
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let len = map.len();
    let all = Bytes::from_mmap(Arc::new(map), 0..len);
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
    if version != FORMAT_VERSION {
        return Err(ArtifactError::Version(version));
    }
    r.u32()?;
    let payload_len = r.u64()? as usize;
    let crc = r.u32()?;
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
        let t = Tensor::new(dtype, dims, all.slice(off..off + len))
            .map_err(|e| malformed(format!("weight `{name}`: {e}")))?;
        weights.insert(name, t);
    }
    let cuda_ptx = match sections.get(&5).copied() {
        Some((o, l)) => Some(read_ptx(&mut Reader {
            b: &b[..o + l],
            at: o,
        })?),
        None => None,
    };
    Ok(CompiledModel {
        graph,
        weights,
        target: target.ok_or_else(|| malformed("no target"))?,
        opt_level: opt_level.ok_or_else(|| malformed("no opt level"))?,
        bindings,
        producer,
        precision,
        cuda_ptx,
    })
}
