//! `kopt-fuzz replay` says what an input did: a panic that a library
//! caught inside the target (rusqlite's callbacks, the demangler's guard)
//! used to read "no panic", though libFuzzer's hook aborts on it.

use kopt_fuzz::driver::{replay, PanicFate};
use kopt_fuzz::Target;

#[global_allocator]
static ALLOC: kopt_fuzz::alloc::CountingAlloc = kopt_fuzz::alloc::CountingAlloc;

fn caught_inside(data: &[u8]) -> bool {
    // A library that runs a callback under catch_unwind and goes on.
    let inner = std::panic::catch_unwind(|| {
        if data.first() == Some(&b'!') {
            panic!("a callback panicked on {:?}", data[0] as char);
        }
    });
    inner.is_err()
}

fn escapes(_: &[u8]) -> bool {
    let v: Vec<u8> = Vec::new();
    v[3] == 0
}

fn quiet(data: &[u8]) -> bool {
    !data.is_empty()
}

#[test]
fn a_panic_caught_inside_the_target_is_reported() {
    let t = Target {
        name: "caught",
        run: caught_inside,
    };
    let r = replay(&t, b"!boom");
    let (text, fate) = r.panic.expect("the caught panic is reported");
    assert_eq!(fate, PanicFate::CaughtInside);
    assert!(text.contains("a callback panicked on '!'"), "{text}");
    assert!(text.contains("tests/replay.rs"), "{text}");
    // The same target on an input that does not panic: nothing reported.
    let r = replay(&t, b"fine");
    assert!(r.panic.is_none(), "{:?}", r.panic);
    assert!(!r.parsed);
}

#[test]
fn a_panic_out_of_the_target_and_none_are_told_apart() {
    let r = replay(
        &Target {
            name: "escapes",
            run: escapes,
        },
        b"x",
    );
    let (text, fate) = r.panic.expect("the escaped panic is reported");
    assert_eq!(fate, PanicFate::Escaped);
    assert!(text.contains("index out of bounds"), "{text}");
    assert!(!r.parsed);

    let r = replay(
        &Target {
            name: "quiet",
            run: quiet,
        },
        b"x",
    );
    assert!(r.panic.is_none());
    assert!(r.parsed);
}
