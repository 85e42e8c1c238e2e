//! `kopt tune`'s engine with fake samplers: strategies, failures, the
//! cache, and workers that never share a GPU.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kopt_engine::bench::{Run, Sampler, Source, Timing, TimingChoice};
use kopt_engine::tune::{space, LocalExecutor, Space, Strategy, TuneRequest};
use kopt_engine::{Error, Result, Silent};
use kopt_model::tune::TrialStatus;

/// Commands `k B W`: a sample around `time(B, W)` (±0.2%) per run; the
/// best is B=128, W=4. `fail` configs exit with an error, `hang` ones are
/// cut at the budget. Every run is counted; runs on one GPU must not overlap.
#[derive(Clone, Default)]
struct Fake {
    runs: Arc<AtomicUsize>,
    busy: Arc<Mutex<HashMap<String, usize>>>,
    overlaps: Arc<AtomicUsize>,
    gpus_seen: Arc<Mutex<Vec<String>>>,
    fail: Vec<&'static str>,
    hang: Vec<&'static str>,
    seed: u64,
}

fn time(b: f64, w: f64) -> f64 {
    // Minimum at B=128, W=4; every other config at least 5% slower.
    let lb = (b / 128.0).log2();
    let lw = (w / 4.0).log2();
    1e-3 * (1.0 + 0.3 * lb * lb + 0.2 * lw * lw + 0.02 * lb.abs())
}

struct FakeSampler {
    fake: Fake,
    rng: u64,
}

impl FakeSampler {
    fn noise(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 10_000) as f64 / 10_000.0 - 0.5
    }
}

impl Sampler for FakeSampler {
    fn choose(&mut self, _: TimingChoice, _: Option<&str>, _: &str) -> Result<Timing> {
        Ok(Timing::untraced(Source::Reported))
    }

    fn run(&mut self, command: &str, _: &Timing, budget: Option<Duration>) -> Result<Run> {
        self.fake.runs.fetch_add(1, Ordering::SeqCst);
        let (gpu, cmd) = match command.strip_prefix("CUDA_VISIBLE_DEVICES=") {
            Some(rest) => {
                let (g, tail) = rest.split_once(';').unwrap();
                let cmd = tail
                    .trim()
                    .strip_prefix("export CUDA_VISIBLE_DEVICES;")
                    .unwrap();
                (Some(g.to_string()), cmd.trim().to_string())
            }
            None => (None, command.to_string()),
        };
        if let Some(g) = &gpu {
            let mut busy = self.fake.busy.lock().unwrap();
            let n = busy.entry(g.clone()).or_default();
            *n += 1;
            if *n > 1 {
                self.fake.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            self.fake.gpus_seen.lock().unwrap().push(g.clone());
        }
        std::thread::sleep(Duration::from_millis(1));
        if let Some(g) = &gpu {
            *self.fake.busy.lock().unwrap().get_mut(g).unwrap() -= 1;
        }
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let label = format!("{} {}", words[1], words[2]);
        if self.fake.fail.contains(&label.as_str()) {
            return Err(Error::WorkloadFailed(format!(
                "`{cmd}` failed (exit 1): boom"
            )));
        }
        if self.fake.hang.contains(&label.as_str()) {
            let b = budget.map_or(1.0, |b| b.as_secs_f64());
            return Ok(Run {
                samples: Vec::new(),
                wall_s: b,
                cut: true,
            });
        }
        let (b, w): (f64, f64) = (words[1].parse().unwrap(), words[2].parse().unwrap());
        let t = time(b, w) * (1.0 + 0.004 * self.noise());
        Ok(Run {
            samples: vec![t],
            wall_s: 0.01,
            cut: false,
        })
    }
}

fn executor(fake: &Fake, gpus: &[&str]) -> LocalExecutor<'static> {
    let f = fake.clone();
    LocalExecutor::with_factory(
        gpus.iter().map(|s| s.to_string()).collect(),
        (Some("Fake GPU".into()), Some("1.0".into())),
        Box::new(move |w| {
            Box::new(FakeSampler {
                fake: f.clone(),
                rng: 0x9E37_79B9 ^ (f.seed + w as u64 + 1),
            })
        }),
    )
    .unwrap()
}

fn request(db: &std::path::Path, blocks: &str, warps: &str) -> TuneRequest {
    let space = Space::new(
        vec![
            space::parse_param(&format!("B={blocks}")).unwrap(),
            space::parse_param(&format!("W={warps}")).unwrap(),
        ],
        &[],
    )
    .unwrap();
    let mut r = TuneRequest::new("k {B} {W}".into(), space);
    r.db = db.to_path_buf();
    r.measure.stop.min_time_s = 0.0;
    r.measure.stop.noise_target = 0.01;
    r
}

#[test]
fn grid_finds_the_known_best_and_halving_needs_fewer_samples() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake::default();
    let mut req = request(&d.path().join("grid.db"), "16..1024 x2", "1,2,4,8");
    req.strategy = Some(Strategy::Grid);
    let grid = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(grid.trials.len(), 28);
    assert_eq!(grid.winner.as_ref().unwrap().label, "B=128,W=4");
    assert!(grid.trials.iter().all(|t| t.status == TrialStatus::Ok));
    let w = grid.winner.as_ref().unwrap();
    assert!(w.speedup_vs_baseline > 1.5, "{}", w.speedup_vs_baseline);
    assert!(w.ratio_interval.is_some() && w.verdict.is_some());

    let mut req = request(&d.path().join("halving.db"), "16..1024 x2", "1,2,4,8");
    req.strategy = Some(Strategy::Halving);
    let halving = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(halving.winner.as_ref().unwrap().label, "B=128,W=4");
    let pruned = halving
        .trials
        .iter()
        .filter(|t| t.status == TrialStatus::Pruned)
        .count();
    assert!(pruned >= 20, "{pruned} pruned");
    println!(
        "28 configs: grid {} trial samples (+{} final), halving {} trial samples (+{} final)",
        grid.trial_samples, grid.final_samples, halving.trial_samples, halving.final_samples
    );
    assert!(halving.trial_samples < grid.trial_samples);
    assert!(
        halving.trial_samples + halving.final_samples < grid.trial_samples + grid.final_samples
    );
}

#[test]
fn the_default_strategy_follows_the_space_size() {
    let d = tempfile::tempdir().unwrap();
    let req = request(&d.path().join("h.db"), "1..8", "1..8");
    assert_eq!(req.chosen_strategy(64), Strategy::Grid);
    assert_eq!(req.chosen_strategy(65), Strategy::Halving);
    let mut r = req.clone();
    r.trials = Some(5);
    assert_eq!(r.chosen_strategy(100), Strategy::Random);
}

#[test]
fn random_tries_n_configs_with_the_baseline_among_them() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake::default();
    let mut req = request(&d.path().join("h.db"), "16..1024 x2", "1,2,4,8");
    req.strategy = Some(Strategy::Random);
    req.trials = Some(6);
    let r = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(r.strategy, "random");
    assert!(
        r.trials.len() == 6 || r.trials.len() == 7,
        "{}",
        r.trials.len()
    );
    assert_eq!(r.trials[0].label, "B=16,W=1");
    let again = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    let labels = |r: &kopt_model::tune::TuneReport| {
        r.trials.iter().map(|t| t.label.clone()).collect::<Vec<_>>()
    };
    assert_eq!(labels(&r), labels(&again), "the seed fixes the draw");
}

#[test]
fn failing_and_hanging_configs_are_recorded_and_skipped() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake {
        fail: vec!["128 4"],
        hang: vec!["64 4"],
        ..Fake::default()
    };
    let mut req = request(&d.path().join("h.db"), "32,64,128,256", "2,4");
    req.measure.stop.max_time_s = 0.5;
    let r = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    let failed = r.trial("B=128,W=4").unwrap();
    assert_eq!(failed.status, TrialStatus::Failed);
    assert!(failed.reason.as_deref().unwrap().contains("boom"));
    let hung = r.trial("B=64,W=4").unwrap();
    assert_eq!(hung.status, TrialStatus::Failed);
    assert!(
        hung.reason.as_deref().unwrap().contains("timed out"),
        "{:?}",
        hung.reason
    );
    let w = r.winner.as_ref().unwrap();
    assert_ne!(w.label, "B=128,W=4");
    assert_eq!(w.label, "B=128,W=2", "the best of those that ran");
}

#[test]
fn a_failing_baseline_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake {
        fail: vec!["32 2"],
        ..Fake::default()
    };
    let req = request(&d.path().join("h.db"), "32,64", "2,4");
    let err = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap_err();
    assert!(
        err.to_string().contains("baseline config B=32,W=2"),
        "{err}"
    );
}

#[test]
fn a_second_sweep_measures_nothing_and_fresh_measures_all() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake::default();
    let req = request(&d.path().join("h.db"), "32,64,128,256", "2,4,8");
    let first = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(first.cached_trials, 0);
    let runs = fake.runs.load(Ordering::SeqCst);
    let second = kopt_engine::tune_with(&req, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(fake.runs.load(Ordering::SeqCst), runs, "nothing ran");
    assert_eq!(second.measured_trials, 0);
    assert_eq!(second.cached_trials, 12);
    assert!(second.final_cached);
    assert_eq!(second.winner, first.winner);
    // Another problem key, or --fresh: measured again.
    let mut keyed = req.clone();
    keyed.key = Some("M=4096".into());
    let k = kopt_engine::tune_with(&keyed, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(k.cached_trials, 0);
    let mut fresh = req.clone();
    fresh.fresh = true;
    let f = kopt_engine::tune_with(&fresh, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(f.measured_trials, 12);
    // Growing the space measures only the new points.
    let grown = request(&d.path().join("h.db"), "32,64,128,256,512", "2,4,8");
    let g = kopt_engine::tune_with(&grown, &executor(&fake, &[]), &Silent).unwrap();
    assert_eq!(g.measured_trials, 3, "only B=512");
}

#[test]
fn workers_run_on_every_gpu_and_never_share_one() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake::default();
    let req = request(&d.path().join("h.db"), "16..512 x2", "1,2,4,8");
    let r = kopt_engine::tune_with(&req, &executor(&fake, &["0", "1", "2"]), &Silent).unwrap();
    assert_eq!(r.gpus, ["0", "1", "2"]);
    assert_eq!(
        fake.overlaps.load(Ordering::SeqCst),
        0,
        "two runs shared a GPU"
    );
    let seen = fake.gpus_seen.lock().unwrap().clone();
    for g in ["0", "1", "2"] {
        assert!(seen.iter().any(|s| s == g), "GPU {g} was not used");
    }
    let used: BTreeMap<&str, usize> = r.trials.iter().fold(BTreeMap::new(), |mut m, t| {
        *m.entry(t.gpu.as_deref().unwrap()).or_default() += 1;
        m
    });
    assert_eq!(used.len(), 3, "{used:?}");
    assert_eq!(r.winner.as_ref().unwrap().label, "B=128,W=4");
    // The final comparison ran on one GPU only: the first.
    let fc = r.final_comparison.as_ref().unwrap();
    assert!(fc.variants.len() >= 2);
}

#[test]
fn requests_are_validated() {
    let d = tempfile::tempdir().unwrap();
    let ok = request(&d.path().join("h.db"), "1,2", "1,2");
    assert!(ok.validate().is_ok());
    type Mutation = Box<dyn Fn(&mut TuneRequest)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (Box::new(|r| r.template = "k {B}".into()), "{W}"),
        (
            Box::new(|r| r.strategy = Some(Strategy::Random)),
            "--trials",
        ),
        (Box::new(|r| r.trials = Some(0)), "--trials"),
        (
            Box::new(|r| r.gpus = Some(vec!["0".into(), "0".into()])),
            "twice",
        ),
        (Box::new(|r| r.gpus = Some(vec!["0; rm".into()])), "--gpus"),
        (
            Box::new(|r| r.baseline = Some([("B".to_string(), "1".to_string())].into())),
            "W is missing",
        ),
        (Box::new(|r| r.top = 0), "--top"),
        (Box::new(|r| r.measure.stop.max_time_s = 0.0), "--max-time"),
    ];
    for (mutate, expected) in cases {
        let mut r = ok.clone();
        mutate(&mut r);
        let err = r.validate().unwrap_err().to_string();
        assert!(err.contains(expected), "{err} / {expected}");
    }
}

#[test]
fn check_with_several_gpus_needs_the_placeholder() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake::default();
    let mut req = request(&d.path().join("h.db"), "1,2", "1,2");
    req.measure.check = Some(d.path().join("out.npy"));
    let err = kopt_engine::tune_with(&req, &executor(&fake, &["0", "1"]), &Silent).unwrap_err();
    assert!(err.to_string().contains("{CHECK}"), "{err}");
}
