//! What a workload is and how it runs: its command or script, GPU,
//! timeout and where its records go. Shared by every workflow that runs
//! one (`profile`, `trace`, the bare run of `analyze TRACE -- CMD`,
//! `optimize`). A front end fills these in from its input and calls; the
//! engine resolves the record paths and creates the run folder (writing a
//! script and its driver there) only once the request is accepted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kopt_collect::Workload as Launch;
use kopt_model::run_folder::{BARE_STEPS_FILE, BEST_BARE_STEPS_FILE};

use crate::error::{Error, Result};
use crate::record::RecordPaths;
use crate::run_folder::create_run_dir;

/// What runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// argv as given: `argv[0]` is the program (no shell).
    Command(Vec<String>),
    /// A script given as text: copied into the run folder once the request
    /// is accepted and, when it is a module script (a `Model` class and
    /// `get_inputs()`), run by kopt's driver so its steps are exact.
    Script(ScriptSource),
}

impl Default for Workload {
    fn default() -> Self {
        Workload::Command(Vec::new())
    }
}

/// A script's text and how kopt runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptSource {
    pub text: String,
    /// The module's name: the copied file's stem, and the run's label.
    pub module: String,
    pub python: String,
    /// Driver passes before the measured steps.
    pub warmup: u32,
    /// Measured driver passes, each an NVTX step.
    pub steps: u32,
    /// Record PyTorch's op ranges with input shapes.
    pub record_ops: bool,
    /// The folder the script came from, when it came from a file: on the
    /// copy's `sys.path`, so its imports of its neighbours resolve.
    pub dir: Option<PathBuf>,
}

impl ScriptSource {
    /// Steps the CLI's `--script` drives a module script for.
    pub const WARMUP: u32 = 3;
    pub const STEPS: u32 = 20;

    pub fn new(text: String, module: String, python: String) -> ScriptSource {
        ScriptSource {
            text,
            module,
            python,
            warmup: Self::WARMUP,
            steps: Self::STEPS,
            record_ops: false,
            dir: None,
        }
    }

    /// The script prepared in `dir` (`crate::module_script::prepare`), its
    /// source folder noted beside the copy when it is driven.
    pub(crate) fn prepare_in(
        &self,
        dir: &Path,
        record_ops: bool,
    ) -> Result<crate::module_script::PreparedScript> {
        let prepared = crate::module_script::prepare(
            dir,
            &self.text,
            &self.module,
            &self.python,
            self.warmup,
            self.steps,
            record_ops,
        )?;
        if let Some(source) = self.dir.as_deref().filter(|_| prepared.driven) {
            kopt_collect::module_script::note_source_dir(&prepared.script, source)
                .map_err(|e| Error::Output(e.to_string()))?;
        }
        Ok(prepared)
    }
}

impl Workload {
    /// `--script FILE`: a module script is driven by kopt (and copied into
    /// the run folder when the request is accepted); any other script runs
    /// in place as `python FILE`. The module is named `module`, else after
    /// the file.
    pub fn from_script_file(
        path: &Path,
        python: &str,
        module: Option<&str>,
        record_ops: bool,
    ) -> Result<Workload> {
        if !path.exists() {
            return Err(Error::Usage(format!(
                "--script {}: no such file",
                path.display()
            )));
        }
        let bytes = kopt_store::confined::read_regular(path, MAX_SCRIPT_BYTES)
            .map_err(|e| Error::Input(format!("--script: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::Input(format!("--script {}: not UTF-8 text", path.display())))?;
        // Blank lines and comments run nothing: a profile of it would only
        // time Python's start-up.
        let has_code = text.lines().any(|l| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        });
        if !has_code {
            return Err(Error::Input(format!(
                "--script {}: nothing to run: the file is empty or holds only comments",
                path.display()
            )));
        }
        if !crate::module_script::is_module_script(&text) {
            return Ok(Workload::Command(vec![
                python.to_string(),
                path.display().to_string(),
            ]));
        }
        let module = module.map(str::to_string).unwrap_or_else(|| {
            path.file_stem()
                .map_or("module".into(), |s| s.to_string_lossy().into_owned())
        });
        let mut source = ScriptSource::new(text, module, python.to_string());
        source.record_ops = record_ops;
        source.dir = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        Ok(Workload::Script(source))
    }

    /// In words, for messages: the command in backquotes, or the script.
    pub fn describe(&self) -> String {
        match self {
            Workload::Command(argv) => format!("`{}`", argv.join(" ")),
            Workload::Script(s) => format!("the script of module {}", s.module),
        }
    }

    /// Whether kopt's driver runs it (a module script, given as text or as
    /// the driver's own command).
    pub fn is_driven(&self) -> bool {
        match self {
            Workload::Command(argv) => crate::module_script::driven_script(argv).is_some(),
            Workload::Script(s) => crate::module_script::is_module_script(&s.text),
        }
    }
}

/// The largest script `--script` reads (a module script is source code).
const MAX_SCRIPT_BYTES: u64 = 16 << 20;

/// How a workload runs (shared by profile, trace and analyze's bare run).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkloadOptions {
    pub workload: Workload,
    /// `CUDA_VISIBLE_DEVICES` for the workload.
    pub gpu: Option<String>,
    /// Kill its whole process group after this long (per pass for profile).
    pub timeout: Option<Duration>,
    /// Keep the workload's output in the logs only.
    pub quiet: bool,
    /// kopt's tracer library (default: beside the kopt binary, or $KOPT_TRACER).
    pub tracer: Option<PathBuf>,
    /// Folder of run folders (default: [`RecordPaths`]'s).
    pub runs_dir: Option<PathBuf>,
    /// History database (default: [`RecordPaths`]'s).
    pub db: Option<PathBuf>,
    /// Use this folder as the run folder (it is created if missing) instead
    /// of a new one under `runs_dir`.
    pub run_dir: Option<PathBuf>,
}

impl WorkloadOptions {
    /// Options that run `argv`, everything else at its default.
    pub fn command(argv: Vec<String>) -> WorkloadOptions {
        WorkloadOptions {
            workload: Workload::Command(argv),
            ..Default::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        match &self.workload {
            Workload::Command(argv) if argv.first().is_none_or(|p| p.is_empty()) => {
                return Err(Error::Usage(
                    "nothing to run: give a command after `--` (kopt profile -- python3 bench.py) or --script FILE".into(),
                ));
            }
            Workload::Script(s) => {
                if s.text.trim().is_empty() {
                    return Err(Error::Usage("the script is empty".into()));
                }
                if s.steps == 0 {
                    return Err(Error::Usage("steps must be at least 1".into()));
                }
                if s.module.trim().is_empty() || s.python.is_empty() {
                    return Err(Error::Usage(
                        "a script needs a module name and a Python interpreter".into(),
                    ));
                }
            }
            Workload::Command(_) => {}
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::Usage(
                "--timeout must be a positive number of seconds".into(),
            ));
        }
        Ok(())
    }

    /// The command as the engine runs it. A script's is its driver's (or
    /// the copied script's), known once the request is accepted
    /// ([`WorkloadOptions::accept`]); before that it is empty.
    pub(crate) fn argv(&self) -> &[String] {
        match &self.workload {
            Workload::Command(argv) => argv,
            Workload::Script(_) => &[],
        }
    }

    /// The history database: the one named, else [`RecordPaths`]'s.
    pub fn db(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(|| RecordPaths::current().db)
    }

    /// The request accepted: the run folder created (the one named, else a
    /// new one under the runs folder) and, for a script, the script and
    /// kopt's driver written into it. The options returned run that command
    /// in that folder with their record paths resolved; with the run's id.
    pub(crate) fn accept(&self) -> Result<(String, WorkloadOptions)> {
        self.validate()?;
        let (id, dir) = self.create_run_dir()?;
        let argv = match &self.workload {
            Workload::Command(argv) => argv.clone(),
            Workload::Script(s) => s.prepare_in(&dir, s.record_ops)?.argv,
        };
        let accepted = WorkloadOptions {
            workload: Workload::Command(argv),
            runs_dir: Some(self.runs_dir()),
            db: Some(self.db()),
            run_dir: Some(dir),
            ..self.clone()
        };
        Ok((id, accepted))
    }

    fn runs_dir(&self) -> PathBuf {
        self.runs_dir
            .clone()
            .unwrap_or_else(|| RecordPaths::current().runs_dir)
    }

    /// The run folder: the one named, else a new one under `runs_dir`.
    fn create_run_dir(&self) -> Result<(String, PathBuf)> {
        match &self.run_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| crate::error::io_error(dir, "create", e))?;
                // A named folder may hold an earlier run's bare steps.
                let _ = std::fs::remove_file(dir.join(BARE_STEPS_FILE));
                let _ = std::fs::remove_file(dir.join(BEST_BARE_STEPS_FILE));
                let id = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Ok((id, dir.clone()))
            }
            None => create_run_dir(&self.runs_dir()),
        }
    }

    /// The accepted run folder (`accept` names it).
    pub(crate) fn folder(&self) -> PathBuf {
        self.run_dir.clone().unwrap_or_default()
    }

    pub(crate) fn launch(&self) -> Launch {
        Launch {
            argv: self.argv().to_vec(),
            gpu: self.gpu.clone(),
            timeout: self.timeout,
        }
    }
}

/// The longest time kopt accepts for a timeout or a time budget, in
/// seconds (about 31 years): beyond it `Duration::from_secs_f64` panics
/// (`1e19`, `1e300`), and no run is meant to last longer.
pub const MAX_SECONDS: f64 = 1e9;

/// A timeout in seconds from a front end, checked.
pub fn timeout_from_secs(t: Option<f64>) -> Result<Option<Duration>> {
    match t {
        Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::Usage(format!(
            "--timeout must be a positive number of seconds, got {t}"
        ))),
        Some(t) if t > MAX_SECONDS => Err(Error::Usage(format!(
            "--timeout must be at most {MAX_SECONDS:e} seconds, got {t:e}"
        ))),
        Some(t) => Ok(Some(secs(t))),
        None => Ok(None),
    }
}

/// `s` seconds as a `Duration`: negative or NaN is zero, too large is
/// `Duration::MAX` (never the panic of `Duration::from_secs_f64`).
pub fn secs(s: f64) -> Duration {
    if s.is_nan() || s <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX)
}

/// How one timed run of a command ended ([`time_once`]).
#[derive(Debug)]
pub enum TimedRun {
    /// It ran to its end: wall seconds, and its exit status when it failed.
    Finished {
        seconds: f64,
        failure: Option<String>,
    },
    /// It was still running at the limit; its group was stopped.
    OverLimit,
    /// The front end cancelled it (its group was stopped).
    Cancelled,
}

/// Run `workload` once untraced, stopped at `limit` ([`time_once`]): a
/// script is prepared in a scratch folder for it, so nothing is left in the
/// runs folder by an estimate.
pub fn time_workload_once(workload: &Workload, limit: Duration) -> Result<TimedRun> {
    match workload {
        Workload::Command(argv) => time_once(argv, limit),
        Workload::Script(s) => {
            let scratch = tempfile::tempdir()
                .map_err(|e| Error::Output(format!("scratch folder for a timing run: {e}")))?;
            let prepared = s.prepare_in(scratch.path(), false)?;
            time_once(&prepared.argv, limit)
        }
    }
}

/// Run `argv` once (no shell unless argv names one) through kopt-collect's
/// runner, output read and dropped, stopped at `limit`: how a front end
/// times a workload before it pays for a measurement (MCP's estimate).
pub fn time_once(argv: &[String], limit: Duration) -> Result<TimedRun> {
    use kopt_collect::runner::{run_group, GroupError, GroupSpec, Stop};
    let Some((program, args)) = argv.split_first() else {
        return Err(Error::Usage("empty command".into()));
    };
    let exit = run_group(
        &GroupSpec {
            program: std::path::Path::new(program),
            args,
            env: &[],
            timeout: Some(limit),
            stop: Stop::Kill,
            max_line: 4096,
            max_output: None,
        },
        &mut |_, _| {},
        &mut |_, _| {},
    );
    match exit {
        // The runner stops a cancelled run as it stops one past its
        // limit: a cancellation is not "over the budget".
        Ok(e) if e.timed_out && kopt_collect::runner::cancel_requested() => Ok(TimedRun::Cancelled),
        Ok(e) if e.timed_out => Ok(TimedRun::OverLimit),
        Ok(e) => Ok(TimedRun::Finished {
            seconds: e.elapsed.as_secs_f64(),
            failure: (!e.status.success()).then(|| e.status.to_string()),
        }),
        Err(GroupError::Cancelled) => Ok(TimedRun::Cancelled),
        Err(e) => Err(Error::WorkloadFailed(format!("{program}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\ndef get_inputs():\n    return [torch.randn(2)]\n";

    fn script(text: &str) -> WorkloadOptions {
        WorkloadOptions {
            workload: Workload::Script(ScriptSource::new(
                text.into(),
                "topk".into(),
                "python3".into(),
            )),
            ..Default::default()
        }
    }

    #[test]
    fn a_script_file_is_driven_only_when_it_is_a_module_script() {
        let d = tempfile::tempdir().unwrap();
        let module = d.path().join("moe_routing.py");
        std::fs::write(&module, MODULE).unwrap();
        let plain = d.path().join("bench.py");
        std::fs::write(&plain, "print(1)\n").unwrap();

        let w = Workload::from_script_file(&module, "python3.12", None, true).unwrap();
        let Workload::Script(s) = &w else {
            panic!("{w:?}")
        };
        assert_eq!(
            (s.module.as_str(), s.python.as_str()),
            ("moe_routing", "python3.12")
        );
        assert!(s.record_ops && w.is_driven());
        assert_eq!(
            Workload::from_script_file(&module, "python3", Some("moe"), false)
                .map(|w| w.describe())
                .unwrap(),
            "the script of module moe"
        );
        // Nothing is copied: a plain script runs where it is.
        assert_eq!(
            Workload::from_script_file(&plain, "python3", None, false).unwrap(),
            Workload::Command(vec!["python3".into(), plain.display().to_string()])
        );
        let missing = Workload::from_script_file(&d.path().join("no.py"), "python3", None, false);
        assert!(missing.unwrap_err().to_string().contains("no such file"));
        let fifo = d.path().join("fifo.py");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success()));
        let refused = Workload::from_script_file(&fifo, "python3", None, false).unwrap_err();
        assert!(
            refused.to_string().contains("not a regular file"),
            "{refused}"
        );
        // A sixth hostile round (L5): an empty script was profiled.
        for empty in ["", "\n  \n", "# only a comment\n#!\n"] {
            std::fs::write(&plain, empty).unwrap();
            let e = Workload::from_script_file(&plain, "python3", None, false).unwrap_err();
            assert!(matches!(e, Error::Input(_)), "{e:?}");
            assert!(
                e.to_string().contains("nothing to run")
                    && e.to_string().contains(&plain.display().to_string()),
                "{e}"
            );
        }
        std::fs::write(&plain, [0xff, 0xfe, b'\n']).unwrap();
        let binary = Workload::from_script_file(&plain, "python3", None, false).unwrap_err();
        assert!(binary.to_string().contains("not UTF-8"), "{binary}");
    }

    #[test]
    fn a_script_request_is_checked_before_anything_is_created() {
        let d = tempfile::tempdir().unwrap();
        let runs = d.path().join("runs");
        for (mut opts, expected) in [
            (script("  \n"), "the script is empty"),
            (script(MODULE), "steps must be at least 1"),
            (WorkloadOptions::command(Vec::new()), "nothing to run"),
        ] {
            if let Workload::Script(s) = &mut opts.workload {
                if !s.text.trim().is_empty() {
                    s.steps = 0;
                }
            }
            opts.runs_dir = Some(runs.clone());
            let err = opts.accept().unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should say {expected}");
            assert!(!runs.exists(), "{expected}: a run folder was created");
        }
    }

    #[test]
    fn accepting_a_script_writes_it_and_its_driver_into_a_new_run_folder() {
        let d = tempfile::tempdir().unwrap();
        let mut opts = script(MODULE);
        opts.runs_dir = Some(d.path().join("runs"));
        opts.db = Some(d.path().join("h.db"));
        opts.gpu = Some("1".into());
        assert!(
            opts.argv().is_empty(),
            "a script's command is known once accepted"
        );

        let (id, accepted) = opts.accept().unwrap();
        let dir = accepted.folder();
        assert_eq!(dir, d.path().join("runs").join(&id));
        assert_eq!(
            std::fs::read_to_string(dir.join("topk.py")).unwrap(),
            MODULE
        );
        let argv = accepted.argv();
        assert_eq!(argv[0], "python3");
        assert!(Path::new(&argv[1]).starts_with(&dir), "{argv:?}");
        assert!(accepted.workload.is_driven());
        assert_eq!(accepted.launch().gpu.as_deref(), Some("1"));
        assert_eq!(accepted.db(), d.path().join("h.db"));
        // A second acceptance is a second run folder.
        let (other, _) = opts.accept().unwrap();
        assert_ne!(id, other);
    }

    #[test]
    fn a_script_from_a_file_has_its_folder_noted_beside_the_copy() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir(&src).unwrap();
        let file = src.join("model.py");
        std::fs::write(&file, MODULE).unwrap();
        let Workload::Script(s) =
            Workload::from_script_file(&file, "python3", None, false).unwrap()
        else {
            panic!("a module script")
        };
        assert_eq!(
            s.dir.as_deref(),
            Some(src.canonicalize().unwrap().as_path())
        );
        let run = d.path().join("run");
        let prepared = s.prepare_in(&run, false).unwrap();
        let noted = run.join(kopt_collect::module_script::SOURCE_DIR_FILE);
        assert_eq!(
            std::fs::read_to_string(noted).unwrap(),
            src.canonicalize().unwrap().display().to_string()
        );
        assert!(prepared.script.starts_with(&run));
        // Text without a file (profile_module's): nothing noted.
        let text_only = ScriptSource::new(MODULE.into(), "m".into(), "python3".into());
        let other = d.path().join("other");
        text_only.prepare_in(&other, false).unwrap();
        assert!(!other
            .join(kopt_collect::module_script::SOURCE_DIR_FILE)
            .exists());
    }
}
