//! Small wrappers over CUPTI calls the other modules share. libcupti is
//! opened at run time (cudarc's dynamic loading): `init` checks it is
//! present before anything here runs, and a missing symbol panics inside
//! the entry points' `catch_unwind`.

use std::ffi::CStr;

use cudarc::cupti::sys;

/// A C string from CUPTI as text, None for a null pointer.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that stays valid for
/// the call.
pub(crate) unsafe fn c_text(p: *const std::ffi::c_char) -> Option<String> {
    // SAFETY: `p` is not null here, and the caller promises it points to a
    // NUL-terminated string valid for this call; the text is copied out
    // before returning.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Set one CUPTI activity attribute; the value's size is its type's.
///
/// # Safety
/// `T` is the type CUPTI documents for `attr` (`size_t` or `uint8_t`), and
/// libcupti is loaded.
pub(crate) unsafe fn set_attribute<T>(
    attr: sys::CUpti_ActivityAttribute,
    mut value: T,
) -> sys::CUptiResult {
    let mut size = std::mem::size_of::<T>();
    // SAFETY: both pointers are to locals that outlive the call; `size` is
    // the byte size of `value`, so CUPTI reads (or writes) at most the bytes
    // of `value`, whose type the caller matched to `attr`.
    unsafe { sys::cuptiActivitySetAttribute(attr, &mut size, (&mut value as *mut T).cast()) }
}

/// CUPTI's clock now (ns; the clock of the activity records).
pub(crate) fn cupti_now() -> u64 {
    let mut t = 0u64;
    // SAFETY: the only argument is an out-pointer to a local u64 that lives
    // across the call; CUPTI writes one u64 there. Only called once `init`
    // found libcupti.
    unsafe { sys::cuptiGetTimestamp(&mut t) };
    t
}
