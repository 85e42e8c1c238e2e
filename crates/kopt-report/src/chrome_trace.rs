//! A timeline as chrome-trace JSON (opens in ui.perfetto.dev and chrome://tracing):
//! GPU activities per device and stream, API calls per host thread, and a flow
//! arrow from each launch call to the work it launched.

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
    use super::us;

    #[test]
    fn microseconds_keep_nanosecond_digits() {
        assert_eq!(us(4_784_577_684_397_930), "4784577684397.930");
        assert_eq!(us(5_856), "5.856");
        assert_eq!(us(7), "0.007");
    }
}
