//! Compiling a model when the application builds: a `build.rs` converts the
//! ONNX file into `OUT_DIR`, and the application embeds the artifact, so no
//! ONNX parsing happens at start-up and the model cannot go missing.
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     rlx_onnx::build::Build::new("model.onnx")
//!         .bind("batch", 1)
//!         .write()
//!         .expect("compile model.onnx");
//! }
//! ```
//!
//! ```ignore
//! // src/main.rs
//! let bytes = rlx_onnx::include_artifact!(concat!(env!("OUT_DIR"), "/model.rlx"));
//! let model = rlx_onnx::artifact::from_static(bytes)?;
//! ```

use std::path::{Path, PathBuf};

use crate::compile::{Compiler, Precision, Target};
use crate::error::{Error, Result};
use crate::OptLevel;

/// One model to compile at build time, with its options.
#[derive(Debug, Clone)]
pub struct Build {
    model: PathBuf,
    compiler: Compiler,
    name: Option<String>,
    out_dir: Option<PathBuf>,
}

/// Compiles `model` for the CPU at `-O2` into `OUT_DIR/<stem>.rlx`.
pub fn compile(model: impl AsRef<Path>) -> Result<PathBuf> {
    Build::new(model).write()
}

impl Build {
    pub fn new(model: impl AsRef<Path>) -> Build {
        Build {
            model: model.as_ref().to_path_buf(),
            compiler: Compiler::default(),
            name: None,
            out_dir: None,
        }
    }

    pub fn target(mut self, target: Target) -> Build {
        self.compiler.target = target;
        self
    }

    /// Binds a symbolic dim of the model's inputs.
    pub fn bind(mut self, name: &str, value: i64) -> Build {
        self.compiler = self.compiler.bind(name, value);
        self
    }

    pub fn opt_level(mut self, level: OptLevel) -> Build {
        self.compiler.opt_level = level;
        self
    }

    pub fn precision(mut self, p: Precision) -> Build {
        self.compiler.precision = p;
        self
    }

    /// The artifact's file name without `.rlx` [default: the model's stem].
    pub fn name(mut self, name: &str) -> Build {
        self.name = Some(name.to_string());
        self
    }

    /// Where the artifact goes [default: `OUT_DIR`].
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Build {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Compiles and writes the artifact; returns its path. In a build
    /// script, also tells cargo to build again when the model file changes
    /// (a model with external data files should list them with
    /// `cargo:rerun-if-changed` too).
    pub fn write(self) -> Result<PathBuf> {
        let dir = match self.out_dir {
            Some(d) => d,
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| Error::Io {
                    action: "find",
                    path: PathBuf::from("OUT_DIR"),
                    reason: "OUT_DIR is not set (not in a build script): give out_dir()".into(),
                })?,
        };
        let stem = self
            .model
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "model".into());
        let name = self.name.unwrap_or(stem);
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            return Err(Error::Io {
                action: "name",
                path: PathBuf::from(&name),
                reason: "an artifact name is a plain file name".into(),
            });
        }
        if std::env::var_os("OUT_DIR").is_some() {
            println!("cargo:rerun-if-changed={}", self.model.display());
        }
        let model = self.compiler.compile_file(&self.model)?;
        let path = dir.join(format!("{name}.rlx"));
        crate::artifact::save(&model, &path)?;
        Ok(path)
    }
}

/// `include_bytes!` of an artifact, aligned so that
/// [`crate::artifact::from_static`] borrows its weights instead of copying
/// them.
#[macro_export]
macro_rules! include_artifact {
    ($path:expr) => {{
        #[repr(C, align(64))]
        struct Aligned<T: ?Sized>(T);
        static ALIGNED: &Aligned<[u8]> = &Aligned(*include_bytes!($path));
        &ALIGNED.0
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_artifact_that_loads_and_refuses_odd_names() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!("rlx-build-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = Build::new(root.join("golden/cnn/model.onnx"))
            .bind("N", 1)
            .out_dir(&dir)
            .write()
            .unwrap();
        assert_eq!(path, dir.join("model.rlx"));
        let m = crate::artifact::load(&path).unwrap();
        assert_eq!(m.inputs()[0].fixed_shape(), Some(vec![1, 3, 16, 16]));
        let e = Build::new(root.join("golden/cnn/model.onnx"))
            .name("../escape")
            .out_dir(&dir)
            .write();
        assert!(e.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
