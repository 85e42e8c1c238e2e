//! A many-rank job analysed in bounded memory: `cargo bench -p kopt-engine
//! --bench ranks_at_scale`. Generates KOPT_BENCH_RANKS (64) Kineto traces
//! of about KOPT_BENCH_RANK_MB (20) MB each from a real rank's trace
//! (fixtures/multigpu-hta/rank-0.json.gz: its events repeated step after
//! step, each rank with its own clock offset and jitter on every
//! duration; KOPT_BENCH_DISTINCT (4) files generated, the other ranks hard
//! links to them, named `rank-N.json`), then times `kopt_engine::ranks::analyze_ranks`
//! over the folder against the named peer, reading the same files' bytes
//! alone, and prints the process's peak resident memory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn template() -> (Value, Vec<Value>, i64, i64) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/multigpu-hta/rank-0.json.gz");
    let bytes = std::fs::read(&path).expect("the template fixture");
    let text = kopt_ingest::kineto::decompress(&bytes, "template").expect("gzip");
    let mut doc: Value = serde_json::from_slice(&text).expect("json");
    let events = match doc.as_object_mut().and_then(|o| o.remove("traceEvents")) {
        Some(Value::Array(v)) => v,
        _ => panic!("no traceEvents"),
    };
    let ts = |e: &Value| e.get("ts").and_then(Value::as_f64);
    let start = events.iter().filter_map(ts).fold(f64::MAX, f64::min) as i64;
    let end = events
        .iter()
        .filter_map(|e| Some(ts(e)? + e.get("dur").and_then(Value::as_f64).unwrap_or(0.0)))
        .fold(0.0, f64::max) as i64;
    (doc, events, start, end)
}

/// One rank's trace: the template's events `reps` times, step after step.
fn write_rank(
    dir: &Path,
    rank: usize,
    world: Option<usize>,
    reps: usize,
    t: &(Value, Vec<Value>, i64, i64),
) -> PathBuf {
    let (doc, events, start, end) = t;
    let span = (end - start + 1000) as f64;
    let offset = 37.0 * rank as f64;
    let mut rng = fastrand::Rng::with_seed(rank as u64);
    let path = dir.join(format!("rank-{rank}.json"));
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    // No distributedInfo: the rank comes from the file name, so one
    // generated file can stand for several ranks (hard links).
    let mut head = doc.clone();
    if let Some(o) = head.as_object_mut() {
        o.remove("distributedInfo");
        // Every rank its own file: its rank in the trace, as torch writes it.
        if let Some(world) = world {
            o.insert(
                "distributedInfo".into(),
                serde_json::json!({"backend": "nccl", "rank": rank, "world_size": world}),
            );
        }
    }
    let head = serde_json::to_string(&head).expect("head");
    // `{...}` without its closing brace, then the events.
    let _ = writeln!(w, "{}, \"traceEvents\": [", &head[..head.len() - 1]);
    let mut first = true;
    for k in 0..reps {
        for e in events {
            let mut e = e.clone();
            if let Some(ts) = e.get("ts").and_then(Value::as_f64) {
                e["ts"] = Value::from(ts + k as f64 * span + offset);
            }
            if let Some(d) = e.get("dur").and_then(Value::as_f64) {
                e["dur"] = Value::from(d * (0.98 + 0.04 * rng.f64()));
            }
            if !first {
                let _ = w.write_all(b",\n");
            }
            first = false;
            let _ = serde_json::to_writer(&mut w, &e);
        }
    }
    let _ = w.write_all(b"\n]}\n");
    path
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let ranks = env_num("KOPT_BENCH_RANKS", 64);
    let mb = env_num("KOPT_BENCH_RANK_MB", 20);
    let t = template();
    let one = serde_json::to_vec(&t.1).expect("events").len().max(1);
    let reps = (mb << 20).div_ceil(one).max(1);
    // KOPT_BENCH_KEEP=DIR writes the set there and keeps it (to run
    // another tool on the same files); else a temporary folder.
    let kept = std::env::var_os("KOPT_BENCH_KEEP").map(PathBuf::from);
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = kept.as_deref().unwrap_or(temp.path());
    std::fs::create_dir_all(dir).expect("the output folder");
    // KOPT_BENCH_DISTINCT files are generated (4: disk stays small at 256
    // ranks of 200 MB) and the other ranks hard-linked to them.
    let distinct = env_num("KOPT_BENCH_DISTINCT", 4).clamp(1, ranks);
    let world = (distinct == ranks).then_some(ranks);
    let made: Vec<PathBuf> = (0..distinct)
        .map(|r| write_rank(dir, r, world, reps, &t))
        .collect();
    let files: Vec<PathBuf> = (0..ranks)
        .map(|r| {
            let path = dir.join(format!("rank-{r}.json"));
            if r >= distinct {
                std::fs::hard_link(&made[r % distinct], &path).expect("hard link");
            }
            path
        })
        .collect();
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let rss_before = peak_rss_mb().unwrap_or(0.0);

    let started = Instant::now();
    let mut read = 0usize;
    for f in &files {
        read += std::fs::read(f).map_or(0, |b| b.len());
    }
    let peer_s = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let d = kopt_engine::ranks::analyze_ranks(&files).expect("analysis");
    let kopt_s = started.elapsed().as_secs_f64();
    let rss = peak_rss_mb().unwrap_or(f64::NAN);
    assert_eq!(d.ranks.len(), ranks);
    println!(
        "{ranks} ranks x {:.0} MB ({:.2} GB in all, {read} bytes read by the peer)",
        bytes as f64 / ranks as f64 / 1e6,
        bytes as f64 / 1e9
    );
    println!("  peer (read the bytes alone): {peer_s:.2} s");
    println!(
        "  kopt analyze_ranks:          {kopt_s:.2} s ({:.1}x the peer, {:.0} MB/s)",
        kopt_s / peer_s.max(1e-9),
        bytes as f64 / 1e6 / kopt_s
    );
    println!("  peak RSS: {rss:.0} MB (after generating: {rss_before:.0} MB)");
    println!(
        "  straggler found: {}",
        d.straggler
            .as_ref()
            .map_or("none".into(), |s| format!("rank {}", s.rank))
    );
}
