//! Where trials run: the [`Executor`] trait and the [`LocalExecutor`],
//! one worker thread per GPU of this host.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{mpsc, Mutex};

use kopt_model::BenchReport;

use crate::bench::Sampler;
use crate::error::{Error, Result};

use super::gpu::{query_device, visible_gpus};
use super::jobs::{FinalJob, TrialJob, TrialOutcome};
use super::trial::{run_final_job, run_trial_job};

/// Where trials run: threads on this host's GPUs, or a cluster.
pub trait Executor: Sync {
    /// The GPUs trials run on (empty: no GPU selection).
    fn gpus(&self) -> Vec<String>;
    /// The device's name and driver version, for the cache key.
    fn device(&self) -> (Option<String>, Option<String>);
    /// Run every job; `done` is called with each outcome as it finishes (the
    /// driver commits it to the cache then).
    fn run_trials(&self, jobs: Vec<TrialJob>, done: &mut dyn FnMut(TrialOutcome)) -> Result<()>;
    /// Time the final comparison interleaved on one GPU.
    fn run_final(&self, job: &FinalJob) -> Result<BenchReport>;
}

/// A sampler for one worker (worker index given).
pub type SamplerFactory<'a> = dyn Fn(usize) -> Box<dyn Sampler + Send> + Sync + 'a;

/// One worker thread per GPU on this host.
pub struct LocalExecutor<'a> {
    gpus: Vec<String>,
    factory: Box<SamplerFactory<'a>>,
    scratch: tempfile::TempDir,
    device: (Option<String>, Option<String>),
}

impl<'a> LocalExecutor<'a> {
    /// Real processes on `gpus` (None: every visible GPU, else one worker without GPU selection).
    pub fn new(
        gpus: Option<Vec<String>>,
        tracer: Option<PathBuf>,
    ) -> Result<LocalExecutor<'static>> {
        let gpus = gpus.unwrap_or_else(visible_gpus);
        let device = query_device(gpus.first().map(String::as_str));
        let factory: Box<SamplerFactory<'static>> = Box::new(move |_| {
            Box::new(
                crate::bench::ProcessSampler::new(tracer.clone())
                    .expect("a ProcessSampler is only a path"),
            )
        });
        LocalExecutor::with_factory(gpus, device, factory)
    }

    /// Any samplers (tests): `gpus` are the labels workers set, `device` the cache's device.
    pub fn with_factory(
        gpus: Vec<String>,
        device: (Option<String>, Option<String>),
        factory: Box<SamplerFactory<'a>>,
    ) -> Result<LocalExecutor<'a>> {
        let scratch = tempfile::Builder::new()
            .prefix("kopt-tune-")
            .tempdir()
            .map_err(|e| Error::Output(format!("temporary folder: {e}")))?;
        Ok(LocalExecutor {
            gpus,
            factory,
            scratch,
            device,
        })
    }

    fn worker_gpu(&self, w: usize) -> Option<&str> {
        self.gpus.get(w).map(String::as_str)
    }
}

impl Executor for LocalExecutor<'_> {
    fn gpus(&self) -> Vec<String> {
        self.gpus.clone()
    }

    fn device(&self) -> (Option<String>, Option<String>) {
        self.device.clone()
    }

    fn run_trials(&self, jobs: Vec<TrialJob>, done: &mut dyn FnMut(TrialOutcome)) -> Result<()> {
        let workers = self.gpus.len().max(1).min(jobs.len().max(1));
        let queue = Mutex::new(jobs.into_iter().collect::<VecDeque<_>>());
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|scope| {
            for w in 0..workers {
                let tx = tx.clone();
                let queue = &queue;
                let gpu = self.worker_gpu(w).map(str::to_string);
                let dir = self.scratch.path().join(format!("w{w}"));
                let cancel = kopt_collect::runner::cancel_flag();
                scope.spawn(move || {
                    let _cancel = kopt_collect::runner::enter_cancellable(cancel);
                    let mut sampler = (self.factory)(w);
                    loop {
                        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                        let Some(job) = job else { break };
                        let out = run_trial_job(&job, sampler.as_mut(), gpu.as_deref(), &dir);
                        if tx.send(out).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for out in rx {
                done(out);
            }
        });
        Ok(())
    }

    fn run_final(&self, job: &FinalJob) -> Result<BenchReport> {
        let mut sampler = (self.factory)(0);
        run_final_job(
            job,
            sampler.as_mut(),
            self.worker_gpu(0),
            &self.scratch.path().join("final"),
        )
    }
}
