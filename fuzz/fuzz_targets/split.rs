//! libFuzzer target `split`: a client request through split_request over a fake cluster and merge_responses of failed parts.
//! The body is `sluice_fuzz_targets::split`, shared with the stable corpus
//! tests (crates/sluice-fuzz-targets/tests/corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz_targets::split(data));
