//! Writing files safely: the bytes go to a temporary file created
//! exclusively beside the destination (so a symlink planted under its name
//! is never followed), then move into place in one step, and the temporary
//! is removed on every error path. A reader never sees a torn file.

use std::io::Write;
use std::path::{Path, PathBuf};

/// What to do when the destination exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Replace it (a symlink there is replaced, not followed).
    Replace,
    /// Refuse with `AlreadyExists`, atomically.
    Refuse,
}

/// Writes `bytes` to `path`; see the module comment.
pub fn write_file(path: &Path, bytes: &[u8], existing: Existing) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"))?
        .to_string_lossy()
        .to_string();
    if existing == Existing::Refuse && std::fs::symlink_metadata(path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("`{}` exists", path.display()),
        ));
    }
    let (tmp, mut file) = create_temp(&dir, &name)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let placed = written.and_then(|()| match existing {
        Existing::Replace => std::fs::rename(&tmp, path),
        // A hard link fails if anything exists at `path`, and follows no
        // symlink: no check-then-write race.
        Existing::Refuse => std::fs::hard_link(&tmp, path),
    });
    if placed.is_err() || existing == Existing::Refuse {
        let _ = std::fs::remove_file(&tmp);
    }
    placed
}

/// A new file `.{name}.{pid}.{n}.tmp` in `dir`, created exclusively.
fn create_temp(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..64u32 {
        let tmp = dir.join(format!(
            ".{name}.{}.{:x}.tmp",
            std::process::id(),
            seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9))
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_symlink_is_never_followed() {
        let dir = std::env::temp_dir().join(format!("rlx-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, b"keep").unwrap();
        let out = dir.join("out.bin");
        #[cfg(unix)]
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        // Refused while something is there...
        let e = write_file(&out, b"new", Existing::Refuse).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        // ...and replacing replaces the link, not its target.
        write_file(&out, b"new", Existing::Replace).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_symlink());
        // No temporary is left behind.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
