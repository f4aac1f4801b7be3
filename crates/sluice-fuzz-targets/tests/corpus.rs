//! Replays every file of `fuzz/corpus/<target>/` through its fuzz target's
//! body, on stable, as part of `cargo test --workspace`: the seeds and any
//! crash input ever added to a corpus must pass without a panic. Also
//! checks that the committed seeds are the ones `seeds::all()` builds now,
//! so that a codec change that moves the wire format shows here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

fn files(target: &str) -> Vec<PathBuf> {
    let dir = corpus_root().join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let (_, body) = sluice_fuzz_targets::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap();
    let files = files(target);
    assert!(!files.is_empty(), "fuzz/corpus/{target} has no inputs");
    for path in files {
        let data = std::fs::read(&path).unwrap();
        body(&data);
    }
}

#[test]
fn framing_corpus() {
    replay("framing");
}

#[test]
fn response_corpus() {
    replay("response");
}

#[test]
fn split_corpus() {
    replay("split");
}

#[test]
fn sasl_corpus() {
    replay("sasl");
}

#[test]
fn every_target_is_replayed_here() {
    let names: Vec<&str> = sluice_fuzz_targets::TARGETS.iter().map(|t| t.0).collect();
    assert_eq!(names, ["framing", "response", "split", "sasl"]);
    // And each has its libFuzzer binary.
    for name in names {
        let target = corpus_root().join(format!("../fuzz_targets/{name}.rs"));
        let text = std::fs::read_to_string(&target).unwrap();
        assert!(
            text.contains(&format!("sluice_fuzz_targets::{name}(data)")),
            "{} does not call its body",
            target.display()
        );
    }
}

#[test]
fn committed_seeds_are_up_to_date() {
    for seed in sluice_fuzz_targets::seeds::all() {
        let path = corpus_root()
            .join(seed.target)
            .join(format!("seed-{}", seed.name));
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run `cargo run -p sluice-fuzz-targets --bin seed`",
                path.display()
            )
        });
        assert!(
            committed == seed.data,
            "{} is stale; run `cargo run -p sluice-fuzz-targets --bin seed`",
            path.display()
        );
        assert!(
            seed.data.len() < 64 * 1024,
            "{} is too large",
            path.display()
        );
    }
}
