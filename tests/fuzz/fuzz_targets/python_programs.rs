#![no_main]
//! `cargo fuzz run python_programs`: see `codemode_e2e::fuzz_targets::python_programs` for the
//! properties checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::python_programs(data));
