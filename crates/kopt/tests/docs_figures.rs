//! What the docs quote from kopt's output stays what kopt prints. A quote
//! is marked in README.md, docs/cli.md, docs/benchmarks.md and docs/training.md:
//!
//! ```text
//! <!-- kopt-output: analyze fixtures/seed000-h200/moe_trace.json -->
//! ...quoted text...
//! <!-- /kopt-output -->
//! ```
//!
//! The arguments after `kopt-output:` are run from the repository root
//! (split at spaces). A fenced code block inside the markers is output
//! quoted verbatim: each of its lines must be a line of the output, in
//! order (`...` skips lines). Prose inside the markers quotes figures:
//! every number in it, with its unit (`21.10 us`, `12.9%`, `3.3x`), must
//! appear in the output, whitespace and line breaks aside.

use std::path::{Path, PathBuf};
use std::process::Command;

const DOCS: [&str; 4] = [
    "README.md",
    "docs/cli.md",
    "docs/benchmarks.md",
    "docs/training.md",
];
const OPEN: &str = "<!-- kopt-output:";
const CLOSE: &str = "<!-- /kopt-output -->";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One marked quote: the document and line it starts on, kopt's arguments
/// and the text between the markers.
struct Quote {
    at: String,
    args: Vec<String>,
    body: String,
}

fn quotes(doc: &str, text: &str) -> Vec<Quote> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let head_end = after
            .find("-->")
            .unwrap_or_else(|| panic!("{doc}: unclosed marker comment"));
        let args = after[..head_end]
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let body_start = &after[head_end + 3..];
        let close = body_start
            .find(CLOSE)
            .unwrap_or_else(|| panic!("{doc}: a kopt-output marker without {CLOSE}"));
        let line = text[..offset + start].lines().count() + 1;
        out.push(Quote {
            at: format!("{doc}:{line}"),
            args,
            body: body_start[..close].to_string(),
        });
        let consumed =
            (body_start.as_ptr() as usize - rest.as_ptr() as usize) + close + CLOSE.len();
        offset += consumed;
        rest = &rest[consumed..];
    }
    out
}

/// The figures a prose quote holds: numbers (`1,133`, `21.10`) with the
/// unit right after them (`%`, `x`, or ` us`, ` ms`, ` ns`, ` s`, ` TB/s`,
/// ` GB/s`, ` TFLOP/s`).
fn figures(prose: &str) -> Vec<String> {
    let chars: Vec<char> = prose.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '.'));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len()
            && (chars[j].is_ascii_digit()
                || (matches!(chars[j], '.' | ',')
                    && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
        {
            j += 1;
        }
        let mut fig: String = chars[i..j].iter().collect();
        let rest: String = chars[j..chars.len().min(j + 9)].iter().collect();
        if rest.starts_with('%') {
            fig.push('%');
        } else if rest.starts_with('x') && !rest[1..].starts_with(char::is_alphanumeric) {
            fig.push('x');
        } else if let Some(unit) = [" us", " ms", " ns", " s", " TB/s", " GB/s", " TFLOP/s"]
            .into_iter()
            .find(|u| {
                rest.starts_with(u) && !rest[u.len()..].starts_with(|c: char| c.is_alphanumeric())
            })
        {
            fig.push_str(unit);
        }
        // A word with digits in it (H200, sm_90) is a name, not a figure.
        if !chars.get(j).is_some_and(|c| c.is_alphabetic()) || fig.ends_with('x') {
            out.push(fig);
        }
        i = j;
    }
    out
}

/// True when `fig` is in `text` as a whole figure (not inside a longer number).
fn holds_figure(text: &str, fig: &str) -> bool {
    text.match_indices(fig).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = &text[at + fig.len()..];
        let digit_after = after.starts_with(|c: char| c.is_ascii_digit())
            || (after.starts_with(['.', ','])
                && after[1..].starts_with(|c: char| c.is_ascii_digit()));
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.') && !digit_after
    })
}

fn run(args: &[String], root: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(args)
        .current_dir(root)
        .env("COLUMNS", "100")
        .output()
        .expect("kopt runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "kopt {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Each line of a fenced block, in order, among the output's lines.
fn check_verbatim(q: &Quote, fence: &str, out: &str) -> Vec<String> {
    let lines: Vec<&str> = out.lines().map(str::trim_end).collect();
    let mut from = 0;
    let mut problems = Vec::new();
    for want in fence.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        if want == "..." {
            continue;
        }
        match lines[from..].iter().position(|l| *l == want) {
            Some(p) => from += p + 1,
            None => problems.push(format!(
                "{}: `kopt {}` does not print (here, in this order) the line {want:?}",
                q.at,
                q.args.join(" ")
            )),
        }
    }
    problems
}

#[test]
fn quoted_output_is_what_kopt_prints() {
    let root = root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in DOCS {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for q in quotes(doc, &text) {
            assert!(!q.args.is_empty(), "{}: a marker without a command", q.at);
            let out = run(&q.args, &root);
            if let Some((_, fenced)) = q.body.split_once("```") {
                let fenced = fenced.split_once('\n').map_or("", |(_, b)| b);
                let fence = fenced.split("```").next().unwrap_or("");
                problems.extend(check_verbatim(&q, fence, &out));
                checked += 1;
                continue;
            }
            let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
            let figs = figures(&q.body.split_whitespace().collect::<Vec<_>>().join(" "));
            assert!(
                !figs.is_empty(),
                "{}: a marked quote without a figure",
                q.at
            );
            for f in figs {
                if !holds_figure(&flat, &f) {
                    problems.push(format!(
                        "{}: `kopt {}` does not print {f:?}",
                        q.at,
                        q.args.join(" ")
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} marked quotes found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn figures_are_found_with_their_units() {
    assert_eq!(
        figures("busy 12.9%; 93 of 114 kernels, 21.10 us a step, 3.3x (1.3-6.9x) on an H200, 1,133 calls"),
        ["12.9%", "93", "114", "21.10 us", "3.3x", "1.3", "6.9x", "1,133"]
    );
    assert!(holds_figure("busy 12.9% of", "12.9%"));
    assert!(!holds_figure("busy 112.9% of", "12.9%"));
    assert!(!holds_figure("took 21.105 us", "21.10"));
    assert!(holds_figure("93 of 114", "93"));
    assert!(!holds_figure("930 of 114", "93"));
}
