//! Text from outside kopt (kernel and device names, file labels, command
//! lines, tensor names, anything read back from the history) made safe for
//! where it is shown. One policy per destination, and every renderer uses
//! these: terminal text, a Markdown table cell, HTML (and SVG) markup.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Text for a terminal, on one line: control characters (C0 such as ESC,
/// BEL, CR and line breaks, DEL, C1) and the Unicode bidirectional controls
/// that reorder what is shown are written as visible `\u{1b}` escapes, so a
/// name can neither drive the terminal nor forge a line of its own.
pub fn terminal(s: &str) -> Cow<'_, str> {
    escape_if(s, hidden)
}

/// [`terminal`] for a whole report: line breaks are kept, since renderers
/// write them; everything else `terminal` escapes is escaped here too (the
/// last guard, should a string have missed `terminal`).
pub fn terminal_lines(s: &str) -> Cow<'_, str> {
    escape_if(s, |c| c != '\n' && hidden(c))
}

/// A Markdown table cell (or list item): control characters escaped
/// ([`terminal`]), a pipe would end the cell, and kernel names hold `<` and
/// `>` that renderers take for HTML.
pub fn markdown_cell(s: &str) -> String {
    terminal(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
}

/// Text for HTML and SVG markup built by hand (the page template escapes
/// its own fields, but not inside markup it is given as safe).
///
/// Control characters (ESC, BEL, C1) and the bidirectional controls are
/// written as visible `\u{1b}` escapes, as on the terminal: a page written
/// to stdout must not drive the terminal it lands on. Line breaks and tabs
/// stay (markup text may hold them).
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c != '\n' && c != '\t' && hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A whole HTML document: whatever control characters reached it past
/// [`html`] (a template's own escaping keeps them) written visibly; line
/// breaks and tabs kept.
pub fn html_document(s: &str) -> Cow<'_, str> {
    escape_if(s, |c| c != '\n' && c != '\t' && hidden(c))
}

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

fn escape_if(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if escape(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_controls_visibly() {
        assert!(matches!(terminal("void k<int>(float*)"), Cow::Borrowed(_)));
        assert_eq!(terminal("a\u{1b}[31mb\u{7}c"), "a\\u{1b}[31mb\\u{7}c");
        assert_eq!(terminal("x\ny\u{9b}z\u{7f}"), "x\\u{a}y\\u{9b}z\\u{7f}");
        assert_eq!(terminal("ab\u{202e}cd"), "ab\\u{202e}cd");
        assert_eq!(terminal_lines("line\nnext\u{1b}"), "line\nnext\\u{1b}");
    }

    #[test]
    fn markdown_cell_keeps_the_table_whole() {
        assert_eq!(
            markdown_cell("k<a|b>&\u{1b}\n"),
            "k&lt;a\\|b&gt;&amp;\\u{1b}\\u{a}"
        );
    }

    #[test]
    fn html_writes_controls_visibly() {
        assert_eq!(html("k\u{1b}[2Jx\u{9b}y"), "k\\u{1b}[2Jx\\u{9b}y");
        assert_eq!(html("a\nb\tc"), "a\nb\tc");
        assert_eq!(
            html_document("<p>\u{1b}]0;t\u{7}</p>\n"),
            "<p>\\u{1b}]0;t\\u{7}</p>\n"
        );
    }

    #[test]
    fn html_escapes_markup() {
        assert_eq!(
            html("<script>a&b</script>\"'"),
            "&lt;script&gt;a&amp;b&lt;/script&gt;&quot;&#39;"
        );
    }
}
