//! kopt's engine: every workflow as a typed function. A front end (the CLI,
//! the Python package, an agent server) builds a request, calls the
//! workflow with a [`Progress`] sink, and renders the typed report it gets
//! back (`Diagnosis`, `BenchReport`, `CompareReport` from kopt-model).
//! Every failure is an [`Error`] whose kind the front end maps to its own
//! vocabulary (exit codes, exception classes).

pub mod analyze;
pub mod bench;
pub mod candidate;
pub mod child;
pub mod compare;
pub mod diagnose;
mod error;
pub mod gate;
pub mod history;
pub mod journal;
pub mod module_script;
pub mod optimize;
mod optimize_kept;
pub mod optimize_run;
pub mod profile;
mod profile_rocprof;
pub mod profile_run;
pub mod progress;
pub mod ranks;
pub mod record;
pub mod run_folder;
pub mod trace;
pub mod tune;
pub mod workload;

pub use analyze::{analyze, AnalyzeRequest};
pub use bench::{
    bench, run_bench, BenchRequest, MeasureOptions, Measurement, Sampler, TimingChoice, VariantSpec,
};
pub use compare::{compare, CompareRequest};
pub use diagnose::AnalysisOptions;
pub use error::{Error, Result};
/// Confines every input file read to allowed folders (the MCP server's).
pub use kopt_ingest::confine::{
    confine_reads, confine_reads_from_env, read_roots_value, READ_ROOTS_VAR,
};
pub use optimize::{Candidate, OptimizeRequest};
pub use optimize_run::optimize;
pub use profile::profile;
pub use profile_run::{Backend, ProfileRequest, TimingPass};
pub use progress::{Progress, Silent};
pub use record::{HistoryDb, RecordPaths};
pub use trace::{trace, TraceRequest, Traced};
pub use tune::{tune, tune_with, Executor, LocalExecutor, Strategy, TuneRequest};
pub use workload::{ScriptSource, Workload, WorkloadOptions};

/// Write outputs under kopt's output policy (see `kopt_store::files`):
/// every path is checked first, so nothing is written unless all can be.
/// Every file a command will write, checked before anything runs: the
/// output policy (`kopt_store::check_writable`), and never one of kopt's
/// own records (the project's history database and its WAL files, the
/// journal): `compare -o .kopt/history.db` replaced the history.
pub fn check_outputs<'a>(paths: impl IntoIterator<Item = &'a std::path::Path>) -> Result<()> {
    let paths: Vec<&std::path::Path> = paths.into_iter().collect();
    kopt_store::check_writable(paths.iter().copied()).map_err(|e| Error::Output(e.to_string()))?;
    let records = RecordPaths::current();
    let wal = |suffix: &str| {
        let mut name = records.db.clone().into_os_string();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    let kept = [
        records.db.clone(),
        wal("-wal"),
        wal("-shm"),
        records.journal.clone(),
    ];
    // A record may not exist yet (the journal before its first entry):
    // compared by folder and name then.
    let place = kopt_store::files::written_at;
    // Two outputs naming one file not there yet (`x.md` and `./x.md`,
    // `sub/../x.md`): the second write would replace the first.
    for (i, a) in paths.iter().enumerate() {
        if let Some(b) = paths[..i]
            .iter()
            .find(|b| place(a).is_some_and(|pa| Some(pa) == place(b)))
        {
            return Err(Error::Usage(format!(
                "{} and {} name one file: give each output its own",
                b.display(),
                a.display()
            )));
        }
    }
    for p in paths {
        let same = |r: &&std::path::PathBuf| {
            kopt_store::files::overwrites(p, r) || place(p).is_some_and(|a| Some(a) == place(r))
        };
        if let Some(r) = kept.iter().find(same) {
            return Err(Error::Usage(format!(
                "{} would overwrite kopt's own record {}: write the report elsewhere",
                p.display(),
                r.display()
            )));
        }
    }
    Ok(())
}

pub fn write_outputs(outputs: &[(&std::path::Path, &[u8])]) -> Result<()> {
    check_outputs(outputs.iter().map(|(p, _)| *p))?;
    for (path, bytes) in outputs {
        kopt_store::write_file(path, bytes).map_err(|e| Error::Output(e.to_string()))?;
    }
    Ok(())
}
