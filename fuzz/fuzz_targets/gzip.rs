#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kopt_fuzz::fuzz_gzip(data);
});
