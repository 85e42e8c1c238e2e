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
