//! PyTorch module scripts in the KernelBench convention (an `nn.Module`
//! class, `get_inputs()`, optionally `get_init_inputs()`): kopt drives them
//! itself, so `profile`, `profile_module` and `optimize` see exact steps.
//! The Python it runs is kept in `python/` and written into the run
//! folder, beside kopt's other runners; the engine decides when to run it.

use std::path::{Path, PathBuf};

/// A module script that cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ModuleScriptError {
    /// The request is wrong (an empty script, no steps).
    #[error("{0}")]
    Usage(String),
    /// The run folder could not be written.
    #[error("{}: cannot {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
}

type Result<T, E = ModuleScriptError> = std::result::Result<T, E>;

fn io_error(path: &Path, what: &'static str, source: std::io::Error) -> ModuleScriptError {
    ModuleScriptError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The loader both drivers import.
const LOADER: (&str, &str) = ("kopt_module.py", include_str!("../python/kopt_module.py"));
/// Warm-up, then N steps in NVTX ranges (profile, trace).
const PROFILE_DRIVER: (&str, &str) = (
    "kopt_profile_driver.py",
    include_str!("../python/kopt_profile_driver.py"),
);
/// The in-process gate's harness: two callables timed in one process
/// (`kopt bench --script`, and the Python package's `kopt.bench`, which
/// runs this same text). It imports nothing from kopt.
pub const GATE_HARNESS: (&str, &str) = (
    "kopt_gate_harness.py",
    include_str!("../python/kopt_gate_harness.py"),
);
/// Candidates built, checked and timed (optimize).
const OPTIMIZE_HARNESS: (&str, &str) = (
    "kopt_optimize.py",
    include_str!("../python/kopt_optimize.py"),
);

/// True when the script defines `get_inputs()` and a class: kopt drives it.
pub fn is_module_script(text: &str) -> bool {
    let get_inputs = text.lines().any(|l| {
        l.strip_prefix("def get_inputs")
            .is_some_and(|rest| rest.trim_start().starts_with('('))
    });
    let class = text.lines().any(|l| {
        l.strip_prefix("class ")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_alphabetic() || c == '_'))
    });
    get_inputs && class
}

/// Does a module script define a training step (a top-level
/// `get_optimizer` or `train_step`, as kopt_module.is_training asks)?
pub fn is_training_script(text: &str) -> bool {
    text.lines().any(|l| {
        ["def get_optimizer", "def train_step"].iter().any(|d| {
            l.strip_prefix(d)
                .is_some_and(|rest| rest.trim_start().starts_with('('))
        })
    })
}

/// The file beside a copied module script that names the folder the
/// script came from (kopt_module.load puts it on `sys.path`, as Python
/// does for a script it runs, so the script's own imports resolve).
pub const SOURCE_DIR_FILE: &str = "kopt_source_dir.txt";

/// Records `dir`, the folder `script` (a copy in a run folder) came from.
pub fn note_source_dir(script: &Path, dir: &Path) -> Result<()> {
    let folder = script.parent().unwrap_or(Path::new("."));
    write(folder, (SOURCE_DIR_FILE, &dir.display().to_string())).map(|_| ())
}

/// A module script placed in a run folder, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedScript {
    pub run_dir: PathBuf,
    /// The script as copied into the run folder.
    pub script: PathBuf,
    /// What to run: the driver for a module script, else the script itself.
    pub argv: Vec<String>,
    pub driven: bool,
}

fn write(dir: &Path, (name, text): (&str, &str)) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| io_error(&path, "write", e))?;
    Ok(path)
}

/// A safe file stem for a module name.
fn stem(module: &str) -> String {
    let s: String = module
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_matches('_').to_string();
    if s.is_empty() {
        "module".into()
    } else {
        s
    }
}

/// Copy `text` into `run_dir` as `<module>.py`; for a module script, write
/// kopt's driver beside it and run that (`warmup` then `steps` passes, each an NVTX step;
/// with `record_ops`, PyTorch's op ranges with input shapes too, so kernels
/// can be traced back to ops: it costs host time per op).
pub fn prepare(
    run_dir: &Path,
    text: &str,
    module: &str,
    python: &str,
    warmup: u32,
    steps: u32,
    record_ops: bool,
) -> Result<PreparedScript> {
    if text.trim().is_empty() {
        return Err(ModuleScriptError::Usage("the script is empty".into()));
    }
    if steps == 0 {
        return Err(ModuleScriptError::Usage("steps must be at least 1".into()));
    }
    std::fs::create_dir_all(run_dir).map_err(|e| io_error(run_dir, "create", e))?;
    let script = write(run_dir, (&format!("{}.py", stem(module)), text))?;
    let driven = is_module_script(text);
    let argv = if driven {
        write(run_dir, LOADER)?;
        let driver = write(run_dir, PROFILE_DRIVER)?;
        let mut argv = driver_argv(python, &driver, &script, module, warmup, steps);
        if record_ops {
            argv.push("ops".into());
        }
        argv
    } else {
        vec![python.to_string(), script.display().to_string()]
    };
    Ok(PreparedScript {
        run_dir: run_dir.to_path_buf(),
        script,
        argv,
        driven,
    })
}

/// The driver's command for `kopt optimize`'s kept result: `script` (a
/// module script already prepared in `dir`) run as the optimize harness
/// builds `variant` (a candidate, or a stack `a+b`), `warmup` then `steps`
/// steps. Writes the loader, the driver and the harness into `dir`.
pub fn variant_argv(
    dir: &Path,
    script: &Path,
    module: &str,
    python: &str,
    variant: &str,
    warmup: u32,
    steps: u32,
) -> Result<Vec<String>> {
    if steps == 0 {
        return Err(ModuleScriptError::Usage("steps must be at least 1".into()));
    }
    if variant.is_empty() || variant.contains(char::is_whitespace) {
        return Err(ModuleScriptError::Usage(format!(
            "'{variant}' is not a candidate name"
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "create", e))?;
    write(dir, LOADER)?;
    write(dir, OPTIMIZE_HARNESS)?;
    let driver = write(dir, PROFILE_DRIVER)?;
    let mut argv = driver_argv(python, &driver, script, module, warmup, steps);
    argv.push(format!("variant={variant}"));
    Ok(argv)
}

/// The profile driver's command line before its options (`ops`,
/// `variant=...`): the one place its positional arguments are written.
fn driver_argv(
    python: &str,
    driver: &Path,
    script: &Path,
    module: &str,
    warmup: u32,
    steps: u32,
) -> Vec<String> {
    vec![
        python.to_string(),
        driver.display().to_string(),
        script.display().to_string(),
        module.to_string(),
        warmup.to_string(),
        steps.to_string(),
    ]
}

/// `argv` without the driver's `ops` argument: a bare run times the steps
/// as they run unrecorded, and PyTorch's op ranges cost host time per op.
/// Any other command is returned as it is.
pub fn without_op_ranges(argv: &[String]) -> Vec<String> {
    let driven = argv.get(1).is_some_and(|a| a.ends_with(PROFILE_DRIVER.0));
    match argv.split_last() {
        Some((last, rest)) if driven && last == "ops" && argv.len() == 7 => rest.to_vec(),
        _ => argv.to_vec(),
    }
}

/// The driver's argument naming where it writes the steps it times bare in
/// the traced process, after the tracer stopped.
const BARE_OUT_ARG: &str = "bare_out=";

/// `argv` with kopt's module driver told to time its steps bare in the
/// traced process, once the tracer stops, into `out`; None for any other
/// command (or one already told).
pub fn with_bare_steps_in_process(argv: &[String], out: &Path) -> Option<Vec<String>> {
    let driven = argv.get(1).is_some_and(|a| a.ends_with(PROFILE_DRIVER.0));
    if !driven || argv.iter().any(|a| a.starts_with(BARE_OUT_ARG)) {
        return None;
    }
    let mut argv = argv.to_vec();
    argv.push(format!("{BARE_OUT_ARG}{}", out.display()));
    Some(argv)
}

/// The interpreter, script and module of a command that runs kopt's
/// module driver (what `prepare` returns for a module script), else None.
pub fn driven_script(argv: &[String]) -> Option<(String, PathBuf, String)> {
    match argv {
        [python, driver, script, module, ..] if driver.ends_with(PROFILE_DRIVER.0) => {
            Some((python.clone(), PathBuf::from(script), module.clone()))
        }
        _ => None,
    }
}

/// The optimize harness's source (the Python package runs it in-process).
pub fn optimize_harness_source() -> &'static str {
    OPTIMIZE_HARNESS.1
}

/// The loader and the optimize harness in `dir`; returns the harness path.
pub fn write_harness(dir: &Path) -> Result<PathBuf> {
    write(dir, LOADER)?;
    write(dir, OPTIMIZE_HARNESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\ndef get_inputs():\n    return [torch.randn(4)]\n";

    #[test]
    fn a_training_script_is_told_by_its_top_level_functions() {
        assert!(is_training_script("def get_optimizer(model):\n    pass\n"));
        assert!(is_training_script("def train_step (m, i, o):\n    pass\n"));
        assert!(!is_training_script(MODULE));
        assert!(!is_training_script("    def get_optimizer(self):\n"));
        assert!(!is_training_script("def get_optimizers_list():\n"));
    }

    #[test]
    fn only_the_driver_is_told_to_time_its_steps_in_process() {
        let d = tempfile::tempdir().unwrap();
        let p = prepare(d.path(), MODULE, "m", "python3", 3, 20, true).unwrap();
        let out = d.path().join("bare_steps.jsonl");
        let argv = with_bare_steps_in_process(&p.argv, &out).unwrap();
        assert_eq!(argv.len(), p.argv.len() + 1);
        assert_eq!(argv.last().unwrap(), &format!("bare_out={}", out.display()));
        // Told once; a plain command never.
        assert!(with_bare_steps_in_process(&argv, &out).is_none());
        let plain = vec!["python3".to_string(), "train.py".into()];
        assert!(with_bare_steps_in_process(&plain, &out).is_none());
    }

    #[test]
    fn module_scripts_are_driven_others_run_as_they_are() {
        assert!(is_module_script(MODULE));
        assert!(!is_module_script("print('hello')\n"));
        assert!(!is_module_script("class A:\n    pass\n"));
        let d = tempfile::tempdir().unwrap();
        let p = prepare(d.path(), MODULE, "topk sort", "python3", 3, 20, false).unwrap();
        assert!(p.driven);
        assert_eq!(p.script, d.path().join("topk_sort.py"));
        assert!(p.argv[1].ends_with("kopt_profile_driver.py"));
        assert_eq!(&p.argv[3..], ["topk sort", "3", "20"]);
        let ops = prepare(d.path(), MODULE, "m", "python3", 3, 20, true).unwrap();
        assert_eq!(ops.argv.last().map(String::as_str), Some("ops"));
        assert!(d.path().join("kopt_module.py").is_file());
        assert_eq!(without_op_ranges(&ops.argv), ops.argv[..6].to_vec());
        assert_eq!(without_op_ranges(&p.argv), p.argv);
        let v = variant_argv(d.path(), &p.script, "m", "python3", "graph+tf32", 2, 8).unwrap();
        assert!(v[1].ends_with("kopt_profile_driver.py"));
        assert_eq!(&v[4..], ["2", "8", "variant=graph+tf32"]);
        assert!(d.path().join("kopt_optimize.py").is_file());
        assert_eq!(without_op_ranges(&v), v);
        assert!(variant_argv(d.path(), &p.script, "m", "python3", "", 2, 8).is_err());
        assert!(variant_argv(d.path(), &p.script, "m", "python3", "graph", 2, 0).is_err());
        let (python, script, module) = driven_script(&p.argv).unwrap();
        assert_eq!(
            (python.as_str(), script, module.as_str()),
            ("python3", d.path().join("topk_sort.py"), "topk sort")
        );
        let plain = prepare(d.path(), "print(1)\n", "m", "python3", 3, 20, false).unwrap();
        assert!(!plain.driven);
        assert!(driven_script(&plain.argv).is_none());
        assert_eq!(
            plain.argv,
            [
                "python3".to_string(),
                d.path().join("m.py").display().to_string()
            ]
        );
        assert!(prepare(d.path(), "  ", "m", "python3", 3, 20, false).is_err());
    }

    #[test]
    fn the_python_is_valid() {
        // The Python files kopt writes compile (no torch needed to parse them).
        let Ok(out) = std::process::Command::new("python3")
            .args([
                "-c",
                "import ast,sys\nfor p in sys.argv[1:]: ast.parse(open(p).read(), p)",
            ])
            .args(
                [
                    "kopt_module.py",
                    "kopt_profile_driver.py",
                    "kopt_optimize.py",
                ]
                .map(|f| format!("{}/python/{f}", env!("CARGO_MANIFEST_DIR"))),
            )
            .output()
        else {
            return; // no python3 on this machine: nothing to parse with
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
