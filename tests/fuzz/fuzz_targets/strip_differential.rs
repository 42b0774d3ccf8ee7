#![no_main]
//! `cargo fuzz run strip_differential`: see `codemode_e2e::fuzz_targets::strip_differential` for
//! what is compared.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::strip_differential(data));
