//! What one input may cost: bytes after decompression, time and temporary
//! space in SQLite. Each budget has a default and an environment variable
//! that raises it; past it, a one-line error names the budget and the
//! variable.

/// A budget read from the environment: its variable and its default.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub var: &'static str,
    pub default: u64,
    /// What one unit is, for messages (`bytes`, `x`, `s`, `MiB`).
    pub unit: &'static str,
}

impl Budget {
    /// The value in force: the variable when it holds a positive whole
    /// number, else the default. Readers check it first with
    /// [`Budget::checked`]; this is for messages after that.
    pub fn get(&self) -> u64 {
        std::env::var(self.var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(self.default)
    }

    /// The value in force, where a set variable that is not a positive
    /// whole number is an error naming it (a typo must not silently give
    /// the default).
    pub fn checked(&self) -> Result<u64, crate::IngestError> {
        let Ok(raw) = std::env::var(self.var) else {
            return Ok(self.default);
        };
        match raw.trim().parse::<u64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(crate::IngestError::format(
                self.var,
                format!(
                    "{}=\"{}\" is not a positive whole number of {} (unset, it is {})",
                    self.var,
                    crate::echo(&raw),
                    self.unit,
                    self.default
                ),
            )),
        }
    }

    /// `(raise it with KOPT_X=N)`: how to go past it, with a suggestion of
    /// four times the value in force.
    pub fn how_to_raise(&self) -> String {
        format!(
            "raise it with {}={} (now {} {})",
            self.var,
            self.get().saturating_mul(4),
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
};

/// The most GPU activities (kernels, copies, sets) one timeline may hold:
/// each becomes a launch record of about 1.7 KB once analysed, so the
/// default takes about 3.5 GB; past it the input is refused whole rather
/// than the process aborting on a failed allocation.
pub const TIMELINE_MAX_ACTIVITIES: Budget = Budget {
    var: "KOPT_TIMELINE_MAX_ACTIVITIES",
    default: 2_000_000,
    unit: "activities",
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
                max.how_to_raise()
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
};

/// The most step, sync and launch records one bare-run step file may hold.
pub const BARE_STEPS_MAX_RECORDS: Budget = Budget {
    var: "KOPT_BARE_STEPS_MAX_RECORDS",
    default: 1_000_000,
    unit: "records",
};

/// The most a gzipped input may decompress to, in bytes, whatever its size.
pub const GZIP_MAX_BYTES: Budget = Budget {
    var: "KOPT_GZIP_MAX_BYTES",
    default: 4 << 30,
    unit: "bytes",
};

/// The most a gzipped input may decompress to, as a multiple of its
/// compressed size (profiler JSON compresses 5-30x; a bomb a thousandfold).
/// Inputs up to [`GZIP_RATIO_FLOOR_BYTES`] decompressed are always allowed.
/// With the floor, a bomb costs at most twice 16 MiB (the buffer doubling).
pub const GZIP_MAX_RATIO: Budget = Budget {
    var: "KOPT_GZIP_MAX_RATIO",
    default: 64,
    unit: "x",
};

/// Decompressed bytes always allowed, whatever the ratio.
pub const GZIP_RATIO_FLOOR_BYTES: u64 = 16 << 20;

/// Seconds SQLite may spend on the queries of one rocpd database.
pub const SQLITE_SECONDS: Budget = Budget {
    var: "KOPT_SQLITE_SECONDS",
    default: 60,
    unit: "s",
};

/// Work SQLite may do for one rocpd database's queries, in millions of
/// virtual-machine steps; at least 256 steps per byte of the file. Reading
/// the tables of a database costs a few steps per byte; a view that
/// computes rows (cross or recursive joins) costs without end.
pub const SQLITE_MSTEPS: Budget = Budget {
    var: "KOPT_SQLITE_MSTEPS",
    default: 50,
    unit: "million steps",
};

/// Memory SQLite may take for one rocpd database's queries (sorts, joins,
/// temporary tables, all kept in memory), in MiB; at least four times the
/// file's size.
pub const SQLITE_TEMP_MB: Budget = Budget {
    var: "KOPT_SQLITE_TEMP_MB",
    default: 64,
    unit: "MiB",
};
