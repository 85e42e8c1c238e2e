//! kopt's records. This slice: the optimization journal, seed 002's
//! OPTIMIZATIONS.md (hypothesis, prediction, measured outcome, verdict, run).

pub mod journal;

pub use journal::{append_entry, find_journal, Entry, JournalError};
