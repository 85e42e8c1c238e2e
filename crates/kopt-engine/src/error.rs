//! One error type for every workflow, in the kinds a front end reports apart
//! (the CLI's exit codes, the Python package's exception classes). Each
//! message is one line that names the file, tool or command at fault.

use kopt_collect::trace::TraceError;
use kopt_collect::{CollectError, PassError, PassFailure};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request itself is wrong (a flag out of range, a missing workload).
    #[error("{0}")]
    Usage(String),
    /// An input file is unreadable or malformed.
    #[error("{0}")]
    Input(String),
    /// A tool kopt needs is missing: ncu, the tracer library.
    #[error("{0}")]
    ToolMissing(String),
    /// The workload failed, timed out or was killed; or it gave nothing to measure.
    #[error("{0}")]
    WorkloadFailed(String),
    /// kopt could not write where it was asked to.
    #[error("{0}")]
    Output(String),
}

impl Error {
    /// The kind as a stable word (JSON, logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Usage(_) => "usage",
            Error::Input(_) => "input",
            Error::ToolMissing(_) => "tool_missing",
            Error::WorkloadFailed(_) => "workload_failed",
            Error::Output(_) => "output",
        }
    }

    /// The same kind with `context: ` put before the message.
    pub fn context(self, context: impl std::fmt::Display) -> Error {
        let wrap = |m: String| format!("{context}: {m}");
        match self {
            Error::Usage(m) => Error::Usage(wrap(m)),
            Error::Input(m) => Error::Input(wrap(m)),
            Error::ToolMissing(m) => Error::ToolMissing(wrap(m)),
            Error::WorkloadFailed(m) => Error::WorkloadFailed(wrap(m)),
            Error::Output(m) => Error::Output(wrap(m)),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<kopt_ingest::IngestError> for Error {
    fn from(e: kopt_ingest::IngestError) -> Self {
        Error::Input(e.to_string())
    }
}

/// A wrong space, parameter or constraint is the request's fault.
impl From<kopt_space::SpaceError> for Error {
    fn from(e: kopt_space::SpaceError) -> Self {
        Error::Usage(e.0)
    }
}

impl From<kopt_collect::module_script::ModuleScriptError> for Error {
    fn from(e: kopt_collect::module_script::ModuleScriptError) -> Self {
        use kopt_collect::module_script::ModuleScriptError;
        match e {
            ModuleScriptError::Usage(m) => Error::Usage(m),
            ModuleScriptError::Io { .. } => Error::Output(e.to_string()),
        }
    }
}

impl From<CollectError> for Error {
    fn from(e: CollectError) -> Self {
        match e {
            CollectError::NcuNotFound { .. } | CollectError::NcuNotExecutable { .. } => {
                Error::ToolMissing(e.to_string())
            }
            CollectError::ExportFailed { .. }
            | CollectError::ExportBudget { .. }
            | CollectError::Spawn { .. } => Error::Input(e.to_string()),
        }
    }
}

impl From<TraceError> for Error {
    fn from(e: TraceError) -> Self {
        match e {
            TraceError::NoTracer(_) => Error::ToolMissing(e.to_string()),
            _ => Error::WorkloadFailed(e.to_string()),
        }
    }
}

impl From<kopt_collect::RocprofError> for Error {
    fn from(e: kopt_collect::RocprofError) -> Self {
        Error::ToolMissing(e.to_string())
    }
}

impl From<PassError> for Error {
    fn from(e: PassError) -> Self {
        match e {
            PassError::Export(c) => c.into(),
            PassError::Write { .. } => Error::Output(e.to_string()),
            PassError::Failed {
                failure: PassFailure::CounterPermission | PassFailure::NoGpu(_),
                ..
            } => Error::ToolMissing(e.to_string()),
            PassError::Failed { .. } | PassError::Spawn { .. } => {
                Error::WorkloadFailed(e.to_string())
            }
        }
    }
}

impl From<kopt_store::HistoryError> for Error {
    fn from(e: kopt_store::HistoryError) -> Self {
        Error::Input(e.to_string())
    }
}

impl From<kopt_store::JournalError> for Error {
    fn from(e: kopt_store::JournalError) -> Self {
        Error::Output(e.to_string())
    }
}

/// An I/O failure on `path`, worded as the other errors are.
pub(crate) fn io_error(path: &std::path::Path, what: &str, e: std::io::Error) -> Error {
    Error::Output(format!("{}: cannot {what}: {e}", path.display()))
}
