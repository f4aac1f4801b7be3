//! libFuzzer target `framing`: a client's byte stream through FrameCodec and Request::parse.
//! The body is `sluice_fuzz_targets::framing`, shared with the stable corpus
//! tests (crates/sluice-fuzz-targets/tests/corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz_targets::framing(data));
