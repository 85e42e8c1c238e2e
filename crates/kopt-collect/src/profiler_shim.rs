//! torch.profiler replaced by step markers in the workloads kopt runs.
//!
//! A Python program that starts torch.profiler itself takes CUPTI over from
//! kopt's tracer (one client at a time), and a bare run must not pay the
//! profiler's cost (x1.17-4.4 on a launch-bound step, measured). So kopt puts
//! a `sitecustomize.py` first on the workload's `PYTHONPATH` that swaps
//! `torch.profiler.profile` for a stand-in: it records nothing and marks the
//! steps as NVTX ranges named as torch names them (`ProfilerStep#N`; only
//! with a schedule, as torch), from the first step the schedule records.
//! The shadowed sitecustomize, if any, still runs. Programs in other
//! languages never read it; the legacy `torch.autograd.profiler.profile` is
//! left alone.

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
    std::fs::write(shim_file(dir), SHIM_SOURCE)?;
    let mut path = vec![folder.display().to_string()];
    // A kopt run by a workload of kopt's: one stand-in, this one.
    if let Some(old) = std::env::var_os("PYTHONPATH") {
        path.extend(
            old.to_string_lossy()
                .split(':')
                .filter(|p| !p.is_empty() && !p.ends_with(SHIM_DIR))
                .map(str::to_string),
        );
    }
    Ok(vec![
        ("PYTHONPATH".into(), path.join(":")),
        (
            "KOPT_PROFILER_SHIM_NOTE".into(),
            replaced_mark(dir).display().to_string(),
        ),
    ])
}

/// Where the stand-in is written in a run folder.
pub fn shim_file(dir: &Path) -> PathBuf {
    dir.join(SHIM_DIR).join("sitecustomize.py")
}

/// The mark file of a run folder.
pub fn replaced_mark(dir: &Path) -> PathBuf {
    dir.join(REPLACED_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `torch` laid out as the real one where the stand-in cares:
    /// `import torch` imports `torch.profiler`, whose package imports
    /// `profile` from `torch.profiler.profiler`; NVTX calls are printed.
    fn fake_torch(root: &Path) {
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            "torch/__init__.py",
            "from torch import cuda\nfrom torch import profiler\n",
        );
        write("torch/cuda/__init__.py", "from torch.cuda import nvtx\n");
        write(
            "torch/cuda/nvtx.py",
            r#"_ids = [0]
def range_start(name):
    _ids[0] += 1
    print('start', name, _ids[0])
    return _ids[0]
def range_end(i):
    print('end', i)
def range_push(name):
    print('push', name)
def range_pop():
    print('pop')
"#,
        );
        write(
            "torch/profiler/__init__.py",
            "from .profiler import profile, schedule, ProfilerAction\n",
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

    /// `script` under python3 with the stand-in (written into `dir`) first
    /// on PYTHONPATH, then `extra` folders: (stdout, stderr).
    fn run_python(dir: &Path, extra: &[&Path], script: &str) -> (String, String) {
        let mut cmd = std::process::Command::new("python3");
        cmd.arg("-c").arg(script).current_dir(dir);
        for (k, v) in shim_env(dir).unwrap() {
            let v = if k == "PYTHONPATH" {
                let mut parts = vec![v];
                parts.extend(extra.iter().map(|p| p.display().to_string()));
                parts.join(":")
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

    fn lines(out: &str) -> Vec<&str> {
        out.lines().collect()
    }

    #[test]
    fn stand_in_marks_the_recorded_steps_and_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        let script = r#"
import json, torch
from torch.profiler import profile, schedule
with profile(activities=[], schedule=schedule(wait=1, warmup=2, active=3),
             on_trace_ready=lambda p: p.export_chrome_trace('x.json'),
             record_shapes=True) as p:
    for _ in range(5):
        torch.cuda.nvtx.range_push('user step')
        p.step()
        torch.cuda.nvtx.range_pop()
p.export_chrome_trace('mine.json')
print(json.load(open('mine.json')))
print(p.key_averages().table(sort_by='cuda_time_total'))
print(p.key_averages().total_average().self_cuda_time_total / 1000, len(p.events()))
print('steps', p.step_num)
"#;
        let (out, err) = run_python(dir.path(), &[torch.path()], script);
        let marks: Vec<&str> = lines(&out)
            .into_iter()
            .filter(|l| l.starts_with("start") || l.starts_with("end"))
            .collect();
        // Steps 0-2 are the schedule's wait and warm-up: unmarked. Marks
        // pair by id, so the user's push/pop inside each step stays whole.
        assert_eq!(
            marks,
            [
                "start ProfilerStep#3 1",
                "end 1",
                "start ProfilerStep#4 2",
                "end 2",
                "start ProfilerStep#5 3",
                "end 3"
            ],
            "{out}\n{err}"
        );
        assert_eq!(out.matches("push user step").count(), 5, "{out}");
        assert_eq!(
            out.matches("\npop").count() + out.starts_with("pop") as usize,
            5
        );
        assert!(out.contains("{'traceEvents': []}"), "{out}");
        assert!(out.contains("replaced by kopt"), "{out}");
        assert!(out.contains("0.0 0"), "{out}");
        assert!(out.contains("steps 5"), "{out}");
        assert!(!dir.path().join("x.json").exists());
        assert!(replaced_mark(dir.path()).is_file());
    }

    #[test]
    fn without_a_schedule_no_step_is_marked_as_in_torch() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        // The submodule's name imported directly.
        let script = r#"
from torch.profiler.profiler import profile
p = profile()
p.start()
p.step()
p.stop()
print('ran')
"#;
        let (out, err) = run_python(dir.path(), &[torch.path()], script);
        assert_eq!(lines(&out), ["ran"], "{err}");
    }

    #[test]
    fn misuse_leaves_no_range_open() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        // step() before start(), start() twice, step() after stop().
        let script = r#"
import torch
from torch.profiler import profile, schedule
p = profile(schedule=schedule(wait=0, warmup=0, active=9))
p.step()
p.start()
p.start()
p.step()
p.stop()
p.step()
"#;
        let (out, err) = run_python(dir.path(), &[torch.path()], script);
        let starts = out.matches("start ").count();
        let ends = out.matches("end ").count();
        assert!(starts > 0 && starts == ends, "{out}\n{err}");
    }

    #[test]
    fn a_shadowed_sitecustomize_still_runs_and_two_stand_ins_do_not_loop() {
        let dir = tempfile::tempdir().unwrap();
        let torch = tempfile::tempdir().unwrap();
        fake_torch(torch.path());
        std::fs::write(
            torch.path().join("sitecustomize.py"),
            "print('site of the user')\n",
        )
        .unwrap();
        let (out, err) = run_python(dir.path(), &[torch.path()], "print('main')");
        assert_eq!(lines(&out), ["site of the user", "main"], "{err}");
        assert!(!replaced_mark(dir.path()).exists());
        // kopt run by a workload kopt runs: two stand-ins on the path.
        let outer = tempfile::tempdir().unwrap();
        shim_env(outer.path()).unwrap();
        let script = r#"
import torch
from torch.profiler import profile, schedule
with profile(schedule=schedule(wait=0, warmup=0, active=2)) as p:
    p.step()
"#;
        let (out, err) = run_python(
            dir.path(),
            &[&outer.path().join("python-shim"), torch.path()],
            script,
        );
        assert!(!err.contains("RecursionError"), "{err}");
        assert_eq!(out.matches("start ProfilerStep").count(), 2, "{out}\n{err}");
    }
}
