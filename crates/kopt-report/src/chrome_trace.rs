//! A timeline as chrome-trace JSON (opens in ui.perfetto.dev and chrome://tracing):
//! GPU activities per device and stream, API calls per host thread, a flow
//! arrow from each launch call to the work it launched, and a sampled trace's
//! windows on a track of their own.

use std::io::{self, Write};

use kopt_model::{ActivityKind, Timeline};

/// Integer nanoseconds as chrome-trace microseconds, digits kept exactly.
fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialise")
}

pub fn write_chrome_trace(t: &Timeline, out: &mut dyn Write) -> io::Result<()> {
    let origin = t
        .activities
        .iter()
        .map(|a| a.start_ns)
        .chain(t.api_calls.iter().map(|c| c.start_ns))
        .chain(t.sampled_windows.iter().map(|w| w.0))
        .min()
        .unwrap_or(0);
    writeln!(out, "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
    let mut first = true;
    let mut sep = |out: &mut dyn Write| -> io::Result<()> {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    sep(out)?;
    write!(out, "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{{\"name\":\"CPU (CUDA API)\"}}}}")?;
    if !t.sampled_windows.is_empty() {
        // Thread 0 of the CPU process: no host thread has that id.
        sep(out)?;
        write!(out, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"args\":{{\"name\":\"kopt: sampled windows (nothing recorded between them)\"}}}}")?;
    }
    for &(s, e) in &t.sampled_windows {
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"X\",\"cat\":\"kopt\",\"name\":\"traced window\",\"pid\":0,\"tid\":0,\"ts\":{},\"dur\":{}}}",
            us(s - origin),
            us(e - s)
        )?;
    }
    for a in &t.activities {
        sep(out)?;
        let cat = match a.kind {
            ActivityKind::Kernel => "kernel",
            ActivityKind::Memcpy => "gpu_memcpy",
            ActivityKind::Memset => "gpu_memset",
        };
        write!(
            out,
            "{{\"ph\":\"X\",\"cat\":\"{cat}\",\"name\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"correlation\":{}}}}}",
            json_str(&a.name),
            a.device as u64 + 1,
            a.stream,
            us(a.start_ns - origin),
            us(a.end_ns - a.start_ns),
            a.correlation
        )?;
    }
    let launched: std::collections::HashSet<u64> =
        t.activities.iter().map(|a| a.correlation).collect();
    let called: std::collections::HashSet<u64> =
        t.api_calls.iter().map(|c| c.correlation).collect();
    for c in &t.api_calls {
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"X\",\"cat\":\"cuda_api\",\"name\":{},\"pid\":0,\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"correlation\":{}}}}}",
            json_str(&c.name),
            c.thread,
            us(c.start_ns - origin),
            us(c.end_ns - c.start_ns),
            c.correlation
        )?;
        if launched.contains(&c.correlation) {
            sep(out)?;
            write!(
                out,
                "{{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{},\"pid\":0,\"tid\":{},\"ts\":{}}}",
                c.correlation,
                c.thread,
                us(c.start_ns - origin)
            )?;
        }
    }
    for a in t.activities.iter().filter(|a| a.correlation != 0) {
        if called.contains(&a.correlation) {
            sep(out)?;
            write!(
                out,
                "{{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{}}}",
                a.correlation,
                a.device as u64 + 1,
                a.stream,
                us(a.start_ns - origin)
            )?;
        }
    }
    writeln!(out, "\n]}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_windows_get_their_own_track() {
        let t = Timeline {
            sampled_windows: vec![(1_000, 6_000), (50_000, 55_000)],
            ..Timeline::default()
        };
        let mut out = Vec::new();
        write_chrome_trace(&t, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let windows: Vec<&serde_json::Value> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "kopt")
            .collect();
        assert_eq!(windows.len(), 2);
        assert_eq!(windows[1]["ts"].as_f64(), Some(49.0));
        assert_eq!(windows[1]["dur"].as_f64(), Some(5.0));
    }

    #[test]
    fn microseconds_keep_nanosecond_digits() {
        assert_eq!(us(4_784_577_684_397_930), "4784577684397.930");
        assert_eq!(us(5_856), "5.856");
        assert_eq!(us(7), "0.007");
    }
}
