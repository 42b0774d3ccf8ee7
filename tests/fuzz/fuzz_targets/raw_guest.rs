#![no_main]
//! `cargo fuzz run raw_guest`: see `codemode_e2e::fuzz_targets::raw_guest` for the properties checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| codemode_e2e::fuzz_targets::raw_guest(data));
