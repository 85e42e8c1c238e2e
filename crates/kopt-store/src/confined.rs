//! kopt's read policy for a file a client names (an MCP resource, a file a
//! run folder points to): read only when its real path (every symlink
//! resolved) lies inside the allowed folder, it is a regular file, and it
//! is no larger than a cap, checked before reading. A FIFO is opened
//! without blocking and refused, a device never read.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: refused: it resolves to {real}, outside {root}")]
    Outside {
        path: String,
        real: PathBuf,
        root: PathBuf,
    },
    #[error("{path}: refused: not a regular file")]
    NotRegular { path: String },
    #[error("{path}: refused: larger than {cap} bytes")]
    TooLarge { path: String, cap: u64 },
}

/// The bytes of `path`, under the policy above (`root` is the folder it
/// must resolve inside, `cap` the most bytes read).
pub fn read_inside(root: &Path, path: &Path, cap: u64) -> Result<Vec<u8>, ConfinedError> {
    let label = path.display().to_string();
    let io = |source| ConfinedError::Io {
        path: label.clone(),
        source,
    };
    let root = std::fs::canonicalize(root).map_err(io)?;
    let real = std::fs::canonicalize(path).map_err(io)?;
    if !real.starts_with(&root) {
        return Err(ConfinedError::Outside {
            path: label,
            real,
            root,
        });
    }
    read_resolved(&real, label, cap)
}

/// A file the user named on the command line (a space file, say): any
/// folder, symlinks followed, but still a regular file (a FIFO opened
/// without blocking and refused, a device never read) of at most `cap`
/// bytes, checked before reading.
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>, ConfinedError> {
    let label = path.display().to_string();
    let real = std::fs::canonicalize(path).map_err(|source| ConfinedError::Io {
        path: label.clone(),
        source,
    })?;
    read_resolved(&real, label, cap)
}

fn read_resolved(real: &Path, label: String, cap: u64) -> Result<Vec<u8>, ConfinedError> {
    let io = |source| ConfinedError::Io {
        path: label.clone(),
        source,
    };
    // The resolved path, no symlink followed now (a swap in between fails)
    // and no blocking on a FIFO.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(real)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ConfinedError::NotRegular { path: label });
    }
    if meta.len() > cap {
        return Err(ConfinedError::TooLarge { path: label, cap });
    }
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    // It grew while being read.
    if bytes.len() as u64 > cap {
        return Err(ConfinedError::TooLarge { path: label, cap });
    }
    Ok(bytes)
}
