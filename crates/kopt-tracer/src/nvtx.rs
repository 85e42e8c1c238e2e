//! NVTX injection for a bare run: loaded through `NVTX_INJECTION64_PATH`
//! alone (no `CUDA_INJECTION64_PATH`, so CUPTI never attaches), it times
//! the program's step ranges and nothing else. `kopt trace` runs the
//! workload a second time like this so the graph-capture prediction starts
//! from the eager step time without a recorder in it.
//!
//! Only push/pop and start/end ranges (core and domain) are handled; NVTX
//! leaves every call the tool does not take as a no-op. A range whose name,
//! `#N` suffix cut, is `$KOPT_BARE_STEPS_RANGE` becomes one line of
//! `$KOPT_BARE_STEPS_OUT`: `{"t":"bare_step","pid":P,"name":N,"s":S,"e":E}`
//! (host monotonic clock, ns), written when the range ends, one write per
//! line (O_APPEND: processes of one workload share the file). Wide-string
//! (W) ranges are pushed unnamed so pops stay balanced.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::io::Write;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::records::json_str;

/// NVTX's ids (nvtxDetail/nvtxTypes.h): export table, modules, callbacks.
const ETID_CALLBACKS: u32 = 1;
const MODULE_CORE: c_int = 1;
const MODULE_CORE2: c_int = 5;
const CORE_RANGE_START_EX: usize = 4;
const CORE_RANGE_START_A: usize = 5;
const CORE_RANGE_START_W: usize = 6;
const CORE_RANGE_END: usize = 7;
const CORE_RANGE_PUSH_EX: usize = 8;
const CORE_RANGE_PUSH_A: usize = 9;
const CORE_RANGE_PUSH_W: usize = 10;
const CORE_RANGE_POP: usize = 11;
const CORE2_RANGE_START_EX: usize = 2;
const CORE2_RANGE_END: usize = 3;
const CORE2_RANGE_PUSH_EX: usize = 4;
const CORE2_RANGE_POP: usize = 5;
const CORE2_REGISTER_STRING_A: usize = 10;
/// nvtxEventAttributes_t: messageType (int32) at byte 32, the message
/// (a pointer-sized union) at byte 40; ASCII messages are type 1.
const ATTR_MESSAGE_TYPE_OFFSET: usize = 32;
const ATTR_MESSAGE_OFFSET: usize = 40;
/// Bytes an attribute struct must declare (its `size`, at byte 2) to hold
/// the message.
const ATTR_MIN_SIZE: u16 = 48;
const MESSAGE_TYPE_ASCII: i32 = 1;
/// A registered string (`nvtxDomainRegisterStringA`): the union holds the
/// handle this library returned, a pointer to its own copy of the text.
const MESSAGE_TYPE_REGISTERED: i32 = 3;

/// A slot of NVTX's function tables: a function pointer, stored untyped
/// (NVTX casts it back to the slot's signature when it calls it).
type Slot = *const c_void;
type GetModuleFunctionTable = unsafe extern "C" fn(c_int, *mut *mut *mut Slot, *mut u32) -> c_int;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: Option<GetModuleFunctionTable>,
}

/// The step family and the output file, set once by the injection entry.
struct Sink {
    family: String,
    file: Mutex<std::fs::File>,
}
static SINK: OnceLock<Sink> = OnceLock::new();
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Start/end ranges of the step family still open: id -> (name, start).
static OPEN: Mutex<Option<HashMap<u64, (String, i64)>>> = Mutex::new(None);

thread_local! {
    /// Push/pop ranges this thread is inside: (domain, step name if it is
    /// one, start).
    static STACK: RefCell<Vec<(usize, Option<String>, i64)>> = const { RefCell::new(Vec::new()) };
}

fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a local timespec clock_gettime writes; CLOCK_MONOTONIC
    // always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The range's name when it is one of the step family's.
fn step_name(message: Option<&str>) -> Option<String> {
    let sink = SINK.get()?;
    let m = message?;
    let family = match m.rsplit_once('#') {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => m,
    };
    (family == sink.family).then(|| m.to_string())
}

fn write_step(name: &str, start: i64, end: i64) {
    if let Some(sink) = SINK.get() {
        let line = format!(
            "{{\"t\":\"bare_step\",\"pid\":{},\"name\":{},\"s\":{start},\"e\":{end}}}\n",
            std::process::id(),
            json_str(name)
        );
        if let Ok(mut f) = sink.file.lock() {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// # Safety
/// `p` is null or a NUL-terminated string NVTX passed for this call.
unsafe fn c_message(p: *const c_char) -> Option<&'static str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: not null, NUL-terminated (caller); read during the call only
    // (the 'static is never kept: the name is copied before returning).
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// # Safety
/// `attr` is null or points to an nvtxEventAttributes_t NVTX passed.
unsafe fn attr_message(attr: *const c_void) -> Option<&'static str> {
    if attr.is_null() {
        return None;
    }
    let base = attr as *const u8;
    // SAFETY: every nvtxEventAttributes_t starts with u16 version, u16 size.
    let size = unsafe { (base.add(2) as *const u16).read_unaligned() };
    if size < ATTR_MIN_SIZE {
        return None;
    }
    // SAFETY: nvtxEventAttributes_t (v2, 48 bytes) holds messageType at
    // byte 32 and the message union at byte 40; `attr` points to one.
    let kind = unsafe { (base.add(ATTR_MESSAGE_TYPE_OFFSET) as *const i32).read_unaligned() };
    if kind != MESSAGE_TYPE_ASCII && kind != MESSAGE_TYPE_REGISTERED {
        return None;
    }
    // SAFETY: as above; for ASCII messages the union holds a char pointer,
    // for registered ones the handle `register_string_a` returned, which is
    // a pointer to a NUL-terminated copy this library never frees.
    let p = unsafe { (base.add(ATTR_MESSAGE_OFFSET) as *const *const c_char).read_unaligned() };
    // SAFETY: null or NUL-terminated (both cases above).
    unsafe { c_message(p) }
}

fn push(domain: usize, message: Option<&str>) -> c_int {
    let entry = (domain, step_name(message), now_ns());
    // try_with: a thread's last calls may come after its locals are gone.
    STACK
        .try_with(|s| {
            let mut s = s.borrow_mut();
            s.push(entry);
            s.len() as c_int - 1
        })
        .unwrap_or(-1)
}

fn pop(domain: usize) -> c_int {
    let end = now_ns();
    STACK
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let Some(i) = s.iter().rposition(|e| e.0 == domain) else {
                return -1;
            };
            let (_, name, start) = s.remove(i);
            if let Some(name) = name {
                write_step(&name, start, end);
            }
            i as c_int
        })
        .unwrap_or(-1)
}

fn start(message: Option<&str>) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    if let Some(name) = step_name(message) {
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.get_or_insert_with(HashMap::new)
            .insert(id, (name, now_ns()));
    }
    id
}

fn end(id: u64) {
    let end = now_ns();
    let open = OPEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|m| m.remove(&id));
    if let Some((name, start)) = open {
        write_step(&name, start, end);
    }
}

unsafe extern "C" fn range_push_a(message: *const c_char) -> c_int {
    // SAFETY: NVTX's argument for nvtxRangePushA.
    catch_unwind(|| push(0, unsafe { c_message(message) })).unwrap_or(-1)
}
unsafe extern "C" fn range_push_ex(attr: *const c_void) -> c_int {
    // SAFETY: NVTX's argument for nvtxRangePushEx.
    catch_unwind(|| push(0, unsafe { attr_message(attr) })).unwrap_or(-1)
}
unsafe extern "C" fn range_push_w(_message: *const c_void) -> c_int {
    catch_unwind(|| push(0, None)).unwrap_or(-1)
}
unsafe extern "C" fn range_start_w(_message: *const c_void) -> u64 {
    catch_unwind(|| start(None)).unwrap_or(0)
}
unsafe extern "C" fn range_pop() -> c_int {
    catch_unwind(|| pop(0)).unwrap_or(-1)
}
unsafe extern "C" fn range_start_a(message: *const c_char) -> u64 {
    // SAFETY: NVTX's argument for nvtxRangeStartA.
    catch_unwind(|| start(unsafe { c_message(message) })).unwrap_or(0)
}
unsafe extern "C" fn range_start_ex(attr: *const c_void) -> u64 {
    // SAFETY: NVTX's argument for nvtxRangeStartEx.
    catch_unwind(|| start(unsafe { attr_message(attr) })).unwrap_or(0)
}
unsafe extern "C" fn range_end(id: u64) {
    let _ = catch_unwind(|| end(id));
}
unsafe extern "C" fn domain_push_ex(domain: *mut c_void, attr: *const c_void) -> c_int {
    // SAFETY: NVTX's argument for nvtxDomainRangePushEx.
    catch_unwind(|| push(domain as usize, unsafe { attr_message(attr) })).unwrap_or(-1)
}
unsafe extern "C" fn domain_pop(domain: *mut c_void) -> c_int {
    catch_unwind(|| pop(domain as usize)).unwrap_or(-1)
}
unsafe extern "C" fn domain_start_ex(_domain: *mut c_void, attr: *const c_void) -> u64 {
    // SAFETY: NVTX's argument for nvtxDomainRangeStartEx.
    catch_unwind(|| start(unsafe { attr_message(attr) })).unwrap_or(0)
}
/// nvtxDomainRegisterStringA: the handle is a pointer to a copy of the
/// text, kept for the life of the process (NVTX has no unregister).
unsafe extern "C" fn register_string_a(_domain: *mut c_void, text: *const c_char) -> *const c_char {
    catch_unwind(|| {
        // SAFETY: NVTX's argument: null or NUL-terminated.
        let copy = unsafe { c_message(text) }
            .and_then(|t| std::ffi::CString::new(t).ok())
            .unwrap_or_default();
        copy.into_raw() as *const c_char
    })
    .unwrap_or(std::ptr::null())
}
unsafe extern "C" fn domain_end(_domain: *mut c_void, id: u64) {
    let _ = catch_unwind(|| end(id));
}

/// Put `f` in slot `id` of a module's table (when the table has it).
///
/// # Safety
/// `table` and `size` are what NVTX's GetModuleFunctionTable returned:
/// `size` slots, each a pointer to a function pointer NVTX then calls.
unsafe fn set(table: *mut *mut Slot, size: u32, id: usize, f: Slot) {
    if table.is_null() || id >= size as usize {
        return;
    }
    // SAFETY: id < size (checked), so the slot is inside the table.
    let slot = unsafe { *table.add(id) };
    if !slot.is_null() {
        // SAFETY: a slot NVTX handed out for this module's function `id`.
        unsafe { *slot = f };
    }
}

/// Entry point NVTX calls when `NVTX_INJECTION64_PATH` names this library.
/// Returns 1 when the step ranges are taken, 0 otherwise (NVTX then leaves
/// every call a no-op).
///
/// # Safety
/// Called by NVTX only, with its export-table getter.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: Option<unsafe extern "C" fn(u32) -> *const c_void>,
) -> c_int {
    // SAFETY: as the function's contract.
    catch_unwind(|| unsafe { init(get_export_table) }).unwrap_or(0)
}

/// # Safety
/// As `InitializeInjectionNvtx2`.
unsafe fn init(get_export_table: Option<unsafe extern "C" fn(u32) -> *const c_void>) -> c_int {
    let (Some(out), Some(family)) = (
        std::env::var_os("KOPT_BARE_STEPS_OUT"),
        std::env::var("KOPT_BARE_STEPS_RANGE").ok(),
    ) else {
        return 0;
    };
    // SAFETY: as the caller's contract.
    unsafe { init_with(&out, family, get_export_table) }
}

/// # Safety
/// As `InitializeInjectionNvtx2`.
unsafe fn init_with(
    out: &std::ffi::OsStr,
    family: String,
    get_export_table: Option<unsafe extern "C" fn(u32) -> *const c_void>,
) -> c_int {
    let Some(get) = get_export_table else {
        return 0;
    };
    // SAFETY: NVTX's getter, asked for the callbacks table (id 1).
    let table = unsafe { get(ETID_CALLBACKS) } as *const ExportTableCallbacks;
    if table.is_null() {
        return 0;
    }
    // SAFETY: not null; NVTX's NvtxExportTableCallbacks, which starts with
    // its size and the GetModuleFunctionTable pointer.
    let callbacks = unsafe { &*table };
    if callbacks.struct_size < std::mem::size_of::<ExportTableCallbacks>() {
        return 0;
    }
    let Some(get_module) = callbacks.get_module_function_table else {
        return 0;
    };
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
    {
        Ok(f) => f,
        Err(e) => {
            crate::warn(&format!(
                "{}: cannot open: {e}; the bare run's steps are not timed",
                out.to_string_lossy()
            ));
            return 0;
        }
    };
    let _ = SINK.set(Sink {
        family,
        file: Mutex::new(file),
    });
    // Each function goes to the slot NVTX calls with its signature
    // (nvtxTypes.h), as NVTX's own table holds them.
    let core: [(usize, Slot); 8] = [
        (
            CORE_RANGE_START_EX,
            range_start_ex as unsafe extern "C" fn(*const c_void) -> u64 as Slot,
        ),
        (
            CORE_RANGE_START_A,
            range_start_a as unsafe extern "C" fn(*const c_char) -> u64 as Slot,
        ),
        (
            CORE_RANGE_END,
            range_end as unsafe extern "C" fn(u64) as Slot,
        ),
        (
            CORE_RANGE_PUSH_EX,
            range_push_ex as unsafe extern "C" fn(*const c_void) -> c_int as Slot,
        ),
        (
            CORE_RANGE_PUSH_A,
            range_push_a as unsafe extern "C" fn(*const c_char) -> c_int as Slot,
        ),
        (
            CORE_RANGE_POP,
            range_pop as unsafe extern "C" fn() -> c_int as Slot,
        ),
        (
            CORE_RANGE_START_W,
            range_start_w as unsafe extern "C" fn(*const c_void) -> u64 as Slot,
        ),
        (
            CORE_RANGE_PUSH_W,
            range_push_w as unsafe extern "C" fn(*const c_void) -> c_int as Slot,
        ),
    ];
    let core2: [(usize, Slot); 5] = [
        (
            CORE2_REGISTER_STRING_A,
            register_string_a as unsafe extern "C" fn(*mut c_void, *const c_char) -> *const c_char
                as Slot,
        ),
        (
            CORE2_RANGE_START_EX,
            domain_start_ex as unsafe extern "C" fn(*mut c_void, *const c_void) -> u64 as Slot,
        ),
        (
            CORE2_RANGE_END,
            domain_end as unsafe extern "C" fn(*mut c_void, u64) as Slot,
        ),
        (
            CORE2_RANGE_PUSH_EX,
            domain_push_ex as unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int as Slot,
        ),
        (
            CORE2_RANGE_POP,
            domain_pop as unsafe extern "C" fn(*mut c_void) -> c_int as Slot,
        ),
    ];
    for (module, fns) in [(MODULE_CORE, &core[..]), (MODULE_CORE2, &core2[..])] {
        let mut t: *mut *mut Slot = std::ptr::null_mut();
        let mut size = 0u32;
        // SAFETY: NVTX's function with local out-pointers it writes.
        if unsafe { get_module(module, &mut t, &mut size) } == 0 {
            continue;
        }
        for &(id, f) in fns {
            // SAFETY: the table and size NVTX just returned for `module`.
            unsafe { set(t, size, id, f) };
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_nest_and_unknown_pops_fail() {
        assert_eq!(pop(0), -1);
        assert_eq!(push(0, Some("outer")), 0);
        assert_eq!(push(7, Some("inner")), 1);
        assert_eq!(pop(0), 0);
        assert_eq!(pop(7), 0);
        assert_eq!(pop(7), -1);
    }

    /// NVTX's side, faked: a core and a core2 table of empty slots.
    static mut CORE_SLOTS: [Slot; 17] = [std::ptr::null(); 17];
    static mut CORE2_SLOTS: [Slot; 16] = [std::ptr::null(); 16];
    static mut CORE_TABLE: [*mut Slot; 17] = [std::ptr::null_mut(); 17];
    static mut CORE2_TABLE: [*mut Slot; 16] = [std::ptr::null_mut(); 16];

    unsafe extern "C" fn fake_get_module(
        m: c_int,
        out: *mut *mut *mut Slot,
        size: *mut u32,
    ) -> c_int {
        // SAFETY: test-only statics, touched by this single test thread.
        unsafe {
            let (table, n): (*mut *mut Slot, u32) = match m {
                MODULE_CORE => (std::ptr::addr_of_mut!(CORE_TABLE).cast(), 16),
                MODULE_CORE2 => (std::ptr::addr_of_mut!(CORE2_TABLE).cast(), 15),
                _ => return 0,
            };
            *out = table;
            *size = n;
        }
        1
    }

    static CALLBACKS: ExportTableCallbacks = ExportTableCallbacks {
        struct_size: std::mem::size_of::<ExportTableCallbacks>(),
        get_module_function_table: Some(fake_get_module),
    };

    unsafe extern "C" fn fake_get_export_table(id: u32) -> *const c_void {
        if id == ETID_CALLBACKS {
            std::ptr::addr_of!(CALLBACKS).cast()
        } else {
            std::ptr::null()
        }
    }

    #[test]
    fn injection_fills_nvtx_slots_and_times_the_step_family() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bare_steps.jsonl");
        // SAFETY: test-only statics; one test thread sets the tables up
        // before the injection reads them.
        unsafe {
            for i in 0..17 {
                CORE_TABLE[i] = std::ptr::addr_of_mut!(CORE_SLOTS[i]);
            }
            for i in 0..16 {
                CORE2_TABLE[i] = std::ptr::addr_of_mut!(CORE2_SLOTS[i]);
            }
            // No environment here (tests run in parallel): the inner entry.
            assert_eq!(
                init_with(out.as_os_str(), "step".into(), Some(fake_get_export_table)),
                1
            );
            assert!(!CORE_SLOTS[CORE_RANGE_PUSH_A].is_null());
            assert!(!CORE_SLOTS[CORE_RANGE_POP].is_null());
            assert!(!CORE2_SLOTS[CORE2_RANGE_PUSH_EX].is_null());
            assert!(CORE_SLOTS[2].is_null(), "marks are left to NVTX");
            let push: unsafe extern "C" fn(*const c_char) -> c_int =
                std::mem::transmute::<Slot, unsafe extern "C" fn(*const c_char) -> c_int>(
                    CORE_SLOTS[CORE_RANGE_PUSH_A],
                );
            let pop: unsafe extern "C" fn() -> c_int = std::mem::transmute::<
                Slot,
                unsafe extern "C" fn() -> c_int,
            >(CORE_SLOTS[CORE_RANGE_POP]);
            for _ in 0..3 {
                push(c"step".as_ptr());
                push(c"aten::mm".as_ptr());
                pop();
                pop();
            }
            push(c"step#7".as_ptr());
            pop();
            // A registered string, pushed through a domain (the `nvtx`
            // Python package's way).
            let register: unsafe extern "C" fn(*mut c_void, *const c_char) -> *const c_char =
                std::mem::transmute::<
                    Slot,
                    unsafe extern "C" fn(*mut c_void, *const c_char) -> *const c_char,
                >(CORE2_SLOTS[CORE2_REGISTER_STRING_A]);
            let domain_push: unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int =
                std::mem::transmute::<
                    Slot,
                    unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int,
                >(CORE2_SLOTS[CORE2_RANGE_PUSH_EX]);
            let domain_pop: unsafe extern "C" fn(*mut c_void) -> c_int =
                std::mem::transmute::<Slot, unsafe extern "C" fn(*mut c_void) -> c_int>(
                    CORE2_SLOTS[CORE2_RANGE_POP],
                );
            let handle = register(std::ptr::null_mut(), c"step".as_ptr());
            let mut attr = [0u8; 48];
            attr[2..4].copy_from_slice(&48u16.to_ne_bytes());
            attr[32..36].copy_from_slice(&MESSAGE_TYPE_REGISTERED.to_ne_bytes());
            attr[40..48].copy_from_slice(&(handle as usize).to_ne_bytes());
            let domain = 0x10 as *mut c_void;
            domain_push(domain, attr.as_ptr().cast());
            domain_pop(domain);
        }
        let text = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[0].starts_with("{\"t\":\"bare_step\",\"pid\":"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("\"name\":\"step\",\"s\":"),
            "{}",
            lines[0]
        );
        assert!(lines[3].contains("\"name\":\"step#7\""));
    }

    #[test]
    fn start_end_ids_are_unique() {
        let a = start(Some("x"));
        let b = start(None);
        assert_ne!(a, b);
        end(a);
        end(b);
        end(12345);
    }
}
