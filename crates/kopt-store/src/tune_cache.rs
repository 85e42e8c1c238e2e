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

/// What the cache holds for a trial's key.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheEntry {
    /// A row that passes every check a measured trial passes.
    Trial(CachedTrial),
    /// A row kopt could not have written (a sample outside the bounds
    /// every measured sample passes, too many samples, an unknown status):
    /// the database travels with a repository, so such a row is ignored,
    /// never ranked, and the trial measured again. Says why.
    Distrusted(String),
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

    /// The trial cached under `k`: none, one to use, or one to ignore.
    pub fn get(&self, k: &TrialKey) -> Result<Option<CacheEntry>, HistoryError> {
        let row = self
            .conn
            .query_row(
                // Samples text longer than MAX_SAMPLES figures take is not
                // read at all (NULL): a planted row must not cost memory.
                "SELECT status, reason,
                        CASE WHEN length(samples_json) <= ?8 THEN samples_json END,
                        spent_s, complete, correct, source, gpu
                 FROM tune_trials WHERE template = ?1 AND params = ?2 AND key = ?3 AND device = ?4
                 AND driver = ?5 AND kopt_version = ?6 AND settings = ?7",
                params![
                    k.template,
                    k.params,
                    k.key,
                    k.device,
                    k.driver,
                    k.kopt_version,
                    k.settings,
                    MAX_SAMPLES_TEXT as i64
                ],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
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
        let samples = match trusted_samples(samples.as_deref()) {
            Ok(s) => s,
            Err(why) => return Ok(Some(CacheEntry::Distrusted(why))),
        };
        if !matches!(status.as_str(), "ok" | "rejected" | "failed") {
            return Ok(Some(CacheEntry::Distrusted(format!(
                "its status is {:?}, not ok, rejected or failed",
                kopt_model::clip_chars(&status, 40)
            ))));
        }
        if status == "ok" && samples.is_empty() {
            return Ok(Some(CacheEntry::Distrusted(
                "it is ok but holds no sample".into(),
            )));
        }
        if !(spent_s.is_finite() && spent_s >= 0.0) {
            return Ok(Some(CacheEntry::Distrusted(format!(
                "its time spent is {spent_s} s"
            ))));
        }
        Ok(Some(CacheEntry::Trial(CachedTrial {
            status,
            reason,
            samples,
            spent_s,
            complete: complete != 0,
            correct: correct.map(|c| c != 0),
            source,
            gpu,
        })))
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
    /// with the lowest median, newest sweeps first. `key` filters. The
    /// median is computed here from the samples, never read from the
    /// stored `median_s` column, and a row whose samples a measured trial
    /// could not have (see [`CacheEntry::Distrusted`]) is never a winner.
    pub fn winners(&self, key: Option<&str>) -> Result<Vec<CachedWinner>, HistoryError> {
        type Group = (String, String, String, String, String);
        /// Trials, newest update, best (median, params).
        type Tally = (usize, String, Option<(f64, String)>);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT template, key, device, driver, kopt_version, params, status,
                        CASE WHEN length(samples_json) <= ?2 THEN samples_json END, updated_utc
                 FROM tune_trials WHERE (?1 IS NULL OR key = ?1)",
            )
            .map_err(self.sql())?;
        let rows = stmt
            .query_map(params![key, MAX_SAMPLES_TEXT as i64], |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                    ),
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, String>(8)?,
                ))
            })
            .map_err(self.sql())?;
        let mut groups: std::collections::HashMap<Group, Tally> = std::collections::HashMap::new();
        // A row that cannot be read is skipped, never allowed to hide the others.
        for (group, params, status, samples, updated) in rows.flatten() {
            let g = groups.entry(group).or_insert((0, String::new(), None));
            g.0 += 1;
            if updated > g.1 {
                g.1 = updated;
            }
            let median = (status == "ok")
                .then(|| trusted_samples(samples.as_deref()).ok())
                .flatten()
                .and_then(|s| median(&s));
            if let Some(m) = median {
                let better = match &g.2 {
                    None => true,
                    Some((best, best_params)) => m < *best || (m == *best && params < *best_params),
                };
                if better {
                    g.2 = Some((m, params));
                }
            }
        }
        let mut winners: Vec<CachedWinner> = groups
            .into_iter()
            .filter_map(
                |((template, key, device, driver, kopt_version), (n, updated, best))| {
                    let (median_s, params) = best?;
                    Some(CachedWinner {
                        template,
                        key,
                        device,
                        driver,
                        kopt_version,
                        params,
                        median_s,
                        trials: n,
                        updated_utc: updated,
                    })
                },
            )
            .collect();
        winners.sort_by(|a, b| {
            b.updated_utc
                .cmp(&a.updated_utc)
                .then_with(|| a.template.cmp(&b.template))
                .then_with(|| a.key.cmp(&b.key))
                .then_with(|| a.device.cmp(&b.device))
        });
        Ok(winners)
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

/// The most characters a row's samples may take: [`MAX_SAMPLES`] figures
/// as `put` writes them (`{s:e}`, at most 24 characters and a comma).
const MAX_SAMPLES_TEXT: usize = MAX_SAMPLES * 32 + 2;

use kopt_bench::MAX_SAMPLES;

/// A row's samples if every one passes the bound a measured sample passes
/// (`kopt_bench::sample_s_in_bounds`) and there are at most
/// [`MAX_SAMPLES`]; otherwise why not.
fn trusted_samples(text: Option<&str>) -> Result<Vec<f64>, String> {
    let Some(text) = text else {
        return Err(format!(
            "its samples take more than {MAX_SAMPLES_TEXT} characters"
        ));
    };
    let unreadable = || "its samples are not a list of numbers".to_string();
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(unreadable)?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut samples = Vec::new();
    for (i, figure) in inner.split(',').enumerate() {
        if samples.len() == MAX_SAMPLES {
            return Err(format!("it holds more than {MAX_SAMPLES} samples"));
        }
        let s: f64 = figure.trim().parse().map_err(|_| unreadable())?;
        if !kopt_bench::sample_s_in_bounds(s) {
            return Err(format!(
                "sample {} is {} s: a sample must be {}",
                i + 1,
                kopt_model::figure::as_read(s),
                kopt_bench::sample_bounds_text()
            ));
        }
        samples.push(s);
    }
    Ok(samples)
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
        assert_eq!(got, CacheEntry::Trial(trial(&[1e-3, 2e-3])));
        c.put(&key("{\"B\":\"1\"}"), &trial(&[3e-3]), "t2").unwrap();
        assert_eq!(
            c.get(&key("{\"B\":\"1\"}")).unwrap().unwrap(),
            CacheEntry::Trial(trial(&[3e-3]))
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

    fn plant(c: &TuneCache, params: &str, samples_json: &str, median_s: f64) {
        c.conn
            .execute(
                "UPDATE tune_trials SET samples_json = ?1, median_s = ?2 WHERE params = ?3",
                params![samples_json, median_s, params],
            )
            .unwrap();
    }

    /// #39: a history database travels with a repository; samples of -1 s
    /// or 1e-9 s planted in the tune cache made the slowest config the
    /// winner of `tune` and of `tune show`.
    #[test]
    fn planted_samples_are_distrusted_and_never_win() {
        let d = tempfile::tempdir().unwrap();
        let mut c = TuneCache::open(&d.path().join("h.db")).unwrap();
        let (fast, slow) = ("{\"B\":\"1\"}", "{\"B\":\"4\"}");
        c.put(&key(fast), &trial(&[12e-3, 12e-3]), "t1").unwrap();
        c.put(&key(slow), &trial(&[42e-3, 42e-3]), "t1").unwrap();
        let huge = format!("[{}]", vec!["1e-3"; MAX_SAMPLES + 1].join(","));
        for (planted, why) in [
            ("[-1.0,-1.0]", "sample 1 is -1 s"),
            ("[1e-3,1e-10]", "sample 2 is 1e-10 s"),
            ("[0.0]", "sample 1 is 0 s"),
            ("[1e300]", "sample 1 is 1e300 s"),
            ("[NaN]", "sample 1 is NaN s"),
            ("[]", "no sample"),
            ("[1e-3,x]", "not a list of numbers"),
            (huge.as_str(), "more than 50000 samples"),
        ] {
            plant(&c, slow, planted, -1.0);
            match c.get(&key(slow)).unwrap().unwrap() {
                CacheEntry::Distrusted(got) => assert!(got.contains(why), "{planted}: {got}"),
                other => panic!("{planted}: {other:?}"),
            }
            let w = c.winners(None).unwrap();
            assert_eq!(w.len(), 1, "{planted}");
            assert_eq!(w[0].params, fast, "{planted}");
            assert_eq!(w[0].median_s, 12e-3, "{planted}");
            assert_eq!(w[0].trials, 2, "{planted}");
        }
        // 1 ns itself is a sample: the edge is inside the bound.
        plant(&c, slow, "[1e-9,1e-9]", 5.0);
        assert!(matches!(
            c.get(&key(slow)).unwrap(),
            Some(CacheEntry::Trial(_))
        ));
        // The stored median is never what ranks: 1e-9 s here, not 5 s.
        let w = c.winners(None).unwrap();
        assert_eq!((w[0].params.as_str(), w[0].median_s), (slow, 1e-9));
        // A median column planted low over honest samples ranks nothing.
        plant(&c, slow, "[42e-3]", -1.0);
        assert_eq!(c.winners(None).unwrap()[0].params, fast);
    }

    #[test]
    fn rows_of_an_unknown_status_or_negative_time_are_distrusted() {
        let d = tempfile::tempdir().unwrap();
        let mut c = TuneCache::open(&d.path().join("h.db")).unwrap();
        let mut t = trial(&[1e-3]);
        t.spent_s = -5.0;
        c.put(&key("a"), &t, "t").unwrap();
        assert!(matches!(
            c.get(&key("a")).unwrap(),
            Some(CacheEntry::Distrusted(_))
        ));
        let mut t = trial(&[1e-3]);
        t.status = "best".into();
        c.put(&key("b"), &t, "t").unwrap();
        assert!(matches!(
            c.get(&key("b")).unwrap(),
            Some(CacheEntry::Distrusted(_))
        ));
        let mut t = trial(&[]);
        t.status = "failed".into();
        c.put(&key("c"), &t, "t").unwrap();
        assert!(matches!(
            c.get(&key("c")).unwrap(),
            Some(CacheEntry::Trial(_))
        ));
    }
}
