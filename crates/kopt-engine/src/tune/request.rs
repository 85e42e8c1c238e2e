//! What a sweep is asked to do: the request (template, space, strategy,
//! measurement), its checks, and the strategy it resolves to.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::bench::{Measurement, TimingChoice};
use crate::error::{Error, Result};

use super::space::{self, Space};

/// Points a grid or halving sweep may enumerate.
pub const MAX_POINTS: usize = 100_000;

/// The placeholder a template uses for the `--check` file: each worker
/// substitutes a file of its own, so parallel trials never share one.
pub const CHECK_PLACEHOLDER: &str = "{CHECK}";

/// How configs are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Strategy {
    /// Every point of the space.
    Grid,
    /// `--trials N` points drawn at random (seeded), the baseline always among them.
    Random,
    /// Successive halving: all get a few samples, the slower half is dropped, survivors get more.
    Halving,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Grid => "grid",
            Strategy::Random => "random",
            Strategy::Halving => "halving",
        }
    }
}

/// A sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneRequest {
    /// The command with `{NAME}` placeholders (run through /bin/sh -c).
    pub template: String,
    pub space: Space,
    /// None: grid up to 64 points, halving beyond.
    pub strategy: Option<Strategy>,
    /// Configs for the random strategy.
    pub trials: Option<usize>,
    /// The reference config (default: the first point of the space).
    pub baseline: Option<BTreeMap<String, String>>,
    /// The problem (shape) the sweep is for: part of the cache key.
    pub key: Option<String>,
    /// Ignore the cache (results are still written to it).
    pub fresh: bool,
    /// GPUs to run on, one worker each (None: all visible).
    pub gpus: Option<Vec<String>>,
    /// How many of the best configs the final comparison times.
    pub top: usize,
    pub measure: Measurement,
    /// Samples each config gets in the first halving round.
    pub halving_start: usize,
    pub db: PathBuf,
}

impl TuneRequest {
    /// A request with the CLI's defaults.
    pub fn new(template: String, space: Space) -> TuneRequest {
        TuneRequest {
            template,
            space,
            strategy: None,
            trials: None,
            baseline: None,
            key: None,
            fresh: false,
            gpus: None,
            top: 3,
            measure: Measurement::default(),
            halving_start: 2,
            db: crate::record::RecordPaths::current().db,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.template.trim().is_empty() {
            return Err(Error::Usage(
                "nothing to tune: give a command template after `--`".into(),
            ));
        }
        if self.space.params.is_empty() {
            return Err(Error::Usage(
                "no parameters: give --param NAME=VALUES or --space FILE".into(),
            ));
        }
        for p in &self.space.params {
            if !self.template.contains(&format!("{{{}}}", p.name)) {
                return Err(Error::Usage(format!(
                    "parameter {} does not appear in the command template as {{{}}}",
                    p.name, p.name
                )));
            }
        }
        self.measure.validate()?;
        if self.top == 0 {
            return Err(Error::Usage("--top must be at least 1".into()));
        }
        if self.halving_start < 2 {
            return Err(Error::Usage(
                "halving needs at least 2 samples per config in its first round".into(),
            ));
        }
        match (self.strategy, self.trials) {
            (Some(Strategy::Random), None) => {
                return Err(Error::Usage("--strategy random needs --trials N".into()))
            }
            (_, Some(0)) => return Err(Error::Usage("--trials must be at least 1".into())),
            (Some(Strategy::Grid | Strategy::Halving), Some(_)) => {
                return Err(Error::Usage(
                    "--trials is for --strategy random (grid and halving try every point)".into(),
                ))
            }
            _ => {}
        }
        if let Some(g) = &self.gpus {
            if g.is_empty()
                || g.iter()
                    .any(|x| x.trim().is_empty() || x.contains(['\'', ' ', ';']))
            {
                return Err(Error::Usage(
                    "--gpus takes GPU ids separated by commas (e.g. 0,1)".into(),
                ));
            }
            let mut sorted = g.clone();
            sorted.sort();
            if sorted.windows(2).any(|w| w[0] == w[1]) {
                return Err(Error::Usage(
                    "--gpus names a GPU twice: trials never share a GPU".into(),
                ));
            }
        }
        if let Some(b) = &self.baseline {
            for name in b.keys() {
                if !self.space.params.iter().any(|p| &p.name == name) {
                    return Err(Error::Usage(format!(
                        "--baseline names {name}, which is not a parameter"
                    )));
                }
            }
            if let Some(p) = self.space.params.iter().find(|p| !b.contains_key(&p.name)) {
                return Err(Error::Usage(format!(
                    "--baseline must give every parameter: {} is missing",
                    p.name
                )));
            }
            for (n, v) in b {
                space::check_value(n, v)?;
            }
        }
        Ok(())
    }

    /// The strategy this sweep uses.
    pub fn chosen_strategy(&self, points: usize) -> Strategy {
        match (self.strategy, self.trials) {
            (Some(s), _) => s,
            (None, Some(_)) => Strategy::Random,
            (None, None) if points <= 64 => Strategy::Grid,
            _ => Strategy::Halving,
        }
    }

    /// Timing choice, correctness gate and baseline: results measured under
    /// other settings are not reused.
    pub(super) fn settings(&self, baseline: &BTreeMap<String, String>) -> String {
        let timing = match self.measure.timing {
            TimingChoice::Auto => "auto",
            TimingChoice::Gpu => "gpu",
            TimingChoice::Reported => "reported",
            TimingChoice::Wall => "wall",
        };
        let check = match (&self.measure.check, self.measure.tol) {
            (None, _) => "none".to_string(),
            (Some(_), Some(t)) => format!("tol={t:e};baseline={}", canonical(baseline)),
            (Some(_), None) => format!("tol=dtype;baseline={}", canonical(baseline)),
        };
        format!(
            "timing={timing};range={};warmup={};check={check}",
            self.measure.range.as_deref().unwrap_or(""),
            self.measure.warmup
        )
    }
}

/// A config as canonical JSON (names sorted): the cache's parameter key.
pub fn canonical(config: &BTreeMap<String, String>) -> String {
    serde_json::to_string(config).unwrap_or_default()
}
