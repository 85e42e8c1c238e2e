//! Options validated apart from clap (hyperfine's way): every rule about
//! what combinations make sense lives here and is unit-tested.

use std::path::PathBuf;

use kopt_model::Peaks;
use kopt_report::Format;

use crate::cli::AnalyzeArgs;

#[derive(Debug)]
pub struct AnalyzeRequest {
    pub files: Vec<PathBuf>,
    pub format: Format,
    pub top: Option<usize>,
    pub output: Option<PathBuf>,
    pub ncu: Option<PathBuf>,
    pub device: Option<String>,
    pub measured_peaks: Peaks,
    pub width: Option<u16>,
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

impl TryFrom<AnalyzeArgs> for AnalyzeRequest {
    type Error = String;

    fn try_from(a: AnalyzeArgs) -> Result<Self, String> {
        let format = Format::parse(&a.format).ok_or_else(|| {
            format!(
                "--format {} is not one of {}",
                a.format,
                Format::NAMES.join(", ")
            )
        })?;
        if a.top == Some(0) {
            return Err("--top must be at least 1".into());
        }
        if a.width.is_some_and(|w| w < 40) {
            return Err("--width must be at least 40 columns".into());
        }
        if let Some(d) = &a.device {
            if d.trim().is_empty() {
                return Err("--device needs a name".into());
            }
        }
        if let Some(out) = &a.output {
            if a.files.iter().any(|f| f == out) {
                return Err(format!(
                    "--output {} would overwrite an input",
                    out.display()
                ));
            }
        }
        Ok(AnalyzeRequest {
            measured_peaks: Peaks {
                dram_bytes_per_s: positive("peak-dram-gbs", a.peak_dram_gbs, 1e9)?,
                fp32_flops: positive("peak-fp32-tflops", a.peak_fp32_tflops, 1e12)?,
                tensor_bf16_flops: positive("peak-tensor-tflops", a.peak_tensor_tflops, 1e12)?,
            },
            files: a.files,
            format,
            top: a.top,
            output: a.output,
            ncu: a.ncu,
            device: a.device,
            width: a.width,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> AnalyzeArgs {
        AnalyzeArgs {
            files: vec!["a.csv".into()],
            format: "term".into(),
            top: None,
            output: None,
            ncu: None,
            device: None,
            peak_dram_gbs: None,
            peak_fp32_tflops: None,
            peak_tensor_tflops: None,
            width: None,
        }
    }

    #[test]
    fn accepts_defaults_and_scales_peaks() {
        let mut a = args();
        a.peak_dram_gbs = Some(3000.0);
        let r = AnalyzeRequest::try_from(a).unwrap();
        assert_eq!(r.format, Format::Terminal);
        assert_eq!(r.measured_peaks.dram_bytes_per_s, Some(3.0e12));
    }

    #[test]
    fn rejects_bad_combinations() {
        type Mutation = Box<dyn Fn(&mut AnalyzeArgs)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|a| a.format = "xml".into()), "--format xml"),
            (Box::new(|a| a.top = Some(0)), "--top"),
            (
                Box::new(|a| a.peak_dram_gbs = Some(-1.0)),
                "--peak-dram-gbs",
            ),
            (
                Box::new(|a| a.peak_fp32_tflops = Some(f64::NAN)),
                "--peak-fp32-tflops",
            ),
            (
                Box::new(|a| a.output = Some("a.csv".into())),
                "overwrite an input",
            ),
            (Box::new(|a| a.width = Some(10)), "--width"),
            (Box::new(|a| a.device = Some(" ".into())), "--device"),
        ];
        for (mutate, expected) in cases {
            let mut a = args();
            mutate(&mut a);
            let err = AnalyzeRequest::try_from(a).unwrap_err();
            assert!(err.contains(expected), "{err} should mention {expected}");
        }
    }
}
