//! libFuzzer target `sasl`: the PLAIN and SCRAM message parsers.
//! The body is `sluice_fuzz_targets::sasl`, shared with the stable corpus
//! tests (crates/sluice-fuzz-targets/tests/corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz_targets::sasl(data));
