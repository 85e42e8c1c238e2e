//! clap's outcomes other than a parsed command line: help and version go to
//! stdout (exit 0), a usage error is one `kopt: error:` line on stderr
//! (exit 2), as every other kopt error is one line.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Print what clap's `e` says and return the exit code.
pub fn report(e: &clap::Error, args: &[OsString]) -> u8 {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // Help asked for (or a bare `kopt`): the page, on stdout. A
            // closed stdout (`kopt --help | head -1`) is not an error.
            use std::io::{IsTerminal, Write};
            let text = if std::io::stdout().is_terminal() {
                e.render().ansi().to_string()
            } else {
                e.render().to_string()
            };
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // `kopt` alone: the page, as the usage error it is.
                let _ = std::io::stderr().write_all(text.as_bytes());
                crate::exit::USAGE
            } else {
                let _ = std::io::stdout().write_all(text.as_bytes());
                crate::exit::OK
            }
        }
        _ => {
            eprintln!(
                "kopt: error: {}",
                kopt_model::text::error_line(&one_line(e, args))
            );
            crate::exit::USAGE
        }
    }
}

/// The error as one line: clap's first line without its `error: ` prefix,
/// its tip replaced where it misleads, and where to read more.
pub fn one_line(e: &clap::Error, args: &[OsString]) -> String {
    let rendered = e.render().to_string();
    // The first paragraph (a missing argument's names follow on their own
    // lines), joined.
    let first: Vec<&str> = rendered
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let first = first.join(" ");
    let first = if first.is_empty() {
        "invalid command line".to_string()
    } else {
        first
    };
    let mut msg = first.strip_prefix("error: ").unwrap_or(&first).to_string();
    if e.kind() == ErrorKind::UnknownArgument {
        // `--top -1`: clap reads -1 as an option and advises `-- -1`,
        // which would make it a program argument. Say what is wrong.
        if let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) {
            if arg.starts_with('-') && arg[1..].parse::<f64>().is_ok() {
                let before = args
                    .iter()
                    .position(|a| a.to_str() == Some(arg.as_str()))
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| args.get(i))
                    .and_then(|a| a.to_str())
                    .filter(|a| a.starts_with("--"));
                msg = match before {
                    Some(flag) => {
                        format!("{flag} {arg}: {flag} takes no negative number (its range is in --help)")
                    }
                    None => format!(
                        "unexpected argument '{arg}': negative numbers are not values kopt takes"
                    ),
                };
            }
        }
    }
    if let Some(near) = suggestion(e) {
        msg.push_str(&format!("; did you mean '{near}'?"));
    }
    let sub = subcommand(args);
    format!("{msg} (see 'kopt{sub} --help')")
}

/// clap's nearest valid name for a mistyped subcommand or flag: its tip
/// is a paragraph of its own, which one line would otherwise lose.
fn suggestion(e: &clap::Error) -> Option<String> {
    match e.get(ContextKind::SuggestedSubcommand) {
        Some(ContextValue::Strings(names)) if !names.is_empty() => {
            return Some(names.join("' or '"))
        }
        Some(ContextValue::String(name)) => return Some(name.clone()),
        _ => {}
    }
    match e.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(flag)) => Some(flag.clone()),
        _ => None,
    }
}

/// ` analyze` when the command line names a subcommand, else "".
fn subcommand(args: &[OsString]) -> String {
    const SUBCOMMANDS: &[&str] = &[
        "analyze",
        "profile",
        "trace",
        "compare",
        "journal",
        "history",
        "bench",
        "optimize",
        "tune",
        "completions",
        "man",
    ];
    args.iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .take_while(|a| *a != "--")
        .find(|a| SUBCOMMANDS.contains(a))
        .map(|a| format!(" {a}"))
        .unwrap_or_default()
}
