//! libFuzzer target `response`: a broker answer through Response::parse, lazy decode, the public rewrites, encode and encode_into.
//! The body is `sluice_fuzz_targets::response`, shared with the stable corpus
//! tests (crates/sluice-fuzz-targets/tests/corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz_targets::response(data));
