//! The HTML report in a real browser: headless Chromium (Debian's `chromium`,
//! installed by .ci/run) renders it without console errors, the DOM holds one
//! roofline point per hot kernel, and a screenshot is saved.
//! Both tests are ignored by a plain `cargo test` (listed as ignored, with
//! the reason); `-- --ignored` runs them and fails without Chromium.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/chromium.rs"]
mod chromium;

use chromium::chromium;

/// The browser with its console sent to stderr, where the test reads it.
fn headless(chrome: &Path, profile: &Path) -> Command {
    let mut c = chromium::headless(chrome, profile);
    c.args(["--enable-logging=stderr", "--v=0"]);
    c
}

#[test]
#[ignore = "needs headless Chromium; run with -- --ignored (CI does)"]
fn report_renders_in_headless_chromium() {
    let chrome = chromium().expect("chromium is not installed (Debian: apt-get install chromium)");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("suite.html");
    let json = dir.path().join("suite.json");
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/labeled-suite-h100/ncu_raw_base.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "json", "--html"])
        .arg(&page)
        .arg("-o")
        .arg(&json)
        .arg(&fixture)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let hot = report["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| {
            k["bottleneck"]["class"] != "unknown"
                && [
                    "fp32_flops_per_s",
                    "dram_bytes_per_s",
                    "tensor_pct",
                    "memory_sol_pct",
                    "compute_sol_pct",
                ]
                .iter()
                .any(|f| !k[f].is_null())
        })
        .count()
        .min(100);

    let url = format!("file://{}", page.display());
    let dom = headless(&chrome, &dir.path().join("profile-dom"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let html = String::from_utf8_lossy(&dom.stdout);
    let stderr = String::from_utf8_lossy(&dom.stderr);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(
        html.contains("<svg class=\"roofline\""),
        "roofline missing from the rendered DOM"
    );
    // Kernels without an intensity (a copy: no FLOPs) are named under the
    // chart instead of drawn.
    let left_out: usize = html
        .split_once(" kernel(s) with counters are not on the chart")
        .map_or(0, |(before, _)| {
            before
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        });
    assert!(left_out > 0, "the labeled suite's copies have no FLOPs");
    assert_eq!(
        html.matches("<circle class=\"pt ").count(),
        hot - left_out,
        "one point per hot kernel with an intensity"
    );

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kopt-labeled-suite-report.png");
    let s = headless(&chrome, &dir.path().join("profile-shot"))
        .arg("--window-size=1280,2400")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot looks empty"
    );
    eprintln!("screenshot: {}", shot.display());
}

/// Measures the page in the browser: every header cell, table cell, badge
/// and chart text (roofline and timeline strip) as laid out, and reports
/// each pair of boxes that intersect and each cell whose content runs past
/// its edges, as JSON in a `<pre id="kopt-layout">` that --dump-dom returns.
const LAYOUT_PROBE: &str = r#"<script>
(function () {
  var boxes = [], problems = [];
  function text(el) { return (el.textContent || '').trim().slice(0, 50); }
  function add(kind, el, r, owner) {
    if (r.width > 0 && r.height > 0) boxes.push({ kind: kind, text: text(el), r: r, owner: owner });
  }
  var cells = document.querySelectorAll('table th, table td');
  cells.forEach(function (c, i) {
    var cell = c.getBoundingClientRect();
    var range = document.createRange();
    range.selectNodeContents(c);
    var content = range.getBoundingClientRect();
    if (content.width > 0 && (content.left < cell.left - 0.5 || content.right > cell.right + 0.5 ||
        content.top < cell.top - 0.5 || content.bottom > cell.bottom + 0.5)) {
      problems.push('content runs out of its cell: ' + text(c));
    }
    add(c.tagName === 'TH' ? 'header' : 'cell', c, content, i);
    c.querySelectorAll('.badge').forEach(function (b) { add('badge', b, b.getBoundingClientRect(), i); });
  });
  document.querySelectorAll('svg text').forEach(function (t, i) {
    // Content folded away in a closed <details> is not on screen.
    if (t.closest('details:not([open]) > :not(summary)')) return;
    add('svg:' + t.getAttribute('class'), t, t.getBoundingClientRect(), 'svg' + i);
  });
  // A kernel name wraps between the parts of an identifier, never inside
  // one: two letters or digits in a row must sit on one line.
  document.querySelectorAll('td.name').forEach(function (c) {
    var walker = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), node, prev = null;
    while ((node = walker.nextNode())) {
      for (var i = 0; i < node.length; i++) {
        var r = document.createRange();
        r.setStart(node, i); r.setEnd(node, i + 1);
        var rect = r.getBoundingClientRect(), ch = node.data[i];
        var word = /[A-Za-z0-9]/.test(ch);
        if (prev && word && prev.word && rect.top >= prev.rect.bottom - 1) {
          problems.push('name breaks inside an identifier: ' + text(c));
          return;
        }
        prev = { rect: rect, word: word };
      }
      // A text node ends at an element (<wbr>): a break there is allowed.
      prev = null;
    }
  });
  var tol = 0.5;
  for (var a = 0; a < boxes.length; a++) {
    for (var b = a + 1; b < boxes.length; b++) {
      var p = boxes[a], q = boxes[b];
      if (p.owner === q.owner) continue;
      var w = Math.min(p.r.right, q.r.right) - Math.max(p.r.left, q.r.left);
      var h = Math.min(p.r.bottom, q.r.bottom) - Math.max(p.r.top, q.r.top);
      if (w > tol && h > tol) {
        problems.push(p.kind + ' "' + p.text + '" overlaps ' + q.kind + ' "' + q.text + '"');
      }
    }
  }
  var pre = document.createElement('pre');
  pre.id = 'kopt-layout';
  pre.textContent = JSON.stringify({ boxes: boxes.length, problems: problems });
  document.body.appendChild(pre);
})();
</script>"#;

/// The report of `input` laid out by Chromium at `width` pixels: how many
/// boxes were measured, and every overlap found.
fn layout_problems(chrome: &Path, dir: &Path, input: &Path, width: u32) -> (u64, Vec<String>) {
    let page = dir.join("page.html");
    let out = Command::new(env!("CARGO_BIN_EXE_kopt"))
        .args(["analyze", "--format", "html", "-o"])
        .arg(&page)
        .arg(input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let probed = dir.join("probed.html");
    std::fs::write(
        &probed,
        html.replace("</body>", &format!("{LAYOUT_PROBE}</body>")),
    )
    .unwrap();
    let dom = chromium::headless(chrome, &dir.join(format!("profile-{width}")))
        .arg(format!("--window-size={width},1600"))
        .arg("--dump-dom")
        .arg(format!("file://{}", probed.display()))
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    let json = dom
        .split("<pre id=\"kopt-layout\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .expect("the layout probe ran");
    let json = json
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let problems = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    (v["boxes"].as_u64().unwrap(), problems)
}

/// No two text boxes of the page overlap, and no cell's text runs out of
/// its cell: on the labeled suite (12 kernels with counters), a `kopt
/// profile` run folder, a capture with ncu's rules, and a trace without
/// counters; at a desktop and a narrow window.
#[test]
#[ignore = "needs headless Chromium; run with -- --ignored (CI does)"]
fn no_text_overlaps_in_the_report() {
    let chrome = chromium().expect("chromium is not installed (Debian: apt-get install chromium)");
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut failures = Vec::new();
    for rel in [
        "labeled-suite-h100/ncu_raw_base.csv",
        "h100-probe/ncu_details.csv",
        "profile-module-h200/run",
        "seed000-h200/moe_trace.json",
        // ATen's long templated names, where identifiers used to split.
        "ops-gpt2-h200/gpt2.trace.jsonl.gz",
        // Real models: crowded rooflines, and start-up before the steady state.
        "advice-h100/resnet50_b128_bf16-plain",
        "advice-h100/bert_b32_s128_fp32-plain",
        "advice-h100/vit_hf_b64_bf16_eager-ops",
    ] {
        for width in [1280, 800] {
            let dir = tempfile::tempdir().unwrap();
            let (boxes, problems) =
                layout_problems(&chrome, dir.path(), &fixtures.join(rel), width);
            assert!(boxes > 50, "{rel}: only {boxes} boxes measured");
            failures.extend(
                problems
                    .into_iter()
                    .map(|p| format!("{rel} at {width}px: {p}")),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
