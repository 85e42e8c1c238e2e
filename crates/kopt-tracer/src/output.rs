//! The trace file: opened once by `init`, appended to by the drain thread
//! (or CUPTI's thread) and closed with the `end` record by the exit handler.

use std::io::{BufWriter, Write};
use std::sync::Mutex;

/// The open trace, None until `init` opened it (or when it could not).
pub(crate) static OUT: Mutex<Option<BufWriter<std::fs::File>>> = Mutex::new(None);

/// The trace file of this process: `path` for the first CUDA process of the
/// workload, `path.<pid>` for every other one (child processes, torchrun
/// ranks, compile workers): none truncates another's trace.
pub(crate) fn open_trace_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let create = |p: &std::path::Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
    };
    match create(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let mut own = path.as_os_str().to_owned();
            own.push(format!(".{}", std::process::id()));
            create(std::path::Path::new(&own))
        }
        other => other,
    }
}

/// Append to the trace file.
pub(crate) fn write_out(text: &str) {
    if let Ok(mut guard) = OUT.lock() {
        if let Some(w) = guard.as_mut() {
            let _ = w.write_all(text.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_process_writes_beside_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        open_trace_file(&path).unwrap();
        assert!(path.exists());
        open_trace_file(&path).unwrap();
        let own = dir
            .path()
            .join(format!("trace.jsonl.{}", std::process::id()));
        assert!(own.exists(), "the second open goes to trace.jsonl.<pid>");
    }
}
