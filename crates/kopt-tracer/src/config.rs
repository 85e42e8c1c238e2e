//! The environment switches. Each is read where the original code read it
//! (once at initialisation, or at every attachment for those `attach`
//! applies), so a switch takes effect exactly as before.
//!
//! | variable | read by | effect |
//! |---|---|---|
//! | `KOPT_TRACE_OUT` | `init` | the trace file; unset: tracing is off |
//! | `KOPT_TRACE_RUN` | `init` | the run's id, written in the `process` record |
//! | `RANK`, `LOCAL_RANK`, `WORLD_SIZE` | `init` | the launcher's rank, written in the `process` record |
//! | `KOPT_TRACER_BUFFER_MB` | `init` | activity buffer size, 1..=1024 MiB (8) |
//! | `KOPT_TRACER_SYNC_DRAIN=1` | `init` | drain buffers in CUPTI's thread |
//! | `KOPT_TRACER_SAMPLE=ON/PERIOD` | `init` | trace ON ms of every PERIOD ms |
//! | `KOPT_TRACER_HW_TRACE=1` | `attach` | hardware-event timestamps |
//! | `KOPT_TRACER_PREALLOC=N` | `attach` | device buffers and semaphore pools up front |
//! | `KOPT_TRACER_PER_THREAD_BUFFERS=1` | `attach` | one activity buffer per host thread |
//! | `KOPT_TRACER_APIS=all\|off\|callbacks` | `attach` | which API calls are recorded |
//! | `KOPT_BARE_SYNCS_OUT` | `init` (no `KOPT_TRACE_OUT`) | a bare run: only the ends of synchronising calls (`sync_ends`) |
//! | `KOPT_BARE_LAUNCH_EVERY=N` | `sync_ends::start` | with `KOPT_BARE_SYNCS_OUT`: launch calls counted instead of sync calls timed, every N-th timed (`sync_ends`) |

use crate::warn;

/// An opt-in switch: the variable is set to 1.
fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| v == "1")
}

/// `KOPT_TRACE_OUT`: where the trace goes.
pub(crate) fn trace_out() -> Option<std::ffi::OsString> {
    std::env::var_os("KOPT_TRACE_OUT")
}

/// `RANK`, `LOCAL_RANK`, `WORLD_SIZE`: the launcher's place for this
/// process; None unless RANK and WORLD_SIZE are numbers with RANK < WORLD_SIZE.
pub(crate) fn rank() -> Option<crate::records::RankRecord> {
    let num = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let (rank, world_size) = (num("RANK")?, num("WORLD_SIZE")?);
    (rank < world_size).then(|| crate::records::RankRecord {
        rank,
        local_rank: num("LOCAL_RANK"),
        world_size,
    })
}

/// `KOPT_TRACE_RUN`: the id every process of one traced run shares (at
/// most 64 printable ASCII characters; anything else is left out).
pub(crate) fn trace_run() -> Option<String> {
    std::env::var("KOPT_TRACE_RUN")
        .ok()
        .filter(|r| !r.is_empty() && r.len() <= 64 && r.bytes().all(|b| b.is_ascii_graphic()))
}

/// `KOPT_TRACER_BUFFER_MB`: the activity buffer size in MiB, when valid.
pub(crate) fn buffer_mb() -> Option<usize> {
    std::env::var("KOPT_TRACER_BUFFER_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|mb| (1..=1024).contains(mb))
}

/// `KOPT_TRACER_SYNC_DRAIN=1`: no drain thread.
pub(crate) fn sync_drain() -> bool {
    env_flag("KOPT_TRACER_SYNC_DRAIN")
}

/// `KOPT_TRACER_SAMPLE`: (on, period) in ms; a value that does not parse
/// is reported and the whole run is traced.
pub(crate) fn sample() -> Option<(u64, u64)> {
    std::env::var("KOPT_TRACER_SAMPLE").ok().and_then(|v| {
        let parsed = parse_sample(&v);
        if parsed.is_none() {
            warn(&format!("KOPT_TRACER_SAMPLE={v} is not ON_MS/PERIOD_MS with 0 < ON < PERIOD; tracing the whole run"));
        }
        parsed
    })
}

/// `KOPT_TRACER_SAMPLE=ON_MS/PERIOD_MS`: trace ON_MS of every PERIOD_MS.
pub(crate) fn parse_sample(v: &str) -> Option<(u64, u64)> {
    let (on, period) = v.split_once('/')?;
    let (on, period) = (
        on.trim().parse::<u64>().ok()?,
        period.trim().parse::<u64>().ok()?,
    );
    (on > 0 && on < period).then_some((on, period))
}

/// `KOPT_TRACER_HW_TRACE=1`: hardware-event-based timestamps.
pub(crate) fn hw_trace() -> bool {
    env_flag("KOPT_TRACER_HW_TRACE")
}

/// `KOPT_TRACER_PREALLOC=N`: device buffers and semaphore pools to allocate up front.
pub(crate) fn prealloc() -> Option<usize> {
    std::env::var("KOPT_TRACER_PREALLOC")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
}

/// `KOPT_TRACER_PER_THREAD_BUFFERS=1`: one activity buffer per host thread.
pub(crate) fn per_thread_buffers() -> bool {
    env_flag("KOPT_TRACER_PER_THREAD_BUFFERS")
}

/// Which host API calls are recorded (`KOPT_TRACER_APIS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiMode {
    /// Only the calls kopt reads: launches, graph launches, syncs, copies (default).
    Select,
    /// Every runtime and driver call (filtered when written).
    All,
    /// None: kernels and copies only, the lowest overhead.
    Off,
    /// The selected calls, from CUPTI's callbacks for those calls only
    /// rather than its API activity records (as a sampled window does).
    Callbacks,
}

impl ApiMode {
    fn parse(v: Option<&str>) -> ApiMode {
        match v {
            Some("all") => ApiMode::All,
            Some("off") | Some("none") => ApiMode::Off,
            Some("callbacks") => ApiMode::Callbacks,
            _ => ApiMode::Select,
        }
    }

    pub(crate) fn from_env() -> ApiMode {
        ApiMode::parse(std::env::var("KOPT_TRACER_APIS").ok().as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_takes_on_and_period_in_ms() {
        assert_eq!(parse_sample("10/100"), Some((10, 100)));
        assert_eq!(parse_sample(" 5 / 50 "), Some((5, 50)));
        assert_eq!(
            parse_sample("100/100"),
            None,
            "a window as long as the period is no sampling"
        );
        assert_eq!(parse_sample("0/100"), None);
        assert_eq!(parse_sample("10"), None);
        assert_eq!(parse_sample("a/b"), None);
    }

    #[test]
    fn api_mode_defaults_to_selected_calls() {
        assert_eq!(ApiMode::parse(None), ApiMode::Select);
        assert_eq!(ApiMode::parse(Some("all")), ApiMode::All);
        assert_eq!(ApiMode::parse(Some("off")), ApiMode::Off);
    }
}
