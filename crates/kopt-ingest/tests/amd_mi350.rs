//! An MI350-series (gfx950) rocprof-compute folder (#27): it was read with
//! "peaks unknown" and its memory-bound copy classed `unknown`. No capture
//! of one is at hand, so the MI300X vcopy capture stands in, its
//! sysinfo.csv rewritten as rocprof-compute writes it on a gfx950 part.

use std::path::{Path, PathBuf};

use kopt_analyze::AnalyzeOptions;
use kopt_ingest::read_rocprof_compute_dir;
use kopt_model::{BottleneckClass, PeakSource};

fn vcopy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/amd/omniperf-vcopy-mi300x")
}

/// The untouched vcopy counters with a sysinfo.csv whose fields `set`
/// replace the MI300X's, and the fields `drop` left out.
fn gfx950_folder(set: &[(&str, &str)], drop: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(vcopy().join("original-c079f133")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let text = std::fs::read_to_string(vcopy().join("sysinfo.csv")).unwrap();
    let mut rdr = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let head: Vec<String> = rdr.headers().unwrap().iter().map(String::from).collect();
    let row: Vec<String> = rdr
        .records()
        .next()
        .unwrap()
        .unwrap()
        .iter()
        .map(String::from)
        .collect();
    let mut w = csv::Writer::from_path(dir.path().join("sysinfo.csv")).unwrap();
    let keep: Vec<usize> = (0..head.len())
        .filter(|&i| !drop.contains(&head[i].as_str()))
        .collect();
    w.write_record(keep.iter().map(|&i| &head[i])).unwrap();
    w.write_record(keep.iter().map(|&i| {
        set.iter()
            .find(|(k, _)| *k == head[i])
            .map_or(row[i].as_str(), |(_, v)| *v)
    }))
    .unwrap();
    w.flush().unwrap();
    dir
}

const GFX950: &[(&str, &str)] = &[
    ("gpu_arch", "gfx950"),
    ("cu_per_gpu", "256"),
    ("num_xcd", "8"),
    ("max_mclk", "2000"),
    ("cur_mclk", "2000"),
];

fn memory_bound(dir: &Path) -> kopt_model::Device {
    let p = read_rocprof_compute_dir(dir).unwrap();
    let d = kopt_analyze::analyze(&p, &AnalyzeOptions::default());
    assert_eq!(
        d.kernels[0].bottleneck.class,
        BottleneckClass::Memory,
        "{}",
        d.kernels[0].root_cause
    );
    assert_eq!(d.primary.as_ref().unwrap().class, BottleneckClass::Memory);
    assert!(
        !d.notes.iter().any(|n| n.contains("peaks unknown")),
        "{:?}",
        d.notes
    );
    p.device
}

#[test]
fn mi350x_folder_gets_its_peaks_and_a_memory_bound_copy() {
    // rocprof-compute names the gfx950 family "MI350": the 2200 MHz peak
    // clock tells the MI350X from the MI355X (both 256 CUs).
    let mut set = GFX950.to_vec();
    set.extend([
        ("gpu_model", "MI350"),
        ("max_sclk", "2200"),
        ("cur_sclk", "2200"),
        ("hbm_bw", "8000"),
    ]);
    let dir = gfx950_folder(&set, &[]);
    let device = memory_bound(dir.path());
    assert_eq!(device.name, "AMD Instinct MI350X");
    assert_eq!(device.sm_count, Some(256));
    assert_eq!(device.peaks.dram_bytes_per_s, Some(8000e9));
    assert_eq!(device.peak_source, PeakSource::DeviceAttributes);
    assert_eq!(device.peaks.tensor_bf16_flops, Some(2306.9e12));
}

#[test]
fn mi355x_folder_without_hbm_bw_takes_the_datasheet() {
    // No model name, no hbm_bw: the gfx target, CUs and 2400 MHz give the
    // MI355X and its data sheet's 8 TB/s.
    let mut set = GFX950.to_vec();
    set.extend([
        ("gpu_model", ""),
        ("max_sclk", "2400"),
        ("cur_sclk", "2400"),
    ]);
    let dir = gfx950_folder(&set, &["hbm_bw"]);
    let device = memory_bound(dir.path());
    assert_eq!(device.name, "AMD Instinct MI355X");
    assert_eq!(device.peaks.dram_bytes_per_s, Some(8.0e12));
    assert!(
        matches!(device.peak_source, PeakSource::Datasheet(_)),
        "{:?}",
        device.peak_source
    );
    assert_eq!(device.peaks.fp32_flops, Some(157.3e12));
}

#[test]
fn mi325x_folder_is_named_by_its_model() {
    // gfx942 at 304 CUs and 2100 MHz is an MI300X or an MI325X: the model
    // name decides, and the peaks follow it.
    let set = [("gpu_model", "MI325X"), ("hbm_bw", "6000")];
    let dir = gfx950_folder(&set, &[]);
    let device = memory_bound(dir.path());
    assert_eq!(device.name, "AMD Instinct MI325X");
    assert_eq!(device.peaks.dram_bytes_per_s, Some(6000e9));
}
