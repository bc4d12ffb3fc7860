//! Reading a component file from disk: only a regular file, only up to
//! `PGW_PLUGIN_MAX_BYTES`. The size is checked from the file's metadata before a byte is read
//! (a path at `/dev/zero`, a FIFO or a directory is refused at once), and the read itself is
//! capped, so a file that grows between the check and the read is refused instead of being
//! read to its end.

use std::io::Read;
use std::path::Path;

/// Why a component file was not read. Every message starts `cannot read <path>: `.
#[derive(Debug, thiserror::Error)]
pub enum ComponentFileError {
    /// The file could not be inspected, opened or read.
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    /// The path is a device, directory, FIFO or socket.
    #[error(
        "cannot read {path}: not a regular file (a device, directory, FIFO or socket); a plugin must be a .wasm component file"
    )]
    NotRegular { path: String },
    /// The file's size, from its metadata, is over the cap.
    #[error("cannot read {path}: {len} bytes is over PGW_PLUGIN_MAX_BYTES ({max})")]
    TooLarge { path: String, len: u64, max: u64 },
    /// The file held more than the cap when read (it grew, or its metadata understated it).
    #[error("cannot read {path}: it grew past PGW_PLUGIN_MAX_BYTES ({max}) while being read")]
    Grew { path: String, max: u64 },
}

/// The bytes of the component file at `path`, at most `max_bytes` of them.
///
/// Errors: [`ComponentFileError`] naming the file: it cannot be opened or read; it is not a
/// regular file; it is larger than `max_bytes` (`PGW_PLUGIN_MAX_BYTES`), from its metadata or
/// while being read.
pub(crate) fn read_component(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ComponentFileError> {
    let shown = || path.display().to_string();
    let io = |e: std::io::Error| ComponentFileError::Io {
        path: shown(),
        message: e.to_string(),
    };
    let not_regular = || ComponentFileError::NotRegular { path: shown() };
    // Metadata first: opening a FIFO would block, and a device has no end.
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    if meta.len() > max_bytes {
        return Err(ComponentFileError::TooLarge {
            path: shown(),
            len: meta.len(),
            max: max_bytes,
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // The path may have been replaced since the check: look at what was opened.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let capacity = usize::try_from(meta.len().min(max_bytes)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ComponentFileError::Grew {
            path: shown(),
            max: max_bytes,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_device_is_refused_at_once_without_reading_it() {
        let t = Instant::now();
        let e = read_component(Path::new("/dev/zero"), 1024).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        let m = e.to_string();
        assert!(
            m.starts_with("cannot read /dev/zero: not a regular file"),
            "{m}"
        );
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let m = read_component(dir.path(), 1024).unwrap_err().to_string();
        assert!(m.contains("not a regular file"), "{m}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_from_its_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.wasm");
        let f = std::fs::File::create(&path).unwrap();
        // Sparse: 100 MiB of length, no data blocks.
        f.set_len(100 * 1024 * 1024).unwrap();
        let t = Instant::now();
        let m = read_component(&path, 64 * 1024 * 1024)
            .unwrap_err()
            .to_string();
        assert!(
            t.elapsed() < Duration::from_millis(100),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(
            m,
            format!(
                "cannot read {}: 104857600 bytes is over PGW_PLUGIN_MAX_BYTES (67108864)",
                path.display()
            )
        );
    }

    #[test]
    fn a_file_at_the_cap_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ok.wasm");
        std::fs::write(&path, [7u8; 100]).unwrap();
        assert_eq!(read_component(&path, 100).unwrap(), vec![7u8; 100]);
        let m = read_component(&path, 99).unwrap_err().to_string();
        assert!(
            m.contains("100 bytes is over PGW_PLUGIN_MAX_BYTES (99)"),
            "{m}"
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_read_is_capped_when_the_metadata_understates_the_size() {
        // A procfs file is regular and reports 0 bytes, but has more: like a file that grew
        // between the check and the read.
        let m = read_component(Path::new("/proc/self/maps"), 16)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("grew past PGW_PLUGIN_MAX_BYTES (16) while being read"),
            "{m}"
        );
    }

    #[test]
    fn a_missing_file_names_the_path() {
        let m = read_component(Path::new("/nonexistent/p.wasm"), 10)
            .unwrap_err()
            .to_string();
        assert!(m.starts_with("cannot read /nonexistent/p.wasm: "), "{m}");
    }
}
