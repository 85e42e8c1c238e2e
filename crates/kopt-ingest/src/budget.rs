//! What one input may cost: bytes after decompression, time and temporary
//! space in SQLite. Each budget has a default and an environment variable
//! that raises it; past it, a one-line error names the budget and the
//! variable.

/// A budget read from the environment: its variable, its default and the
/// most it accepts.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub var: &'static str,
    pub default: u64,
    /// What one unit is, for messages (`bytes`, `x`, `s`, `MiB`).
    pub unit: &'static str,
    /// The largest value the variable accepts: past it the arithmetic the
    /// budget feeds (bytes from MiB, steps from millions) or the memory it
    /// allows is no longer meaningful, so a larger setting is an error,
    /// not a silent "unlimited".
    pub max: u64,
}

impl Budget {
    /// The value in force: the variable when it holds a whole number from
    /// 1 to [`Budget::max`], else the default. Readers check it first with
    /// [`Budget::checked`]; this is for messages after that.
    pub fn get(&self) -> u64 {
        std::env::var(self.var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|v| (1..=self.max).contains(v))
            .unwrap_or(self.default)
    }

    /// The value in force, where a set variable that is not a whole number
    /// from 1 to [`Budget::max`] is an error naming it (a typo must not
    /// silently give the default).
    pub fn checked(&self) -> Result<u64, crate::IngestError> {
        let Ok(raw) = std::env::var(self.var) else {
            return Ok(self.default);
        };
        match raw.trim().parse::<u64>() {
            Ok(v) if (1..=self.max).contains(&v) => Ok(v),
            _ => Err(crate::IngestError::format(
                self.var,
                format!(
                    "\"{}\" is not a positive whole number of {} up to {} (unset, it is {})",
                    crate::echo(&raw),
                    self.unit,
                    self.max,
                    self.default
                ),
            )),
        }
    }

    /// How to go past the budget when what the input needs is not known
    /// (a stream stopped at the budget): four times the value in force,
    /// within [`Budget::max`], or that none can be set where it is there.
    pub fn how_to_raise(&self) -> String {
        self.how_to_raise_above(self.get())
    }

    /// [`Budget::how_to_raise`] for a limit that was `in_force` units (a
    /// budget that grows with the input, such as SQLite's memory, can be
    /// above the variable's value, and a suggestion below it would not
    /// help).
    pub fn how_to_raise_above(&self, in_force: u64) -> String {
        if in_force >= self.max {
            return format!(
                "no setting goes further: {} goes up to {} {}",
                self.var, self.max, self.unit
            );
        }
        format!(
            "try {}={} (the limit was {in_force} {}; how much more the input needs is not known)",
            self.var,
            in_force.saturating_mul(4).min(self.max),
            self.unit
        )
    }

    /// How to go past the budget for an input known to need `needed`
    /// units: the variable set to that, or that no setting can, where it is
    /// past [`Budget::max`].
    pub fn how_to_raise_to(&self, needed: u64) -> String {
        if needed > self.max {
            return format!(
                "no setting can take it: it needs {needed} {}, and {} goes up to {}",
                self.unit, self.var, self.max
            );
        }
        format!(
            "raise it with {}={needed} (now {} {})",
            self.var,
            self.get(),
            self.unit
        )
    }
}

/// The most kernel launches one ncu CSV may hold: each costs about 2.4 KB
/// once read (its metrics), and ncu replays a launch in seconds, so a real
/// capture stays far below this.
pub const NCU_MAX_LAUNCHES: Budget = Budget {
    var: "KOPT_NCU_MAX_LAUNCHES",
    default: 250_000,
    unit: "launches",
    max: 1_000_000_000,
};

/// The most GPU activities (kernels, copies, sets) one timeline may hold:
/// each becomes a launch record of about 1.7 KB once analysed, so the
/// default takes about 3.5 GB; past it the input is refused whole rather
/// than the process aborting on a failed allocation.
pub const TIMELINE_MAX_ACTIVITIES: Budget = Budget {
    var: "KOPT_TIMELINE_MAX_ACTIVITIES",
    default: 2_000_000,
    unit: "activities",
    max: 1_000_000_000,
};

/// An error when `t` holds more activities than
/// [`TIMELINE_MAX_ACTIVITIES`].
pub(crate) fn check_activities(
    t: &kopt_model::Timeline,
    path: &str,
) -> Result<(), crate::IngestError> {
    check_activity_count(t.activities.len(), path)
}

/// [`check_activities`] for `n` activities not built yet (an AMD kernel
/// trace's dispatches, checked before each becomes a launch record).
pub(crate) fn check_activity_count(n: usize, path: &str) -> Result<(), crate::IngestError> {
    let max = TIMELINE_MAX_ACTIVITIES;
    if n as u64 > max.checked()? {
        return Err(crate::IngestError::format(
            path,
            format!(
                "{n} GPU activities: more than the timeline budget of {}, not analysed; record fewer steps or sample (kopt trace --sample), or {}",
                max.get(),
                max.how_to_raise_to(n as u64)
            ),
        ));
    }
    Ok(())
}

/// The largest bare-run step file (`bare_steps.jsonl`) read, in bytes: a
/// line is about 60 bytes, and a bare run times a few thousand steps.
pub const BARE_STEPS_MAX_BYTES: Budget = Budget {
    var: "KOPT_BARE_STEPS_MAX_BYTES",
    default: 64 << 20,
    unit: "bytes",
    max: 1 << 40,
};

/// The most step, sync and launch records one bare-run step file may hold.
pub const BARE_STEPS_MAX_RECORDS: Budget = Budget {
    var: "KOPT_BARE_STEPS_MAX_RECORDS",
    default: 1_000_000,
    unit: "records",
    max: 1_000_000_000,
};

/// The most bytes of an uncompressed trace read into memory (a Kineto
/// JSON is read whole before it is parsed).
pub const TRACE_MAX_BYTES: Budget = Budget {
    var: "KOPT_TRACE_MAX_BYTES",
    default: 4 << 30,
    unit: "bytes",
    max: 1 << 40,
};

/// The most a gzipped input may decompress to, in bytes, whatever its size.
pub const GZIP_MAX_BYTES: Budget = Budget {
    var: "KOPT_GZIP_MAX_BYTES",
    default: 4 << 30,
    unit: "bytes",
    max: 1 << 40,
};

/// The most a gzipped input may decompress to, as a multiple of its
/// compressed size (profiler JSON compresses 5-30x; a bomb a thousandfold).
/// Inputs up to [`GZIP_RATIO_FLOOR_BYTES`] decompressed are always allowed.
/// With the floor, a bomb costs at most twice 16 MiB (the buffer doubling).
pub const GZIP_MAX_RATIO: Budget = Budget {
    var: "KOPT_GZIP_MAX_RATIO",
    default: 64,
    unit: "x",
    max: 1_000_000,
};

/// Decompressed bytes always allowed, whatever the ratio.
pub const GZIP_RATIO_FLOOR_BYTES: u64 = 16 << 20;

/// Seconds SQLite may spend on the queries of one rocpd database.
pub const SQLITE_SECONDS: Budget = Budget {
    var: "KOPT_SQLITE_SECONDS",
    default: 60,
    unit: "s",
    max: 7 * 24 * 3600,
};

/// Work SQLite may do for one rocpd database's queries, in millions of
/// virtual-machine steps; at least 256 steps per byte of the file. Reading
/// the tables of a database costs a few steps per byte; a view that
/// computes rows (cross or recursive joins) costs without end.
pub const SQLITE_MSTEPS: Budget = Budget {
    var: "KOPT_SQLITE_MSTEPS",
    default: 50,
    unit: "million steps",
    max: 1_000_000_000,
};

/// Memory SQLite may take for one rocpd database's queries (sorts, joins,
/// temporary tables, all kept in memory), in MiB; at least four times the
/// file's size.
pub const SQLITE_TEMP_MB: Budget = Budget {
    var: "KOPT_SQLITE_TEMP_MB",
    default: 64,
    unit: "MiB",
    max: 1 << 20,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Its own variable, set by no other test.
    fn budget(var: &'static str) -> Budget {
        Budget {
            var,
            default: 100,
            unit: "bytes",
            max: 1000,
        }
    }

    /// A sixth hostile round (L1): a 1,004,450-byte report over a 10-byte
    /// budget was told "KOPT_REPORT_MAX_BYTES=40", a value that cannot
    /// work. A known need is suggested as it is; past the variable's most,
    /// no setting is suggested.
    #[test]
    fn a_suggestion_reaches_the_need_within_the_range() {
        let b = budget("KOPT_TEST_BUDGET_NEED");
        let s = b.how_to_raise_to(700);
        assert!(s.contains("KOPT_TEST_BUDGET_NEED=700"), "{s}");
        let s = b.how_to_raise_to(5000);
        assert!(
            s.contains("no setting can take it") && s.contains("up to 1000"),
            "{s}"
        );
        assert!(!s.contains('='), "{s}");
        // Unknown need: above the limit in force, never past the most.
        let s = b.how_to_raise_above(400);
        assert!(s.contains("KOPT_TEST_BUDGET_NEED=1000"), "{s}");
        let s = b.how_to_raise_above(1000);
        assert!(
            s.contains("no setting goes further") && !s.contains('='),
            "{s}"
        );
        assert_eq!(
            b.how_to_raise(),
            b.how_to_raise_above(100),
            "unset: the default is in force"
        );
    }

    /// The variable is named once in its error, and a value past the most
    /// it accepts is refused with the range.
    #[test]
    fn a_bad_setting_names_the_variable_once_and_the_range() {
        let b = budget("KOPT_TEST_BUDGET_RANGE");
        for bad in ["abc", "0", "1001", "18446744073709551615"] {
            std::env::set_var(b.var, bad);
            let e = b.checked().unwrap_err().to_string();
            assert_eq!(e.matches(b.var).count(), 1, "{e}");
            assert!(e.contains("up to 1000") && e.contains(bad), "{e}");
        }
        std::env::set_var(b.var, "1000");
        assert_eq!(b.checked().unwrap(), 1000);
        std::env::remove_var(b.var);
    }
}
