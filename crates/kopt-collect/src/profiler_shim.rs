//! torch.profiler replaced by step markers in the workloads kopt runs.
//!
//! A Python program that starts torch.profiler itself takes CUPTI over from
//! kopt's tracer (one client at a time), and a bare run must not pay the
//! profiler's cost (x1.4-3.7 on a launch-bound step, measured). So kopt puts
//! a `sitecustomize.py` first on the workload's `PYTHONPATH` that swaps
//! `torch.profiler.profile` for a stand-in: it records nothing and marks the
//! steps as NVTX ranges named as torch names them (`ProfilerStep#N`), from the
//! first step the program's schedule records. The shadowed sitecustomize, if
//! any, still runs. Programs in other languages never read it.

use std::path::{Path, PathBuf};

/// The stand-in (Python).
pub const SHIM_SOURCE: &str = include_str!("profiler_shim.py");

/// Folder of the stand-in inside a run folder.
const SHIM_DIR: &str = "python-shim";

/// Created (empty) in the run folder when the program instantiated
/// torch.profiler.profile, so kopt can say the stand-in replaced it.
pub const REPLACED_MARK: &str = "torch_profiler_replaced";

/// Set to 1 to leave the program's torch.profiler alone.
pub const KEEP_ENV: &str = "KOPT_KEEP_TORCH_PROFILER";

/// Write the stand-in into `dir` and return the environment that loads it
/// (none when the user keeps the profiler).
pub fn shim_env(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    if std::env::var_os(KEEP_ENV).is_some_and(|v| v == "1") {
        return Ok(Vec::new());
    }
    let folder = dir.join(SHIM_DIR);
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("sitecustomize.py"), SHIM_SOURCE)?;
    let mut path = vec![folder.display().to_string()];
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(old.to_string_lossy().into_owned());
    }
    Ok(vec![
        ("PYTHONPATH".into(), path.join(":")),
        (
            "KOPT_PROFILER_SHIM_NOTE".into(),
            replaced_mark(dir).display().to_string(),
        ),
    ])
}

/// The mark file of a run folder.
pub fn replaced_mark(dir: &Path) -> PathBuf {
    dir.join(REPLACED_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `torch` with just what the stand-in touches: the profiler
    /// module (with a schedule) and NVTX pushes printed to stdout.
    fn fake_torch(root: &Path) {
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("torch/__init__.py", "from torch import cuda\n");
        write("torch/cuda/__init__.py", "from torch.cuda import nvtx\n");
        write(
            "torch/cuda/nvtx.py",
            "def range_push(name):\n    print('push', name)\ndef range_pop():\n    print('pop')\n",
        );
        write(
            "torch/profiler/__init__.py",
            "from torch.profiler.profiler import profile, schedule, ProfilerAction\n",
        );
        write(
            "torch/profiler/profiler.py",
            r#"import enum
class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
def schedule(*, wait, warmup, active):
    def f(n):
        if n < wait: return ProfilerAction.NONE
        if n < wait + warmup: return ProfilerAction.WARMUP
        return ProfilerAction.RECORD
    return f
class profile:
    def __init__(self, **kw): raise SystemExit('the real profiler ran')
"#,
        );
    }

    fn run_python(dir: &Path, torch_root: &Path, script: &str) -> (String, String) {
        let mut cmd = std::process::Command::new("python3");
        cmd.arg("-c").arg(script).current_dir(dir);
        for (k, v) in shim_env(dir).unwrap() {
            let v = if k == "PYTHONPATH" {
                format!("{v}:{}", torch_root.display())
            } else {
                v
            };
            cmd.env(k, v);
        }
        let out = cmd.output().expect("python3 runs (kopt's tests need it)");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn stand_in_marks_the_recorded_steps_and_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        let script = r#"
import torch
from torch.profiler import profile, schedule
with profile(activities=[], schedule=schedule(wait=1, warmup=2, active=3),
             on_trace_ready=lambda p: p.export_chrome_trace('x.json'),
             record_shapes=True) as p:
    for _ in range(5):
        p.step()
p.export_chrome_trace('never.json')
print(p.key_averages().table(sort_by='cuda_time_total'))
print('steps', p.step_num)
"#;
        let (out, err) = run_python(dir.path(), torch.path(), script);
        let lines: Vec<&str> = out.lines().collect();
        // Steps 0-2 are the schedule's wait and warm-up: unmarked.
        assert_eq!(
            lines[..6],
            [
                "push ProfilerStep#3",
                "pop",
                "push ProfilerStep#4",
                "pop",
                "push ProfilerStep#5",
                "pop"
            ],
            "{out}\n{err}"
        );
        assert!(out.contains("replaced by kopt"), "{out}");
        assert!(out.contains("steps 5"), "{out}");
        assert!(!dir.path().join("x.json").exists());
        assert!(replaced_mark(dir.path()).is_file());
    }

    #[test]
    fn profile_without_schedule_marks_every_step_and_import_order_does_not_matter() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        // The submodule's name imported directly, before the package.
        let script = r#"
from torch.profiler.profiler import profile
p = profile()
p.start()
p.step()
p.stop()
"#;
        let (out, err) = run_python(dir.path(), torch.path(), script);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            ["push ProfilerStep#0", "pop", "push ProfilerStep#1", "pop"],
            "{err}"
        );
    }

    #[test]
    fn a_shadowed_sitecustomize_still_runs() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        std::fs::write(
            torch.path().join("sitecustomize.py"),
            "print('site of the user')\n",
        )
        .unwrap();
        let (out, err) = run_python(dir.path(), torch.path(), "print('main')");
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            ["site of the user", "main"],
            "{err}"
        );
        assert!(!replaced_mark(dir.path()).exists());
    }
}
