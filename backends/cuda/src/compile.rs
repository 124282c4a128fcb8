//! NVRTC: CUDA C modules to PTX for one GPU architecture, cached on disk
//! (when a directory is given) under a key hashed from the source, the
//! architecture and the NVRTC version. Works without a GPU: only libnvrtc
//! must be loadable.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::nvrtc;

use crate::CudaError;

/// How modules are compiled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompileOptions {
    /// Where compiled PTX is kept between processes; `None`: not kept.
    pub cache_dir: Option<PathBuf>,
}

/// An NVRTC compiler for one architecture (`sm_90`).
#[derive(Debug, Clone)]
pub struct Compiler {
    arch: String,
    version: (i32, i32),
    cache_dir: Option<PathBuf>,
    /// Modules NVRTC compiled (cache misses), shared by clones.
    compiled: Arc<AtomicUsize>,
}

/// Whether libnvrtc can be loaded (by the dynamic loader's search path, or
/// because it is loaded already).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to open the library by its candidate names.
    unsafe { nvrtc::sys::is_culib_present() }
}

/// Makes libnvrtc loadable when the dynamic loader cannot find it by name:
/// opens `libnvrtc.so.13` (and its builtins) from the first of `dirs` that
/// holds it, for the rest of the process (loaded objects are matched by
/// soname, so later opens by name find them). Compile checks without a CUDA
/// toolkit use the `nvidia-cuda-nvrtc` wheel's `nvidia/cu13/lib`.
pub fn load_nvrtc_from(dirs: &[PathBuf]) -> Result<(), CudaError> {
    if nvrtc_available() {
        return Ok(());
    }
    for d in dirs {
        let lib = d.join("libnvrtc.so.13");
        if !lib.is_file() {
            continue;
        }
        let builtins = d.join("libnvrtc-builtins.so.13.0");
        let open = |p: &std::path::Path| {
            // SAFETY: NVIDIA's libraries, whose initializers are benign; kept
            // loaded for the rest of the process.
            unsafe { libloading::Library::new(p) }
                .map(std::mem::forget)
                .map_err(|e| CudaError::Unavailable(format!("{}: {e}", p.display())))
        };
        if builtins.is_file() {
            open(&builtins)?;
        }
        open(&lib)?;
        if nvrtc_available() {
            return Ok(());
        }
    }
    Err(CudaError::Unavailable(format!(
        "libnvrtc.so.13 is not on the library path nor in {dirs:?}"
    )))
}

/// The NVRTC version, `Unavailable` when libnvrtc cannot be loaded.
pub fn nvrtc_version() -> Result<(i32, i32), CudaError> {
    if !nvrtc_available() {
        return Err(CudaError::Unavailable(
            "libnvrtc cannot be loaded (not on the library search path)".into(),
        ));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; both pointers are valid for writes.
    let r = unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r != nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::Device(format!("nvrtcVersion: {r:?}")));
    }
    Ok((major, minor))
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust releases (the
/// cache outlives the process).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.iter().chain([0xffu8].iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

impl Compiler {
    /// A compiler for compute capability `(major, minor)`.
    pub fn new(capability: (i32, i32), opts: &CompileOptions) -> Result<Compiler, CudaError> {
        Ok(Compiler {
            arch: format!("sm_{}{}", capability.0, capability.1),
            version: nvrtc_version()?,
            cache_dir: opts.cache_dir.clone(),
            compiled: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// How many modules NVRTC has compiled (disk-cache and prebuilt hits
    /// are not counted).
    pub fn compiled(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The NVRTC version this compiler uses.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The cache file of a module.
    fn cache_path(&self, name: &str, source: &str) -> Option<PathBuf> {
        let v = format!("{}.{}", self.version.0, self.version.1);
        let key = fnv1a(&[source.as_bytes(), self.arch.as_bytes(), v.as_bytes()]);
        let dir = self.cache_dir.as_ref()?;
        Some(dir.join(format!("{name}-{}-{key:016x}.ptx", self.arch)))
    }

    /// The PTX of module `name`, from the cache or compiled (and then cached;
    /// a cache that cannot be written is skipped, not an error).
    pub fn ptx(&self, name: &str, source: &str) -> Result<String, CudaError> {
        let path = self.cache_path(name, source);
        if let Some(ptx) = path.as_ref().and_then(|p| fs::read_to_string(p).ok()) {
            return Ok(ptx);
        }
        let ptx = self.compile(name, source)?;
        if let Some(p) = path {
            // One temporary per write: two compilers of this process may
            // store the same module at once.
            static WRITES: AtomicUsize = AtomicUsize::new(0);
            let n = WRITES.fetch_add(1, Ordering::Relaxed);
            let tmp = p.with_extension(format!("tmp{}.{n}", std::process::id()));
            let stored = p
                .parent()
                .map_or(Ok(()), fs::create_dir_all)
                .and_then(|()| fs::write(&tmp, &ptx))
                .and_then(|()| fs::rename(&tmp, &p));
            if stored.is_err() {
                let _ = fs::remove_file(&tmp);
            }
        }
        Ok(ptx)
    }

    /// The PTX of every `(name, source)` module, as [`Compiler::ptx`] gives
    /// it (through the cache when there is one), in the order of `modules`,
    /// one after another: NVRTC 13.0 compiling on several threads of one
    /// process crashed (SIGSEGV) in 3 of 5 runs of the CUDA parity tests on
    /// an H200, and in none of 5 with the same modules compiled in turn.
    pub fn ptx_many(&self, modules: &[(&str, &str)]) -> Vec<Result<String, CudaError>> {
        modules.iter().map(|(n, s)| self.ptx(n, s)).collect()
    }

    /// What ptxas reports for every kernel of `source` compiled to machine
    /// code for this architecture (`--ptxas-options=-v`: registers, stack,
    /// spill stores and loads), as NVRTC's log gives it. The driver
    /// assembles the PTX the plan runs with the same ptxas, so a spill seen
    /// here is a spill on the device.
    pub fn ptxas_report(&self, name: &str, source: &str) -> Result<String, CudaError> {
        let src = std::ffi::CString::new(source)
            .map_err(|_| CudaError::Internal(format!("module `{name}` holds a NUL byte")))?;
        let file = std::ffi::CString::new(format!("{name}.cu"))
            .map_err(|_| CudaError::Internal(format!("module name `{name}` holds a NUL byte")))?;
        let prog = nvrtc::result::create_program(&src, Some(&file))
            .map_err(|e| CudaError::Device(format!("NVRTC on module `{name}`: {e:?}")))?;
        let options = [
            format!("--gpu-architecture={}", self.arch),
            "--device-int128".to_string(),
            "--ptxas-options=-v".to_string(),
        ];
        // SAFETY: `prog` is the live program created above, destroyed once
        // below whatever the compile returned.
        let compiled = unsafe { nvrtc::result::compile_program(prog, &options) };
        let log = unsafe { nvrtc::result::get_program_log(prog) };
        let destroyed = unsafe { nvrtc::result::destroy_program(prog) };
        let log = log.map_err(|e| CudaError::Device(format!("NVRTC log of `{name}`: {e:?}")))?;
        let text: Vec<u8> = log
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        let text = String::from_utf8_lossy(&text).into_owned();
        compiled.map_err(|_| {
            CudaError::Internal(format!(
                "NVRTC rejected module `{name}` for {}:\n{text}",
                self.arch
            ))
        })?;
        destroyed.map_err(|e| CudaError::Device(format!("NVRTC on module `{name}`: {e:?}")))?;
        Ok(text)
    }

    /// Compiles `source` with NVRTC (no cache).
    pub fn compile(&self, name: &str, source: &str) -> Result<String, CudaError> {
        let opts = nvrtc::CompileOptions {
            // 128-bit integers: exact means of 64-bit integer reductions.
            options: vec![
                format!("--gpu-architecture={}", self.arch),
                "--device-int128".to_string(),
            ],
            name: Some(format!("{name}.cu")),
            ..Default::default()
        };
        self.compiled.fetch_add(1, Ordering::Relaxed);
        match nvrtc::compile_ptx_with_opts(source, opts) {
            Ok(ptx) => Ok(ptx.to_src()),
            Err(nvrtc::CompileError::CompileError { log, .. }) => {
                Err(CudaError::Internal(format!(
                    "NVRTC rejected module `{name}` for {}:\n{}",
                    self.arch,
                    log.to_string_lossy()
                )))
            }
            Err(e) => Err(CudaError::Device(format!(
                "NVRTC failed on module `{name}`: {e}"
            ))),
        }
    }
}

/// PTX compiled ahead of time for one architecture, by the hash of each
/// module's source: what `convert --target cuda` stores in an artifact, so
/// that loading it compiles nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prebuilt {
    /// The architecture the PTX targets (`sm_90`); the driver runs it on
    /// that architecture and newer ones.
    pub arch: String,
    /// [`source_key`] -> PTX text.
    pub modules: BTreeMap<u64, String>,
}

/// The key of a module's source in a [`Prebuilt`].
pub fn source_key(source: &str) -> u64 {
    fnv1a(&[source.as_bytes()])
}

impl Prebuilt {
    /// Compiles `modules` with `compiler` (through its disk cache).
    pub fn build(compiler: &Compiler, modules: &[crate::Module]) -> Result<Prebuilt, CudaError> {
        let mut p = Prebuilt {
            arch: compiler.arch().to_string(),
            modules: BTreeMap::new(),
        };
        let mut distinct: BTreeMap<u64, (&str, &str)> = BTreeMap::new();
        for m in modules {
            distinct
                .entry(source_key(&m.source))
                .or_insert((&m.name, &m.source));
        }
        let jobs: Vec<(&str, &str)> = distinct.values().copied().collect();
        for (key, ptx) in distinct.keys().zip(compiler.ptx_many(&jobs)) {
            p.modules.insert(*key, ptx?);
        }
        Ok(p)
    }

    /// Attaches the prebuilt PTX of each module of `s` that has one.
    pub fn attach(&self, s: &mut crate::Schedule) {
        for m in &mut s.modules {
            if let Some(ptx) = self.modules.get(&source_key(&m.source)) {
                m.ptx = Some(ptx.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_change_with_source_and_arch() {
        let c = |arch: &str| Compiler {
            arch: arch.into(),
            version: (13, 0),
            cache_dir: Some(PathBuf::from("/cache")),
            compiled: Arc::new(AtomicUsize::new(0)),
        };
        let a = c("sm_90").cache_path("control", "x").unwrap();
        assert_eq!(a, c("sm_90").cache_path("control", "x").unwrap());
        assert_ne!(a, c("sm_90").cache_path("control", "y").unwrap());
        assert_ne!(a, c("sm_80").cache_path("control", "x").unwrap());
        assert!(a.to_string_lossy().starts_with("/cache/control-sm_90-"));
        assert_eq!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"ab", b"c"]));
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
    }
}
