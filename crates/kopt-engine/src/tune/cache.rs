//! What a sweep keeps: each trial committed to the tune cache as it
//! finishes (and found there by the next sweep), the run in the history,
//! the cached winners.

use std::path::{Path, PathBuf};

use kopt_model::tune::{TrialStatus, TuneReport};
use kopt_store::{CacheEntry, CachedTrial, TrialKey, TuneCache};

use crate::error::{Error, Result};
use crate::progress::Progress;

use super::jobs::parse_source;
use super::request::{canonical, TuneRequest};
use super::state::{Driver, Trial};

/// How far (a factor, either way) a cached trial's median may be from its
/// re-timing in the final comparison before the cache is taken to be wrong:
/// well past run-to-run noise, well short of a planted 1 ns.
const CACHE_DISAGREEMENT: f64 = 2.0;

impl Driver<'_> {
    pub(super) fn trial_key(&self, t: &Trial) -> TrialKey {
        TrialKey {
            params: canonical(&t.config),
            ..self.key.clone()
        }
    }

    pub(super) fn load_cache(&mut self) {
        let Some(cache) = &self.cache else { return };
        let mut hits = Vec::new();
        for (i, t) in self.trials.iter().enumerate() {
            match cache.get(&self.trial_key(t)) {
                // A failed baseline is tried again: the sweep cannot go on without it.
                Ok(Some(CacheEntry::Trial(c))) if i == 0 && c.status == "failed" => {}
                Ok(Some(CacheEntry::Trial(c))) => hits.push((i, c)),
                // Never ranked: measured again, as if nothing were cached.
                Ok(Some(CacheEntry::Distrusted(why))) => self.notes.push(format!(
                    "the tune cache's trial {} was ignored and measured again: {why}",
                    t.label
                )),
                Ok(None) => {}
                Err(e) => {
                    self.progress.note(&format!("warning: tune cache: {e}"));
                    return;
                }
            }
        }
        for (i, c) in hits {
            let t = &mut self.trials[i];
            t.samples = c.samples;
            t.spent_s = c.spent_s;
            t.complete = c.complete;
            t.correct = c.correct;
            t.gpu = c.gpu;
            t.reason = c.reason;
            t.status = match c.status.as_str() {
                "rejected" => TrialStatus::Rejected,
                "failed" => TrialStatus::Failed,
                _ => TrialStatus::Ok,
            };
            if t.status != TrialStatus::Ok {
                t.complete = true;
            }
            if self.timing.source.is_none() && parse_source(&c.source).is_some() {
                self.timing.source = Some(c.source.clone());
            }
            t.source = Some(c.source);
        }
    }

    /// Cached trials the final comparison `f` re-timed at more than
    /// [`CACHE_DISAGREEMENT`] times (or less than its inverse) their
    /// cached median: their samples become the final's, their cache rows
    /// are replaced, and a note says so. Whether any was.
    pub(super) fn recheck_cached(&mut self, f: &kopt_model::BenchReport) -> bool {
        let mut any = false;
        for v in &f.variants {
            let Some(i) = self.trials.iter().position(|t| t.label == v.name) else {
                continue;
            };
            let t = &self.trials[i];
            let Some(cached) = t.median().filter(|_| !t.ran) else {
                continue;
            };
            let ratio = v.median_s / cached;
            if !(ratio.is_finite() && ratio > 0.0) || v.values_s.is_empty() {
                continue;
            }
            if (1.0 / CACHE_DISAGREEMENT..=CACHE_DISAGREEMENT).contains(&ratio) {
                continue;
            }
            self.notes.push(format!(
                "the tune cache's trial {} (median {} s) was re-timed at {} s in the final \
                 comparison: its samples are replaced by the final's and the configs ranked again",
                t.label,
                kopt_model::figure::as_read(cached),
                kopt_model::figure::as_read(v.median_s)
            ));
            let t = &mut self.trials[i];
            t.samples = v.values_s.clone();
            t.ran = true;
            any = true;
            self.save(i);
        }
        any
    }

    pub(super) fn save(&mut self, i: usize) {
        let t = &self.trials[i];
        if self.cache.is_none() {
            return;
        }
        let status = match t.status {
            TrialStatus::Rejected => "rejected",
            TrialStatus::Failed => "failed",
            _ => "ok",
        };
        let row = CachedTrial {
            status: status.into(),
            reason: if t.status == TrialStatus::Pruned {
                None
            } else {
                t.reason.clone()
            },
            samples: t.samples.clone(),
            spent_s: t.spent_s,
            complete: t.complete,
            correct: t.correct,
            source: t
                .source
                .clone()
                .or_else(|| self.timing.source.clone())
                .unwrap_or_default(),
            gpu: t.gpu.clone(),
        };
        let key = self.trial_key(t);
        let now = crate::run_folder::utc_timestamp(std::time::SystemTime::now());
        if let Some(cache) = self.cache.as_mut() {
            if let Err(e) = cache.put(&key, &row, &now) {
                self.progress
                    .note(&format!("warning: trial not kept in the tune cache: {e}"));
            }
        }
    }
}

/// The sweep in the run history, one row (its trials are in the tune cache).
pub fn record(req: &TuneRequest, r: &TuneReport, progress: &dyn Progress) {
    let summary = match &r.winner {
        Some(w) => format!(
            "tune {}: winner {} {:.3}x vs {} ({} trials, {} measured)",
            r.strategy,
            w.label,
            w.speedup_vs_baseline,
            r.baseline,
            r.trials.len(),
            r.measured_trials
        ),
        None => format!("tune {}: no winner ({} trials)", r.strategy, r.trials.len()),
    };
    let mut row = crate::record::run_row("tune", r.template.clone(), summary);
    row.device = r.device.clone();
    row.verdict = r
        .winner
        .as_ref()
        .and_then(|w| w.verdict.as_ref())
        .map(|v| v.kind.as_str().to_string());
    row.report_json = serde_json::to_string(r).ok();
    crate::record::record_run(&req.db, &row, progress);
}

/// Cached winners per template, key and device (`kopt tune show`).
pub fn cached_winners(
    db: Option<&Path>,
    key: Option<&str>,
) -> Result<(PathBuf, Vec<kopt_store::CachedWinner>)> {
    let db = crate::record::RecordPaths::db_or(db)?;
    if !db.is_file() {
        return Err(Error::Input(format!("{}: no history yet", db.display())));
    }
    let winners = TuneCache::open(&db)?.winners(key)?;
    Ok((db, winners))
}
