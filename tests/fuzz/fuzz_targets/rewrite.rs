#![no_main]
//! `cargo fuzz run rewrite`: see `codemode_e2e::fuzz_targets::rewrite` for the properties checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::rewrite(data));
