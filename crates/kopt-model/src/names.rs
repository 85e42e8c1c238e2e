//! Kernel names are C++ templates; tables need something a person can read.

/// Longest short name a table shows.
const MAX_SHORT: usize = 48;

/// `void at::<unnamed>::vectorized_elementwise_kernel<4, ...>(int, ...)` ->
/// `vectorized_elementwise_kernel`, cut to a table-friendly length.
pub fn kernel_short_name(full: &str) -> String {
    let name = kernel_function_name(full);
    if name.chars().count() > MAX_SHORT {
        let cut: String = name.chars().take(MAX_SHORT - 1).collect();
        format!("{cut}…")
    } else {
        name
    }
}

/// The bare function name: template arguments and parameter lists dropped at
/// any depth, then the last namespace component kept (what ncu's
/// `--kernel-name-base function` matches).
pub fn kernel_function_name(full: &str) -> String {
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
    let last_word = top.rsplit(' ').next().unwrap_or(top);
    let name = last_word
        .rsplit("::")
        .find(|part| !part.is_empty())
        .unwrap_or(last_word);
    let name = if name.is_empty() { full.trim() } else { name };
    name.to_string()
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
