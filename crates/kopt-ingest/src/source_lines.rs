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
/// All the source files read for one trace hold at most this much: a file
/// reached by many names (hard links) or many files of the bound each
/// still cost memory once.
const MAX_TOTAL_SOURCE_BYTES: u64 = 16 << 20;
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

/// A source file's text, with where each line starts: one buffer, not a
/// string a line (a 2 MiB file of one-character lines was 56 MB as those).
pub(crate) struct SourceText {
    text: String,
    starts: Vec<u32>,
}

impl SourceText {
    pub(crate) fn new(text: String) -> SourceText {
        let mut starts = vec![0u32];
        starts.extend(
            text.match_indices('\n')
                .map(|(i, _)| (i + 1) as u32)
                .filter(|&i| (i as usize) < text.len()),
        );
        if text.is_empty() {
            starts.clear();
        }
        SourceText { text, starts }
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    /// Line `i` (0-based) without its line break.
    pub(crate) fn line(&self, i: usize) -> &str {
        let start = self.starts[i] as usize;
        let end = self
            .starts
            .get(i + 1)
            .map_or(self.text.len(), |&e| e as usize);
        let l = &self.text[start..end];
        let l = l.strip_suffix('\n').unwrap_or(l);
        l.strip_suffix('\r').unwrap_or(l)
    }
}

/// Source files read so far (None: not readable here) and the frames
/// resolved, by (raw frame, op).
#[derive(Default)]
pub(crate) struct Sources {
    /// A frame's path as written -> the file's identity (device, inode;
    /// None: not here): names and links of one file read it once.
    real: HashMap<String, Option<(u64, u64)>>,
    files: HashMap<(u64, u64), Option<SourceText>>,
    /// Bytes of source read so far (`MAX_TOTAL_SOURCE_BYTES`).
    bytes: u64,
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

    fn file(&mut self, path: &str) -> Option<&SourceText> {
        use std::os::unix::fs::MetadataExt;
        if !self.real.contains_key(path) {
            if self.real.len() >= MAX_SOURCE_FILES * 4 {
                return None;
            }
            let id = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
            self.real.insert(path.to_string(), id);
        }
        let key = (*self.real.get(path)?)?;
        if !self.files.contains_key(&key) {
            if self.files.len() >= MAX_SOURCE_FILES {
                return None;
            }
            let left = MAX_TOTAL_SOURCE_BYTES.saturating_sub(self.bytes);
            let text = read_source(std::path::Path::new(path), left);
            self.bytes += text.as_ref().map_or(0, |t| t.text.len() as u64);
            self.files.insert(key, text);
        }
        self.files.get(&key)?.as_ref()
    }
}

/// A regular file within the size bound (and `left`, what the trace's
/// sources may still take), as text (invalid UTF-8 replaced). Read only as
/// far as the bound: a file's length in its metadata is not trusted
/// (procfs files say 0 and hold gigabytes).
fn read_source(path: &std::path::Path, left: u64) -> Option<SourceText> {
    use std::io::Read;
    // The folders a server lets its client read bound these reads too: a
    // trace names any path it likes.
    crate::confine::check(path, "source").ok()?;
    let bound = MAX_SOURCE_BYTES.min(left);
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > bound {
        return None;
    }
    let mut bytes = Vec::new();
    let file = std::fs::File::open(path).ok()?;
    crate::confine::check_opened(&file, "source").ok()?;
    file.take(bound + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > bound {
        return None;
    }
    Some(SourceText::new(String::from_utf8(bytes).unwrap_or_else(
        |e| String::from_utf8_lossy(e.as_bytes()).into_owned(),
    )))
}

/// Lines (1-based) of the statements in the function `func` starting at
/// `first` (its `def`, or a decorator above it) that can make a call of
/// `op`; empty when that line does not start `func` here.
pub(crate) fn statement_lines(
    lines: &SourceText,
    first: u32,
    func: &str,
    op: Option<&str>,
) -> Vec<u32> {
    let Some((def, end)) = function_body(lines, first, func) else {
        return Vec::new();
    };
    let body = def + 1..end;
    // Each line is scanned once for its index expressions, whatever the
    // number of masks (a body assigning 2,000 comparisons made the search
    // quadratic: 281 s for one trace).
    let masks = if indexes_by_mask(op) {
        mask_names(body.clone().map(|i| lines.line(i)))
    } else {
        std::collections::HashSet::new()
    };
    let patterns = patterns(op);
    let mut out = Vec::new();
    for i in body {
        let code = code_of(lines.line(i));
        let hit = patterns.iter().any(|p| code.contains(p))
            || (!masks.is_empty() && indexed_by_any(code, &masks));
        if hit {
            out.push((i + 1) as u32);
            if out.len() == MAX_STATEMENTS {
                break;
            }
        }
    }
    out
}

/// The `def` line's index and the end (exclusive) of its body: the lines
/// indented deeper than the `def`, blank and comment lines included.
fn function_body(lines: &SourceText, first: u32, func: &str) -> Option<(usize, usize)> {
    let start = (first as usize).checked_sub(1)?;
    // A decorated function's first line is its first decorator.
    let def = (start..lines.len().min(start + 32)).find(|&i| {
        let t = lines.line(i).trim_start();
        !t.starts_with('@')
    })?;
    let text = lines.line(def).trim_start();
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
    let indent = indent_of(lines.line(def));
    // A body past `MAX_BODY_LINES` is not searched at all: its statement
    // could lie beyond what is read.
    let last = lines.len().min(def + 1 + MAX_BODY_LINES);
    let end = (def + 1..last).find(|&i| {
        let t = lines.line(i).trim();
        !t.is_empty() && !t.starts_with('#') && indent_of(lines.line(i)) <= indent
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
fn mask_names<'a>(body: impl Iterator<Item = &'a str>) -> std::collections::HashSet<&'a str> {
    const COMPARISONS: [&str; 8] = [
        " > ", " < ", " >= ", " <= ", " == ", " != ", ".isnan(", ".isinf(",
    ];
    body.filter_map(|l| {
        let code = code_of(l).trim();
        let (lhs, rhs) = code.split_once(" = ")?;
        let lhs = lhs.trim();
        let name_ok = !lhs.is_empty() && lhs.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        (name_ok
            && (COMPARISONS.iter().any(|c| rhs.contains(c)) || rhs.trim_start().starts_with('~')))
        .then_some(lhs)
    })
    .collect()
}

/// `code` indexes something by one of `masks` (`x[mask]`, `x[mask, :]`,
/// `x[~mask]`): each `[` looked at once.
fn indexed_by_any(code: &str, masks: &std::collections::HashSet<&str>) -> bool {
    code.match_indices('[').any(|(i, _)| {
        let rest = &code[i + 1..];
        let rest = rest.strip_prefix('~').unwrap_or(rest);
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        name_len > 0
            && matches!(rest[name_len..].chars().next(), Some(']' | ',' | ' '))
            && masks.contains(&rest[..name_len])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> SourceText {
        SourceText::new(text.to_string())
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
            assert!(read_source(big, MAX_TOTAL_SOURCE_BYTES).is_none());
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

    #[test]
    fn links_to_one_file_read_it_once_and_all_sources_share_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.py");
        std::fs::write(&path, MODEL).unwrap();
        let mut s = Sources::default();
        for k in 0..3 {
            let link = dir.path().join(format!("link{k}.py"));
            std::fs::hard_link(&path, &link).unwrap();
            let raw = format!("{}(3): forward", link.display());
            assert_eq!(s.statements(&raw, Some("aten::item")), Some(vec![7]));
        }
        assert_eq!(s.files.len(), 1);
        // Files of the per-file bound, one after another: the trace's
        // sources stop at the total bound.
        let body = format!(
            "def f(x):\n    return x.item()\nx = 1\n{}",
            "#\n".repeat((1 << 20) - 64)
        );
        let mut read = 0;
        for k in 0..12 {
            let p = dir.path().join(format!("big{k}.py"));
            std::fs::write(&p, &body).unwrap();
            if s.statements(&format!("{}(1): f", p.display()), Some("aten::item"))
                .is_some()
            {
                read += 1;
            }
        }
        assert!(s.bytes <= MAX_TOTAL_SOURCE_BYTES, "{}", s.bytes);
        assert!((7..12).contains(&read), "{read}");
    }

    #[test]
    fn many_masks_are_matched_by_name_in_one_pass() {
        let mut text = String::from("def f(x):\n");
        for k in 0..1_500 {
            text.push_str(&format!("    m{k} = x > {k}\n"));
        }
        text.push_str("    y = x[~m1499, :]\n    z = x[m7]\n    w = x[m7x]\n");
        let lines = src(&text);
        assert_eq!(
            statement_lines(&lines, 1, "f", Some("aten::index")),
            [1502, 1503]
        );
        assert!(indexed_by_any("a[keep]", &["keep"].into()));
        assert!(!indexed_by_any("a[keeps]", &["keep"].into()));
        assert!(!indexed_by_any("a[", &["keep"].into()));
    }

    #[test]
    fn lines_are_cut_from_one_buffer() {
        let t = SourceText::new("a\r\nbb\n\nc".to_string());
        assert_eq!(t.len(), 4);
        assert_eq!(
            [t.line(0), t.line(1), t.line(2), t.line(3)],
            ["a", "bb", "", "c"]
        );
        assert_eq!(SourceText::new(String::new()).len(), 0);
        assert_eq!(SourceText::new("x\n".into()).len(), 1);
    }
}
