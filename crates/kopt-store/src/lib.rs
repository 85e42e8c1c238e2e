//! kopt's records: the run history (SQLite, `.kopt/history.db`) and the
//! optimization journal, seed 002's OPTIMIZATIONS.md.

pub mod confined;
pub mod files;
pub mod history;
pub mod journal;
pub mod tune_cache;

pub use files::{check_writable, write_file, OutputError};
pub use history::{git_revision, History, HistoryError, RunRow};
pub use journal::{append_entry, find_journal, Entry, JournalError};
pub use tune_cache::{CacheEntry, CachedTrial, CachedWinner, TrialKey, TuneCache};
