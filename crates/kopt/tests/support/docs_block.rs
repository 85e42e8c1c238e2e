//! A table in docs/benchmarks.md kept equal to what a test computes: the
//! text between `<!-- NAME -->` and `<!-- /NAME -->`. With KOPT_BLESS set,
//! the block is rewritten instead of compared.

use std::path::PathBuf;

pub fn pin(name: &str, table: &str, test: &str) {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md");
    let text = std::fs::read_to_string(&docs).unwrap();
    let (open, close) = (format!("<!-- {name} -->\n"), format!("<!-- /{name} -->"));
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("docs/benchmarks.md has no {name} block"))
        + open.len();
    let end = text[start..].find(&close).unwrap() + start;
    if std::env::var_os("KOPT_BLESS").is_some() {
        let new = format!("{}{table}{}", &text[..start], &text[end..]);
        std::fs::write(&docs, new).unwrap();
        return;
    }
    assert_eq!(
        &text[start..end],
        table,
        "re-pin with KOPT_BLESS=1 cargo test -p kopt --test {test}"
    );
}
