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

/// Opens `path` for reading if it is a regular file (after symlinks): a
/// FIFO would block the open or the read, a device (`/dev/zero`) would
/// never end, a directory has no bytes.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    std::fs::File::open(path)
}

/// Reads a regular file whole; see [`open_regular`].
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = open_regular(path)?;
    let len = f.metadata()?.len();
    let mut bytes = Vec::new();
    // Fallible: a file larger than the memory at hand is an error, not an
    // abort.
    bytes
        .try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("{len} bytes: more memory than there is"),
            )
        })?;
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A new file `.{name}.{pid}.{n}.tmp` in `dir`, created exclusively; `name`
/// is cut to 64 bytes (at a character boundary), so that a destination
/// whose name is near the file-name limit still has a temporary beside it.
fn create_temp(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut cut = name.len().min(64);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let name = &name[..cut];
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

    #[test]
    fn a_name_near_the_file_name_limit_still_gets_a_temporary() {
        let dir = std::env::temp_dir().join(format!("rlx-files-long-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // 250 bytes with a multi-byte character across the 64-byte cut.
        let name = format!("{}é{}.npy", "a".repeat(63), "b".repeat(182));
        let out = dir.join(&name);
        write_file(&out, b"v", Existing::Refuse).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"v");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
