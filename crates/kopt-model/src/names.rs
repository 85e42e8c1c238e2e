//! Kernel names are C++ templates; tables need something a person can read.

/// Longest short name a table shows.
const MAX_SHORT: usize = 48;

/// `void at::<unnamed>::vectorized_elementwise_kernel<4, ...>(int, ...)` ->
/// `vectorized_elementwise_kernel`, cut to a table-friendly length. A
/// generic wrapper is named by the kernel its template argument names:
/// `void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)`
/// -> `cutlass_80_simt_sgemm_64x64_8x5_tn_align1`, not `Kernel2`.
pub fn kernel_short_name(full: &str) -> String {
    let function = kernel_function_name(full);
    let name = if is_generic_wrapper(&function) {
        wrapped_kernel_name(full, &function).unwrap_or(function)
    } else {
        function
    };
    clip_chars(&name, MAX_SHORT)
}

/// A function name that says only "a kernel": CUTLASS's `cutlass::Kernel`,
/// `Kernel2` and `device_kernel` (cuDNN's copies of them too), a plain
/// `kernel`; what runs is its template argument.
fn is_generic_wrapper(function: &str) -> bool {
    let base = function
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .to_ascii_lowercase();
    matches!(base.as_str(), "kernel" | "device_kernel" | "global_kernel")
}

/// The kernel a generic wrapper `function` runs, from the first template
/// argument of `function` in `full`: its own function name (namespaces and
/// templates dropped) when that names something, not a number, a cast or
/// a built-in type (`kernel<float>` stays `kernel`).
fn wrapped_kernel_name(full: &str, function: &str) -> Option<String> {
    let args = function_template_args(full, function)?;
    let first = split_top_level(args).into_iter().next()?.trim();
    let name = kernel_function_name(first);
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    const BUILTIN: [&str; 22] = [
        "void",
        "bool",
        "char",
        "short",
        "int",
        "long",
        "float",
        "double",
        "half",
        "__half",
        "bfloat16",
        "__nv_bfloat16",
        "unsigned",
        "signed",
        "size_t",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint32_t",
        "uint64_t",
    ];
    let last_word = first.rsplit(' ').next().unwrap_or(first);
    (plain && !BUILTIN.contains(&name.as_str()) && !BUILTIN.contains(&last_word)).then_some(name)
}

/// The text inside the template brackets that follow `function` at the top
/// level of `full` (`Kernel2<...>(`), the last such group.
fn function_template_args<'a>(full: &'a str, function: &str) -> Option<&'a str> {
    let bytes = full.as_bytes();
    let mut depth = 0usize;
    let mut found = None;
    let mut open = None;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' | b'[' => {
                if depth == 0 && b == b'<' && full[..i].ends_with(function) {
                    let before = full[..i - function.len()].chars().next_back();
                    if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                        open = Some(i + 1);
                    }
                }
                depth += 1;
            }
            b'>' | b')' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 && b == b'>' {
                    if let Some(start) = open.take() {
                        found = Some(&full[start..i]);
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// `a, b<c, d>, e` -> `a`, `b<c, d>`, `e`: split at commas outside brackets.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' | b')' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// At most `max` characters: a longer text keeps `max - 1` and ends in "…".
pub fn clip_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let head: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

/// Names cut to at most `max` characters each and kept apart: different
/// names never read the same. A name that fits stays whole; a longer one
/// loses its end (`clip_chars`) unless that makes it read like another
/// name, and then it loses its middle instead, keeping as much of the
/// differing end as it takes, from the start of its word
/// (`kopt_transpose_s…` twice becomes `kopt_transp…naive` and
/// `kopt_trans…padded`). Names that differ only
/// in a middle no cut can show end in a counter (`…~1`, `…~2`). Equal
/// names stay equal. Every renderer that shortens kernel names uses this.
pub fn clip_distinct<S: AsRef<str>>(names: &[S], max: usize) -> Vec<String> {
    use std::collections::HashMap;
    let max = max.max(1);
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    let mut out: Vec<String> = names.iter().map(|n| clip_chars(n, max)).collect();
    // How many names read each text: every check below is a look-up, so
    // thousands of names that read alike cost linear time, not cubic.
    let mut shown: HashMap<String, usize> = HashMap::new();
    for o in &out {
        *shown.entry(o.clone()).or_default() += 1;
    }
    for group in collisions(&names, &out) {
        // Only shortened names can change; a name shown whole stays.
        let cut: Vec<usize> = group
            .iter()
            .copied()
            .filter(|&i| names[i].chars().count() > max)
            .collect();
        let mut in_cut: HashMap<&str, usize> = HashMap::new();
        for &i in &cut {
            *in_cut.entry(out[i].as_str()).or_default() += 1;
        }
        // Different names never read the same, and none reads like a name
        // outside the group.
        let ok = |tries: &[String]| {
            let mut by_text: HashMap<&str, &str> = HashMap::new();
            let apart = cut
                .iter()
                .zip(tries)
                .all(|(&i, t)| *by_text.entry(t.as_str()).or_insert(names[i]) == names[i]);
            apart
                && tries.iter().all(|t| {
                    shown.get(t.as_str()).copied().unwrap_or(0)
                        == in_cut.get(t.as_str()).copied().unwrap_or(0)
                })
        };
        // The shortest kept end that tells the group apart and reads like
        // no other name.
        let fits = (1..max.saturating_sub(1)).find_map(|tail| {
            let tries: Vec<String> = cut.iter().map(|&i| elide(names[i], max, tail)).collect();
            ok(&tries).then_some((tail, tries))
        });
        let Some((tail, tries)) = fits else {
            continue;
        };
        // Each kept end widened to the start of its word where that keeps
        // the group apart: `…naive`, not `…e`.
        let widened: Vec<String> = cut
            .iter()
            .map(|&i| elide(names[i], max, word_tail(names[i], tail, max)))
            .collect();
        let chosen = if ok(&widened) { widened } else { tries };
        drop(in_cut);
        for (&i, t) in cut.iter().zip(chosen) {
            if let Some(n) = shown.get_mut(out[i].as_str()) {
                *n -= 1;
            }
            *shown.entry(t.clone()).or_default() += 1;
            out[i] = t;
        }
    }
    // What no cut could tell apart gets a counter, one per different name.
    let mut counter = 0usize;
    for group in collisions(&names, &out) {
        let mut numbered: HashMap<&str, String> = HashMap::new();
        for &i in &group {
            if names[i].chars().count() <= max {
                continue;
            }
            if let Some(t) = numbered.get(names[i]) {
                out[i] = t.clone();
                continue;
            }
            counter += 1;
            let tag = format!("~{counter}");
            let head = max.saturating_sub(1 + tag.chars().count());
            let t = format!("{}…{tag}", names[i].chars().take(head).collect::<String>());
            numbered.insert(names[i], t.clone());
            out[i] = t;
        }
    }
    out
}

/// Indices of different names that read the same, grouped by what they
/// read, in a stable order.
fn collisions(names: &[&str], out: &[String]) -> Vec<Vec<usize>> {
    let mut by_text: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for (i, o) in out.iter().enumerate() {
        by_text.entry(o.as_str()).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = by_text
        .into_values()
        .filter(|g| g.iter().any(|&i| names[i] != names[g[0]]))
        .collect();
    groups.sort();
    groups
}

/// A kept end of at least `tail` characters grown to the start of its word
/// (after `_`, `:`, a space, ...), while the head keeps half of `max`.
fn word_tail(name: &str, tail: usize, max: usize) -> usize {
    let chars: Vec<char> = name.chars().collect();
    let limit = (max.saturating_sub(1)).saturating_sub(max / 2);
    (tail..=limit.min(chars.len()))
        .find(|&t| {
            t == chars.len()
                || matches!(
                    chars[chars.len() - t - 1],
                    '_' | ':' | ' ' | '<' | '(' | ',' | '.' | '-'
                )
        })
        .unwrap_or(tail)
}

/// `name` cut to `max` characters by dropping its middle: the head, "…",
/// and the last `tail` characters.
fn elide(name: &str, max: usize, tail: usize) -> String {
    let n = name.chars().count();
    if n <= max {
        return name.to_string();
    }
    let tail = tail.min(max.saturating_sub(1));
    let head = max - 1 - tail;
    let mut s: String = name.chars().take(head).collect();
    s.push('…');
    s.extend(name.chars().skip(n - tail));
    s
}

/// The qualified function name: template arguments and parameter lists
/// dropped at any depth and a leading return type with them, namespaces
/// kept (`void at::native::foo<8>(int)` -> `at::native::foo`).
pub fn qualified_function_name(full: &str) -> String {
    let mut depth = 0i32;
    let mut top = String::with_capacity(full.len());
    for ch in full.chars() {
        match ch {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth = (depth - 1).max(0),
            _ if depth == 0 => top.push(ch),
            _ => {}
        }
    }
    let top = top.trim();
    // Drop a leading return type ("void ", "static void ").
    top.rsplit(' ').next().unwrap_or(top).to_string()
}

/// The bare function name: the qualified name's last namespace component
/// (what ncu's `--kernel-name-base function` matches).
pub fn kernel_function_name(full: &str) -> String {
    let qualified = qualified_function_name(full);
    let name = qualified
        .rsplit("::")
        .find(|part| !part.is_empty())
        .unwrap_or(&qualified);
    let name = if name.is_empty() { full.trim() } else { name };
    name.to_string()
}

/// A name for matching the same kernel across ncu runs: every namespace
/// qualifier dropped. ncu shortens namespaces differently from one run to the
/// next (`detail::TensorInfo` in one, `cuda::TensorInfo` in the other), while
/// template arguments and parameters, which tell instances apart, stay.
pub fn kernel_match_key(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut rest = full;
    while let Some(pos) = rest.find("::") {
        out.push_str(&rest[..pos]);
        // Drop the qualifier just written: an identifier, `<unnamed>` or `(anonymous namespace)`.
        for anon in ["<unnamed>", "(anonymous namespace)"] {
            if out.ends_with(anon) {
                out.truncate(out.len() - anon.len());
            }
        }
        while out.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            out.pop();
        }
        rest = &rest[pos + 2..];
    }
    out.push_str(rest);
    out
}

/// Nanoseconds for people: "850 ns", "34.52 us", "1.53 ms", "2.10 s".
pub fn format_duration_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "n/a".into();
    }
    // The unit is chosen by magnitude, the sign put back in front; what
    // rounds to zero is "0 ns", never "-0 ns".
    let a = ns.abs();
    let sign = if ns < 0.0 && a >= 0.5 { "-" } else { "" };
    if a >= 1e15 {
        // Beyond any run: scientific, not a 300-digit integer.
        format!("{sign}{:.2e} s", a / 1e9)
    } else if a >= 1e9 {
        format!("{sign}{:.2} s", a / 1e9)
    } else if a >= 1e6 {
        format!("{sign}{:.2} ms", a / 1e6)
    } else if a >= 1e3 {
        format!("{sign}{:.2} us", a / 1e3)
    } else if ns > 0.0 && ns < 0.5 {
        // Some time, less than a nanosecond: not "0 ns", which reads as none.
        "<1 ns".into()
    } else {
        format!("{sign}{a:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_short_name as s;

    #[test]
    fn durations_under_a_nanosecond_are_not_zero() {
        use super::format_duration_ns as d;
        assert_eq!(d(1e-300), "<1 ns");
        assert_eq!(d(0.4), "<1 ns");
        assert_eq!(d(0.0), "0 ns");
        assert_eq!(d(-1e-300), "0 ns");
        assert_eq!(d(0.6), "1 ns");
    }

    /// #39: "-0 ns" for a tiny negative, a 300-digit integer for an extreme
    /// duration, and negatives always in ns.
    #[test]
    fn durations_never_print_minus_zero_or_hundreds_of_digits() {
        use super::format_duration_ns as d;
        assert_eq!(d(-0.3), "0 ns");
        assert_eq!(d(-0.0), "0 ns");
        assert_eq!(d(-2.5e6), "-2.50 ms");
        assert!(d(1e300).len() < 16, "{}", d(1e300));
        assert!(d(-1e300).len() < 16, "{}", d(-1e300));
        assert_eq!(d(f64::NAN), "n/a");
        assert_eq!(d(850.0), "850 ns");
        assert_eq!(d(1.5e9), "1.50 s");
    }

    #[test]
    fn match_keys_ignore_namespace_spelling() {
        use super::kernel_match_key as k;
        let a = "void at::bitonicSortKVInPlace<2, (int)-1, float, at::GTOp<float, 1>>(detail::TensorInfo<T5, T8>, T8)";
        let b = "void at::bitonicSortKVInPlace<2, (int)-1, float, at::GTOp<float, 1>>(cuda::TensorInfo<T5, T8>, T8)";
        assert_eq!(k(a), k(b));
        assert_eq!(
            k(a),
            "void bitonicSortKVInPlace<2, (int)-1, float, GTOp<float, 1>>(TensorInfo<T5, T8>, T8)"
        );
        let other = "void at::bitonicSortKVInPlace<-2, (int)-1, float, at::GTOp<float, 1>>(detail::TensorInfo<T5, T8>, T8)";
        assert_ne!(k(a), k(other));
        assert_eq!(k("void at::<unnamed>::f<int>(x::y::Z)"), "void f<int>(Z)");
        assert_eq!(k("kopt_copy"), "kopt_copy");
    }

    #[test]
    fn clipped_names_stay_distinct() {
        use super::clip_distinct;
        let names = [
            "kopt_transpose_smem_naive",
            "kopt_transpose_smem_padded",
            "kopt_fma_loop",
            "kopt_transpose_smem_naive",
        ];
        let got = clip_distinct(&names, 17);
        assert!(got.iter().all(|g| g.chars().count() <= 17), "{got:?}");
        assert_ne!(got[0], got[1], "{got:?}");
        // The differing end is what is kept; equal names stay equal.
        assert!(
            got[0].ends_with("naive") && got[1].ends_with("padded"),
            "{got:?}"
        );
        assert_eq!(got[0], got[3]);
        assert_eq!(got[2], "kopt_fma_loop");
        // Names apart in their first characters keep the plain cut.
        let plain = clip_distinct(&["alpha_kernel_one", "beta_kernel_two"], 8);
        assert_eq!(plain, ["alpha_k…", "beta_ke…"]);
        // A middle no cut can show: a counter.
        let a = format!("k_{}_a_{}", "x".repeat(30), "y".repeat(30));
        let b = format!("k_{}_b_{}", "x".repeat(30), "y".repeat(30));
        let got = clip_distinct(&[a.as_str(), b.as_str()], 12);
        assert_ne!(got[0], got[1], "{got:?}");
        assert!(got.iter().all(|g| g.chars().count() <= 12), "{got:?}");
        // A cut never reads like a name shown whole.
        let got = clip_distinct(&["abcdefg…", "abcdefghij"], 8);
        assert_ne!(got[0], got[1], "{got:?}");
    }

    /// 16k different names alike but for their ends (a stored report of a
    /// sweep): every check a look-up, so this takes well under a second
    /// where the pairwise checks took minutes (#39).
    #[test]
    fn thousands_of_alike_names_stay_apart_in_linear_time() {
        let names: Vec<String> = (0..16_000)
            .map(|i| format!("void very_long_common_prefix_kernel<float, 128>(int, float*)_{i:06}"))
            .collect();
        let start = std::time::Instant::now();
        let got = super::clip_distinct(&names, 40);
        let took = start.elapsed();
        assert!(took.as_secs_f64() < 10.0, "{took:?}");
        let distinct: std::collections::HashSet<&String> = got.iter().collect();
        assert_eq!(distinct.len(), names.len());
        assert!(
            got.iter().all(|g| g.chars().count() <= 40),
            "{:?}",
            &got[..3]
        );
        // Equal names stay equal.
        let same = vec!["x".repeat(100); 3];
        let got = super::clip_distinct(&same, 20);
        assert!(got.iter().all(|g| g == &got[0]), "{got:?}");
    }

    #[test]
    fn shortens_templates() {
        assert_eq!(
            s("void at::<unnamed>::distribution_elementwise_grid_stride_kernel<float, 4, void templates::normal_and_transform<float>(T1)::[lambda() (instance 1)]>(at::TensorIteratorBase &, T3, T4)"),
            "distribution_elementwise_grid_stride_kernel"
        );
        assert_eq!(s("void sbtopk::gatherTopK<float, unsigned int, 2, 0>(detail::TensorInfo<const T1, T2>, T2)"), "gatherTopK");
        assert_eq!(
            s("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"),
            "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
        );
        assert_eq!(s("kopt_copy_coalesced"), "kopt_copy_coalesced");
        // Generic wrappers are named by the kernel they run (real names from
        // fixtures/graph-replay-h100, advice-h100, models/resnet50-b256-h100).
        assert_eq!(
            s("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)"),
            "cutlass_80_simt_sgemm_64x64_8x5_tn_align1"
        );
        assert_eq!(
            s("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)"),
            "cutlass_80_simt_sgemm_64x64_8x5_tn_align1"
        );
        assert_eq!(
            s("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)"),
            "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_ali…"
        );
        assert_eq!(
            s("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align8>(T1::Params)"),
            "cutlass_tensorop_bf16_s16816fprop_optimized_bf1…"
        );
        assert_eq!(
            s("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, float>>(T1::Params)"),
            "GemmUniversal"
        );
        // A wrapper over a number, a cast or a built-in type keeps its name,
        // as does a name that only contains the word.
        assert_eq!(s("void kernel<8>(float *)"), "kernel");
        assert_eq!(s("void kernel<(int)-1, float>(float *)"), "kernel");
        assert_eq!(s("void kernel<float>(float *)"), "kernel");
        assert_eq!(s("void my::Kernel2<unsigned int>(int)"), "Kernel2");
        assert_eq!(s("Kernel2"), "Kernel2");
        assert_eq!(
            s("void elementwise_kernel<MyOp>(int)"),
            "elementwise_kernel"
        );
        assert_eq!(s("void cutlass::Kernel2<>(Params)"), "Kernel2");
        assert_eq!(s("<script>alert(1)</script>"), "alert");
        assert_eq!(s("<>"), "<>");
    }
}
