//! kopt-analyze's modules form layers, and a module only uses modules of
//! layers below its own: read from the source text (`crate::a::b`,
//! `super::x`, `use super::{..}`), test code left out. A new module must be
//! given its layer here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The crate's top-level modules, lowest layer first.
const LAYERS: &[&[&str]] = &[
    // Primitives: kernel names, ncu's rules, rooflines, op ranges, per-launch
    // rules, a finding's gain; host syncs, copies and the optimizer's step
    // (summarised for the timeline, their findings from those summaries alone).
    &[
        "library",
        "ncu_rules",
        "roofline",
        "ops",
        "rules",
        "gain",
        "host_syncs",
        "copies",
        "optimizer",
        "step_phases",
    ],
    &["timeline"],
    // What is built on the timeline and on the launches.
    &["steady_strip", "warmup", "rollup", "ranks"],
    // Findings over one kernel or a family of kernels.
    &["catalogue", "batchnorm", "fusion", "layout", "attention"],
    // The ranking's base and finding ids.
    &["ranking"],
    // Findings priced on the ranking's base; what `kopt profile` decides
    // from a diagnosis.
    &["precision", "compile", "counter_plan"],
    // `analyze` itself (lib.rs).
    &["lib"],
];

/// The timeline's modules, lowest layer first.
const TIMELINE_LAYERS: &[&[&str]] = &[
    &["stats", "period", "launches", "syncs"],
    &["steps"],
    &["steady"],
    &["window", "bare"],
    &["replay"],
    &["summary"],
    &["range_time", "step_profile", "strip"],
    // The re-exports (timeline/mod.rs) and the tests' timelines.
    &["mod", "synthetic"],
];

fn level(layers: &[&[&str]], name: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&name))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("src is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// A file's module path under the crate: `timeline/steps/host.rs` is
/// `[timeline, steps, host]`, a `mod.rs` its folder's, `lib.rs` `[lib]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") && parts.len() > 1 {
        parts.pop();
    }
    parts
}

/// The module paths a file's non-test code names: `crate::` paths as
/// written, `super::` paths resolved against the file's own module.
fn references(text: &str, own: &[String]) -> Vec<Vec<String>> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    // The path's segments, up to the first that does not end at `::`.
    let ident = |s: &str| -> Vec<String> {
        let mut path = Vec::new();
        for part in s.split("::") {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let whole = name.len() == part.len();
            if !name.is_empty() {
                path.push(name);
            }
            if !whole || path.is_empty() {
                break;
            }
        }
        path
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            out.extend(inner.split(',').map(|g| ident(g.trim())));
        } else {
            out.push(ident(rest));
        }
    }
    // `super` is the module above the file's own (a mod.rs's own is its folder).
    let parent: Vec<String> = own[..own.len().saturating_sub(1)].to_vec();
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + "super::".len()..];
        let names: Vec<Vec<String>> = if let Some(group) = rest.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            inner.split(',').map(|g| ident(g.trim())).collect()
        } else {
            vec![ident(rest)]
        };
        for n in names {
            let mut p = parent.clone();
            p.extend(n);
            out.push(p);
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// Where a module path sits: (top-level layer, timeline layer where inside
/// the timeline). An item of lib.rs (no module of that name) is `lib`'s.
fn rank(path: &[String]) -> Option<(usize, Option<usize>)> {
    let top = path.first()?;
    let Some(l) = level(LAYERS, top) else {
        return level(LAYERS, "lib").map(|l| (l, None));
    };
    if top != "timeline" {
        return Some((l, None));
    }
    let inner = path.get(1).and_then(|s| level(TIMELINE_LAYERS, s));
    Some((l, inner))
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut violations = BTreeMap::new();
    let mut checked = 0;
    for file in &files {
        let own = module_path(&src, file);
        let (own_top, own_inner) =
            rank(&own).unwrap_or_else(|| panic!("{}: no layer (add it to LAYERS)", file.display()));
        assert!(
            level(LAYERS, &own[0]).is_some(),
            "{}: module {} has no layer (add it to LAYERS)",
            file.display(),
            own[0]
        );
        if own[0] == "timeline" && own.len() > 1 {
            assert!(
                level(TIMELINE_LAYERS, &own[1]).is_some(),
                "{}: timeline module {} has no layer (add it to TIMELINE_LAYERS)",
                file.display(),
                own[1]
            );
        }
        let text = std::fs::read_to_string(file).expect("a source file");
        for target in references(&text, &own) {
            let Some((top, inner)) = rank(&target) else {
                continue;
            };
            checked += 1;
            // Within one top-level module (its own folder) only the
            // timeline's layers are checked; a submodule of the same
            // timeline module (steps/host -> steps) is the same unit.
            let ok = if own[0] == target[0] {
                own[0] != "timeline"
                    || own.len() < 2
                    || target.len() < 2
                    || own[1] == target[1]
                    || match (own_inner, inner) {
                        (Some(a), Some(b)) => b < a,
                        _ => false,
                    }
            } else {
                top < own_top
            };
            if !ok {
                violations
                    .entry(own.join("::"))
                    .or_insert_with(Vec::new)
                    .push(target.join("::"));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} references read: the parser is broken"
    );
    assert!(
        violations.is_empty(),
        "modules using a layer above their own: {violations:#?}"
    );
}

#[test]
fn a_reference_upwards_is_caught() {
    let own = vec!["rules".to_string()];
    let refs = references(
        "use crate::rollup::KernelGroup;\nfn f() { super::x(); }",
        &own,
    );
    assert_eq!(
        refs,
        [
            vec!["rollup".to_string(), "KernelGroup".into()],
            vec!["x".into()]
        ]
    );
    let (rules, _) = rank(&own).unwrap();
    let (rollup, _) = rank(&refs[0]).unwrap();
    assert!(rollup > rules, "rules may not use rollup");
    // An item of lib.rs counts as analyze's layer, the top.
    assert_eq!(rank(&refs[1]).unwrap().0, LAYERS.len() - 1);
    // Inside the timeline: steps may not use the summary.
    let own = vec!["timeline".to_string(), "steps".into(), "host".into()];
    let refs = references("use super::Steps;\nuse crate::timeline::summary::x;", &own);
    assert_eq!(refs[0], ["timeline", "summary", "x"]);
    let (_, steps) = rank(&own).unwrap();
    let (_, summary) = rank(&refs[0]).unwrap();
    assert!(summary > steps);
}
