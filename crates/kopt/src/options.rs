//! Options validated apart from clap (hyperfine's way): every rule about
//! what combinations make sense lives here and is unit-tested.

use std::path::PathBuf;
use std::time::Duration;

use kopt_model::Peaks;
use kopt_report::Format;

use crate::cli::{AnalyzeArgs, ProfileArgs, ReportArgs, TraceArgs};

/// How and where the report goes.
#[derive(Debug)]
pub struct ReportOptions {
    pub format: Format,
    pub output: Option<PathBuf>,
    /// An HTML page written besides the main report.
    pub html: Option<PathBuf>,
    pub device: Option<String>,
    pub measured_peaks: Peaks,
    pub width: Option<u16>,
}

#[derive(Debug)]
pub struct AnalyzeRequest {
    pub files: Vec<PathBuf>,
    pub top: Option<usize>,
    pub ncu: Option<PathBuf>,
    pub report: ReportOptions,
}

#[derive(Debug)]
pub struct ProfileRequest {
    /// The workload's argv (from `-- COMMAND...` or `--python --script`).
    pub argv: Vec<String>,
    pub module: Option<String>,
    pub gpu: Option<String>,
    pub timeout: Option<Duration>,
    pub kernel_regex: Option<String>,
    pub top: usize,
    pub launches: u32,
    pub deep_top: Option<usize>,
    pub quiet: bool,
    pub ncu: Option<PathBuf>,
    /// Pass 1 from kopt's tracer (else ncu).
    pub trace_timing: bool,
    pub tracer: Option<PathBuf>,
    pub runs_dir: PathBuf,
    pub db: PathBuf,
    pub report: ReportOptions,
}

#[derive(Debug)]
pub struct TraceRequest {
    pub argv: Vec<String>,
    /// Chrome-trace JSON written beside the report.
    pub export: Option<PathBuf>,
    pub gpu: Option<String>,
    pub timeout: Option<Duration>,
    pub quiet: bool,
    pub tracer: Option<PathBuf>,
    pub sample: Option<kopt_collect::trace::Sampling>,
    pub runs_dir: PathBuf,
    pub db: PathBuf,
    pub report: ReportOptions,
}

fn timeout(t: Option<f64>) -> Result<Option<Duration>, String> {
    match t {
        Some(t) if !(t.is_finite() && t > 0.0) => Err(format!(
            "--timeout must be a positive number of seconds, got {t}"
        )),
        Some(t) => Ok(Some(Duration::from_secs_f64(t))),
        None => Ok(None),
    }
}

impl TryFrom<TraceArgs> for TraceRequest {
    type Error = String;

    fn try_from(a: TraceArgs) -> Result<Self, String> {
        let export = match a.export.as_slice() {
            [] => None,
            [format, file] if format == "perfetto" || format == "chrome" => {
                Some(PathBuf::from(file))
            }
            [format, _] => {
                return Err(format!(
                    "--export {format}: the formats are perfetto, chrome (the same JSON)"
                ))
            }
            _ => {
                return Err("--export takes a format and a file: --export perfetto out.json".into())
            }
        };
        Ok(TraceRequest {
            report: ReportOptions::validate(a.report, &[])?,
            argv: a.command,
            export,
            gpu: a.run.gpu,
            timeout: timeout(a.run.timeout)?,
            quiet: a.run.quiet,
            tracer: a.tracer,
            sample: a
                .sample
                .as_deref()
                .map(kopt_collect::trace::Sampling::parse)
                .transpose()?,
            runs_dir: a.run.runs_dir,
            db: a.run.db,
        })
    }
}

fn positive(name: &str, v: Option<f64>, scale: f64) -> Result<Option<f64>, String> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            Err(format!("--{name} must be a positive number, got {x}"))
        }
        Some(x) => Ok(Some(x * scale)),
        None => Ok(None),
    }
}

impl ReportOptions {
    fn validate(a: ReportArgs, inputs: &[PathBuf]) -> Result<Self, String> {
        let format = Format::parse(&a.format).ok_or_else(|| {
            format!(
                "--format {} is not one of {}",
                a.format,
                Format::NAMES.join(", ")
            )
        })?;
        if a.width.is_some_and(|w| w < 40) {
            return Err("--width must be at least 40 columns".into());
        }
        if a.device.as_deref().is_some_and(|d| d.trim().is_empty()) {
            return Err("--device needs a name".into());
        }
        for (flag, out) in [("--output", &a.output), ("--html", &a.html)] {
            if let Some(out) = out {
                if inputs.iter().any(|f| f == out) {
                    return Err(format!("{flag} {} would overwrite an input", out.display()));
                }
            }
        }
        if a.output.is_some() && a.output == a.html {
            return Err("--output and --html name the same file".into());
        }
        Ok(ReportOptions {
            measured_peaks: Peaks {
                dram_bytes_per_s: positive("peak-dram-gbs", a.peak_dram_gbs, 1e9)?,
                fp32_flops: positive("peak-fp32-tflops", a.peak_fp32_tflops, 1e12)?,
                tensor_bf16_flops: positive("peak-tensor-tflops", a.peak_tensor_tflops, 1e12)?,
            },
            format,
            output: a.output,
            html: a.html,
            device: a.device,
            width: a.width,
        })
    }
}

impl TryFrom<AnalyzeArgs> for AnalyzeRequest {
    type Error = String;

    fn try_from(a: AnalyzeArgs) -> Result<Self, String> {
        if a.top == Some(0) {
            return Err("--top must be at least 1".into());
        }
        let report = ReportOptions::validate(a.report, &a.files)?;
        Ok(AnalyzeRequest {
            files: a.files,
            top: a.top,
            ncu: a.ncu,
            report,
        })
    }
}

impl TryFrom<ProfileArgs> for ProfileRequest {
    type Error = String;

    fn try_from(a: ProfileArgs) -> Result<Self, String> {
        let argv = match (&a.script, a.command.is_empty()) {
            (Some(script), true) => vec![a.python.clone(), script.display().to_string()],
            (None, false) => a.command.clone(),
            (Some(_), false) => return Err("give either --script FILE or -- COMMAND, not both".into()),
            (None, true) => {
                return Err("nothing to profile: give a command after `--` (kopt profile -- python3 bench.py) or --script FILE".into())
            }
        };
        if let Some(script) = &a.script {
            if !script.is_file() {
                return Err(format!("--script {}: no such file", script.display()));
            }
        }
        if a.top == 0 {
            return Err("--top must be at least 1".into());
        }
        if a.launches == 0 {
            return Err("--launches must be at least 1".into());
        }
        if a.deep && a.deep_top == 0 {
            return Err("--deep-top must be at least 1".into());
        }
        let timeout = timeout(a.run.timeout)?;
        if a.kernel.as_deref().is_some_and(|k| k.is_empty()) {
            return Err("--kernel needs a regex".into());
        }
        let trace_timing = match a.timing_pass.as_str() {
            "tracer" => true,
            "ncu" => false,
            other => return Err(format!("--timing-pass {other} is not one of tracer, ncu")),
        };
        let report = ReportOptions::validate(a.report, &[])?;
        Ok(ProfileRequest {
            argv,
            module: a.module,
            gpu: a.run.gpu,
            timeout,
            kernel_regex: a.kernel,
            top: a.top,
            launches: a.launches,
            deep_top: a.deep.then_some(a.deep_top),
            quiet: a.run.quiet,
            ncu: a.ncu,
            trace_timing,
            tracer: a.tracer,
            runs_dir: a.run.runs_dir,
            db: a.run.db,
            report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RunArgs;

    fn report() -> ReportArgs {
        ReportArgs {
            format: "term".into(),
            output: None,
            html: None,
            device: None,
            peak_dram_gbs: None,
            peak_fp32_tflops: None,
            peak_tensor_tflops: None,
            width: None,
        }
    }

    fn analyze_args() -> AnalyzeArgs {
        AnalyzeArgs {
            files: vec!["a.csv".into()],
            top: None,
            ncu: None,
            report: report(),
        }
    }

    fn profile_args() -> ProfileArgs {
        ProfileArgs {
            command: vec!["python3".into(), "bench.py".into()],
            script: None,
            python: "python3".into(),
            module: None,
            kernel: None,
            top: 10,
            launches: 2,
            deep: false,
            deep_top: 3,
            ncu: None,
            timing_pass: "tracer".into(),
            tracer: None,
            run: RunArgs {
                gpu: None,
                timeout: None,
                quiet: false,
                runs_dir: ".kopt/runs".into(),
                db: ".kopt/history.db".into(),
            },
            report: report(),
        }
    }

    #[test]
    fn accepts_defaults_and_scales_peaks() {
        let mut a = analyze_args();
        a.report.peak_dram_gbs = Some(3000.0);
        let r = AnalyzeRequest::try_from(a).unwrap();
        assert_eq!(r.report.format, Format::Terminal);
        assert_eq!(r.report.measured_peaks.dram_bytes_per_s, Some(3.0e12));
    }

    #[test]
    fn rejects_bad_analyze_combinations() {
        type Mutation = Box<dyn Fn(&mut AnalyzeArgs)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|a| a.report.format = "xml".into()), "--format xml"),
            (Box::new(|a| a.top = Some(0)), "--top"),
            (
                Box::new(|a| a.report.peak_dram_gbs = Some(-1.0)),
                "--peak-dram-gbs",
            ),
            (
                Box::new(|a| a.report.peak_fp32_tflops = Some(f64::NAN)),
                "--peak-fp32-tflops",
            ),
            (
                Box::new(|a| a.report.output = Some("a.csv".into())),
                "overwrite an input",
            ),
            (Box::new(|a| a.report.width = Some(10)), "--width"),
            (Box::new(|a| a.report.device = Some(" ".into())), "--device"),
            (
                Box::new(|a| a.report.html = Some("a.csv".into())),
                "--html a.csv would overwrite",
            ),
            (
                Box::new(|a| {
                    a.report.output = Some("r.html".into());
                    a.report.html = Some("r.html".into());
                }),
                "same file",
            ),
        ];
        for (mutate, expected) in cases {
            let mut a = analyze_args();
            mutate(&mut a);
            let err = AnalyzeRequest::try_from(a).unwrap_err();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
    }

    #[test]
    fn profile_workload_from_command_or_script() {
        let r = ProfileRequest::try_from(profile_args()).unwrap();
        assert_eq!(r.argv, ["python3", "bench.py"]);
        assert_eq!(r.deep_top, None);

        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("topk.py");
        std::fs::write(&script, "print(1)").unwrap();
        let mut a = profile_args();
        a.command.clear();
        a.script = Some(script.clone());
        a.python = "python3.12".into();
        a.deep = true;
        let r = ProfileRequest::try_from(a).unwrap();
        assert_eq!(
            r.argv,
            ["python3.12".to_string(), script.display().to_string()]
        );
        assert_eq!(r.deep_top, Some(3));
    }

    #[test]
    fn rejects_bad_profile_combinations() {
        type Mutation = Box<dyn Fn(&mut ProfileArgs)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|a| a.command.clear()), "nothing to profile"),
            (Box::new(|a| a.script = Some("x.py".into())), "not both"),
            (
                Box::new(|a| {
                    a.command.clear();
                    a.script = Some("/nonexistent/x.py".into());
                }),
                "no such file",
            ),
            (Box::new(|a| a.top = 0), "--top"),
            (Box::new(|a| a.launches = 0), "--launches"),
            (Box::new(|a| a.run.timeout = Some(-2.0)), "--timeout"),
            (Box::new(|a| a.kernel = Some(String::new())), "--kernel"),
            (
                Box::new(|a| a.timing_pass = "nsys".into()),
                "--timing-pass nsys",
            ),
            (
                Box::new(|a| {
                    a.deep = true;
                    a.deep_top = 0;
                }),
                "--deep-top",
            ),
        ];
        for (mutate, expected) in cases {
            let mut a = profile_args();
            mutate(&mut a);
            let err = ProfileRequest::try_from(a).unwrap_err();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
    }
}
