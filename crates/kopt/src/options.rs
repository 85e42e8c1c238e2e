//! Typed flags lowered into the engine's typed requests (ripgrep's way).
//! The engine validates what a request means; what only concerns printing
//! (format, width, where the report goes) is checked here.

use std::path::PathBuf;

use kopt_engine::bench::VariantSpec;
use kopt_engine::profile::timeout_from_secs;
use kopt_engine::workload::MAX_SECONDS;
use kopt_engine::{
    AnalysisOptions, AnalyzeRequest, BenchRequest, CompareRequest, Error, HistoryDb,
    ProfileRequest, TraceRequest, Workload, WorkloadOptions,
};
use kopt_model::Peaks;
use kopt_report::Format;

use crate::cli::{
    AnalyzeArgs, BenchArgs, Budget, CompareArgs, OptimizeArgs, ProfileArgs, ReportArgs, RunArgs,
    TraceArgs,
};

/// How and where a report goes.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    pub format: Format,
    pub output: Option<PathBuf>,
    /// An HTML page written besides the main report.
    pub html: Option<PathBuf>,
    pub width: Option<u16>,
    /// Every column in the terminal table.
    pub wide: bool,
    /// The whole terminal report, not the one-screen default.
    pub verbose: bool,
}

impl ReportOptions {
    pub(crate) fn validate(a: &ReportArgs, inputs: &[PathBuf]) -> Result<Self, Error> {
        if a.width.is_some_and(|w| w < 40) {
            return Err(Error::Usage("--width must be at least 40 columns".into()));
        }
        for (flag, out) in [("--output", &a.output), ("--html", &a.html)] {
            if let Some(out) = out {
                if inputs.iter().any(|f| kopt_store::files::overwrites(out, f)) {
                    return Err(Error::Usage(format!(
                        "{flag} {} would overwrite an input",
                        out.display()
                    )));
                }
            }
        }
        if let (Some(o), Some(h)) = (&a.output, &a.html) {
            if kopt_store::files::overwrites(o, h) {
                return Err(Error::Usage(
                    "--output and --html name the same file".into(),
                ));
            }
        }
        Ok(ReportOptions {
            format: a.format,
            output: a.output.clone(),
            html: a.html.clone(),
            width: a.width,
            wide: a.wide,
            verbose: a.verbose,
        })
    }
}

fn scaled(v: Option<f64>, scale: f64) -> Option<f64> {
    // Non-finite or negative values stay so: the engine names the flag.
    v.map(|x| {
        if x.is_finite() && x > 0.0 {
            x * scale
        } else {
            x
        }
    })
}

fn analysis(a: &ReportArgs, top: Option<usize>) -> AnalysisOptions {
    AnalysisOptions {
        device: a.device.clone(),
        measured_peaks: Peaks {
            dram_bytes_per_s: scaled(a.peak_dram_gbs, 1e9),
            fp32_flops: scaled(a.peak_fp32_tflops, 1e12),
            tensor_bf16_flops: scaled(a.peak_tensor_tflops, 1e12),
        },
        top,
        keep_warmup: a.keep_warmup,
        calibration: HistoryDb::Project,
    }
}

fn workload(
    workload: Workload,
    run: &RunArgs,
    tracer: Option<PathBuf>,
) -> Result<WorkloadOptions, Error> {
    Ok(WorkloadOptions {
        workload,
        gpu: run.gpu.clone(),
        timeout: timeout_from_secs(run.timeout)?,
        quiet: run.quiet,
        tracer,
        runs_dir: run.runs_dir.clone(),
        db: run.db.clone(),
        run_dir: None,
    })
}

pub fn analyze(a: &AnalyzeArgs) -> Result<(AnalyzeRequest, ReportOptions), Error> {
    let report = ReportOptions::validate(&a.report, &a.files)?;
    if a.command.is_empty() {
        // These shape the program's bare run: without a program they would
        // be ignored, so they are refused.
        let given = [
            ("--gpu", a.run.gpu.is_some()),
            ("--timeout", a.run.timeout.is_some()),
            ("--quiet", a.run.quiet),
            ("--runs-dir", a.run.runs_dir.is_some()),
            ("--tracer", a.tracer.is_some()),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
            return Err(Error::Usage(format!(
                "{flag} applies to the bare run of the program that made the trace: give it after `--` (kopt analyze trace.json {flag} ... -- python3 train.py)"
            )));
        }
    }
    let bare_run = (!a.command.is_empty())
        .then(|| {
            workload(
                Workload::Command(a.command.clone()),
                &a.run,
                a.tracer.clone(),
            )
        })
        .transpose()?;
    let mut analysis = analysis(&a.report, a.top);
    if let Some(db) = &a.run.db {
        analysis.calibration = HistoryDb::At(db.clone());
    }
    let req = AnalyzeRequest {
        files: a.files.clone(),
        ncu: a.ncu.clone(),
        bare_run,
        analysis,
    };
    req.validate()?;
    Ok((req, report))
}

pub fn profile(a: &ProfileArgs) -> Result<(ProfileRequest, ReportOptions), Error> {
    let report = ReportOptions::validate(&a.report, &[])?;
    let target = match (&a.script, a.command.is_empty()) {
        (Some(script), true) => {
            Workload::from_script_file(script, &a.python, a.module.as_deref(), a.ops)?
        }
        (None, false) => Workload::Command(a.command.clone()),
        (Some(_), false) => {
            return Err(Error::Usage("give either --script FILE or -- COMMAND, not both".into()))
        }
        (None, true) => {
            return Err(Error::Usage("nothing to profile: give a command after `--` (kopt profile -- python3 bench.py) or --script FILE".into()))
        }
    };
    let run = workload(target, &a.run, a.tracer.clone())?;
    /// Kernels the counter pass covers at most when the timeline leaves it
    /// to kopt.
    const DEFAULT_PROFILE_TOP: usize = 20;
    let req = ProfileRequest {
        run,
        module: a.module.clone(),
        kernel_regex: a.kernel.clone(),
        profile_top: a.profile_top.unwrap_or(DEFAULT_PROFILE_TOP),
        counters_forced: a.profile_top.is_some() || a.deep,
        launches: a.launches,
        deep_top: a.deep.then_some(a.deep_top),
        ncu: a.ncu.clone(),
        timing_pass: a.timing_pass,
        backend: a.backend,
        rocprof: a.rocprof.clone(),
        bare_run: !a.no_bare_run,
        analysis: analysis(&a.report, a.top),
        verify: a.verify,
    };
    req.validate()?;
    Ok((req, report))
}

/// A trace request, and the export file (`--export perfetto FILE`).
pub fn trace(a: &TraceArgs) -> Result<(TraceRequest, ReportOptions, Option<PathBuf>), Error> {
    let export = match a.export.as_slice() {
        [] => None,
        [format, file] if format == "perfetto" || format == "chrome" => Some(PathBuf::from(file)),
        [format, _] => {
            return Err(Error::Usage(format!(
                "--export {format}: the formats are perfetto, chrome (the same JSON)"
            )))
        }
        _ => {
            return Err(Error::Usage(
                "--export takes a format and a file: --export perfetto out.json".into(),
            ))
        }
    };
    let report = ReportOptions::validate(&a.report, &[])?;
    let req = TraceRequest {
        run: workload(
            Workload::Command(a.command.clone()),
            &a.run,
            a.tracer.clone(),
        )?,
        sample: a
            .sample
            .as_deref()
            .map(kopt_engine::trace::parse_sampling)
            .transpose()?,
        keep_timeline: export.is_some(),
        bare_run: !a.no_bare_run,
        analysis: analysis(&a.report, None),
    };
    req.validate()?;
    Ok((req, report, export))
}

pub fn bench(a: &BenchArgs) -> Result<BenchRequest, Error> {
    let variants = match (&a.baseline, &a.candidate) {
        (Some(b), Some(c)) => vec![
            VariantSpec {
                name: "baseline".into(),
                command: b.clone(),
            },
            VariantSpec {
                name: "candidate".into(),
                command: c.clone(),
            },
        ],
        _ => a
            .variants
            .iter()
            .map(|s| VariantSpec::parse(s))
            .collect::<Result<_, _>>()?,
    };
    let mut req = BenchRequest::new(variants);
    req.measure = a.measure.clone().lower();
    req.journal = a.journal.clone();
    if let Some(db) = &a.db {
        req.db = db.clone();
    }
    req.validate()?;
    Ok(req)
}

pub fn compare(a: &CompareArgs) -> Result<CompareRequest, Error> {
    let req = CompareRequest {
        reference: a.reference.clone(),
        candidate: a.candidate.clone(),
        tol: a.tol,
        tf32: a.tf32,
        atol: a.atol,
        rtol: a.rtol,
        allow_dtype_change: a.allow_dtype_change,
        db: HistoryDb::project_or(a.db.clone()),
    };
    req.validate()?;
    Ok(req)
}

pub fn optimize(a: &OptimizeArgs) -> Result<kopt_engine::OptimizeRequest, Error> {
    // --conclude reads the script from the run folder.
    let mut req = kopt_engine::OptimizeRequest::new(a.script.clone().unwrap_or_default());
    req.conclude = a.conclude.clone();
    req.module = a.module.clone();
    req.python = a.python.clone();
    req.gpu = a.run.gpu.clone();
    req.timeout = timeout_from_secs(a.run.timeout)?;
    req.quiet = a.run.quiet;
    req.tracer = a.tracer.clone();
    req.ncu = a.ncu.clone();
    req.counters = !a.no_counters;
    req.force = a.candidates.clone();
    req.skip = a.skip.clone();
    req.budget = match a.budget {
        Budget::Seconds(s) => match timeout_from_secs(Some(s)) {
            Ok(d) => d,
            Err(_) => {
                return Err(Error::Usage(format!(
                    "--budget {s}: give a positive number of seconds, at most {MAX_SECONDS:e} (or `none`)"
                )))
            }
        },
        Budget::Unbounded => None,
    };
    req.allow_precision = a.allow_precision;
    req.stack = !a.no_stack;
    req.profile_kept = !a.no_profile_kept;
    req.threshold = a.threshold;
    req.seed = a.seed;
    req.min_samples = a.min_samples;
    req.max_time_s = a.max_time;
    req.steps = a.steps;
    if let Some(dir) = &a.run.runs_dir {
        req.runs_dir = dir.clone();
    }
    if let Some(db) = &a.run.db {
        req.db = db.clone();
    }
    if a.no_journal {
        req.journal = None;
    } else if let Some(file) = &a.journal_file {
        req.journal = Some(file.clone());
    }
    req.validate()?;
    Ok(req)
}

/// The template from the words after `--`: one word is a shell command as
/// given; several are quoted one by one (placeholders kept readable).
pub fn tune_template(words: &[String]) -> String {
    if let [one] = words {
        return one.clone();
    }
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%{}".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn tune(a: &crate::cli::TuneArgs) -> Result<kopt_engine::TuneRequest, Error> {
    use kopt_engine::tune::space;
    let mut params = Vec::new();
    let mut constraints = Vec::new();
    if let Some(file) = &a.space {
        let (p, c) = space::parse_file(file)?;
        params.extend(p);
        constraints.extend(c);
    }
    for p in &a.params {
        let p = space::parse_param(p)?;
        // --param overrides a parameter of the space file.
        params.retain(|q: &space::Param| q.name != p.name);
        params.push(p);
    }
    constraints.extend(a.constraints.iter().cloned());
    let space = space::Space::new(params, &constraints)?;
    let mut req = kopt_engine::TuneRequest::new(tune_template(&a.command), space);
    req.strategy = a.strategy;
    req.trials = a.trials;
    req.baseline = a
        .baseline
        .as_deref()
        .map(space::parse_assignment)
        .transpose()?;
    req.key = a.key.clone();
    req.fresh = a.fresh;
    req.gpus = a.gpus.as_ref().map(|g| {
        g.split(',')
            .map(|s| s.trim().to_string())
            .collect::<Vec<_>>()
    });
    req.top = a.top;
    req.measure = a.measure.clone().lower();
    if let Some(db) = &a.db {
        req.db = db.clone();
    }
    req.validate()?;
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use kopt_engine::Measurement;

    fn parse(args: &[&str]) -> crate::cli::Command {
        let mut argv = vec!["kopt"];
        argv.extend_from_slice(args);
        crate::cli::Cli::try_parse_from(argv).unwrap().command
    }

    fn analyze_err(args: &[&str]) -> String {
        match parse(args) {
            crate::cli::Command::Analyze(a) => analyze(&a).unwrap_err().to_string(),
            _ => unreachable!(),
        }
    }

    /// The flags' defaults are the engine's (`Measurement::default()`),
    /// the ones Python's keywords left at None get.
    #[test]
    fn measuring_flags_default_to_the_engines_measurement() {
        let crate::cli::Command::Bench(a) = parse(&["bench", "-n", "a=x", "-n", "b=y"]) else {
            unreachable!()
        };
        assert_eq!(bench(&a).unwrap().measure, Measurement::default());
    }

    #[test]
    fn lowers_analyze_flags_and_scales_peaks() {
        let crate::cli::Command::Analyze(a) =
            parse(&["analyze", "a.csv", "--peak-dram-gbs", "3000", "-f", "md"])
        else {
            unreachable!()
        };
        let (req, report) = analyze(&a).unwrap();
        assert_eq!(report.format, Format::Markdown);
        assert_eq!(req.analysis.measured_peaks.dram_bytes_per_s, Some(3.0e12));
    }

    #[test]
    fn rejects_bad_analyze_combinations() {
        for (args, expected) in [
            (&["analyze", "a.csv", "--top", "0"][..], "--top"),
            (
                &["analyze", "a.csv", "--peak-dram-gbs=-1"][..],
                "--peak-dram-gbs",
            ),
            (
                &["analyze", "a.csv", "--peak-fp32-tflops", "NaN"][..],
                "--peak-fp32-tflops",
            ),
            (
                &["analyze", "a.csv", "-o", "a.csv"][..],
                "overwrite an input",
            ),
            (&["analyze", "a.csv", "--width", "10"][..], "--width"),
            (&["analyze", "a.csv", "--device", " "][..], "--device"),
            (
                &["analyze", "a.csv", "--html", "a.csv"][..],
                "--html a.csv would overwrite",
            ),
            (
                &["analyze", "a.csv", "-o", "r.html", "--html", "r.html"][..],
                "same file",
            ),
            (
                &["analyze", "t.json", "--gpu", "1"][..],
                "--gpu applies to the bare run",
            ),
            (
                &["analyze", "t.json", "--timeout", "9"][..],
                "--timeout applies",
            ),
            (
                &["analyze", "t.json", "--tracer", "x.so"][..],
                "--tracer applies",
            ),
            (
                &["analyze", "t.json", "--timeout", "0", "--", "python3"][..],
                "--timeout must be a positive",
            ),
        ] {
            let err = analyze_err(args);
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
        assert!(
            crate::cli::Cli::try_parse_from(["kopt", "analyze", "a.csv", "-f", "xml"]).is_err()
        );
    }

    #[test]
    fn profile_workload_from_command_or_script() {
        let crate::cli::Command::Profile(a) = parse(&["profile", "--", "python3", "bench.py"])
        else {
            unreachable!()
        };
        let (r, _) = profile(&a).unwrap();
        assert_eq!(
            r.run.workload,
            Workload::Command(vec!["python3".into(), "bench.py".into()])
        );
        assert_eq!(r.deep_top, None);

        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("topk.py");
        std::fs::write(&script, "print(1)").unwrap();
        let s = script.display().to_string();
        let crate::cli::Command::Profile(a) = parse(&[
            "profile",
            "--script",
            &s,
            "--python",
            "python3.12",
            "--deep",
        ]) else {
            unreachable!()
        };
        let (r, _) = profile(&a).unwrap();
        assert_eq!(
            r.run.workload,
            Workload::Command(vec!["python3.12".into(), s])
        );
        assert_eq!(r.deep_top, Some(3));
    }

    #[test]
    fn rejects_bad_profile_combinations() {
        for (args, expected) in [
            (&["profile"][..], "nothing to profile"),
            (
                &["profile", "--script", "/nonexistent/x.py"][..],
                "no such file",
            ),
            (
                &["profile", "--profile-top", "0", "--", "x"][..],
                "--profile-top",
            ),
            (&["profile", "--top", "0", "--", "x"][..], "--top"),
            (&["profile", "--launches", "0", "--", "x"][..], "--launches"),
            (&["profile", "--timeout=-2", "--", "x"][..], "--timeout"),
            (&["profile", "--kernel", "", "--", "x"][..], "--kernel"),
            (
                &["profile", "--deep", "--deep-top", "0", "--", "x"][..],
                "--deep-top",
            ),
        ] {
            let crate::cli::Command::Profile(a) = parse(args) else {
                unreachable!()
            };
            let err = profile(&a).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
        assert!(crate::cli::Cli::try_parse_from([
            "kopt",
            "profile",
            "--timing-pass",
            "nsys",
            "--",
            "x"
        ])
        .is_err());
    }
}

#[cfg(test)]
mod output_identity_tests {
    use super::*;
    use clap::Parser;

    /// #39: the guard compared path text, so `./in.csv`, an absolute path, a
    /// symlink or `--html` to the input got through and overwrote it.
    #[test]
    fn an_output_that_is_the_input_by_another_name_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.csv");
        std::fs::write(&input, "x").unwrap();
        std::os::unix::fs::symlink(&input, d.path().join("link.csv")).unwrap();
        let sub = d.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let input_s = input.display().to_string();
        for (flag, out) in [
            ("-o", d.path().join("sub/../in.csv")),
            ("-o", d.path().join("link.csv")),
            ("--html", d.path().join("./in.csv")),
        ] {
            let out_s = out.display().to_string();
            let cli = crate::cli::Cli::try_parse_from(["kopt", "analyze", &input_s, flag, &out_s])
                .unwrap();
            let crate::cli::Command::Analyze(a) = cli.command else {
                unreachable!()
            };
            let e = analyze(&a).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                e.contains("would overwrite an input"),
                "{flag} {out_s}: {e:?}"
            );
        }
    }
}
