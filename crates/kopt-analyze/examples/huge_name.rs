//! Peak memory for a kopt trace whose kernel name is huge (a fuzzed 200 MB
//! mangled name once took 19 GB of RSS through demangling and copies).
//!
//! cargo run --release -p kopt-analyze --example huge_name -- write /tmp/huge.jsonl 200
//! /usr/bin/time -v target/release/examples/huge_name read /tmp/huge.jsonl

use std::io::Write;
use std::path::Path;

use kopt_analyze::{analyze, AnalyzeOptions};
use kopt_ingest::{profile_from_timeline, read_kopt_trace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("write"), Some(path)) => {
            let mb: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(200);
            let ident = mb * 1_000_000;
            let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
            write!(f, "{{\"t\":\"kernel\",\"name\":\"_Z{ident}")?;
            let chunk = "a".repeat(1 << 20);
            let mut left = ident;
            while left > 0 {
                let n = left.min(chunk.len());
                f.write_all(&chunk.as_bytes()[..n])?;
                left -= n;
            }
            writeln!(f, "v\",\"s\":1000,\"e\":2000,\"c\":1}}")?;
            writeln!(
                f,
                "{{\"t\":\"kernel\",\"name\":\"_Z1fv\",\"s\":3000,\"e\":4000,\"c\":2}}"
            )?;
            writeln!(f, "{{\"t\":\"end\",\"records\":2,\"dropped\":0}}")?;
            Ok(())
        }
        (Some("read"), Some(path)) => {
            let trace = read_kopt_trace(Path::new(path))?;
            let cut = trace.names_cut;
            let d = analyze(
                &profile_from_timeline(trace.timeline, path, "kopt trace"),
                &AnalyzeOptions::default(),
            );
            let longest = d.kernels.iter().map(|k| k.name.len()).max().unwrap_or(0);
            println!(
                "{} kernels analysed; {cut} name(s) cut; longest name kept: {longest} bytes",
                d.kernels.len()
            );
            Ok(())
        }
        _ => Err("usage: huge_name write PATH [MB] | huge_name read PATH".into()),
    }
}
