//! #39: KOPT_JOURNAL_MAX_BYTES near 2^64 wrapped the read's cap to nothing
//! and the next append wiped the journal. Its own test binary: it sets the
//! process environment.

use kopt_store::journal::{append_entry, read_journal, Entry};

#[test]
fn a_budget_of_u64_max_keeps_earlier_entries() {
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
