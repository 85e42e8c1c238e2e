//! #39: the key insight and the timeline's verdict name the same primary.
//! A trace of many launches of one tiny kernel had the verdict say
//! launch-bound while the key insight named the kernel's small grid: no
//! finding had a measured gain, and the fallback took the hottest kernel's
//! class over the timeline's measurement.

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{parse_kopt_trace, profile_from_timeline};
use kopt_model::BottleneckClass;

/// `n` launches (4 us of host time each) of kernels of 1.5 us on one
/// block, named in turn from `names`.
fn tiny_launches(n: usize, names: &[&str]) -> String {
    let mut s = String::from("{\"t\":\"process\",\"pid\":1}\n{\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA H100 80GB HBM3\",\"sms\":132,\"cc\":[9,0]}\n");
    let mut t = 1_000i64;
    for i in 0..n {
        let c = i + 1;
        let name = names[i % names.len()];
        s.push_str(&format!(
            "{{\"t\":\"api\",\"name\":\"cudaLaunchKernel_v7000\",\"s\":{t},\"e\":{},\"tid\":42,\"c\":{c}}}\n",
            t + 4_000
        ));
        s.push_str(&format!(
            "{{\"t\":\"kernel\",\"name\":\"{name}\",\"s\":{},\"e\":{},\"dev\":0,\"str\":7,\"c\":{c},\"g\":[1,1,1],\"b\":[32,1,1]}}\n",
            t + 4_500,
            t + 6_000
        ));
        t += 5_000;
    }
    s.push_str("{\"t\":\"end\",\"records\":0,\"dropped\":0}\n");
    s
}

#[test]
fn a_launch_bound_timeline_is_the_key_insight_over_tiny_kernels() {
    for (n, names) in [
        (20_000, vec!["_Z4stepPf"]),
        (3_000, vec!["_Z4stepPf"]),
        (6_000, vec!["_Z5scalePf", "_Z4biasPf", "_Z4reluPf"]),
    ] {
        let trace = parse_kopt_trace(&tiny_launches(n, &names), "tiny.jsonl").unwrap();
        let d = analyze(
            &profile_from_timeline(trace.timeline, "tiny.jsonl", "kopt trace"),
            &AnalyzeOptions::default(),
        );
        let t = d.timeline.as_ref().unwrap();
        assert!(t.launch_bound, "{n} launches: {}", t.verdict);
        let p = d.primary.as_ref().unwrap();
        assert_eq!(
            p.class,
            BottleneckClass::LaunchOverhead,
            "{n} launches of {names:?}: key insight {} / {:?} while the verdict says: {}",
            p.component_short,
            p.class,
            t.verdict
        );
        assert!(p.insight.starts_with(&t.verdict), "{}", p.insight);
    }
}
