#![no_main]
//! `cargo fuzz run programs`: see `codemode_e2e::fuzz_targets::programs` for the properties checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::programs(data));
