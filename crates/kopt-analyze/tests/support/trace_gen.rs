//! Synthetic kopt traces (the tracer's JSON lines) of many kernels, for the
//! large-trace test and the `timeline_80k` example.

/// A whole-program kopt trace of `n` kernels, each launched by its own
/// `cudaLaunchKernel` (5 us of host time) and running 3 us, 10 us apart;
/// kernel `i` is named `name(i)` (a mangled name is demangled on reading).
pub fn kopt_trace(n: usize, name: impl Fn(usize) -> String) -> String {
    let mut out = String::with_capacity(n * 200);
    out.push_str("{\"t\":\"device\",\"id\":0,\"name\":\"NVIDIA H100 80GB HBM3\",\"sms\":132}\n");
    for i in 0..n {
        let at = 1_000_000 + i as u64 * 10_000;
        let c = i + 1;
        out.push_str(&format!(
            "{{\"t\":\"api\",\"name\":\"cudaLaunchKernel\",\"s\":{at},\"e\":{},\"tid\":1,\"c\":{c}}}\n",
            at + 5_000
        ));
        out.push_str(&format!(
            "{{\"t\":\"kernel\",\"name\":\"{}\",\"s\":{},\"e\":{},\"dev\":0,\"str\":7,\"c\":{c},\"g\":[1,1,1],\"b\":[128,1,1]}}\n",
            name(i),
            at + 6_000,
            at + 9_000
        ));
    }
    out.push_str(&format!(
        "{{\"t\":\"end\",\"records\":{},\"dropped\":0}}\n",
        2 * n
    ));
    out
}

/// `_Z<len>kernel_<i>v`: a distinct mangled name per kernel.
pub fn distinct(i: usize) -> String {
    let ident = format!("kernel_{i}");
    format!("_Z{}{ident}v", ident.len())
}

/// One of `names` names in a pseudo-random order that never repeats itself.
pub fn shuffled(names: usize) -> impl Fn(usize) -> String {
    move |i| {
        let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        format!("op_{}", x % names as u64)
    }
}
