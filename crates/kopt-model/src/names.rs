//! Kernel names are C++ templates; tables need something a person can read.

/// Longest short name a table shows.
const MAX_SHORT: usize = 48;

/// `void at::<unnamed>::vectorized_elementwise_kernel<4, ...>(int, ...)` ->
/// `vectorized_elementwise_kernel`, cut to a table-friendly length.
pub fn kernel_short_name(full: &str) -> String {
    clip_chars(&kernel_function_name(full), MAX_SHORT)
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
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_short_name as s;

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
        assert_eq!(s("<script>alert(1)</script>"), "alert");
        assert_eq!(s("<>"), "<>");
    }
}
