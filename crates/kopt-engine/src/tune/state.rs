//! The sweep's state: every trial (its config, command, samples and
//! verdict so far) and the driver that holds them with the request, the
//! executor and the cache. The driver's work is spread over `driver.rs`,
//! `cache.rs` and `strategies.rs`, each an `impl Driver` of its own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kopt_bench::median;
use kopt_model::tune::TrialStatus;
use kopt_store::{TrialKey, TuneCache};

use crate::progress::Progress;

use super::executor::Executor;
use super::jobs::TimingSpec;
use super::request::TuneRequest;

/// One trial as the driver tracks it.
#[derive(Debug, Clone)]
pub(super) struct Trial {
    pub(super) config: BTreeMap<String, String>,
    pub(super) label: String,
    pub(super) command: String,
    pub(super) samples: Vec<f64>,
    pub(super) spent_s: f64,
    pub(super) status: TrialStatus,
    pub(super) reason: Option<String>,
    pub(super) correct: Option<bool>,
    /// The stopping rule held (or --max-time passed): the samples are final.
    pub(super) complete: bool,
    pub(super) measured: usize,
    pub(super) ran: bool,
    pub(super) gpu: Option<String>,
    pub(super) round: usize,
    pub(super) output: Option<PathBuf>,
    pub(super) source: Option<String>,
}

impl Trial {
    pub(super) fn median(&self) -> Option<f64> {
        median(&self.samples)
    }

    pub(super) fn usable(&self) -> bool {
        self.status == TrialStatus::Ok && !self.samples.is_empty()
    }
}

pub(super) struct Driver<'a> {
    pub(super) req: &'a TuneRequest,
    pub(super) exec: &'a dyn Executor,
    pub(super) progress: &'a dyn Progress,
    pub(super) cache: Option<TuneCache>,
    pub(super) key: TrialKey,
    pub(super) trials: Vec<Trial>,
    pub(super) timing: TimingSpec,
    pub(super) device_seen: Option<String>,
    pub(super) reference: Option<Vec<kopt_ingest::tensor::Tensor>>,
    pub(super) notes: Vec<String>,
    pub(super) done: usize,
}
