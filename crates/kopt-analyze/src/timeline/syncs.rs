//! The host's synchronising calls: where the host waits for the GPU.

use kopt_model::{ApiKind, Timeline};

/// When each call that makes the host wait for the GPU ended (device,
/// stream and event syncs, blocking copies), in order.
pub(super) fn host_sync_ends(t: &Timeline) -> Vec<i64> {
    let mut ends: Vec<i64> = t
        .api_calls
        .iter()
        .filter(|c| {
            c.kind == ApiKind::Synchronize
                || (c.kind == ApiKind::Memory
                    && c.name.contains("emcpy")
                    && !c.name.contains("Async"))
        })
        .map(|c| c.end_ns)
        .collect();
    ends.sort_unstable();
    ends
}
