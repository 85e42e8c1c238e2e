//! kopt's own trace: JSON lines written by the `kopt-tracer` injection library
//! (one record per line: kernel, api, memcpy, memset, and a closing `end`).
//! Kernel names arrive mangled and are demangled here. A sampled trace closes
//! each window with a `window` record after the window's records: CUPTI
//! starts afresh in every window, so correlation and NVTX ids are matched
//! within their window only.

use std::path::Path;

use kopt_model::{ActivityKind, ApiCall, ApiKind, Dim3, GpuActivity, Range, Timeline};
use serde::Deserialize;

use crate::IngestError;

#[derive(Deserialize)]
struct Line {
    t: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    s: Option<i64>,
    #[serde(default)]
    e: Option<i64>,
    #[serde(default)]
    dev: Option<u32>,
    #[serde(default, rename = "str")]
    stream: Option<u64>,
    #[serde(default)]
    c: Option<u64>,
    #[serde(default)]
    g: Option<[u32; 3]>,
    #[serde(default)]
    b: Option<[u32; 3]>,
    #[serde(default)]
    tid: Option<u64>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default)]
    dropped: Option<u64>,
    #[serde(default)]
    lost_buffers: Option<u64>,
    /// Device records: SM count.
    #[serde(default)]
    sms: Option<u32>,
    /// NVTX range id (range_start / range_end), device id (device).
    #[serde(default)]
    id: Option<u64>,
}

/// A parsed kopt trace and what it says about its own completeness.
#[derive(Debug, Clone)]
pub struct KoptTrace {
    pub timeline: Timeline,
    /// False when the `end` record is missing (the process died before exit).
    pub ended: bool,
    pub dropped_records: u64,
    /// Records left out at the edges of sampled windows: flushed before the
    /// GPU wrote their timestamps, or launched while CUPTI was attaching.
    pub incomplete_records: u64,
    /// Activity buffers CUPTI never handed back: another CUPTI client (the
    /// program's own torch.profiler, nsys) took tracing over during the run.
    pub lost_buffers: u64,
    /// How many processes' traces were merged (1 for one file).
    pub processes: u32,
}

/// `_ZN2at6native...` -> `void at::native::...`; other names unchanged.
pub fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") {
        return name.to_string();
    }
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

fn dim(v: Option<[u32; 3]>) -> Option<Dim3> {
    v.map(|[x, y, z]| Dim3 { x, y, z })
}

/// The records read since the last `window` line of a sampled trace.
///
/// A window starts at its first API call (else its first record): attaching
/// CUPTI again stalls the program for milliseconds (about 5 ms seen on an
/// H200), time that is kopt's, not the program's; a kernel launched while
/// CUPTI was attaching, its launch call unrecorded, is dropped as incomplete.
/// And a window covers a record CUPTI stamped a little before it opened.
#[derive(Default)]
struct OpenWindow {
    /// Earliest start and latest end of its records.
    span: Option<(i64, i64)>,
    first_call: Option<i64>,
    /// Where its activities and ranges begin in the timeline's lists.
    activities_from: usize,
    ranges_from: usize,
}

impl OpenWindow {
    fn saw(&mut self, start: i64, end: i64, api_call: bool) {
        self.span = Some(
            self.span
                .map_or((start, end), |(lo, hi)| (lo.min(start), hi.max(end))),
        );
        if api_call {
            self.first_call = Some(self.first_call.map_or(start, |f| f.min(start)));
        }
    }

    /// Close the window at its recorded bounds, or (None: the run died
    /// before writing them) at its records' own. Returns the records left out.
    fn close(&mut self, t: &mut Timeline, bounds: Option<(i64, i64)>) -> u64 {
        let mut left_out = 0;
        let window = match (self.span.take(), bounds) {
            (Some((lo, hi)), bounds) => {
                let previous_end = t.sampled_windows.last().map_or(i64::MIN, |w| w.1);
                let start = self.first_call.take().unwrap_or(lo).max(previous_end);
                let end = bounds.map_or(hi, |(_, e)| e.max(hi));
                left_out = keep_from(&mut t.activities, self.activities_from, |a| {
                    a.start_ns >= start
                });
                keep_from(&mut t.ranges, self.ranges_from, |r| r.start_ns >= start);
                Some((start, end))
            }
            (None, bounds) => bounds,
        };
        if let Some(w) = window {
            t.sampled_windows.push(w);
        }
        (self.activities_from, self.ranges_from) = (t.activities.len(), t.ranges.len());
        left_out
    }
}

/// Keep the items from `from` on that pass `keep` (those before stay);
/// returns how many went.
fn keep_from<T>(v: &mut Vec<T>, from: usize, keep: impl Fn(&T) -> bool) -> u64 {
    let mut tail = v.split_off(from);
    let before = tail.len();
    tail.retain(keep);
    let gone = (before - tail.len()) as u64;
    v.append(&mut tail);
    gone
}

pub fn parse_kopt_trace(text: &str, path: &str) -> Result<KoptTrace, IngestError> {
    if text.trim().is_empty() {
        return Err(IngestError::Empty { path: path.into() });
    }
    let mut t = Timeline {
        whole_program: true,
        ..Timeline::default()
    };
    let mut ended = false;
    let mut dropped = 0;
    let mut lost_buffers = 0;
    let mut incomplete = 0;
    // Devices by id; the report names the one the kernels ran on.
    let mut devices: std::collections::HashMap<u64, (String, Option<u32>)> =
        std::collections::HashMap::new();
    // NVTX ranges open by id until their end record arrives.
    let mut open: std::collections::HashMap<u64, (String, i64)> = std::collections::HashMap::new();
    // Sampled windows closed so far: correlation ids (CUPTI's are 32-bit)
    // carry the window in bits 32..48 (processes use the bits above).
    let mut window: u64 = 0;
    let mut open_window = OpenWindow::default();
    let scoped = |c: Option<u64>, window: u64| match c.unwrap_or(0) {
        0 => 0,
        c => (c & 0xFFFF_FFFF) | (window.min(0xFFFF) << 32),
    };
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_str(raw) {
            Ok(l) => l,
            // A process killed mid-write leaves a cut last line: what came before stands.
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(IngestError::At {
                    path: path.into(),
                    line: i as u64 + 1,
                    message: format!("expected one kopt trace record (a JSON object): {e}"),
                })
            }
        };
        match (line.t.as_str(), line.id, line.s) {
            ("range_start", Some(id), Some(s)) => {
                open_window.saw(s, s, false);
                open.insert(id, (line.name.unwrap_or_default(), s));
                continue;
            }
            ("device", Some(id), _) => {
                devices.insert(id, (line.name.unwrap_or_default(), line.sms));
                continue;
            }
            ("window", _, Some(s)) => {
                incomplete += open_window.close(&mut t, Some((s, line.e.unwrap_or(s))));
                window += 1;
                // A range still open when its window closed never gets its end here.
                open.clear();
                continue;
            }
            ("range_end", Some(id), Some(e)) => {
                if let Some((name, start_ns)) = open.remove(&id) {
                    t.ranges.push(Range {
                        name,
                        start_ns,
                        end_ns: e,
                    });
                }
                continue;
            }
            _ => {}
        }
        let (Some(s), Some(e)) = (line.s, line.e) else {
            if line.t == "end" {
                ended = true;
                dropped = line.dropped.unwrap_or(0);
                lost_buffers = line.lost_buffers.unwrap_or(0);
            }
            continue;
        };
        let name = line.name.unwrap_or_default();
        let kind = match line.t.as_str() {
            "kernel" => Some(ActivityKind::Kernel),
            "memcpy" => Some(ActivityKind::Memcpy),
            "memset" => Some(ActivityKind::Memset),
            _ => None,
        };
        if kind.is_some() && (s <= 0 || e < s) {
            // CUPTI flushed the record before the GPU wrote its timestamps
            // (a sampled window closing under running kernels).
            incomplete += 1;
            continue;
        }
        if kind.is_some() || line.t == "api" {
            open_window.saw(s, e, line.t == "api");
        }
        if let Some(kind) = kind {
            t.activities.push(GpuActivity {
                kind,
                name: if kind == ActivityKind::Kernel {
                    demangle(&name)
                } else {
                    name
                },
                start_ns: s,
                end_ns: e,
                device: line.dev.unwrap_or(0),
                stream: line.stream.unwrap_or(0),
                correlation: scoped(line.c, window),
                grid: dim(line.g),
                block: dim(line.b),
                bytes: line.bytes,
            });
        } else if line.t == "api" {
            t.api_calls.push(ApiCall {
                kind: ApiKind::of(&name),
                name,
                start_ns: s,
                end_ns: e,
                thread: line.tid.unwrap_or(0),
                correlation: scoped(line.c, window),
            });
        }
    }
    t.ranges.sort_by_key(|r| r.start_ns);
    // Records of a window the run ended in without closing it (no exit handler).
    if !t.sampled_windows.is_empty() {
        incomplete += open_window.close(&mut t, None);
    }
    let busiest = {
        let mut per: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        for a in t
            .activities
            .iter()
            .filter(|a| a.kind == ActivityKind::Kernel)
        {
            *per.entry(a.device).or_default() += 1;
        }
        per.into_iter()
            .max_by_key(|(d, n)| (*n, std::cmp::Reverse(*d)))
            .map(|(d, _)| d)
    };
    if let Some((name, sms)) = busiest
        .and_then(|d| devices.get(&u64::from(d)))
        .or_else(|| devices.iter().min_by_key(|(id, _)| **id).map(|(_, d)| d))
    {
        t.device_name = Some(name.clone());
        t.sm_count = *sms;
    }
    Ok(KoptTrace {
        timeline: t,
        ended,
        dropped_records: dropped,
        incomplete_records: incomplete,
        lost_buffers,
        processes: 1,
    })
}

/// The trace at `path` and those other processes of the same workload wrote
/// beside it (`path.<pid>`), merged into one timeline. Correlation ids are
/// per process: each further process's are moved to their own range so
/// launches still find their kernels.
pub fn read_kopt_trace_set(path: &Path) -> Result<KoptTrace, IngestError> {
    let mut merged = read_kopt_trace(path)?;
    let (Some(dir), Some(stem)) = (path.parent(), path.file_name()) else {
        return Ok(merged);
    };
    let stem = stem.to_string_lossy().into_owned();
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut others: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| IngestError::Io {
            path: dir.display().to_string(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(stem.as_str()))
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    others.sort();
    for (i, other) in others.iter().enumerate() {
        let next = read_kopt_trace(other)?;
        let shift = (i as u64 + 1) << 48;
        let moved = |c: u64| if c == 0 { 0 } else { c + shift };
        let t = next.timeline;
        merged
            .timeline
            .activities
            .extend(t.activities.into_iter().map(|mut a| {
                a.correlation = moved(a.correlation);
                a
            }));
        merged
            .timeline
            .api_calls
            .extend(t.api_calls.into_iter().map(|mut c| {
                c.correlation = moved(c.correlation);
                c
            }));
        merged.timeline.ranges.extend(t.ranges);
        merged.timeline.sampled_windows = union_of_windows(
            std::mem::take(&mut merged.timeline.sampled_windows),
            t.sampled_windows,
        );
        if merged.timeline.device_name.is_none() {
            merged.timeline.device_name = t.device_name;
            merged.timeline.sm_count = t.sm_count;
        }
        merged.ended &= next.ended;
        merged.dropped_records += next.dropped_records;
        merged.incomplete_records += next.incomplete_records;
        merged.lost_buffers += next.lost_buffers;
        merged.processes += 1;
    }
    if !others.is_empty() {
        merged.timeline.activities.sort_by_key(|a| a.start_ns);
        merged.timeline.api_calls.sort_by_key(|c| c.start_ns);
        merged.timeline.ranges.sort_by_key(|r| r.start_ns);
    }
    Ok(merged)
}

/// The windows two processes' traces cover together. A continuous trace
/// (no windows) covers everything, and so does the union.
fn union_of_windows(a: Vec<(i64, i64)>, b: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut all: Vec<(i64, i64)> = a.into_iter().chain(b).collect();
    all.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(all.len());
    for (s, e) in all {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

pub fn read_kopt_trace(path: &Path) -> Result<KoptTrace, IngestError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| IngestError::Io {
        path: label.clone(),
        source,
    })?;
    parse_kopt_trace(&text, &label)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"t":"api","name":"cudaLaunchKernel_v7000","s":1000,"e":6000,"tid":42,"c":7}
{"t":"kernel","name":"_Z14kopt_tiny_stepPi","s":9000,"e":11500,"dev":0,"str":7,"c":7,"g":[1,1,1],"b":[32,1,1],"reg":16,"smem":0,"graph":0}
{"t":"memset","name":"Memset","s":12000,"e":12600,"dev":0,"str":7,"c":8,"bytes":4}
{"t":"end","records":3,"dropped":0}
"#;

    #[test]
    fn sampled_windows_scope_correlations_and_ranges() {
        // Two windows; CUPTI numbered both from 1 again after detaching. The
        // range opened in the first window closes (same id) in the second:
        // not one range. A kernel flushed before its timestamps is skipped.
        let text = r#"{"t":"process","pid":10}
{"t":"range_start","id":3,"s":90,"tid":1,"name":"step","dom":""}
{"t":"api","name":"cuLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"first","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"kernel","name":"cut","s":0,"e":0,"dev":0,"str":7,"c":2}
{"t":"window","s":50,"e":200}
{"t":"api","name":"cuLaunchKernel","s":5000,"e":5005,"tid":1,"c":1}
{"t":"kernel","name":"second","s":5010,"e":5030,"dev":0,"str":7,"c":1}
{"t":"kernel","name":"early","s":4899,"e":4950,"dev":0,"str":7,"c":2}
{"t":"range_end","id":3,"s":5040}
{"t":"window","s":4900,"e":5100}
{"t":"end","records":6,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap();
        let tl = &t.timeline;
        assert_eq!(
            tl.sampled_windows,
            vec![(100, 200), (5000, 5100)],
            "a window starts at its first launch call"
        );
        let names: Vec<&str> = tl.activities.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, vec!["first", "second"]);
        assert_eq!(
            (t.dropped_records, t.incomplete_records),
            (0, 2),
            "the kernel without timestamps and the one launched before the window's first call"
        );
        assert_ne!(tl.activities[0].correlation, tl.activities[1].correlation);
        for (k, call) in tl.activities.iter().zip(&tl.api_calls) {
            assert_eq!(
                k.correlation, call.correlation,
                "{} finds its own launch",
                k.name
            );
        }
        assert!(tl.ranges.is_empty(), "no range across windows");
    }

    #[test]
    fn a_sampled_run_that_died_keeps_its_last_open_window() {
        let text = r#"{"t":"kernel","name":"a","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"window","s":100,"e":200}
{"t":"kernel","name":"b","s":5010,"e":5030,"dev":0,"str":7,"c":1}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap();
        assert!(!t.ended);
        assert_eq!(t.timeline.sampled_windows, vec![(110, 200), (5010, 5030)]);
    }

    #[test]
    fn windows_of_two_processes_join() {
        assert_eq!(
            union_of_windows(vec![(0, 10), (100, 110)], vec![(5, 20), (200, 210)]),
            vec![(0, 20), (100, 110), (200, 210)]
        );
        assert!(
            union_of_windows(vec![(0, 10)], Vec::new()).is_empty(),
            "a continuous trace covers all"
        );
    }

    #[test]
    fn traces_of_several_processes_merge_with_their_own_correlations() {
        let dir = tempfile::tempdir().unwrap();
        let one = r#"{"t":"process","pid":10}
{"t":"api","name":"cudaLaunchKernel","s":100,"e":105,"tid":1,"c":1}
{"t":"kernel","name":"first","s":110,"e":120,"dev":0,"str":7,"c":1}
{"t":"end","records":2,"dropped":0}
"#;
        let two = r#"{"t":"process","pid":11}
{"t":"api","name":"cudaLaunchKernel","s":50,"e":55,"tid":2,"c":1}
{"t":"kernel","name":"second","s":60,"e":90,"dev":0,"str":7,"c":1}
"#;
        std::fs::write(dir.path().join("trace.jsonl"), one).unwrap();
        std::fs::write(dir.path().join("trace.jsonl.11"), two).unwrap();
        std::fs::write(dir.path().join("trace.log"), "not a trace").unwrap();
        let t = read_kopt_trace_set(&dir.path().join("trace.jsonl")).unwrap();
        assert_eq!(t.processes, 2);
        assert!(!t.ended, "the second process never wrote its end record");
        let names: Vec<&str> = t
            .timeline
            .activities
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(
            names,
            vec!["second", "first"],
            "one timeline, in time order"
        );
        let (k2, k1) = (&t.timeline.activities[0], &t.timeline.activities[1]);
        assert_ne!(k1.correlation, k2.correlation);
        for k in [k1, k2] {
            let launch = t
                .timeline
                .api_calls
                .iter()
                .find(|c| c.correlation == k.correlation);
            assert!(launch.is_some_and(|c| c.start_ns < k.start_ns));
        }
    }

    #[test]
    fn the_device_the_kernels_ran_on_names_the_trace() {
        let text = r#"{"t":"device","id":0,"name":"NVIDIA H200","sms":132,"cc":[9,0],"mem_bw_kbs":4800000000,"clock_khz":1980000}
{"t":"device","id":1,"name":"NVIDIA H100 80GB HBM3","sms":132,"cc":[9,0],"mem_bw_kbs":3350000000,"clock_khz":1980000}
{"t":"kernel","name":"k","s":10,"e":20,"dev":1,"str":7,"c":1}
{"t":"end","records":3,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap().timeline;
        assert_eq!(t.device_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(t.sm_count, Some(132));
    }

    #[test]
    fn nvtx_ranges_pair_by_id() {
        let text = r#"{"t":"range_start","id":2,"s":100,"tid":1,"name":"step","dom":""}
{"t":"range_start","id":3,"s":150,"tid":1,"name":"inner","dom":""}
{"t":"range_end","id":3,"s":180}
{"t":"range_end","id":2,"s":200}
{"t":"range_start","id":4,"s":300,"tid":1,"name":"never closed","dom":""}
{"t":"end","records":5,"dropped":0}
"#;
        let t = parse_kopt_trace(text, "trace.jsonl").unwrap().timeline;
        let got: Vec<(&str, i64, i64)> = t
            .ranges
            .iter()
            .map(|r| (r.name.as_str(), r.start_ns, r.end_ns))
            .collect();
        assert_eq!(got, vec![("step", 100, 200), ("inner", 150, 180)]);
    }

    #[test]
    fn parses_and_demangles() {
        let t = parse_kopt_trace(SAMPLE, "trace.jsonl").unwrap();
        assert!(t.ended);
        assert_eq!(t.timeline.activities.len(), 2);
        assert_eq!(t.timeline.activities[0].name, "kopt_tiny_step(int*)");
        assert_eq!(
            t.timeline.activities[0].grid,
            Some(Dim3 { x: 1, y: 1, z: 1 })
        );
        assert_eq!(t.timeline.api_calls[0].kind, ApiKind::KernelLaunch);
        assert_eq!(demangle("kopt_copy"), "kopt_copy");
    }

    #[test]
    fn a_cut_last_line_is_dropped_and_the_missing_end_reported() {
        let cut = &SAMPLE[..SAMPLE.find("{\"t\":\"end\"").unwrap() + 10];
        let t = parse_kopt_trace(cut, "trace.jsonl").unwrap();
        assert!(!t.ended);
        assert_eq!(t.timeline.activities.len(), 2);
    }

    #[test]
    fn garbage_in_the_middle_names_the_line() {
        let bad = SAMPLE.replacen("{\"t\":\"memset\"", "not json {", 1);
        let e = parse_kopt_trace(&bad, "trace.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("trace.jsonl:3: "), "{e}");
    }
}
