//! Run folders (`.kopt/runs/<id>/`) and `run.json`: what a `kopt profile`
//! run did, written when it starts and rewritten after every pass, so a
//! failed or killed run still says how far it got.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{io_error, Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassRecord {
    pub name: String,
    pub description: String,
    pub command: Vec<String>,
    pub elapsed_s: f64,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The file(s) the pass wrote, comma-separated when several.
    pub csv: String,
}

/// The profiler that ran a run's passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profiler {
    /// NVIDIA Nsight Compute (pass 1 may be kopt's CUPTI tracer).
    #[default]
    Ncu,
    /// AMD rocprofv3 (ROCprofiler-SDK).
    Rocprofv3,
}

impl Profiler {
    pub fn name(self) -> &'static str {
        match self {
            Profiler::Ncu => "ncu",
            Profiler::Rocprofv3 => "rocprofv3",
        }
    }
}

/// `run.json`. Run folders written before kopt named the profiler hold
/// `ncu` / `ncu_version` / `cuda_visible_devices` instead of
/// `profiler_path` / `profiler_version` / `visible_devices`, and no
/// `profiler` (they are ncu runs): they still load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub id: String,
    pub kopt_version: String,
    pub started_utc: String,
    pub cwd: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub module: Option<String>,
    /// `--gpu`, exported to the workload as CUDA_VISIBLE_DEVICES (ncu) or
    /// HIP_VISIBLE_DEVICES (rocprofv3).
    #[serde(default, alias = "cuda_visible_devices")]
    pub visible_devices: Option<String>,
    #[serde(default)]
    pub profiler: Profiler,
    /// The profiler binary that ran the passes.
    #[serde(alias = "ncu")]
    pub profiler_path: String,
    /// Its `--version` line.
    #[serde(default, alias = "ncu_version")]
    pub profiler_version: Option<String>,
    /// rocprofv3 runs: `--kernel`. rocprofv3's trace records every kernel,
    /// so the regex is applied whenever the folder is read, by `kopt
    /// profile` and by `kopt analyze` alike (ncu applies it while profiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_filter: Option<String>,
    #[serde(default)]
    pub passes: Vec<PassRecord>,
    /// "running", "ok", or `"failed: <reason>"`.
    pub status: String,
    #[serde(default)]
    pub wall_s: Option<f64>,
}

/// The largest `run.json` read back (kopt writes a few KB).
const MAX_RUN_JSON: u64 = 16 << 20;

impl RunRecord {
    /// A record for a run that starts now in the current folder.
    pub fn start(
        id: String,
        argv: Vec<String>,
        profiler: Profiler,
        profiler_path: &Path,
        profiler_version: Option<String>,
    ) -> RunRecord {
        RunRecord {
            schema: "kopt/1".into(),
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
            status: "running".into(),
            wall_s: None,
        }
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join("run.json");
        let tmp = dir.join(".run.json.tmp");
        let json = serde_json::to_vec_pretty(self).map_err(|e| Error::Output(e.to_string()))?;
        std::fs::write(&tmp, json).map_err(|e| io_error(&path, "write", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io_error(&path, "write", e))
    }

    /// `dir/run.json`, or None when the folder has none (a folder put
    /// together by hand, a `kopt trace` folder).
    pub fn load(dir: &Path) -> Result<Option<RunRecord>> {
        use std::io::Read;
        let path = dir.join("run.json");
        let bad = |what: String| Error::Input(format!("{}: {what}", path.display()));
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(format!("cannot read: {e}"))),
        };
        // Checked before opening: opening a FIFO blocks until a writer comes.
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        let file = std::fs::File::open(&path).map_err(|e| bad(format!("cannot read: {e}")))?;
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
}

/// Read a run folder back into a profile, as `kopt profile` read it when
/// the run ended: ncu folders (the tracer's or ncu's timing pass, targeted,
/// deep) and rocprofv3 folders (kernel trace and counter passes) alike, with
/// a rocprofv3 run's `--kernel` applied again.
pub fn read_run_folder(dir: &Path) -> Result<kopt_model::Profile> {
    let record = RunRecord::load(dir)?;
    let mut profile = kopt_ingest::read_run_folder(dir)?;
    if let Some(pattern) = record.as_ref().and_then(|r| r.kernel_filter.as_deref()) {
        let re = regex::Regex::new(pattern).map_err(|e| {
            Error::Input(format!(
                "{}: kernel_filter \"{}\" is not a regex: {}",
                dir.join("run.json").display(),
                kopt_ingest::echo(pattern),
                regex_error(&e)
            ))
        })?;
        // The timeline too: the table, the timeline analysis and the graph
        // prediction cover the same kernels, as ncu's filtered passes do.
        profile.retain_kernels(|name| re.is_match(name));
    }
    Ok(profile)
}

/// A regex error on one line: the regex crate's syntax errors quote the
/// pattern over several lines with a caret, then say what is wrong last.
pub(crate) fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("invalid regex");
    kopt_ingest::one_line(last.strip_prefix("error: ").unwrap_or(last))
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

/// A new, unique run folder under `runs_dir`: `20261125-221900-4242`.
pub fn create_run_dir(runs_dir: &Path) -> Result<(String, PathBuf)> {
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

#[cfg(test)]
mod tests {
    use super::*;
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

    /// run.json files written before the profiler was named (`ncu`,
    /// `ncu_version`, `cuda_visible_devices`) load as ncu runs.
    #[test]
    fn old_run_records_load_as_ncu_runs() {
        let d = tempfile::tempdir().unwrap();
        std::fs::copy(
            fixture("labeled-suite-h200-profile/profile_run.json"),
            d.path().join("run.json"),
        )
        .unwrap();
        for dir in [
            fixture("profile-module-h200/run"),
            fixture("moe-route-h200-profile"),
            d.path().to_path_buf(),
        ] {
            let r = RunRecord::load(&dir).unwrap().unwrap();
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
        let r = RunRecord::load(&fixture("profile-module-h200/run"))
            .unwrap()
            .unwrap();
        assert_eq!(r.visible_devices.as_deref(), Some("0"));
        assert_eq!(r.module.as_deref(), Some("topk_sort"));
    }

    #[test]
    fn run_records_round_trip_with_profiler_neutral_names() {
        let d = tempfile::tempdir().unwrap();
        let mut r = RunRecord::start(
            "x".into(),
            vec!["./app".into()],
            Profiler::Rocprofv3,
            Path::new("/opt/rocm/bin/rocprofv3"),
            Some("rocprofv3 1.0.0".into()),
        );
        r.kernel_filter = Some("gemm".into());
        r.save(d.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("run.json")).unwrap()).unwrap();
        assert_eq!(json["schema"], "kopt/1");
        assert_eq!(json["profiler"], "rocprofv3");
        assert_eq!(json["profiler_path"], "/opt/rocm/bin/rocprofv3");
        assert_eq!(json["profiler_version"], "rocprofv3 1.0.0");
        assert_eq!(json["kernel_filter"], "gemm");
        assert!(json.get("ncu").is_none() && json.get("ncu_version").is_none());
        assert_eq!(RunRecord::load(d.path()).unwrap(), Some(r));
        // No filter, no key.
        let r = RunRecord::start("y".into(), vec![], Profiler::Ncu, Path::new("ncu"), None);
        r.save(d.path()).unwrap();
        let text = std::fs::read_to_string(d.path().join("run.json")).unwrap();
        assert!(text.contains("\"profiler\": \"ncu\"") && !text.contains("kernel_filter"));
    }

    #[test]
    fn bad_run_records_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(RunRecord::load(d.path()).unwrap(), None);
        let path = d.path().join("run.json");
        for text in [
            "{\"schema\": \"kopt/1\"",
            "[]",
            "{\"profiler\": \"nvprof\"}",
        ] {
            std::fs::write(&path, text).unwrap();
            let e = RunRecord::load(d.path()).unwrap_err();
            assert!(matches!(e, Error::Input(_)), "{e:?}");
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
        let msg = RunRecord::load(d.path()).unwrap_err().to_string();
        assert!(msg.contains("run.json: not a regular file"), "{msg}");
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
        let all = read_run_folder(d.path()).unwrap();
        assert_eq!(all, kopt_ingest::read_run_folder(d.path()).unwrap());
        let mut r = RunRecord::load(d.path()).unwrap().unwrap();
        let first = all.launches[0].name.clone();
        let function = kopt_model::kernel_function_name(&first);
        r.kernel_filter = Some(regex::escape(&function));
        r.save(d.path()).unwrap();
        let some = read_run_folder(d.path()).unwrap();
        assert!(!some.launches.is_empty() && some.launches.len() < all.launches.len());
        assert!(some.launches.iter().all(|l| l.name.contains(&function)));

        r.kernel_filter = Some("gemm(".into());
        r.save(d.path()).unwrap();
        let msg = read_run_folder(d.path()).unwrap_err().to_string();
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
