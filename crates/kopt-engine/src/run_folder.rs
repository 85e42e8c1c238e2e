//! Run folders (`.kopt/runs/<id>/`) and `run.json`: what a `kopt profile`
//! run did, written when it starts and rewritten after every pass, so a
//! failed or killed run still says how far it got.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::{io_error, Error, Result};

#[derive(Debug, Serialize)]
pub struct PassRecord {
    pub name: String,
    pub description: String,
    pub command: Vec<String>,
    pub elapsed_s: f64,
    pub exit_code: Option<i32>,
    pub csv: String,
}

#[derive(Debug, Serialize)]
pub struct RunRecord {
    pub schema: &'static str,
    pub id: String,
    pub kopt_version: &'static str,
    pub started_utc: String,
    pub cwd: String,
    pub argv: Vec<String>,
    pub module: Option<String>,
    pub cuda_visible_devices: Option<String>,
    pub ncu: String,
    pub ncu_version: Option<String>,
    pub passes: Vec<PassRecord>,
    /// "running", "ok", or "failed: <reason>".
    pub status: String,
    pub wall_s: Option<f64>,
}

impl RunRecord {
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join("run.json");
        let tmp = dir.join(".run.json.tmp");
        let json = serde_json::to_vec_pretty(self).map_err(|e| Error::Output(e.to_string()))?;
        std::fs::write(&tmp, json).map_err(|e| io_error(&path, "write", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io_error(&path, "write", e))
    }
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

    #[test]
    fn run_dirs_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = create_run_dir(dir.path()).unwrap();
        let (b, _) = create_run_dir(dir.path()).unwrap();
        assert_ne!(a, b);
    }
}
