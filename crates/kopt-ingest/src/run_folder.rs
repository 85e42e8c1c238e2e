//! Reading a run folder back as `kopt profile` left it: `run.json` (its
//! record, [`kopt_model::run_folder::RunRecord`]) and the passes, with a
//! rocprofv3 run's `--kernel` applied again. Writing the record is the
//! engine's; the layout is `kopt_model::run_folder`'s.

use std::path::Path;

use kopt_model::run_folder::{RunRecord, RUN_JSON};
use kopt_model::Profile;

use crate::{echo, one_line, IngestError};

/// The largest `run.json` read back (kopt writes a few KB).
const MAX_RUN_JSON: u64 = 16 << 20;

/// `dir/run.json`, or None when the folder has none (a folder put together
/// by hand, a `kopt trace` folder).
pub fn read_run_record(dir: &Path) -> Result<Option<RunRecord>, IngestError> {
    use std::io::Read;
    let path = dir.join(RUN_JSON);
    let bad = |what: String| IngestError::format(&path.display().to_string(), what);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(format!("cannot read: {e}"))),
    };
    // Checked before opening: opening a FIFO blocks until a writer comes.
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    crate::confine::check(&path, &path.display().to_string())?;
    let file = std::fs::File::open(&path).map_err(|e| bad(format!("cannot read: {e}")))?;
    crate::confine::check_opened(&file, &path.display().to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_RUN_JSON + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_RUN_JSON {
        return Err(bad(format!(
            "larger than {} MiB: not a run record kopt wrote",
            MAX_RUN_JSON >> 20
        )));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| bad(format!("not a kopt run record: {e}")))
}

/// Read a run folder back into a profile, as `kopt profile` read it when
/// the run ended: ncu folders (the tracer's or ncu's timing pass, targeted,
/// deep) and rocprofv3 folders (kernel trace and counter passes) alike, with
/// a rocprofv3 run's `--kernel` (run.json's `kernel_filter`) applied again.
/// [`crate::read_run_folder`] reads the passes alone.
pub fn read_run_folder_filtered(dir: &Path) -> Result<Profile, IngestError> {
    let record = read_run_record(dir)?;
    let mut profile = crate::tiered::read_run_folder(dir)?;
    if let Some(pattern) = record.as_ref().and_then(|r| r.kernel_filter.as_deref()) {
        let re = regex::Regex::new(pattern).map_err(|e| {
            IngestError::format(
                &dir.join(RUN_JSON).display().to_string(),
                format!(
                    "kernel_filter \"{}\" is not a regex: {}",
                    echo(pattern),
                    regex_error(&e)
                ),
            )
        })?;
        // The timeline too: the table, the timeline analysis and the graph
        // prediction cover the same kernels, as ncu's filtered passes do.
        profile.retain_kernels(|name| re.is_match(name));
    }
    Ok(profile)
}

/// A regex error on one line: the regex crate's syntax errors quote the
/// pattern over several lines with a caret, then say what is wrong last.
pub fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("invalid regex");
    one_line(last.strip_prefix("error: ").unwrap_or(last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_model::run_folder::Profiler;
    use std::path::PathBuf;

    fn fixture(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(rel)
    }

    /// run.json files written before the profiler was named (`ncu`,
    /// `ncu_version`, `cuda_visible_devices`) load as ncu runs.
    #[test]
    fn old_run_records_load_as_ncu_runs() {
        let d = tempfile::tempdir().unwrap();
        std::fs::copy(
            fixture("labeled-suite-h200-profile/profile_run.json"),
            d.path().join(RUN_JSON),
        )
        .unwrap();
        for dir in [
            fixture("profile-module-h200/run"),
            fixture("moe-route-h200-profile"),
            d.path().to_path_buf(),
        ] {
            let r = read_run_record(&dir).unwrap().unwrap();
            assert_eq!(r.profiler, Profiler::Ncu, "{}", dir.display());
            assert!(r.profiler_path.ends_with("/ncu"), "{}", r.profiler_path);
            assert!(
                r.profiler_version.as_deref().unwrap().contains("2025."),
                "{:?}",
                r.profiler_version
            );
            assert_eq!(r.status, "ok");
            assert!(!r.passes.is_empty());
            assert_eq!(r.kernel_filter, None);
        }
        let r = read_run_record(&fixture("profile-module-h200/run"))
            .unwrap()
            .unwrap();
        assert_eq!(r.visible_devices.as_deref(), Some("0"));
        assert_eq!(r.module.as_deref(), Some("topk_sort"));
    }

    #[test]
    fn bad_run_records_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_run_record(d.path()).unwrap(), None);
        let path = d.path().join(RUN_JSON);
        for text in [
            "{\"schema\": \"kopt/1\"",
            "[]",
            "{\"profiler\": \"nvprof\"}",
        ] {
            std::fs::write(&path, text).unwrap();
            let e = read_run_record(d.path()).unwrap_err();
            assert!(matches!(e, IngestError::Format { .. }), "{e:?}");
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("{}: not a kopt run record: ", path.display())),
                "{msg}"
            );
            assert!(!msg.contains('\n'), "{msg}");
        }
        std::fs::remove_file(&path).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        let msg = read_run_record(d.path()).unwrap_err().to_string();
        assert!(msg.contains("run.json: not a regular file"), "{msg}");
    }
}
