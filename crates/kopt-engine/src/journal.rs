//! The optimization journal (OPTIMIZATIONS.md): one entry per attempt.

use std::path::{Path, PathBuf};

use kopt_store::Entry;

use crate::error::{Error, Result};
use crate::record::RecordPaths;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct JournalEntryRequest {
    pub hypothesis: String,
    pub predict: Option<String>,
    pub outcome: Option<String>,
    /// KEEP, MARGINAL or REVERT (any case).
    pub verdict: Option<String>,
    pub run: Option<String>,
}

/// Append an entry to `file` (default: the project's journal); returns the
/// file and the entry as written.
pub fn add_entry(file: Option<&Path>, req: &JournalEntryRequest) -> Result<(PathBuf, Entry)> {
    let file = file.map_or_else(|| RecordPaths::current().journal, Path::to_path_buf);
    if req.hypothesis.trim().is_empty() {
        return Err(Error::Usage("--hypothesis needs text".into()));
    }
    let verdict = match req.verdict.as_deref().map(str::to_ascii_uppercase) {
        None => None,
        Some(v) if matches!(v.as_str(), "KEEP" | "MARGINAL" | "REVERT") => Some(v),
        Some(v) => {
            return Err(Error::Usage(format!(
                "--verdict {v} is not one of KEEP, MARGINAL, REVERT"
            )))
        }
    };
    let entry = Entry {
        when: crate::run_folder::journal_timestamp(std::time::SystemTime::now()),
        hypothesis: req.hypothesis.clone(),
        prediction: req.predict.clone(),
        outcome: req.outcome.clone(),
        verdict,
        run: req.run.clone(),
        change: None,
    };
    crate::record::refuse_planted_link(&file)?;
    kopt_store::append_entry(&file, &entry)?;
    Ok((file, entry))
}

/// The journal `file` (default: the project's) and its text; `None` when
/// no entry was written yet (no file).
pub fn read(file: Option<&Path>) -> Result<(PathBuf, Option<String>)> {
    let file = file.map_or_else(|| RecordPaths::current().journal, Path::to_path_buf);
    crate::record::refuse_planted_link(&file)?;
    let text = kopt_store::journal::read_journal(&file).map_err(|e| Error::Input(e.to_string()))?;
    Ok((file, text))
}
