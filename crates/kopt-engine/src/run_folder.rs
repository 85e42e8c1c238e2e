//! Run folders (`.kopt/runs/<id>/`) and `run.json`: what a `kopt profile`
//! run did, written when it starts and rewritten after every pass, so a
//! failed or killed run still says how far it got. The layout and the
//! record are kopt-model's (`kopt_model::run_folder`); reading a folder back
//! is kopt-ingest's (`read_run_folder_filtered`).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use kopt_model::run_folder::{Profiler, RunRecord, RUN_JSON, SCHEMA};

use crate::error::{io_error, Error, Result};

/// A record for a run that starts now in the current folder.
pub fn start_record(
    id: String,
    argv: Vec<String>,
    profiler: Profiler,
    profiler_path: &Path,
    profiler_version: Option<String>,
) -> RunRecord {
    RunRecord {
        schema: SCHEMA.into(),
        id,
        kopt_version: env!("CARGO_PKG_VERSION").into(),
        started_utc: utc_timestamp(SystemTime::now()),
        cwd: std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        argv,
        module: None,
        visible_devices: None,
        profiler,
        profiler_path: profiler_path.display().to_string(),
        profiler_version,
        kernel_filter: None,
        passes: Vec::new(),
        counters: None,
        status: "running".into(),
        wall_s: None,
    }
}

/// `dir/run.json` replaced whole (written beside it, then renamed), so a
/// reader never sees half a record.
pub fn save_record(record: &RunRecord, dir: &Path) -> Result<()> {
    let path = dir.join(RUN_JSON);
    let tmp = dir.join(format!(".{RUN_JSON}.tmp"));
    let json = serde_json::to_vec_pretty(record).map_err(|e| Error::Output(e.to_string()))?;
    std::fs::write(&tmp, json).map_err(|e| io_error(&path, "write", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io_error(&path, "write", e))
}

/// Seconds since the epoch as "YYYY-MM-DDTHH:MM:SSZ" (no time-zone database needed).
pub fn utc_timestamp(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// "2026-11-25 23:50 UTC", the journal's form.
pub fn journal_timestamp(t: SystemTime) -> String {
    let stamp = utc_timestamp(t);
    format!("{} {} UTC", &stamp[..10], &stamp[11..16])
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A new run folder under `runs_dir`, else under the project's runs folder
/// ([`crate::RecordPaths`]).
pub fn new_run_dir(runs_dir: Option<&Path>) -> Result<(String, PathBuf)> {
    match runs_dir {
        Some(dir) => create_run_dir(dir),
        None => create_run_dir(&crate::RecordPaths::current().runs_dir),
    }
}

/// A new, unique run folder under `runs_dir`: `20261125-221900-4242`.
pub fn create_run_dir(runs_dir: &Path) -> Result<(String, PathBuf)> {
    crate::record::refuse_planted_link(runs_dir)?;
    std::fs::create_dir_all(runs_dir).map_err(|e| io_error(runs_dir, "create", e))?;
    let stamp = utc_timestamp(SystemTime::now());
    let base: String = stamp
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .map(|c| if c == 'T' { '-' } else { c })
        .collect();
    for n in 0..1000 {
        let id = if n == 0 {
            format!("{base}-{}", std::process::id())
        } else {
            format!("{base}-{}-{n}", std::process::id())
        };
        let dir = runs_dir.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error(&dir, "create", e)),
        }
    }
    Err(Error::Output(format!(
        "{}: cannot find a free run folder name",
        runs_dir.display()
    )))
}

/// `dir/run.json` read back (None: the folder has none), for front ends
/// that cannot reach kopt-ingest themselves (the MCP server's estimates).
pub fn read_record(dir: &Path) -> Result<Option<RunRecord>> {
    Ok(kopt_ingest::read_run_record(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kopt_ingest::read_run_folder_filtered;
    use std::time::Duration;

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_990_740);
        assert_eq!(utc_timestamp(t), "2026-11-29T22:19:00Z");
        assert_eq!(journal_timestamp(t), "2026-11-29 22:19 UTC");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc_timestamp(leap), "2000-02-29T00:00:00Z");
    }

    fn fixture(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(rel)
    }

    #[test]
    fn run_records_round_trip_with_profiler_neutral_names() {
        let d = tempfile::tempdir().unwrap();
        let mut r = start_record(
            "x".into(),
            vec!["./app".into()],
            Profiler::Rocprofv3,
            Path::new("/opt/rocm/bin/rocprofv3"),
            Some("rocprofv3 1.0.0".into()),
        );
        r.kernel_filter = Some("gemm".into());
        save_record(&r, d.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("run.json")).unwrap()).unwrap();
        assert_eq!(json["schema"], "kopt/1");
        assert_eq!(json["profiler"], "rocprofv3");
        assert_eq!(json["profiler_path"], "/opt/rocm/bin/rocprofv3");
        assert_eq!(json["profiler_version"], "rocprofv3 1.0.0");
        assert_eq!(json["kernel_filter"], "gemm");
        assert!(json.get("ncu").is_none() && json.get("ncu_version").is_none());
        assert_eq!(kopt_ingest::read_run_record(d.path()).unwrap(), Some(r));
        // No filter, no key.
        let r = start_record("y".into(), vec![], Profiler::Ncu, Path::new("ncu"), None);
        save_record(&r, d.path()).unwrap();
        let text = std::fs::read_to_string(d.path().join("run.json")).unwrap();
        assert!(text.contains("\"profiler\": \"ncu\"") && !text.contains("kernel_filter"));
    }

    /// run.json's kernel_filter is applied whenever the folder is read; a
    /// filter that is no regex names run.json.
    #[test]
    fn reading_a_folder_applies_its_kernel_filter() {
        let d = tempfile::tempdir().unwrap();
        let src = fixture("moe-route-h200-profile");
        for f in ["pass1-timing.csv", "pass2-targeted.csv", "run.json"] {
            std::fs::copy(src.join(f), d.path().join(f)).unwrap();
        }
        let all = read_run_folder_filtered(d.path()).unwrap();
        assert_eq!(all, kopt_ingest::read_run_folder(d.path()).unwrap());
        let mut r = kopt_ingest::read_run_record(d.path()).unwrap().unwrap();
        let first = all.launches[0].name.clone();
        let function = kopt_model::kernel_function_name(&first);
        r.kernel_filter = Some(regex::escape(&function));
        save_record(&r, d.path()).unwrap();
        let some = read_run_folder_filtered(d.path()).unwrap();
        assert!(!some.launches.is_empty() && some.launches.len() < all.launches.len());
        assert!(some.launches.iter().all(|l| l.name.contains(&function)));

        r.kernel_filter = Some("gemm(".into());
        save_record(&r, d.path()).unwrap();
        let msg = read_run_folder_filtered(d.path()).unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!(
                "{}: kernel_filter \"gemm(\" is not a regex: unclosed group",
                d.path().join("run.json").display()
            )),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn run_dirs_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = create_run_dir(dir.path()).unwrap();
        let (b, _) = create_run_dir(dir.path()).unwrap();
        assert_ne!(a, b);
    }
}
