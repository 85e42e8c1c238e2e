/// A parse failure. Every variant prints as one line that names the file and,
/// where one is at fault, the line.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: file is empty")]
    Empty { path: String },
    #[error("{path}: binary data (NUL byte at offset {offset}), not a CSV; a .ncu-rep report must keep its .ncu-rep extension")]
    Binary { path: String, offset: usize },
    #[error("{path}:{line}: {message}")]
    At {
        path: String,
        line: u64,
        message: String,
    },
    #[error("{path}: {message}")]
    Format { path: String, message: String },
}

impl IngestError {
    pub(crate) fn at(path: &str, line: u64, message: impl Into<String>) -> Self {
        IngestError::At {
            path: path.to_string(),
            line,
            message: message.into(),
        }
    }

    pub(crate) fn format(path: &str, message: impl Into<String>) -> Self {
        IngestError::Format {
            path: path.to_string(),
            message: message.into(),
        }
    }
}
