//! ARCHITECTURE.md's boundaries, checked on the source: processes start
//! only in kopt-collect (its one runner owns timeouts, process groups and
//! cancellation), no crate includes another crate's files, and the analysis
//! depends on nothing above the model.

use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Each crate's non-test source: its `src/` files, each cut at its first
/// `#[cfg(test)]` (unit tests sit at the end of their file).
fn shipped_sources() -> Vec<(String, PathBuf, String)> {
    let mut out = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let name = krate.file_name().to_string_lossy().into_owned();
        let mut files = Vec::new();
        rust_files(&krate.path().join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let shipped = match text.find("#[cfg(test)]") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            out.push((name.clone(), f, shipped));
        }
    }
    assert!(out.len() > 50, "found only {} source files", out.len());
    out
}

#[test]
fn only_kopt_collect_starts_processes() {
    let offenders: Vec<String> = shipped_sources()
        .into_iter()
        .filter(|(krate, _, _)| krate != "kopt-collect")
        .filter(|(_, _, text)| text.contains("process::Command") || text.contains("Command::new("))
        .map(|(_, f, _)| f.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "processes started outside kopt_collect::runner: {offenders:?}"
    );
}

#[test]
fn no_crate_includes_another_crates_files() {
    let mut offenders = Vec::new();
    for (krate, file, text) in shipped_sources() {
        let crate_root = crates_dir().join(&krate).canonicalize().unwrap();
        for (i, _) in text.match_indices("include_") {
            let rest = &text[i..];
            let macro_len = ["include_str!(\"", "include_bytes!(\""]
                .iter()
                .find(|m| rest.starts_with(**m))
                .map(|m| m.len());
            let Some(len) = macro_len else { continue };
            let Some(end) = rest[len..].find('"') else {
                continue;
            };
            let rel = &rest[len..len + end];
            let target = file.parent().unwrap().join(rel);
            let target = target.canonicalize().unwrap_or(target);
            if !target.starts_with(&crate_root) {
                offenders.push(format!("{}: {rel}", file.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "includes across crates: {offenders:?}"
    );
}

#[test]
fn the_analysis_depends_on_the_model_only() {
    let manifest = std::fs::read_to_string(crates_dir().join("kopt-analyze/Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|s| s.split("\n[").next())
        .unwrap();
    let kopt_deps: Vec<&str> = deps
        .lines()
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .filter(|n| n.starts_with("kopt"))
        .collect();
    assert_eq!(
        kopt_deps,
        ["kopt-model"],
        "kopt-analyze's kopt dependencies"
    );
}

fn peek(c: &[char], i: usize) -> char {
    c.get(i).copied().unwrap_or('\0')
}

/// A space in `out` for a character of a literal (a newline kept).
fn blank(out: &mut String, ch: char) {
    out.push(if ch == '\n' { '\n' } else { ' ' });
}

/// A string's or char's body from `c[i]` to its closing `close` (escapes
/// skipped), blanked into `out`; returns the index after it.
fn blank_quoted(c: &[char], mut i: usize, close: char, out: &mut String) -> usize {
    while i < c.len() {
        let ch = c[i];
        if ch == '\\' {
            blank(out, ch);
            blank(out, peek(c, i + 1));
            i += 2;
            continue;
        }
        blank(out, ch);
        i += 1;
        if ch == close {
            break;
        }
    }
    i
}

/// `text` with comments, string, byte-string, raw-string and char literals
/// blanked to spaces (newlines kept), so braces inside them are not counted
/// and line numbers stay true.
fn blank_literals_and_comments(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if peek(&c, i) == '/' && peek(&c, i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if peek(&c, i) == '/' && peek(&c, i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && peek(&c, i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && peek(&c, i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !ident_before
            && (peek(&c, i) == 'r' || (peek(&c, i) == 'b' && peek(&c, i + 1) == 'r'))
            && {
                let s = if peek(&c, i) == 'b' { 2 } else { 1 };
                let mut k = s;
                while peek(&c, i + k) == '#' {
                    k += 1;
                }
                peek(&c, i + k) == '"'
            }
        {
            // Raw string: r"..", r#".."#, br".."
            let s = if peek(&c, i) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while peek(&c, i + s + hashes) == '#' {
                hashes += 1;
            }
            let open = s + hashes + 1;
            for _ in 0..open {
                out.push(' ');
            }
            i += open;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|h| peek(&c, i + h) == '#') {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if peek(&c, i) == '"'
            || (peek(&c, i) == 'b' && peek(&c, i + 1) == '"' && !ident_before)
        {
            if peek(&c, i) == 'b' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i = blank_quoted(&c, i + 1, '"', &mut out);
        } else if peek(&c, i) == '\''
            && (peek(&c, i + 1) == '\\' || (peek(&c, i + 2) == '\'' && peek(&c, i + 1) != '\''))
        {
            // A char literal ('x', '\n', '\u{7b}'); a lifetime ('a) is left.
            out.push(' ');
            i = blank_quoted(&c, i + 1, '\'', &mut out);
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Byte index of the brace closing the one opened at `open`.
fn matching_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &ch) in b.iter().enumerate().skip(open) {
        match ch {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    b.len().saturating_sub(1)
}

/// `(first line, name, line count)` of every `fn` with a body in `code`
/// (already blanked), leaving out items under `#[cfg(test)]`.
fn function_lengths(code: &str) -> Vec<(usize, String, usize)> {
    let b = code.as_bytes();
    let line_of = |pos: usize| code[..pos].matches('\n').count() + 1;
    let is_ident = |ch: u8| ch.is_ascii_alphanumeric() || ch == b'_';
    // Spans under #[cfg(test)]: the next item, to its `;` or matching brace.
    let mut skipped: Vec<(usize, usize)> = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let from = at + "#[cfg(test)]".len();
        let next = b[from..].iter().position(|&ch| ch == b'{' || ch == b';');
        if let Some(n) = next {
            let end = if b[from + n] == b'{' {
                matching_brace(b, from + n)
            } else {
                from + n
            };
            skipped.push((at, end));
        }
    }
    let mut out = Vec::new();
    for (at, _) in code.match_indices("fn ") {
        if at > 0 && is_ident(b[at - 1]) || skipped.iter().any(|&(s, e)| at >= s && at <= e) {
            continue;
        }
        let name: String = code[at + 3..]
            .trim_start()
            .chars()
            .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
            .collect();
        if name.is_empty() {
            continue; // a `fn(..)` pointer type
        }
        // The body opens at the first `{` outside () and []; a `;` there
        // first means a declaration without a body.
        let mut depth = 0i32;
        let mut open = None;
        for (k, &ch) in b.iter().enumerate().skip(at) {
            match ch {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(k);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let close = matching_brace(b, open);
        let first = line_of(at);
        out.push((first, name, line_of(close) - first + 1));
    }
    out
}

#[test]
fn the_scanner_sees_through_literals_and_test_modules() {
    let code = blank_literals_and_comments(
        "fn a() {\n    let s = \"}}\"; // }\n    let c = '{';\n    let r = r#\"{\"#;\n}\n\
         fn b<'x>(v: &'x [u8; 4]) -> u8 {\n    /* { */ v[0]\n}\n\
         #[cfg(test)]\nmod tests {\n    fn hidden() {\n    }\n}\n",
    );
    let found = function_lengths(&code);
    assert_eq!(
        found,
        vec![(1, "a".to_string(), 5), (6, "b".to_string(), 3)]
    );
}

/// #40: no god functions. A function over 200 lines (150 in kopt-analyze,
/// where the timeline work lands next) is cut into named steps.
#[test]
fn no_function_is_too_long() {
    let mut offenders = Vec::new();
    for krate in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let name = krate.file_name().to_string_lossy().into_owned();
        let limit = if name == "kopt-analyze" { 150 } else { 200 };
        let mut files = Vec::new();
        rust_files(&krate.path().join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let code = blank_literals_and_comments(&text);
            for (line, func, len) in function_lengths(&code) {
                if len > limit {
                    offenders.push(format!(
                        "{}:{line}: {func} is {len} lines (limit {limit})",
                        f.strip_prefix(crates_dir()).unwrap_or(&f).display()
                    ));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "functions to cut into named steps:\n{}",
        offenders.join("\n")
    );
}
