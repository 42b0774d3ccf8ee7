#![no_main]
//! `cargo fuzz run strip`: see `codemode_e2e::fuzz_targets::strip` for the properties checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::strip(data));
