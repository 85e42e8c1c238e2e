/// A parse failure. Every variant prints as one line that names the file and,
/// where one is at fault, the line: control characters in a path or a message
/// are escaped and an over-long message is cut (see [`one_line`]).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{}: cannot read: {}", one_line(path), one_line(&source.to_string()))]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: file is empty", one_line(path))]
    Empty { path: String },
    #[error("{}: binary data (NUL byte at offset {offset}), not a CSV; a .ncu-rep report must keep its .ncu-rep extension", one_line(path))]
    Binary { path: String, offset: usize },
    /// A FIFO, a device, a socket or a directory where a file was expected:
    /// reading one could block forever or never end.
    #[error("{}: not a regular file ({kind})", one_line(path))]
    NotRegular { path: String, kind: &'static str },
    /// A well-formed trace without any GPU kernel, copy or set: nothing to analyse.
    #[error("{}: no GPU activity (kernel, copy or set) among the trace's {events} event(s): was the profiler run with CUDA activities enabled?", one_line(path))]
    NoGpuActivity { path: String, events: u64 },
    #[error("{}:{line}: {}", one_line(path), one_line(message))]
    At {
        path: String,
        line: u64,
        message: String,
    },
    #[error("{}: {}", one_line(path), one_line(message))]
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

/// The longest message an error prints, in characters.
const MESSAGE_MAX_CHARS: usize = 1000;
/// The longest piece of input an error echoes, in characters.
const ECHO_MAX_CHARS: usize = 80;

/// `s` on one line: control characters (newlines included) escaped as
/// `\n`, `\u{1b}`..., and cut after `MESSAGE_MAX_CHARS` characters.
pub fn one_line(s: &str) -> String {
    escape_capped(s, MESSAGE_MAX_CHARS)
}

/// A piece of the input quoted in a message: control characters escaped and
/// cut after `ECHO_MAX_CHARS` characters, so a broken cell cannot split the
/// error over lines or flood it.
pub fn echo(s: &str) -> String {
    escape_capped(s, ECHO_MAX_CHARS)
}

fn escape_capped(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 16));
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push_str(&format!("… ({} bytes in all)", s.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// What a path is when it is not a regular file, or `None` for a regular
/// file (symbolic links followed).
pub(crate) fn non_regular_kind(ft: std::fs::FileType) -> Option<&'static str> {
    if ft.is_file() {
        return None;
    }
    if ft.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("a FIFO");
        }
        if ft.is_char_device() {
            return Some("a character device");
        }
        if ft.is_block_device() {
            return Some("a block device");
        }
        if ft.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_stay_on_one_line_and_short() {
        let e = IngestError::at("a\nb.csv", 3, format!("found \"{}\"", echo("x\ny\r\u{1b}")));
        let s = e.to_string();
        assert_eq!(s, "a\\nb.csv:3: found \"x\\ny\\r\\u{1b}\"");
        let long = echo(&"z".repeat(10_000));
        assert!(long.starts_with(&"z".repeat(80)), "{long}");
        assert!(long.ends_with("… (10000 bytes in all)"), "{long}");
        let e = IngestError::format("f", "m".repeat(1_000_000)).to_string();
        assert!(e.len() < 1100 && !e.contains('\n'), "{}", e.len());
    }
}
