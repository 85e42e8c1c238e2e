//! `kopt analyze DIR` on a folder of per-rank traces: each rank read and
//! reduced on its own, several at once, its trace dropped before the next
//! is read, so memory holds one trace per worker whatever the rank count.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use kopt_analyze::ranks::{diagnose_ranks, rank_profile, RankProfile};
use kopt_model::RanksDiagnosis;

use crate::error::{Error, Result};

/// The trace files when `inputs` is one folder of per-rank traces.
pub fn rank_folder(inputs: &[PathBuf]) -> Result<Option<Vec<PathBuf>>> {
    match inputs {
        [dir] if dir.is_dir() => Ok(kopt_ingest::ranks::rank_trace_files(dir)?),
        _ => Ok(None),
    }
}

/// Every rank's profile, read by up to `workers` threads.
fn read_profiles(files: &[PathBuf], workers: usize) -> Result<Vec<RankProfile>> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, RankProfile)>> = Mutex::new(Vec::with_capacity(files.len()));
    let failed: Mutex<Option<(usize, Error)>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, files.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                    break;
                }
                match kopt_ingest::ranks::read_rank_trace(path) {
                    Ok(t) => {
                        let p = rank_profile(&t, &file_name(path));
                        drop(t);
                        if let Ok(mut o) = out.lock() {
                            o.push((i, p));
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = failed.lock() {
                            if f.as_ref().is_none_or(|(at, _)| i < *at) {
                                *f = Some((i, e.into()));
                            }
                        }
                    }
                }
            });
        }
    });
    if let Some((_, e)) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut profiles = out
        .into_inner()
        .map_err(|_| Error::Input("a rank reader panicked".into()))?;
    profiles.sort_by_key(|(i, _)| *i);
    Ok(profiles.into_iter().map(|(_, p)| p).collect())
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The job's diagnosis from its folder of rank traces.
pub fn analyze_ranks(files: &[PathBuf]) -> Result<RanksDiagnosis> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let profiles = read_profiles(files, workers)?;
    let mut seen = std::collections::BTreeMap::new();
    for p in &profiles {
        if let Some(other) = seen.insert(p.row.rank, p.row.source.clone()) {
            return Err(Error::Input(format!(
                "{} and {other} both say they are rank {}: one job's ranks each have one trace",
                p.row.source, p.row.rank
            )));
        }
    }
    if let Some(p) = profiles
        .iter()
        .find(|p| p.world_size.is_some_and(|w| p.row.rank >= w))
    {
        return Err(Error::Input(format!(
            "{}: rank {} outside its world of {}",
            p.row.source,
            p.row.rank,
            p.world_size.unwrap_or(0)
        )));
    }
    Ok(diagnose_ranks(profiles))
}
