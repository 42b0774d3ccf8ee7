#![no_main]
//! `cargo fuzz run frames`: see `codemode_e2e::fuzz_targets::frames` for the properties checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::frames(data));
