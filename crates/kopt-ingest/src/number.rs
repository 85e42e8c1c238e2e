//! Numbers as Nsight Compute prints them: thousands separators (`1,024`),
//! locale decimal commas (`0,5`, `1.234,5`), `n/a`, and empty cells.

/// How a file writes its numbers; detected once per file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberStyle {
    /// `1,234.5`: comma groups thousands, dot is the decimal point (ncu's default).
    DotDecimal,
    /// `1.234,5` or `1 234,5`: the decimal point is a comma.
    CommaDecimal,
}

/// Result of reading one cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    Value(f64),
    /// `n/a`, `-`, or an empty cell: the metric was not collected for this launch.
    Missing,
    /// Not a number at all.
    Invalid,
}

fn is_missing(s: &str) -> bool {
    s.is_empty() || s.eq_ignore_ascii_case("n/a") || s == "-" || s.eq_ignore_ascii_case("nan")
}

/// The style a single cell implies, when it can only be read one way.
pub fn vote(raw: &str) -> Option<NumberStyle> {
    let s = raw.trim();
    if is_missing(s) || !s.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b',' | b'.' | b'-' | b'+' | b' '))
    {
        return None;
    }
    match (s.rfind(','), s.rfind('.')) {
        (Some(c), Some(d)) if c > d => Some(NumberStyle::CommaDecimal),
        (Some(_), Some(_)) => Some(NumberStyle::DotDecimal),
        // `1,024` reads either way; `0,5` or `12,3456` only as a decimal comma.
        (Some(_), None) => {
            (!s.split(',').skip(1).all(|g| g.len() == 3)).then_some(NumberStyle::CommaDecimal)
        }
        // `1.234.567` only groups thousands; `12.5` is a decimal point.
        (None, Some(_)) if s.matches('.').count() > 1 => Some(NumberStyle::CommaDecimal),
        (None, Some(_)) => Some(NumberStyle::DotDecimal),
        (None, None) => None,
    }
}

/// Vote on the style from sample cells: cells that can only be read one way decide.
pub fn detect_style<'a>(cells: impl IntoIterator<Item = &'a str>) -> NumberStyle {
    let (mut comma_votes, mut dot_votes) = (0u32, 0u32);
    for cell in cells {
        match vote(cell) {
            Some(NumberStyle::CommaDecimal) => comma_votes += 1,
            Some(NumberStyle::DotDecimal) => dot_votes += 1,
            None => {}
        }
    }
    if comma_votes > dot_votes {
        NumberStyle::CommaDecimal
    } else {
        NumberStyle::DotDecimal
    }
}

/// Parse one cell in the given style, without allocating for the common case.
pub fn parse_cell(raw: &str, style: NumberStyle) -> Cell {
    let s = raw.trim();
    if is_missing(s) {
        return Cell::Missing;
    }
    let (group, decimal) = match style {
        NumberStyle::DotDecimal => (',', '.'),
        NumberStyle::CommaDecimal => ('.', ','),
    };
    if !grouped_well(s, group, decimal) {
        // `3.168,5` in a file that groups with commas, `3,16,8`, `,3168`:
        // read as the file's style they would be another number.
        return Cell::Invalid;
    }
    let needs_rewrite =
        s.contains(group) || s.contains(' ') || s.contains('\u{a0}') || decimal != '.';
    let parsed = if needs_rewrite {
        let cleaned: String = s
            .chars()
            .filter(|&c| c != group && c != ' ' && c != '\u{a0}')
            .map(|c| if c == decimal { '.' } else { c })
            .collect();
        cleaned.parse::<f64>()
    } else {
        s.parse::<f64>()
    };
    match parsed {
        Ok(v) if v.is_finite() => Cell::Value(v),
        Ok(_) => Cell::Missing,
        Err(_) => Cell::Invalid,
    }
}

/// Thousands groups as the style writes them: only before the decimal
/// point, the first of one to three digits, every other of three.
fn grouped_well(s: &str, group: char, decimal: char) -> bool {
    let whole = match s.find(decimal) {
        Some(i) if s[i + decimal.len_utf8()..].contains(group) => return false,
        Some(i) => &s[..i],
        None => s,
    };
    if !whole.contains(group) {
        return true;
    }
    let digits = whole.trim_start_matches(['-', '+']);
    let mut groups = digits.split(group);
    let first = groups.next().unwrap_or("");
    (1..=3).contains(&first.len()) && groups.all(|g| g.len() == 3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ncu_default_style() {
        let st = NumberStyle::DotDecimal;
        assert_eq!(parse_cell("1,024", st), Cell::Value(1024.0));
        assert_eq!(parse_cell("6,141,785.60", st), Cell::Value(6_141_785.6));
        assert_eq!(parse_cell("0.10", st), Cell::Value(0.1));
        assert_eq!(parse_cell("n/a", st), Cell::Missing);
        assert_eq!(parse_cell("", st), Cell::Missing);
        assert_eq!(parse_cell("PolicySpread", st), Cell::Invalid);
        assert_eq!(parse_cell("4.705e-05", st), Cell::Value(4.705e-05));
    }

    #[test]
    fn a_cell_grouped_against_its_files_style_is_not_a_number() {
        // Round seven: `3.168,5` in a dot-decimal file read as 3.1685.
        for bad in ["3.168,5", "3,16,8", ",3168", "1,2345.5"] {
            assert_eq!(
                parse_cell(bad, NumberStyle::DotDecimal),
                Cell::Invalid,
                "{bad}"
            );
        }
        assert_eq!(
            parse_cell("12,5", NumberStyle::CommaDecimal),
            Cell::Value(12.5)
        );
        assert_eq!(
            parse_cell("1,234,567.5", NumberStyle::DotDecimal),
            Cell::Value(1234567.5)
        );
        assert_eq!(
            parse_cell("-1,024", NumberStyle::DotDecimal),
            Cell::Value(-1024.0)
        );
        assert_eq!(
            parse_cell("1.234,5", NumberStyle::CommaDecimal),
            Cell::Value(1234.5)
        );
        assert_eq!(
            parse_cell("1,5,0", NumberStyle::CommaDecimal),
            Cell::Invalid
        );
    }

    #[test]
    fn comma_decimal_style() {
        let st = NumberStyle::CommaDecimal;
        assert_eq!(parse_cell("0,5", st), Cell::Value(0.5));
        assert_eq!(parse_cell("1.234.567,25", st), Cell::Value(1_234_567.25));
        assert_eq!(parse_cell("1 234,5", st), Cell::Value(1234.5));
    }

    #[test]
    fn detection() {
        assert_eq!(
            detect_style(["1,024", "0.10", "n/a"]),
            NumberStyle::DotDecimal
        );
        assert_eq!(detect_style(["1,024", "3,168"]), NumberStyle::DotDecimal);
        assert_eq!(
            detect_style(["0,10", "38,79", "1.024"]),
            NumberStyle::CommaDecimal
        );
        assert_eq!(detect_style(["1.980.000"]), NumberStyle::CommaDecimal);
        assert_eq!(
            detect_style(["(256, 1, 1)", "abc"]),
            NumberStyle::DotDecimal
        );
    }

    proptest! {
        #[test]
        fn thousands_grouping_round_trips(v in 0u64..10_000_000_000u64, frac in 0u32..100) {
            let int = v.to_string();
            let mut grouped = String::new();
            for (i, ch) in int.chars().enumerate() {
                if i > 0 && (int.len() - i) % 3 == 0 { grouped.push(','); }
                grouped.push(ch);
            }
            let dot = format!("{grouped}.{frac:02}");
            let expected = v as f64 + frac as f64 / 100.0;
            prop_assert_eq!(parse_cell(&dot, NumberStyle::DotDecimal), Cell::Value(expected));
            let comma = format!("{}.{:02}", grouped, frac).replace(',', "_").replace('.', ",").replace('_', ".");
            prop_assert_eq!(parse_cell(&comma, NumberStyle::CommaDecimal), Cell::Value(expected));
        }

        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse_cell(&s, NumberStyle::DotDecimal);
            let _ = parse_cell(&s, NumberStyle::CommaDecimal);
            let _ = detect_style([s.as_str()]);
        }
    }
}
