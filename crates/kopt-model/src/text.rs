//! Text from input quoted in a message: on one line (control characters
//! escaped) and cut to a length, so a broken cell or a hostile name can
//! neither split an error over lines nor flood it.

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

/// The longest run of non-space characters an error line keeps whole.
const WORD_MAX_CHARS: usize = 200;

/// An error as kopt prints it: [`one_line`] of [`cut_long_words`], so a
/// 100 KB path or value given on the command line is cut to its head and
/// tail and the words around it, which say what is wrong, stay in the line.
pub fn error_line(s: &str) -> String {
    one_line(&cut_long_words(s))
}

/// `s` with every run of non-space characters longer than
/// `WORD_MAX_CHARS` cut to its head, its size and its tail; line breaks
/// and the rest kept (an MCP error's text).
pub fn cut_long_words(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(4 * MESSAGE_MAX_CHARS));
    for piece in s.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let n = word.chars().count();
        if n <= WORD_MAX_CHARS {
            out.push_str(piece);
            continue;
        }
        out.extend(word.chars().take(WORD_MAX_CHARS / 2));
        out.push_str(&format!("…[{} bytes]…", word.len()));
        out.extend(word.chars().skip(n - WORD_MAX_CHARS / 4));
        out.push_str(&piece[word.len()..]);
    }
    out
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
