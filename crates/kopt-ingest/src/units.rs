//! Unit names as Nsight Compute prints them, with and without
//! `--print-units base`, mapped to kopt's base units (ns, bytes, bytes/s, Hz).
//! ncu's byte prefixes are decimal (Kbyte = 1000 bytes).

/// Factor that turns a value in `unit` into kopt's base unit for that dimension.
/// Dimensionless units (`%`, `inst`, `block`, `sector`, ...) and unknown ones give 1.
pub fn to_base_factor(unit: &str) -> f64 {
    let u = unit.trim();
    let lower = u.to_ascii_lowercase();
    // Rates first: "Gbyte/second", "GB/s", "byte/s".
    if let Some((num, den)) = lower.split_once('/') {
        let per = match den {
            "second" | "s" => 1.0,
            "msecond" | "ms" => 1e3,
            "usecond" | "us" => 1e6,
            "nsecond" | "ns" => 1e9,
            // "byte/block", "register/thread": per-item counts, not rates.
            _ => return byte_factor(num).unwrap_or(1.0),
        };
        let amount = byte_factor(num)
            .or_else(|| (num == "cycle" || num == "cycles").then_some(1.0))
            .unwrap_or(1.0);
        return amount * per;
    }
    if let Some(f) = time_factor(&lower) {
        return f;
    }
    if let Some(f) = byte_factor(&lower) {
        return f;
    }
    match lower.as_str() {
        "hz" => 1.0,
        "khz" => 1e3,
        "mhz" => 1e6,
        "ghz" => 1e9,
        _ => 1.0,
    }
}

/// Whether kopt knows `unit`: a time, a size, a rate or a clock it scales,
/// a count ncu names (`inst`, `sector`, `warp`, ...), or a ratio of those
/// (`byte/sector`, `%/register`). [`to_base_factor`] reads an unknown unit
/// as the base unit, so its values are only taken where this holds; a
/// `furlong` column would otherwise read as nanoseconds or bytes.
pub fn is_known(unit: &str) -> bool {
    let lower = unit.trim().to_ascii_lowercase();
    let part = |u: &str| {
        const COUNTS: &[&str] = &[
            "",
            "%",
            "inst",
            "block",
            "sm",
            "branches",
            "cycle",
            "cycles",
            "pass",
            "register",
            "registers",
            "thread",
            "threads",
            "request",
            "requests",
            "sample",
            "samples",
            "sector",
            "sectors",
            "warp",
            "warps",
            "cluster",
            "clusters",
            "wavefront",
            "wavefronts",
            "instance",
            "instances",
            "ratio",
            "count",
            "x",
        ];
        COUNTS.contains(&u)
            || time_factor(u).is_some()
            || byte_factor(u).is_some()
            || matches!(u, "hz" | "khz" | "mhz" | "ghz")
    };
    match lower.split_once('/') {
        Some((num, den)) => part(num) && part(den),
        None => part(&lower),
    }
}

/// Nanoseconds per unit.
fn time_factor(u: &str) -> Option<f64> {
    Some(match u {
        "ns" | "nsecond" | "nseconds" => 1.0,
        "us" | "usecond" | "useconds" | "µs" => 1e3,
        "ms" | "msecond" | "mseconds" => 1e6,
        "s" | "second" | "seconds" => 1e9,
        _ => return None,
    })
}

/// Bytes per unit (decimal prefixes, as ncu uses; binary ones where spelled so).
fn byte_factor(u: &str) -> Option<f64> {
    Some(match u {
        "byte" | "bytes" | "b" => 1.0,
        "kbyte" | "kb" => 1e3,
        "mbyte" | "mb" => 1e6,
        "gbyte" | "gb" => 1e9,
        "tbyte" | "tb" => 1e12,
        "kibyte" | "kib" => 1024.0,
        "mibyte" | "mib" => 1024.0 * 1024.0,
        "gibyte" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::to_base_factor as f;

    #[test]
    fn times_to_ns() {
        assert_eq!(f("ns"), 1.0);
        assert_eq!(f("nsecond"), 1.0);
        assert_eq!(f("usecond"), 1e3);
        assert_eq!(f("us"), 1e3);
        assert_eq!(f("ms"), 1e6);
        assert_eq!(f("msecond"), 1e6);
    }

    #[test]
    fn bytes_and_rates() {
        assert_eq!(f("byte"), 1.0);
        assert_eq!(f("Kbyte"), 1e3);
        assert_eq!(f("Mbyte"), 1e6);
        assert_eq!(f("Gbyte"), 1e9);
        assert_eq!(f("Gbyte/second"), 1e9);
        assert_eq!(f("Tbyte/s"), 1e12);
        assert_eq!(f("byte/second"), 1.0);
        assert_eq!(f("Kbyte/block"), 1e3);
        assert_eq!(f("byte/block"), 1.0);
    }

    #[test]
    fn units_kopt_does_not_know_are_told() {
        use super::is_known;
        for u in [
            "",
            "%",
            "nsecond",
            "Gbyte/second",
            "byte/sector",
            "%/register",
            "Ghz",
            "inst",
        ] {
            assert!(is_known(u), "{u}");
        }
        for u in ["furlong", "parsec/second", "byte/fortnight", "µfoo"] {
            assert!(!is_known(u), "{u}");
        }
    }

    #[test]
    fn clocks_and_dimensionless() {
        assert_eq!(f("hz"), 1.0);
        assert_eq!(f("Ghz"), 1e9);
        assert_eq!(f("cycle/nsecond"), 1e9);
        assert_eq!(f("cycle/second"), 1.0);
        assert_eq!(f("%"), 1.0);
        assert_eq!(f("inst"), 1.0);
        assert_eq!(f("register/thread"), 1.0);
        assert_eq!(f(""), 1.0);
    }
}
