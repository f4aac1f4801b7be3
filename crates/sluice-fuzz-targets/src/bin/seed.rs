//! Writes the seed corpora of the fuzz targets (`sluice_fuzz_targets::seeds`)
//! to `fuzz/corpus/<target>/`, replacing the seeds of the same name and
//! leaving any other file (crash inputs, minimized finds) alone.
//!
//! `cargo run -p sluice-fuzz-targets --bin seed [CORPUS_DIR]`

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus"),
        PathBuf::from,
    );
    let mut written = 0;
    for seed in sluice_fuzz_targets::seeds::all() {
        let dir = root.join(seed.target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{}", seed.name)), &seed.data)?;
        written += 1;
    }
    println!("wrote {written} seeds under {}", root.display());
    Ok(())
}
