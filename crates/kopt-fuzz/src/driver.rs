//! The stable-Rust fuzz driver: replays a target's seed corpus, then mutates
//! it with a seeded PRNG for a time budget, running each input under
//! `catch_unwind`. Panics, inputs slower than the hang limit and inputs whose
//! heap grows past the memory rule are findings: each is written to a file
//! and reported with the seed. Before every input runs it is written to a
//! `current-<target>` file, so an abort the driver cannot catch (a stack
//! overflow, an allocation past the limit) still leaves the input behind.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::mutate::{mutate, Rng};
use crate::{alloc, Target};

/// The repository's root (where `fuzz/` lives).
pub fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed seed corpus of `target`.
pub fn corpus_dir(target: &str) -> PathBuf {
    repo_dir().join("fuzz/corpus").join(target)
}

/// Inputs that once failed `target`, kept as regression tests.
pub fn regressions_dir(target: &str) -> PathBuf {
    repo_dir().join("fuzz/regressions").join(target)
}

#[derive(Debug, Clone)]
pub struct Config {
    pub target: Target,
    /// Folders whose files are the seeds (missing folders are skipped).
    pub seed_dirs: Vec<PathBuf>,
    /// Time for mutation after the seeds are replayed.
    pub secs: f64,
    pub seed: u64,
    /// Where findings and the current input are written.
    pub out_dir: PathBuf,
    /// An input running longer is a hang.
    pub hang: Duration,
    /// Mutants are cut to this length.
    pub max_len: usize,
    /// An input may grow the heap by `heap_factor` times its length, or
    /// `heap_floor` bytes, whichever is more, and never past `heap_limit`.
    pub heap_factor: usize,
    pub heap_floor: usize,
    pub heap_limit: usize,
    /// Stop after this many distinct findings.
    pub max_findings: usize,
}

impl Config {
    /// The defaults for `target`: its corpus and regressions, 5 s hangs,
    /// 2 GiB and 10x the input (above a 64 MiB floor) for the heap.
    pub fn new(target: Target, secs: f64, seed: u64, out_dir: PathBuf) -> Self {
        Config {
            target,
            seed_dirs: vec![corpus_dir(target.name), regressions_dir(target.name)],
            secs,
            seed,
            out_dir,
            hang: Duration::from_secs(5),
            max_len: 256 * 1024,
            heap_factor: 10,
            heap_floor: 64 << 20,
            heap_limit: 2 << 30,
            max_findings: 16,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Panic,
    Timeout,
    Memory,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Panic => "panic",
            Kind::Timeout => "timeout",
            Kind::Memory => "memory",
        })
    }
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub kind: Kind,
    /// The panic's location and message, or what was exceeded.
    pub message: String,
    /// The backtrace of a panic's first occurrence, if captured.
    pub backtrace: Option<String>,
    pub input: PathBuf,
    pub len: usize,
    /// Which execution of the run found it (0-based; seeds come first).
    pub exec: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub execs: u64,
    /// Inputs the target parsed.
    pub accepted: u64,
    pub seeds: usize,
    pub secs: f64,
    pub slowest: Duration,
    pub slowest_len: usize,
    /// The largest heap growth of one input, and that input's length.
    pub peak_heap: usize,
    pub peak_heap_len: usize,
    /// The largest heap growth relative to the input, and its input's length.
    pub worst_ratio: f64,
    pub worst_ratio_len: usize,
    /// Whether heap figures were measured (the binary installs [`alloc::CountingAlloc`]).
    pub heap_measured: bool,
    /// The process's peak resident set (VmHWM), in bytes, if known.
    pub peak_rss: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub target: &'static str,
    pub seed: u64,
    pub stats: Stats,
    pub findings: Vec<Finding>,
}

fn mib(b: usize) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        write!(
            f,
            "{}: {} execs in {:.1} s ({:.0}/s; {} seeds, {} inputs parsed), slowest {:.0} ms ({} B)",
            self.target,
            s.execs,
            s.secs,
            s.execs as f64 / s.secs.max(1e-9),
            s.seeds,
            s.accepted,
            s.slowest.as_secs_f64() * 1e3,
            s.slowest_len,
        )?;
        if s.heap_measured {
            write!(
                f,
                ", heap growth max {:.1} MiB ({} B input), max {:.0}x input ({} B input)",
                mib(s.peak_heap),
                s.peak_heap_len,
                s.worst_ratio,
                s.worst_ratio_len
            )?;
        }
        if let Some(rss) = s.peak_rss {
            write!(f, ", process peak RSS {:.0} MiB", mib(rss as usize))?;
        }
        write!(
            f,
            ", seed {}, {} finding(s)",
            self.seed,
            self.findings.len()
        )?;
        for x in &self.findings {
            write!(
                f,
                "\n  {} in {} (exec {}): {}\n    input: {} ({} bytes)\n    replay: cargo run -p kopt-fuzz -- replay {} {}",
                x.kind.to_string().to_uppercase(),
                self.target,
                x.exec,
                x.message,
                x.input.display(),
                x.len,
                self.target,
                x.input.display()
            )?;
            if let Some(bt) = &x.backtrace {
                for frame in kopt_frames(bt).iter().take(12) {
                    write!(f, "\n      {frame}")?;
                }
            }
        }
        Ok(())
    }
}

/// A panic caught on this thread: where, what, and the backtrace of the
/// first panic at that place.
struct Caught {
    location: String,
    /// For a panic inside the standard library: the first kopt frame below it.
    caller: Option<String>,
    message: String,
    backtrace: Option<String>,
}

thread_local! {
    static IN_EXEC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static CAUGHT: std::cell::RefCell<Option<Caught>> = const { std::cell::RefCell::new(None) };
    static SEEN: std::cell::RefCell<HashSet<String>> = std::cell::RefCell::new(HashSet::new());
}

/// A panic hook that records panics inside a run input (quietly) and hands
/// every other panic to the hook it replaced.
fn install_hook() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_EXEC.with(|c| c.get()) {
                return previous(info);
            }
            let location = info
                .location()
                .map_or_else(|| "unknown location".to_string(), |l| l.to_string());
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(non-string panic payload)".into());
            // A panic inside the standard library (a slice index, an
            // overflowing `sum`) is placed by the first kopt frame that called it.
            let in_std = !location.starts_with("crates/");
            let first = in_std || SEEN.with(|s| s.borrow_mut().insert(location.clone()));
            let backtrace = first.then(|| std::backtrace::Backtrace::force_capture().to_string());
            let caller = backtrace
                .as_deref()
                .filter(|_| in_std)
                .and_then(first_kopt_frame);
            if in_std {
                let key = caller.clone().unwrap_or_else(|| location.clone());
                let _ = SEEN.with(|s| s.borrow_mut().insert(key));
            }
            CAUGHT.with(|c| {
                *c.borrow_mut() = Some(Caught {
                    location,
                    caller,
                    message,
                    backtrace,
                })
            });
        }));
    });
}

/// `function at file:line:col` of each frame of a printed backtrace in a
/// kopt crate, the driver's own frames left out.
fn kopt_frames(backtrace: &str) -> Vec<String> {
    let mut frames = Vec::new();
    let mut function: Option<&str> = None;
    for line in backtrace.lines().map(str::trim) {
        if let Some(path) = line.strip_prefix("at ") {
            if let Some(f) = function.take() {
                if f.starts_with("kopt") && !f.starts_with("kopt_fuzz::driver") {
                    let path = path.find("crates/").map_or(path, |at| &path[at..]);
                    frames.push(format!("{f} at {path}"));
                }
            }
        } else if let Some((_, f)) = line.split_once(": ") {
            function = Some(f);
        }
    }
    frames
}

/// `function at crates/...:line:col` of the first frame in a kopt crate
/// (the fuzz harness aside) of a printed backtrace.
fn first_kopt_frame(backtrace: &str) -> Option<String> {
    let mut function = None;
    for line in backtrace.lines().map(str::trim) {
        if let Some(path) = line.strip_prefix("at ") {
            let Some(at) = path.find("crates/kopt") else {
                continue;
            };
            let path = &path[at..];
            if !path.starts_with("crates/kopt-fuzz/") {
                return Some(format!("{} at {path}", function.unwrap_or("?")));
            }
        } else if let Some((_, f)) = line.split_once(": ") {
            function = Some(f);
        }
    }
    None
}

/// What one replayed input did.
#[derive(Debug)]
pub struct Replayed {
    /// The target parsed it (false when rejected or when it panicked out).
    pub parsed: bool,
    pub secs: f64,
    /// How far the heap grew while it ran.
    pub heap_growth: usize,
    /// A panic: `panicked at LOCATION: MESSAGE`, and whether it escaped the
    /// target or a library caught it inside (rusqlite's callbacks, the
    /// demangler's guard): libFuzzer's hook aborts on either, so both are
    /// findings.
    pub panic: Option<(String, PanicFate)>,
    /// The kopt frames of the panic's backtrace (innermost first).
    pub frames: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanicFate {
    /// It unwound out of the target.
    Escaped,
    /// Something inside the target caught it and the target went on.
    CaughtInside,
}

/// Run one input through `target` as `run` does (the same panic hook), for
/// `kopt-fuzz replay`: a panic is reported whether it escaped the target or
/// was caught inside it, never as "no panic".
pub fn replay(target: &Target, input: &[u8]) -> Replayed {
    install_hook();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    SEEN.with(|s| s.borrow_mut().clear());
    let heap_before = alloc::reset_peak();
    let started = Instant::now();
    IN_EXEC.with(|c| c.set(true));
    let result = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    IN_EXEC.with(|c| c.set(false));
    let secs = started.elapsed().as_secs_f64();
    let heap_growth = alloc::peak().saturating_sub(heap_before);
    let caught = CAUGHT.with(|c| c.borrow_mut().take());
    let fate = match &result {
        Err(_) => Some(PanicFate::Escaped),
        Ok(_) if caught.is_some() => Some(PanicFate::CaughtInside),
        Ok(_) => None,
    };
    let panic = fate.map(|fate| {
        let text = match &caught {
            Some(c) => match &c.caller {
                Some(caller) => format!(
                    "panicked at {}: {} (called from {caller})",
                    c.location, c.message
                ),
                None => format!("panicked at {}: {}", c.location, c.message),
            },
            None => "panicked (no message caught)".into(),
        };
        (text, fate)
    });
    let frames = caught
        .and_then(|c| c.backtrace)
        .map(|b| kopt_frames(&b))
        .unwrap_or_default();
    Replayed {
        parsed: matches!(result, Ok(true)),
        secs,
        heap_growth,
        panic,
        frames,
    }
}

/// Targets share the counting allocator's figures: one runs at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What the watchdog sees: when the running input started.
type Running = Arc<Mutex<Option<(Instant, u64)>>>;

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The process's peak resident set, from /proc (Linux).
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Every file in `dirs` (not recursing), sorted by path.
pub fn load_seeds(dirs: &[PathBuf]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut paths: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
        .collect()
}

struct Run<'a> {
    cfg: &'a Config,
    current: PathBuf,
    running: Running,
    stats: Stats,
    findings: Vec<Finding>,
    keys: HashMap<String, usize>,
}

impl Run<'_> {
    /// Run one input; returns whether the target parsed it.
    fn exec(&mut self, input: &[u8]) -> bool {
        let n = self.stats.execs;
        self.stats.execs += 1;
        // Left behind if the process dies on this input.
        let _ = std::fs::write(&self.current, input);
        let heap_before = alloc::reset_peak();
        *self.running.lock().expect("watchdog lock") = Some((Instant::now(), n));
        let started = Instant::now();
        IN_EXEC.with(|c| c.set(true));
        let result = catch_unwind(AssertUnwindSafe(|| (self.cfg.target.run)(input)));
        IN_EXEC.with(|c| c.set(false));
        let took = started.elapsed();
        *self.running.lock().expect("watchdog lock") = None;
        let grown = alloc::peak().saturating_sub(heap_before);
        // A panic a library caught itself (rusqlite's callbacks do) is a
        // finding too: libFuzzer's hook aborts on it, and the CLI's prints it.
        let caught = CAUGHT.with(|c| c.borrow_mut().take());
        let ok = result.is_ok() && caught.is_none();

        if took > self.stats.slowest {
            self.stats.slowest = took;
            self.stats.slowest_len = input.len();
        }
        // A panic's heap is the hook's backtrace, not the input's.
        if ok && grown > self.stats.peak_heap {
            self.stats.peak_heap = grown;
            self.stats.peak_heap_len = input.len();
            // Kept for a look: the input that grew the heap most.
            let _ = std::fs::write(
                self.cfg
                    .out_dir
                    .join(format!("heap-max-{}", self.cfg.target.name)),
                input,
            );
        }
        let ratio = grown as f64 / input.len().max(1) as f64;
        if ok && ratio > self.stats.worst_ratio {
            self.stats.worst_ratio = ratio;
            self.stats.worst_ratio_len = input.len();
        }

        let accepted = match (result, ok) {
            (Ok(accepted), true) => accepted,
            _ => {
                let (key, message, backtrace) = match caught {
                    Some(c) => (
                        c.caller.clone().unwrap_or_else(|| c.location.clone()),
                        match &c.caller {
                            Some(caller) => format!(
                                "panicked at {}: {} (called from {caller})",
                                c.location, c.message
                            ),
                            None => format!("panicked at {}: {}", c.location, c.message),
                        },
                        c.backtrace,
                    ),
                    None => ("?".into(), "panicked (no message caught)".into(), None),
                };
                self.found(Kind::Panic, key, message, backtrace, input, n);
                false
            }
        };
        if took > self.cfg.hang {
            let msg = format!(
                "took {:.1} s (the limit is {:.1} s)",
                took.as_secs_f64(),
                self.cfg.hang.as_secs_f64()
            );
            self.found(Kind::Timeout, "timeout".into(), msg, None, input, n);
        }
        let allowed = self
            .cfg
            .heap_floor
            .max(self.cfg.heap_factor * input.len())
            .min(self.cfg.heap_limit);
        if ok && grown > allowed {
            let msg = format!(
                "the heap grew by {:.1} MiB for a {} B input ({:.0}x; allowed {:.1} MiB)",
                mib(grown),
                input.len(),
                ratio,
                mib(allowed)
            );
            self.found(Kind::Memory, "memory".into(), msg, None, input, n);
        }
        if accepted {
            self.stats.accepted += 1;
        }
        accepted
    }

    fn found(
        &mut self,
        kind: Kind,
        key: String,
        message: String,
        backtrace: Option<String>,
        input: &[u8],
        exec: u64,
    ) {
        // One input per panic location (and one per timeout / memory): the shortest seen.
        let key = format!("{kind}:{key}");
        let path = self.cfg.out_dir.join(format!(
            "{kind}-{}-{:016x}",
            self.cfg.target.name,
            fnv(input)
        ));
        if let Some(&i) = self.keys.get(&key) {
            let f = &mut self.findings[i];
            if input.len() < f.len {
                let _ = std::fs::remove_file(&f.input);
                let _ = std::fs::write(&path, input);
                f.input = path;
                f.len = input.len();
                f.exec = exec;
                f.message = message;
            }
            return;
        }
        let _ = std::fs::write(&path, input);
        self.keys.insert(key, self.findings.len());
        self.findings.push(Finding {
            kind,
            message,
            backtrace,
            input: path,
            len: input.len(),
            exec,
        });
    }
}

/// Run `cfg.target`: replay its seeds, then mutate them until `cfg.secs` pass.
pub fn run(cfg: &Config) -> Report {
    install_hook();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    std::fs::create_dir_all(&cfg.out_dir).expect("creating the fuzz output folder");
    let heap_measured = alloc::installed();
    alloc::set_limit(alloc::current().saturating_add(cfg.heap_limit));
    let current = cfg.out_dir.join(format!("current-{}", cfg.target.name));

    let running: Running = Arc::new(Mutex::new(None));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (running, done, current) = (running.clone(), done.clone(), current.clone());
        let (hang, name) = (cfg.hang, cfg.target.name);
        let hard = (hang * 6).max(Duration::from_secs(30));
        let out_dir = cfg.out_dir.clone();
        std::thread::spawn(move || {
            let mut reported = None;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let Some((since, n)) = *running.lock().unwrap_or_else(|e| e.into_inner()) else {
                    continue;
                };
                let t = since.elapsed();
                if t > hang && reported != Some(n) {
                    reported = Some(n);
                    let keep = out_dir.join(format!("hang-{name}-exec{n}"));
                    let _ = std::fs::copy(&current, &keep);
                    eprintln!(
                        "kopt-fuzz: {name}: exec {n} has run {:.1} s; its input is {}",
                        t.as_secs_f64(),
                        keep.display()
                    );
                }
                if t > hard {
                    eprintln!(
                        "kopt-fuzz: {name}: exec {n} still running after {:.0} s: a hang; stopping (input: {})",
                        t.as_secs_f64(),
                        out_dir.join(format!("hang-{name}-exec{n}")).display()
                    );
                    std::process::exit(70);
                }
            }
        })
    };

    let mut seeds = load_seeds(&cfg.seed_dirs);
    if seeds.is_empty() {
        seeds.push((PathBuf::from("(empty)"), Vec::new()));
    }
    let mut run = Run {
        cfg,
        current: current.clone(),
        running,
        stats: Stats {
            seeds: seeds.len(),
            heap_measured,
            ..Stats::default()
        },
        findings: Vec::new(),
        keys: HashMap::new(),
    };
    let started = Instant::now();
    // Accepted mutants, mutated further now and then (a bounded ring).
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut next_slot = 0;
    for (_, s) in &seeds {
        run.exec(s);
    }
    let seed_bytes: Vec<&[u8]> = seeds.iter().map(|(_, b)| b.as_slice()).collect();
    let mut rng = Rng::new(cfg.seed);
    let deadline = Duration::from_secs_f64(cfg.secs.max(0.0));
    while started.elapsed() < deadline && run.findings.len() < cfg.max_findings {
        let base: &[u8] = if !pool.is_empty() && rng.chance(3) {
            &pool[rng.below(pool.len())]
        } else {
            seed_bytes[rng.below(seed_bytes.len())]
        };
        let input = mutate(&mut rng, base, &seed_bytes, cfg.max_len);
        if run.exec(&input) {
            if pool.len() < 256 {
                pool.push(input);
            } else {
                pool[next_slot] = input;
                next_slot = (next_slot + 1) % pool.len();
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    alloc::set_limit(usize::MAX);
    let _ = std::fs::remove_file(&current);
    run.stats.secs = started.elapsed().as_secs_f64();
    run.stats.peak_rss = peak_rss();
    Report {
        target: cfg.target.name,
        seed: cfg.seed,
        stats: run.stats,
        findings: run.findings,
    }
}

/// The seed for a run: `KOPT_FUZZ_SEED` (a number, or `random`), else a
/// fixed one per target so CI runs repeat.
pub fn seed_from_env(target: &str) -> u64 {
    match std::env::var("KOPT_FUZZ_SEED").ok().as_deref() {
        Some("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 ^ u64::from(std::process::id())),
        Some(s) => s.parse().unwrap_or_else(|_| fnv(s.as_bytes())),
        None => fnv(target.as_bytes()),
    }
}
