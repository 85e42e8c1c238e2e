//! Which CUDA API calls kopt keeps (`keep_api`), their names (`api_name`),
//! and the ids of the kept ones (`selected_apis`). Shared by the buffer
//! drain (API activity records), CUPTI's API callbacks and `attach`; it
//! keeps no tracing state but the name cache.

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::cupti::sys;

use crate::cupti::c_text;

/// API names by (domain, callback id), looked up once each.
static NAMES: Mutex<Option<HashMap<(u32, u32), String>>> = Mutex::new(None);

/// API calls worth keeping: launches, graph launches, synchronisation, copies.
pub(crate) fn keep_api(name: &str) -> bool {
    ["Launch", "Synchronize", "Memcpy", "Memset", "GraphLaunch"]
        .iter()
        .any(|k| name.contains(k))
}

pub(crate) fn api_name(domain: sys::CUpti_CallbackDomain, cbid: u32) -> String {
    let key = (domain as u32, cbid);
    let mut guard = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let names = guard.get_or_insert_with(HashMap::new);
    names
        .entry(key)
        .or_insert_with(|| callback_name(domain, cbid).unwrap_or_else(|| format!("cbid{cbid}")))
        .clone()
}

/// CUPTI's name for a runtime or driver API call, None for an unused id.
fn callback_name(domain: sys::CUpti_CallbackDomain, cbid: u32) -> Option<String> {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: `p` is a local out-pointer that lives across the call; domain
    // and id are plain values (an unknown id is an error, not UB).
    if unsafe { sys::cuptiGetCallbackName(domain, cbid, &mut p) } != sys::CUptiResult::CUPTI_SUCCESS
    {
        return None;
    }
    // SAFETY: on success CUPTI set `p` to its own NUL-terminated name of the
    // call (static in libcupti), or left it null.
    unsafe { c_text(p) }
}

/// Enable activity records for the selected runtime and driver APIs only.
/// False when this CUPTI cannot select APIs (then whole kinds are enabled).
///
/// # Safety
/// libcupti is loaded; called while setting CUPTI up (`attach`).
pub(crate) unsafe fn enable_selected_apis() -> bool {
    use sys::CUpti_CallbackDomain as D;
    for &(domain, cbid) in selected_apis() {
        let enable = if domain == D::CUPTI_CB_DOMAIN_RUNTIME_API {
            sys::cuptiActivityEnableRuntimeApi
        } else {
            sys::cuptiActivityEnableDriverApi
        };
        // SAFETY: plain values: an id CUPTI itself named for this domain,
        // and 1 (enable).
        if unsafe { enable(cbid, 1) } != sys::CUptiResult::CUPTI_SUCCESS {
            return false;
        }
    }
    !selected_apis().is_empty()
}

/// The runtime and driver calls kopt keeps, looked up once (3,000 name
/// queries): a sampled trace subscribes to them again at every window.
pub(crate) fn selected_apis() -> &'static [(sys::CUpti_CallbackDomain, u32)] {
    static SELECTED: std::sync::OnceLock<Vec<(sys::CUpti_CallbackDomain, u32)>> =
        std::sync::OnceLock::new();
    SELECTED.get_or_init(|| {
        let mut ids = Vec::new();
        for domain in [
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
        ] {
            // Callback ids are small dense integers; names that do not resolve are skipped.
            for cbid in 1..1500u32 {
                if callback_name(domain, cbid).is_some_and(|name| keep_api(&name)) {
                    ids.push((domain, cbid));
                }
            }
        }
        ids
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_launch_sync_and_copy_calls_only() {
        assert!(keep_api("cudaLaunchKernel_v7000"));
        assert!(keep_api("cuLaunchKernelEx"));
        assert!(keep_api("cudaGraphLaunch_v10000"));
        assert!(keep_api("cudaDeviceSynchronize_v3020"));
        assert!(keep_api("cudaMemcpyAsync_v3020"));
        assert!(!keep_api("cudaGetDevice_v3020"));
    }
}
