//! #39: KOPT_JOURNAL_MAX_BYTES near 2^64 wrapped the read's cap to nothing
//! and the next append wiped the journal. Its own test binary: it sets the
//! process environment.

use kopt_store::journal::{append_entry, read_journal, Entry};

/// The tests here share the process environment: one at a time.
static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_budget_of_u64_max_keeps_earlier_entries() {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("OPTIMIZATIONS.md");
    let e = |h: &str| Entry {
        when: "2026-11-28 21:00 UTC".into(),
        hypothesis: h.into(),
        ..Entry::default()
    };
    append_entry(&p, &e("first")).unwrap();
    std::env::set_var("KOPT_JOURNAL_MAX_BYTES", u64::MAX.to_string());
    append_entry(&p, &e("second")).unwrap();
    let text = read_journal(&p).unwrap().unwrap();
    assert!(
        text.contains(": first\n") && text.contains(": second\n"),
        "{text}"
    );
}

/// A fifth hostile round: an invalid value was silently ignored while
/// every other KOPT_* budget variable is an error naming itself. The
/// variable is restored at the end.
#[test]
fn an_invalid_budget_is_an_error_naming_the_variable() {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("OPTIMIZATIONS.md");
    std::fs::write(&p, "# Optimizations\n").unwrap();
    let before = std::env::var("KOPT_JOURNAL_MAX_BYTES").ok();
    for bad in ["abc", "-5", "1e3", ""] {
        std::env::set_var("KOPT_JOURNAL_MAX_BYTES", bad);
        let e = read_journal(&p).unwrap_err().to_string();
        assert!(e.contains("KOPT_JOURNAL_MAX_BYTES"), "{bad:?}: {e}");
    }
    match before {
        Some(v) => std::env::set_var("KOPT_JOURNAL_MAX_BYTES", v),
        None => std::env::remove_var("KOPT_JOURNAL_MAX_BYTES"),
    }
}
