//! A signal to `kopt` stops the workloads it started (#37): they run in
//! process groups of their own, out of reach of the terminal's Ctrl-C, so
//! kopt stops them itself on SIGINT / SIGTERM, and the kernel kills them
//! (PR_SET_PDEATHSIG) when kopt is killed outright.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `kopt bench` of a workload that writes its pid, then sleeps as that pid.
fn start_bench(dir: &Path) -> Child {
    let pidfile = dir.join("pid");
    let workload = format!("sh -c 'echo $$ > {}; exec sleep 60'", pidfile.display());
    Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args([
            "bench",
            "--timing",
            "wall",
            "--baseline",
            &workload,
            "--candidate",
            "true",
            "--db",
        ])
        .arg(dir.join("h.db"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn workload_pid(dir: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(dir.join("pid"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the workload never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie waiting for its reaper counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

fn gone_within(pid: i32, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn wait_exit(child: &mut Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn sigterm_stops_the_workload_and_kopt() {
    let d = tempfile::tempdir().unwrap();
    let mut kopt = start_bench(d.path());
    let pid = workload_pid(d.path());
    assert!(alive(pid));
    // SAFETY: a plain kill(2) on the child we started.
    unsafe { libc::kill(kopt.id() as i32, libc::SIGTERM) };
    assert!(gone_within(pid, 5), "the workload outlived SIGTERM to kopt");
    let status = wait_exit(&mut kopt, 10).expect("kopt did not exit after SIGTERM");
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
}

#[test]
fn sigkill_to_kopt_kills_the_workload() {
    let d = tempfile::tempdir().unwrap();
    let mut kopt = start_bench(d.path());
    let pid = workload_pid(d.path());
    kopt.kill().unwrap();
    let _ = kopt.wait();
    assert!(gone_within(pid, 5), "the workload outlived kopt's SIGKILL");
}
