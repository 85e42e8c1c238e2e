//! What an input path holds: `kopt analyze` sniffs each input here, then
//! hands it to the reader of its kind. A new input format is taught here
//! and in its reader, both in this crate.

use std::path::Path;

use crate::IngestError;

/// What an input path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    RunFolder,
    KoptTrace,
    Kineto,
    NcuReport,
    NcuCsv,
    /// rocprofv3 / legacy rocprof CSV, rocprofv3 JSON, rocminfo text, a rocpd database.
    Rocprof,
    /// A rocprof-compute (Omniperf) workload folder.
    RocprofCompute,
    /// A JSON document kopt wrote (`-f json`: `"schema": "kopt/N"` first).
    KoptReport,
}

/// True when `head` opens a JSON document kopt wrote: an object whose first
/// key is `"schema"` with a `"kopt/..."` value (every `kopt/1` document
/// serializes it first). Any version matches, so a newer one is named as
/// such instead of being read as a trace.
pub fn is_kopt_document(head: &[u8]) -> bool {
    let mut rest = head;
    let mut expect = |token: &[u8]| {
        let start = rest
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        rest = &rest[start..];
        let ok = rest.starts_with(token);
        if ok {
            rest = &rest[token.len()..];
        }
        ok
    };
    expect(b"{") && expect(b"\"schema\"") && expect(b":") && expect(b"\"kopt/")
}

/// The kind of an input: folders are run folders; files by extension, else
/// by their first bytes. Anything but a folder or a regular file is refused
/// here, before a reader could block on a FIFO or read a device forever.
pub fn sniff(path: &Path) -> Result<InputKind, IngestError> {
    let label = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| IngestError::Io {
        path: label.clone(),
        source,
    })?;
    if meta.is_dir() {
        if crate::is_rocprof_compute_dir(path) {
            return Ok(InputKind::RocprofCompute);
        }
        return Ok(InputKind::RunFolder);
    }
    if !meta.is_file() {
        return Err(IngestError::format(
            &label,
            "not a regular file (kopt reads files and run folders only)",
        ));
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if path.to_string_lossy().ends_with(".jsonl.gz") {
        return Ok(InputKind::KoptTrace);
    }
    // A gzipped ncu CSV page (a fixture or attachment kept small).
    if path.to_string_lossy().ends_with(".csv.gz") {
        return Ok(InputKind::NcuCsv);
    }
    use std::io::Read;
    let mut first = vec![0u8; 4096];
    let head = |first: &mut Vec<u8>| {
        std::fs::File::open(path)
            .ok()
            .filter(|f| crate::confine::check_opened(f, "").is_ok())
            .and_then(|mut f| f.read(first).ok())
            .unwrap_or(0)
    };
    match ext {
        "jsonl" => return Ok(InputKind::KoptTrace),
        // rocprofv3's JSON output by its top-level key; any other JSON is a
        // Kineto / Chrome trace.
        "json" => {
            let n = head(&mut first);
            if is_kopt_document(&first[..n]) {
                return Ok(InputKind::KoptReport);
            }
            if crate::rocprof::sniff_json(&first[..n]) {
                return Ok(InputKind::Rocprof);
            }
            return Ok(InputKind::Kineto);
        }
        "gz" => return Ok(InputKind::Kineto),
        "ncu-rep" => return Ok(InputKind::NcuReport),
        _ => {}
    }
    let n = head(&mut first);
    if is_kopt_document(&first[..n]) {
        return Ok(InputKind::KoptReport);
    }
    if crate::rocprof::sniff(&first[..n]) {
        return Ok(InputKind::Rocprof);
    }
    let head = &first[..n.min(64)];
    Ok(if head.starts_with(b"{\"t\":") {
        InputKind::KoptTrace
    } else if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        || head.starts_with(&[0x1f, 0x8b])
    {
        InputKind::Kineto
    } else {
        InputKind::NcuCsv
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_formats_and_refuses_special_files() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        assert_eq!(
            sniff(&write("t", "{\"t\":\"kernel\"}")).unwrap(),
            InputKind::KoptTrace
        );
        assert_eq!(
            sniff(&write("k", "  {\"traceEvents\":[]}")).unwrap(),
            InputKind::Kineto
        );
        assert_eq!(
            sniff(&write("c", "\"ID\",\"x\"")).unwrap(),
            InputKind::NcuCsv
        );
        // .json: rocprofv3's by its top-level key, Kineto / Chrome otherwise.
        assert_eq!(
            sniff(&write("r.json", "{\n  \"rocprofiler-sdk-tool\": [")).unwrap(),
            InputKind::Rocprof
        );
        assert_eq!(
            sniff(&write("k.json", "{\"schemaVersion\":1,\"traceEvents\":[]}")).unwrap(),
            InputKind::Kineto
        );
        assert_eq!(
            sniff(&write("x.json", "{\"rocprofiler-sdk-tools\": []}")).unwrap(),
            InputKind::Kineto
        );
        // A SQLite database under any name goes to the rocpd reader.
        assert_eq!(
            sniff(&write("results", "SQLite format 3\0rest")).unwrap(),
            InputKind::Rocprof
        );
        // kopt's own JSON, by its first key, under any name and version;
        // a "schema" key elsewhere or another schema is not kopt's.
        assert_eq!(
            sniff(&write("report.json", "{\n  \"schema\": \"kopt/1\",\n")).unwrap(),
            InputKind::KoptReport
        );
        assert_eq!(
            sniff(&write("report", "{\"schema\":\"kopt/7\"}")).unwrap(),
            InputKind::KoptReport
        );
        assert_eq!(
            sniff(&write(
                "s.json",
                "{\"traceEvents\":[], \"schema\": \"kopt/1\"}"
            ))
            .unwrap(),
            InputKind::Kineto
        );
        assert_eq!(
            sniff(&write("o.json", "{\"schema\": \"other/1\"}")).unwrap(),
            InputKind::Kineto
        );
        assert_eq!(sniff(d.path()).unwrap(), InputKind::RunFolder);
        let fifo = d.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let err = sniff(&fifo).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
