//! `kopt tune`'s cache: one row per trial of a sweep in the history
//! database (table `tune_trials`), keyed by the command template, the
//! parameter values, the problem key, the device, its driver, kopt's version
//! and the measurement settings. Each trial is written in its own
//! transaction as soon as it finishes, so a killed sweep keeps every trial
//! it finished. The final comparison of a sweep is kept in `tune_finals`.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use crate::history::HistoryError;

/// What a trial's cache row is found by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrialKey {
    pub template: String,
    /// The config as canonical JSON (names sorted).
    pub params: String,
    /// `--key` (problem shape), empty when none.
    pub key: String,
    pub device: String,
    pub driver: String,
    pub kopt_version: String,
    /// Timing choice, correctness gate and baseline: results under other
    /// settings are not comparable.
    pub settings: String,
}

/// One cached trial.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedTrial {
    /// ok, rejected or failed.
    pub status: String,
    pub reason: Option<String>,
    /// Samples, seconds.
    pub samples: Vec<f64>,
    /// Seconds of timed runs (the stopping rule's clock).
    pub spent_s: f64,
    /// The stopping rule held: the samples are final.
    pub complete: bool,
    pub correct: Option<bool>,
    /// How the samples were timed (a source name).
    pub source: String,
    pub gpu: Option<String>,
}

/// A cached winner, as `kopt tune show` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedWinner {
    pub template: String,
    pub key: String,
    pub device: String,
    pub driver: String,
    pub kopt_version: String,
    pub params: String,
    pub median_s: f64,
    /// Trials cached for this template, key and device.
    pub trials: usize,
    pub updated_utc: String,
}

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tune_trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    template TEXT NOT NULL,
    params TEXT NOT NULL,
    key TEXT NOT NULL,
    device TEXT NOT NULL,
    driver TEXT NOT NULL,
    kopt_version TEXT NOT NULL,
    settings TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    samples_json TEXT NOT NULL,
    median_s REAL,
    spent_s REAL NOT NULL,
    complete INTEGER NOT NULL,
    correct INTEGER,
    source TEXT NOT NULL,
    gpu TEXT,
    updated_utc TEXT NOT NULL,
    UNIQUE (template, params, key, device, driver, kopt_version, settings)
);
CREATE TABLE IF NOT EXISTS tune_finals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    template TEXT NOT NULL,
    key TEXT NOT NULL,
    device TEXT NOT NULL,
    driver TEXT NOT NULL,
    kopt_version TEXT NOT NULL,
    settings TEXT NOT NULL,
    candidates TEXT NOT NULL,
    report_json TEXT NOT NULL,
    updated_utc TEXT NOT NULL,
    UNIQUE (template, key, device, driver, kopt_version, settings, candidates)
);";

/// The tune tables of one history database.
pub struct TuneCache {
    conn: Connection,
    path: PathBuf,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

impl TuneCache {
    /// Open (and create) the database and its tune tables.
    pub fn open(path: &Path) -> Result<TuneCache, HistoryError> {
        // The history's own connection and setup: folders, WAL, busy
        // timeout, synchronous mode, its tables; then the tune tables.
        let conn = crate::History::open(path)?.into_connection();
        conn.execute_batch(SCHEMA)
            .map_err(|source| HistoryError::Sql {
                path: path.display().to_string(),
                source,
            })?;
        Ok(TuneCache {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> HistoryError + '_ {
        move |source| HistoryError::Sql {
            path: self.path.display().to_string(),
            source,
        }
    }

    pub fn get(&self, k: &TrialKey) -> Result<Option<CachedTrial>, HistoryError> {
        let row = self
            .conn
            .query_row(
                "SELECT status, reason, samples_json, spent_s, complete, correct, source, gpu
                 FROM tune_trials WHERE template = ?1 AND params = ?2 AND key = ?3 AND device = ?4
                 AND driver = ?5 AND kopt_version = ?6 AND settings = ?7",
                params![
                    k.template,
                    k.params,
                    k.key,
                    k.device,
                    k.driver,
                    k.kopt_version,
                    k.settings
                ],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, f64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, Option<i64>>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, Option<String>>(7)?,
                    ))
                },
            )
            .optional()
            .map_err(self.sql())?;
        let Some((status, reason, samples, spent_s, complete, correct, source, gpu)) = row else {
            return Ok(None);
        };
        // A row whose samples cannot be read is as good as none: measure again.
        let Some(samples) = parse_samples(&samples) else {
            return Ok(None);
        };
        Ok(Some(CachedTrial {
            status,
            reason,
            samples,
            spent_s,
            complete: complete != 0,
            correct: correct.map(|c| c != 0),
            source,
            gpu,
        }))
    }

    /// Write (or replace) one trial, in its own transaction.
    pub fn put(
        &mut self,
        k: &TrialKey,
        t: &CachedTrial,
        now_utc: &str,
    ) -> Result<(), HistoryError> {
        let samples = format!(
            "[{}]",
            t.samples
                .iter()
                .map(|s| format!("{s:e}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        self.conn
            .execute(
                "INSERT INTO tune_trials (template, params, key, device, driver, kopt_version, settings,
                   status, reason, samples_json, median_s, spent_s, complete, correct, source, gpu, updated_utc)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
                 ON CONFLICT (template, params, key, device, driver, kopt_version, settings) DO UPDATE SET
                   status = excluded.status, reason = excluded.reason, samples_json = excluded.samples_json,
                   median_s = excluded.median_s, spent_s = excluded.spent_s, complete = excluded.complete,
                   correct = excluded.correct, source = excluded.source, gpu = excluded.gpu,
                   updated_utc = excluded.updated_utc",
                params![
                    k.template,
                    k.params,
                    k.key,
                    k.device,
                    k.driver,
                    k.kopt_version,
                    k.settings,
                    t.status,
                    t.reason,
                    samples,
                    median(&t.samples),
                    t.spent_s,
                    i64::from(t.complete),
                    t.correct.map(i64::from),
                    t.source,
                    t.gpu,
                    now_utc
                ],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// The final comparison of a sweep over `candidates`, as JSON.
    pub fn get_final(
        &self,
        k: &TrialKey,
        candidates: &str,
    ) -> Result<Option<String>, HistoryError> {
        self.conn
            .query_row(
                "SELECT report_json FROM tune_finals WHERE template = ?1 AND key = ?2 AND device = ?3
                 AND driver = ?4 AND kopt_version = ?5 AND settings = ?6 AND candidates = ?7",
                params![
                    k.template,
                    k.key,
                    k.device,
                    k.driver,
                    k.kopt_version,
                    k.settings,
                    candidates
                ],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.sql())
    }

    pub fn put_final(
        &mut self,
        k: &TrialKey,
        candidates: &str,
        report_json: &str,
        now_utc: &str,
    ) -> Result<(), HistoryError> {
        self.conn
            .execute(
                "INSERT INTO tune_finals (template, key, device, driver, kopt_version, settings, candidates, report_json, updated_utc)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (template, key, device, driver, kopt_version, settings, candidates) DO UPDATE SET
                   report_json = excluded.report_json, updated_utc = excluded.updated_utc",
                params![
                    k.template,
                    k.key,
                    k.device,
                    k.driver,
                    k.kopt_version,
                    k.settings,
                    candidates,
                    report_json,
                    now_utc
                ],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Per template, key, device, driver and version: the correct trial
    /// with the lowest median, newest sweeps first. `key` filters.
    pub fn winners(&self, key: Option<&str>) -> Result<Vec<CachedWinner>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT t.template, t.key, t.device, t.driver, t.kopt_version, t.params, t.median_s,
                        g.n, g.updated
                 FROM tune_trials t
                 JOIN (SELECT template, key, device, driver, kopt_version, COUNT(*) AS n,
                              MAX(updated_utc) AS updated,
                              MIN(CASE WHEN status = 'ok' AND median_s IS NOT NULL THEN median_s END) AS best
                       FROM tune_trials GROUP BY template, key, device, driver, kopt_version) g
                   ON t.template = g.template AND t.key = g.key AND t.device = g.device
                  AND t.driver = g.driver AND t.kopt_version = g.kopt_version AND t.median_s = g.best
                 WHERE t.status = 'ok' AND (?1 IS NULL OR t.key = ?1)
                 GROUP BY t.template, t.key, t.device, t.driver, t.kopt_version
                 ORDER BY g.updated DESC",
            )
            .map_err(self.sql())?;
        let rows = stmt
            .query_map(params![key], |r| {
                Ok(CachedWinner {
                    template: r.get(0)?,
                    key: r.get(1)?,
                    device: r.get(2)?,
                    driver: r.get(3)?,
                    kopt_version: r.get(4)?,
                    params: r.get(5)?,
                    median_s: r.get(6)?,
                    trials: r.get::<_, i64>(7)? as usize,
                    updated_utc: r.get(8)?,
                })
            })
            .map_err(self.sql())?;
        // A row that cannot be read is skipped, never allowed to hide the others.
        Ok(rows.flatten().collect())
    }

    /// Trials cached in total (tests, `tune show`).
    pub fn count(&self) -> Result<usize, HistoryError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM tune_trials", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as usize)
            .map_err(self.sql())
    }
}

fn parse_samples(text: &str) -> Option<Vec<f64>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|s| s.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(params: &str) -> TrialKey {
        TrialKey {
            template: "./k --b {B}".into(),
            params: params.into(),
            key: "".into(),
            device: "H100".into(),
            driver: "550".into(),
            kopt_version: "0.1.0".into(),
            settings: "timing=auto".into(),
        }
    }

    fn trial(samples: &[f64]) -> CachedTrial {
        CachedTrial {
            status: "ok".into(),
            reason: None,
            samples: samples.to_vec(),
            spent_s: 0.5,
            complete: true,
            correct: Some(true),
            source: "reported".into(),
            gpu: Some("0".into()),
        }
    }

    #[test]
    fn trials_round_trip_and_are_replaced() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join(".kopt/history.db");
        let mut c = TuneCache::open(&db).unwrap();
        assert!(c.get(&key("{\"B\":\"1\"}")).unwrap().is_none());
        c.put(&key("{\"B\":\"1\"}"), &trial(&[1e-3, 2e-3]), "t1")
            .unwrap();
        c.put(&key("{\"B\":\"2\"}"), &trial(&[0.5e-3]), "t1")
            .unwrap();
        let got = c.get(&key("{\"B\":\"1\"}")).unwrap().unwrap();
        assert_eq!(got, trial(&[1e-3, 2e-3]));
        c.put(&key("{\"B\":\"1\"}"), &trial(&[3e-3]), "t2").unwrap();
        assert_eq!(
            c.get(&key("{\"B\":\"1\"}")).unwrap().unwrap().samples,
            [3e-3]
        );
        assert_eq!(c.count().unwrap(), 2);
        let mut other = key("{\"B\":\"1\"}");
        other.device = "H200".into();
        assert!(c.get(&other).unwrap().is_none());
        // The history's own table is still there and usable.
        assert!(crate::History::open_existing(&db).is_ok());
        let w = c.winners(None).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].params, "{\"B\":\"2\"}");
        assert_eq!(w[0].trials, 2);
        assert!(c.winners(Some("other")).unwrap().is_empty());
    }

    #[test]
    fn finals_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let mut c = TuneCache::open(&d.path().join("h.db")).unwrap();
        let k = key("");
        assert!(c.get_final(&k, "[a,b]").unwrap().is_none());
        c.put_final(&k, "[a,b]", "{}", "t").unwrap();
        assert_eq!(c.get_final(&k, "[a,b]").unwrap().as_deref(), Some("{}"));
        assert!(c.get_final(&k, "[a,c]").unwrap().is_none());
    }
}
