//! The statement behind a sync or copy call. torch.profiler's Python frames
//! (`with_stack=True`) name each function by its first line
//! (`co_firstlineno`), not by the line that made the call, so a `.item()`
//! in a 40-line `forward` was named by the `def`. Where the source file is
//! readable here (an absolute path, or one relative to this directory) and
//! its line there starts the very function the trace names, that
//! function's body is searched for the statements that can make the call
//! the enclosing op names (`aten::item` -> `.item()`, a boolean-mask index
//! -> `x[mask]` with `mask` a comparison, ...). One match or a few are
//! named (`model.py:17/21 in forward`); none, an unreadable file or one
//! whose line does not start that function leave the function's line.

use std::collections::HashMap;

/// At most this many source files are read for one trace (by their real
/// path: `./m.py` and `m.py` are one), each at most `MAX_SOURCE_BYTES`,
/// whatever its metadata says (a /proc file says 0): names come from the
/// trace, so what they make kopt read is bounded.
const MAX_SOURCE_FILES: usize = 64;
const MAX_SOURCE_BYTES: u64 = 2 << 20;
/// A function body is searched over at most this many lines, and at most
/// `MAX_LOOKUPS` (frame, op) pairs are searched for one trace: together at
/// most a few million short lines scanned, whatever the trace and sources.
const MAX_BODY_LINES: usize = 2_000;
const MAX_LOOKUPS: usize = 1_024;
/// At most this many statements are named for one call site.
const MAX_STATEMENTS: usize = 4;

/// A `python_function` event's name taken apart: `path.py(LINE): func`.
pub(crate) struct RawFrame<'a> {
    pub path: &'a str,
    pub line: u32,
    pub func: &'a str,
}

pub(crate) fn parse_frame(name: &str) -> Option<RawFrame<'_>> {
    let (path, rest) = name.split_once(".py(")?;
    let (line, func) = rest.split_once("): ")?;
    Some(RawFrame {
        path: name.get(..path.len() + 3)?,
        line: line.parse().ok()?,
        func,
    })
}

/// Source files read so far (None: not readable here) and the frames
/// resolved, by (raw frame, op).
#[derive(Default)]
pub(crate) struct Sources {
    /// A frame's path as written -> its real path (None: not here).
    real: HashMap<String, Option<String>>,
    files: HashMap<String, Option<Vec<String>>>,
    resolved: HashMap<(String, Option<String>), Option<Vec<u32>>>,
}

impl Sources {
    /// The statement lines in `raw`'s function that can make a call of
    /// `op` (None: no source, or nothing in it matches).
    pub(crate) fn statements(&mut self, raw: &str, op: Option<&str>) -> Option<Vec<u32>> {
        let key = (raw.to_string(), op.map(str::to_string));
        if let Some(hit) = self.resolved.get(&key) {
            return hit.clone();
        }
        if self.resolved.len() >= MAX_LOOKUPS {
            return None;
        }
        let found = parse_frame(raw).and_then(|f| {
            let lines = self.file(f.path)?;
            let found = statement_lines(lines, f.line, f.func, op);
            (!found.is_empty()).then_some(found)
        });
        self.resolved.insert(key, found.clone());
        found
    }

    fn file(&mut self, path: &str) -> Option<&Vec<String>> {
        if !self.real.contains_key(path) {
            if self.real.len() >= MAX_SOURCE_FILES * 4 {
                return None;
            }
            let real = std::fs::canonicalize(path)
                .ok()
                .map(|p| p.to_string_lossy().into_owned());
            self.real.insert(path.to_string(), real);
        }
        let key = self.real.get(path)?.clone()?;
        if !self.files.contains_key(&key) {
            if self.files.len() >= MAX_SOURCE_FILES {
                return None;
            }
            let lines = read_source(std::path::Path::new(&key));
            self.files.insert(key.clone(), lines);
        }
        self.files.get(&key)?.as_ref()
    }
}

/// A regular file within the size bound, as lines (invalid UTF-8 replaced).
/// Read only as far as the bound: a file's length in its metadata is not
/// trusted (procfs files say 0 and hold gigabytes).
fn read_source(path: &std::path::Path) -> Option<Vec<String>> {
    use std::io::Read;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SOURCE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return None;
    }
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// Lines (1-based) of the statements in the function `func` starting at
/// `first` (its `def`, or a decorator above it) that can make a call of
/// `op`; empty when that line does not start `func` here.
pub(crate) fn statement_lines(
    lines: &[String],
    first: u32,
    func: &str,
    op: Option<&str>,
) -> Vec<u32> {
    let Some((def, end)) = function_body(lines, first, func) else {
        return Vec::new();
    };
    let body = &lines[def + 1..end];
    let masks = mask_names(body);
    let patterns = patterns(op);
    let mut out = Vec::new();
    for (i, line) in body.iter().enumerate() {
        let code = code_of(line);
        let hit = patterns.iter().any(|p| code.contains(p))
            || (indexes_by_mask(op) && masks.iter().any(|m| indexed_by(code, m)));
        if hit {
            out.push((def + 2 + i) as u32);
            if out.len() == MAX_STATEMENTS {
                break;
            }
        }
    }
    out
}

/// The `def` line's index and the end (exclusive) of its body: the lines
/// indented deeper than the `def`, blank and comment lines included.
fn function_body(lines: &[String], first: u32, func: &str) -> Option<(usize, usize)> {
    let start = (first as usize).checked_sub(1)?;
    // A decorated function's first line is its first decorator.
    let def = (start..lines.len().min(start + 32)).find(|&i| {
        let t = lines[i].trim_start();
        !t.starts_with('@')
    })?;
    let text = lines[def].trim_start();
    let head = text
        .strip_prefix("async ")
        .unwrap_or(text)
        .strip_prefix("def ")?;
    if !head.trim_start().starts_with(func)
        || !head[head.find(func)? + func.len()..]
            .trim_start()
            .starts_with('(')
    {
        return None;
    }
    let indent = indent_of(&lines[def]);
    // A body past `MAX_BODY_LINES` is not searched at all: its statement
    // could lie beyond what is read.
    let last = lines.len().min(def + 1 + MAX_BODY_LINES);
    let end = (def + 1..last).find(|&i| {
        let t = lines[i].trim();
        !t.is_empty() && !t.starts_with('#') && indent_of(&lines[i]) <= indent
    });
    match end {
        Some(end) => Some((def, end)),
        None if last == lines.len() => Some((def, last)),
        None => None,
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A line without its comment (a `#` outside quotes ends the code).
fn code_of(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

/// What a statement making a call of `op` looks like in Python.
fn patterns(op: Option<&str>) -> Vec<&'static str> {
    match op.map(|o| o.strip_prefix("aten::").unwrap_or(o)) {
        Some("item") => vec![".item()"],
        Some("_local_scalar_dense" | "is_nonzero") => vec![
            ".item()",
            ".tolist()",
            "float(",
            "int(",
            "bool(",
            "if ",
            "while ",
            "assert ",
        ],
        Some("to" | "_to_copy" | "copy_" | "cpu" | "cuda" | "_copy_from") => vec![
            ".cpu()",
            ".cuda(",
            ".to(",
            ".tolist()",
            ".numpy()",
            "copy_(",
            "print(",
        ],
        Some("nonzero" | "nonzero_static" | "argwhere") => {
            vec!["nonzero(", "argwhere(", "torch.where("]
        }
        Some("masked_select") => vec!["masked_select("],
        Some("unique" | "_unique2" | "unique_consecutive") => vec!["unique("],
        Some("repeat_interleave") => vec!["repeat_interleave("],
        Some("index" | "index_put_" | "index_put") => vec!["masked_select("],
        None => vec!["synchronize("],
        Some(_) => Vec::new(),
    }
}

/// Ops a boolean-mask index makes.
fn indexes_by_mask(op: Option<&str>) -> bool {
    matches!(
        op.map(|o| o.strip_prefix("aten::").unwrap_or(o)),
        Some("index" | "index_put_" | "index_put" | "nonzero")
    )
}

/// Names the body assigns a comparison to (`keep = x.abs() > t`): masks.
fn mask_names(body: &[String]) -> Vec<String> {
    const COMPARISONS: [&str; 8] = [
        " > ", " < ", " >= ", " <= ", " == ", " != ", ".isnan(", ".isinf(",
    ];
    body.iter()
        .filter_map(|l| {
            let code = code_of(l).trim();
            let (lhs, rhs) = code.split_once(" = ")?;
            let lhs = lhs.trim();
            let name_ok =
                !lhs.is_empty() && lhs.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            (name_ok
                && (COMPARISONS.iter().any(|c| rhs.contains(c))
                    || rhs.trim_start().starts_with('~')))
            .then(|| lhs.to_string())
        })
        .collect()
}

/// `code` indexes something by `mask` (`x[mask]`, `x[mask, :]`, `x[~mask]`).
fn indexed_by(code: &str, mask: &str) -> bool {
    ["[", "[~"].iter().any(|open| {
        let pat = format!("{open}{mask}");
        code.match_indices(&pat)
            .any(|(i, _)| matches!(code[i + pat.len()..].chars().next(), Some(']' | ',' | ' ')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    const MODEL: &str = r#"import torch
class M(torch.nn.Module):
    @torch.no_grad()
    def forward(self, x):
        # x.item() in a comment is no call
        y = self.a(x)
        s = y.abs().max().item()
        keep = y > 0
        z = y[keep]
        print("loss", z.sum().cpu())
        return z

def step(model, x):
    torch.cuda.synchronize()
    return model(x)
"#;

    #[test]
    fn each_op_finds_its_statement_in_the_named_function() {
        let lines = src(MODEL);
        // The frame's line is the decorator's (co_firstlineno).
        assert_eq!(
            statement_lines(&lines, 3, "forward", Some("aten::item")),
            [7]
        );
        assert_eq!(
            statement_lines(&lines, 3, "forward", Some("aten::index")),
            [9]
        );
        assert_eq!(
            statement_lines(&lines, 3, "forward", Some("aten::to")),
            [10]
        );
        assert_eq!(statement_lines(&lines, 13, "step", None), [14]);
        // Nothing in the body matches: no statement.
        assert!(statement_lines(&lines, 13, "step", Some("aten::item")).is_empty());
    }

    #[test]
    fn a_line_that_does_not_start_the_function_is_not_trusted() {
        let lines = src(MODEL);
        // Another file of the same name: its line 4 is not `def step`.
        assert!(statement_lines(&lines, 4, "step", None).is_empty());
        assert!(statement_lines(&lines, 400, "forward", Some("aten::item")).is_empty());
        assert!(statement_lines(&lines, 0, "forward", Some("aten::item")).is_empty());
        // `def forward_all` is not `forward`.
        let other = src("def forward_all(x):\n    return x.item()\n");
        assert!(statement_lines(&other, 1, "forward", Some("aten::item")).is_empty());
    }

    #[test]
    fn a_body_past_the_bound_is_not_searched() {
        let mut text = String::from("def f(x):\n");
        text.push_str(&"\n".repeat(MAX_BODY_LINES + 5));
        text.push_str("    return x.item()\n");
        assert!(statement_lines(&src(&text), 1, "f", Some("aten::item")).is_empty());
        let near = format!("def f(x):\n{}    return x.item()\n", "\n".repeat(10));
        assert_eq!(
            statement_lines(&src(&near), 1, "f", Some("aten::item")),
            [12]
        );
    }

    #[test]
    fn a_file_longer_than_its_metadata_says_is_read_only_to_the_bound() {
        // procfs files report a length of 0.
        let big = std::path::Path::new("/proc/self/pagemap");
        if big.exists() {
            assert!(read_source(big).is_none());
        }
    }

    #[test]
    fn frames_are_taken_apart_and_sources_read_once() {
        let f = parse_frame("/w/train.py(34): step").unwrap();
        assert_eq!((f.path, f.line, f.func), ("/w/train.py", 34, "step"));
        assert!(parse_frame("nn.Module: Linear_0").is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.py");
        std::fs::write(&path, MODEL).unwrap();
        let raw = format!("{}(3): forward", path.display());
        let mut s = Sources::default();
        assert_eq!(s.statements(&raw, Some("aten::item")), Some(vec![7]));
        // Read once: the answer stands after the file is gone.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(s.statements(&raw, Some("aten::item")), Some(vec![7]));
        assert_eq!(s.statements(&raw, Some("aten::index")), Some(vec![9]));
        assert_eq!(s.statements("/nonexistent/x.py(3): forward", None), None);
    }
}
