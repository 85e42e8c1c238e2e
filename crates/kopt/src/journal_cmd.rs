//! `kopt journal add|show`: seed 002's OPTIMIZATIONS.md, one entry per attempt.

use std::time::SystemTime;

use kopt_store::{append_entry, find_journal, Entry};

use crate::cli::JournalCommand;
use crate::exit::Failure;
use crate::run_record::utc_timestamp;

pub fn run(cmd: JournalCommand) -> Result<(), Failure> {
    let cwd = std::env::current_dir().map_err(|e| Failure::Error(e.into()))?;
    match cmd {
        JournalCommand::Show { file } => {
            let path = file.unwrap_or_else(|| find_journal(&cwd));
            let text = std::fs::read_to_string(&path).map_err(|e| {
                Failure::Error(anyhow::anyhow!("{}: cannot read: {e}", path.display()))
            })?;
            print!("{text}");
            Ok(())
        }
        JournalCommand::Add(a) => {
            if a.hypothesis.trim().is_empty() {
                return Err(Failure::Usage("--hypothesis needs text".into()));
            }
            let verdict = match a.verdict.as_deref().map(str::to_ascii_uppercase) {
                None => None,
                Some(v) if matches!(v.as_str(), "KEEP" | "MARGINAL" | "REVERT") => Some(v),
                Some(v) => {
                    return Err(Failure::Usage(format!(
                        "--verdict {v} is not one of KEEP, MARGINAL, REVERT"
                    )))
                }
            };
            // "2026-11-25T23:50:07Z" -> "2026-11-25 23:50 UTC"
            let stamp = utc_timestamp(SystemTime::now());
            let when = format!("{} {} UTC", &stamp[..10], &stamp[11..16]);
            let path = a.file.unwrap_or_else(|| find_journal(&cwd));
            let entry = Entry {
                when,
                hypothesis: a.hypothesis,
                prediction: a.predict,
                outcome: a.outcome,
                verdict,
                run: a.run,
            };
            append_entry(&path, &entry).map_err(|e| Failure::Error(e.into()))?;
            eprintln!("kopt: journal entry added to {}", path.display());
            Ok(())
        }
    }
}
