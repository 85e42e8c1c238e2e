//! A distributed job's traces, one file a rank: the folder torch.profiler's
//! tensorboard handler (or HTA's users) fill, gzipped or not. Each rank is
//! read on its own, never merged with another: the caller reduces one
//! rank's timeline before reading the next, so memory holds one trace at a
//! time whatever the number of ranks.

use std::path::{Path, PathBuf};

use kopt_model::{RankInfo, Timeline};

use crate::IngestError;

/// The most trace files one folder may hold: more is not a job's ranks.
pub const MAX_RANK_FILES: usize = 4096;

/// True for a file name torch.profiler or its users give a Kineto trace.
fn is_trace_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".json") || lower.ends_with(".json.gz")
}

/// The rank a file name states (`rank3`, `rank-3`, `rank_3`, `Rank 3`),
/// anywhere in the name; None when it states none.
pub fn rank_from_file_name(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower.get(from..)?.find("rank") {
        let rest = &lower[from + at + 4..];
        let digits_at = rest
            .char_indices()
            .find(|&(_, c)| !matches!(c, '-' | '_' | ' ' | '.'))
            .map_or(rest.len(), |(i, _)| i);
        // At most one separator: `rank-3`, not `ranked ...3`.
        if digits_at <= 1 {
            let digits: String = rest[digits_at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u32>() {
                return Some(n);
            }
        }
        from += at + 4;
    }
    None
}

/// The trace files of a folder of per-rank traces, in name order; None
/// when the folder is not one (a kopt run folder, fewer than two traces).
pub fn rank_trace_files(dir: &Path) -> Result<Option<Vec<PathBuf>>, IngestError> {
    let label = dir.display().to_string();
    let io = |source| IngestError::Io {
        path: label.clone(),
        source,
    };
    if dir.join(kopt_model::run_folder::RUN_JSON).exists() {
        return kopt_trace_ranks(dir);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Symbolic links are not followed out of the folder's own files.
        if !entry.file_type().map_err(io)?.is_file() || !is_trace_name(name) {
            continue;
        }
        files.push(entry.path());
        if files.len() > MAX_RANK_FILES {
            return Err(IngestError::format(
                &label,
                format!("more than {MAX_RANK_FILES} trace files: not one job's ranks"),
            ));
        }
    }
    files.sort();
    Ok((files.len() >= 2).then_some(files))
}

/// The first record of a kopt trace: its process, run and rank.
#[derive(serde::Deserialize)]
struct ProcessRecord {
    t: String,
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    rank: Option<u32>,
}

/// A kopt trace's process record, from its first line alone (at most
/// 64 KiB read): which run and rank wrote it.
fn process_record(path: &Path) -> Option<ProcessRecord> {
    let mut head = vec![0u8; 64 << 10];
    let mut f = crate::open_regular(path, &path.display().to_string()).ok()?;
    let n = crate::read_up_to(&mut f, &mut head).ok()?;
    let line = head[..n].split(|&b| b == b'\n').next()?;
    serde_json::from_slice::<ProcessRecord>(line)
        .ok()
        .filter(|r| r.t == "process")
}

/// A run folder of `kopt trace` over a launcher (torchrun): its
/// `trace.jsonl` and the `trace.jsonl.<pid>` files of the same run, when
/// they hold at least two distinct ranks; None otherwise (one process,
/// or processes that are not ranks, such as compile workers).
pub fn kopt_trace_ranks(dir: &Path) -> Result<Option<Vec<PathBuf>>, IngestError> {
    let first = dir.join(kopt_model::run_folder::TRACE_FILE);
    let Some(head) = first.is_file().then(|| process_record(&first)).flatten() else {
        return Ok(None);
    };
    let label = dir.display().to_string();
    let stem = kopt_model::run_folder::TRACE_FILE;
    let mut files = vec![(head.rank, first)];
    for entry in std::fs::read_dir(dir).map_err(|source| IngestError::Io {
        path: label.clone(),
        source,
    })? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let is_pid_file = name
            .to_str()
            .and_then(|n| n.strip_prefix(stem))
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid_file || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Some(r) = process_record(&entry.path()).filter(|r| r.run == head.run) {
            files.push((r.rank, entry.path()));
        }
        if files.len() > MAX_RANK_FILES {
            return Err(IngestError::format(
                &label,
                format!("more than {MAX_RANK_FILES} trace files: not one job's ranks"),
            ));
        }
    }
    let ranked: Vec<(u32, PathBuf)> = files
        .into_iter()
        .filter_map(|(r, p)| r.map(|r| (r, p)))
        .collect();
    let distinct: std::collections::BTreeSet<u32> = ranked.iter().map(|r| r.0).collect();
    if distinct.len() < 2 {
        return Ok(None);
    }
    let mut ranked = ranked;
    ranked.sort();
    Ok(Some(ranked.into_iter().map(|r| r.1).collect()))
}

/// One rank's trace: the timeline with its rank set, from the trace's own
/// `distributedInfo` or else from the file name.
pub fn read_rank_trace(path: &Path) -> Result<Timeline, IngestError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut t = if name.contains(".jsonl") {
        crate::read_kopt_trace(path)?.timeline
    } else {
        crate::read_kineto(path)?.timeline
    };
    if t.rank.is_none() {
        t.rank = rank_from_file_name(name).map(|rank| RankInfo {
            rank,
            world_size: None,
        });
    }
    if t.rank.is_none() {
        return Err(IngestError::format(
            &path.display().to_string(),
            "no rank: the trace has no distributedInfo and its file name no `rankN`; name the file after its rank",
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_folder_of_ranked_kopt_traces_is_a_job() {
        let d = tempfile::tempdir().unwrap();
        let trace = |rank: u32, run: &str| {
            format!(
                "{{\"t\":\"process\",\"pid\":1{rank},\"run\":\"{run}\",\"rank\":{rank},\"world_size\":2}}\n{{\"t\":\"kernel\",\"name\":\"k\",\"s\":10,\"e\":20,\"dev\":{rank},\"str\":7,\"c\":1}}\n"
            )
        };
        std::fs::write(d.path().join("run.json"), "{}").unwrap();
        std::fs::write(d.path().join("trace.jsonl"), trace(0, "a")).unwrap();
        assert_eq!(rank_trace_files(d.path()).unwrap(), None, "one process");
        std::fs::write(d.path().join("trace.jsonl.77"), trace(1, "other-run")).unwrap();
        assert_eq!(
            rank_trace_files(d.path()).unwrap(),
            None,
            "another run's rank"
        );
        std::fs::write(d.path().join("trace.jsonl.78"), trace(1, "a")).unwrap();
        let files = rank_trace_files(d.path()).unwrap().unwrap();
        assert_eq!(files.len(), 2);
        let t = read_rank_trace(&files[1]).unwrap();
        assert_eq!(t.rank.unwrap().rank, 1);
        // The single-GPU reader keeps rank 0 alone.
        let set = crate::read_kopt_trace_set(&d.path().join("trace.jsonl")).unwrap();
        assert_eq!(set.timeline.activities.len(), 1);
        assert_eq!(set.other_ranks_left_out, vec!["trace.jsonl.78".to_string()]);
    }

    #[test]
    fn file_names_give_ranks() {
        assert_eq!(rank_from_file_name("rank-3.json.gz"), Some(3));
        assert_eq!(rank_from_file_name("rank0.json"), Some(0));
        assert_eq!(rank_from_file_name("trace_Rank_12.pt.trace.json"), Some(12));
        assert_eq!(
            rank_from_file_name("ranked_results.rank7.json"),
            Some(7),
            "a later `rankN` counts"
        );
        assert_eq!(rank_from_file_name("host.1234.pt.trace.json"), None);
        assert_eq!(rank_from_file_name("rank.json"), None);
    }

    #[test]
    fn a_folder_needs_two_traces_and_no_run_record() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("rank0.json"), "{}").unwrap();
        assert_eq!(rank_trace_files(d.path()).unwrap(), None);
        std::fs::write(d.path().join("rank1.json.gz"), "").unwrap();
        std::fs::write(d.path().join("notes.txt"), "").unwrap();
        let files = rank_trace_files(d.path()).unwrap().unwrap();
        assert_eq!(files.len(), 2);
        std::fs::write(d.path().join("run.json"), "{}").unwrap();
        assert_eq!(rank_trace_files(d.path()).unwrap(), None, "a run folder");
    }

    #[test]
    fn the_trace_rank_wins_over_the_file_name() {
        let d = tempfile::tempdir().unwrap();
        let trace = r#"{"distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
 "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ts": 10, "dur": 5,
   "args": {"stream": 7, "correlation": 1, "Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "Float", "Group size": 2}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(x)", "ts": 20, "dur": 5,
   "args": {"stream": 7, "correlation": 2, "Collective name": "_allgather_base", "In msg nelems": 100, "Out msg nelems": 200, "dtype": "BFloat16"}}
 ]}"#;
        let path = d.path().join("rank0.json");
        std::fs::write(&path, trace).unwrap();
        let t = read_rank_trace(&path).unwrap();
        assert_eq!(
            t.rank,
            Some(RankInfo {
                rank: 1,
                world_size: Some(2)
            })
        );
        assert_eq!(t.activities[0].bytes, Some(4000), "1000 floats");
        assert_eq!(
            t.activities[1].bytes,
            Some(400),
            "an all-gather's size is its output"
        );
        let plain = d.path().join("rank5.json");
        std::fs::write(
            &plain,
            r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {}}]}"#,
        )
        .unwrap();
        assert_eq!(read_rank_trace(&plain).unwrap().rank.unwrap().rank, 5);
        let nameless = d.path().join("trace.json");
        std::fs::copy(&plain, &nameless).unwrap();
        let e = read_rank_trace(&nameless).unwrap_err().to_string();
        assert!(e.contains("no rank"), "{e}");
    }
}
