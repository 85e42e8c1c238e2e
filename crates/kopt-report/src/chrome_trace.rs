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
    write_lanes(&[Lane { rank: None, t }], out)
}

/// A distributed job's ranks in one chrome trace: each rank its own
/// processes (`rank N: CPU`, `rank N: GPU d`), one time axis (the ranks'
/// clocks as recorded), launch arrows kept within each rank.
pub fn write_chrome_trace_ranks(ranks: &[(u32, &Timeline)], out: &mut dyn Write) -> io::Result<()> {
    let lanes: Vec<Lane> = ranks
        .iter()
        .map(|&(rank, t)| Lane {
            rank: Some(rank),
            t,
        })
        .collect();
    write_lanes(&lanes, out)
}

/// One timeline to write, and the rank it is, if any.
struct Lane<'a> {
    rank: Option<u32>,
    t: &'a Timeline,
}

impl Lane<'_> {
    /// Process ids: a rank's block of 1000 (CPU first, then a GPU a
    /// device); a single timeline keeps 0 for the CPU.
    fn cpu_pid(&self) -> u64 {
        self.rank.map_or(0, |r| u64::from(r) * 1000)
    }
    fn gpu_pid(&self, device: u32) -> u64 {
        self.cpu_pid() + device as u64 + 1
    }
    /// Correlation ids are per process: each rank's moved above 2^48.
    fn flow_id(&self, correlation: u64) -> u64 {
        correlation.wrapping_add(u64::from(self.rank.unwrap_or(0)) << 48)
    }
}

fn write_lanes(lanes: &[Lane], out: &mut dyn Write) -> io::Result<()> {
    let origin = lanes
        .iter()
        .flat_map(|l| {
            let t = l.t;
            t.activities
                .iter()
                .map(|a| a.start_ns)
                .chain(t.api_calls.iter().map(|c| c.start_ns))
                .chain(t.sampled_windows.iter().map(|w| w.0))
        })
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
    for lane in lanes {
        write_lane(lane, origin, &mut sep, out)?;
    }
    writeln!(out, "\n]}}")
}

fn write_lane(
    lane: &Lane,
    origin: i64,
    sep: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let t = lane.t;
    let cpu = lane.cpu_pid();
    sep(out)?;
    let cpu_name = match lane.rank {
        Some(r) => format!("rank {r}: CPU (CUDA API)"),
        None => "CPU (CUDA API)".into(),
    };
    write!(
        out,
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{cpu},\"args\":{{\"name\":{}}}}}",
        json_str(&cpu_name)
    )?;
    if let Some(r) = lane.rank {
        let mut devices: Vec<u32> = t.activities.iter().map(|a| a.device).collect();
        devices.sort_unstable();
        devices.dedup();
        for d in devices {
            sep(out)?;
            write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"rank {r}: GPU {d}\"}}}}",
                lane.gpu_pid(d)
            )?;
        }
    }
    if !t.sampled_windows.is_empty() {
        // Thread 0 of the CPU process: no host thread has that id.
        sep(out)?;
        write!(out, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{cpu},\"tid\":0,\"args\":{{\"name\":\"kopt: sampled windows (nothing recorded between them)\"}}}}")?;
    }
    for &(s, e) in &t.sampled_windows {
        sep(out)?;
        write!(
            out,
            "{{\"ph\":\"X\",\"cat\":\"kopt\",\"name\":\"traced window\",\"pid\":{cpu},\"tid\":0,\"ts\":{},\"dur\":{}}}",
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
            lane.gpu_pid(a.device),
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
            "{{\"ph\":\"X\",\"cat\":\"cuda_api\",\"name\":{},\"pid\":{cpu},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"correlation\":{}}}}}",
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
                "{{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":{},\"pid\":{cpu},\"tid\":{},\"ts\":{}}}",
                lane.flow_id(c.correlation),
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
                lane.flow_id(a.correlation),
                lane.gpu_pid(a.device),
                a.stream,
                us(a.start_ns - origin)
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_get_their_own_processes_and_arrows() {
        use kopt_model::{ApiCall, ApiKind, GpuActivity};
        let rank = |device: u32, at: i64| Timeline {
            activities: vec![GpuActivity {
                kind: ActivityKind::Kernel,
                name: "k".into(),
                start_ns: at + 10,
                end_ns: at + 20,
                device,
                stream: 7,
                correlation: 1,
                grid: None,
                block: None,
                bytes: None,
                copy: None,
            }],
            api_calls: vec![ApiCall {
                kind: ApiKind::of("cudaLaunchKernel"),
                name: "cudaLaunchKernel".into(),
                start_ns: at,
                end_ns: at + 5,
                thread: 1,
                correlation: 1,
                frame: None,
                op: None,
                op_span: None,
            }],
            ..Timeline::default()
        };
        let (r0, r1) = (rank(0, 1_000), rank(1, 2_000));
        let mut out = Vec::new();
        write_chrome_trace_ranks(&[(0, &r0), (1, &r1)], &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let ev = doc["traceEvents"].as_array().unwrap();
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "rank 0: CPU (CUDA API)",
                "rank 0: GPU 0",
                "rank 1: CPU (CUDA API)",
                "rank 1: GPU 1"
            ]
        );
        let kernels: Vec<(u64, f64)> = ev
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .map(|e| (e["pid"].as_u64().unwrap(), e["ts"].as_f64().unwrap()))
            .collect();
        assert_eq!(kernels, [(1, 0.01), (1002, 1.01)], "one time axis");
        let flows: std::collections::BTreeSet<u64> = ev
            .iter()
            .filter(|e| e["cat"] == "launch")
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        assert_eq!(flows.len(), 2, "each rank's correlation 1 its own arrow");
    }

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
