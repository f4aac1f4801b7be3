//! Generates `src/messages.rs` and `src/messages/*.rs` of kafka-protocol from
//! Kafka's JSON message specs.
//!
//! Usage: `protocol_codegen <SPEC_DIR> <MESSAGES_DIR>`, where SPEC_DIR holds
//! Kafka's `clients/src/main/resources/common/message/*.json` (the same files
//! ship in `kafka-clients-<version>.jar` under `common/message/`) and
//! MESSAGES_DIR is the crate's `src/messages` directory. The `.rs` files in
//! MESSAGES_DIR are replaced; run `cargo fmt` on the crate afterwards.
//! Upstream's version of this file clones apache/kafka at a pinned release
//! instead; the generator itself (`generate_messages`) is upstream's.

use failure::{bail, Error};
use std::fs;
use std::path::PathBuf;

pub mod generate_messages;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [spec_dir, messages_dir] = args.as_slice() else {
        bail!("usage: protocol_codegen <SPEC_DIR> <MESSAGES_DIR>");
    };
    let spec_dir = PathBuf::from(spec_dir);
    let messages_dir = fs::canonicalize(messages_dir)?;
    let messages_module_dir = messages_dir
        .to_str()
        .ok_or_else(|| failure::err_msg("messages dir is not UTF-8"))?;

    // Clear the output directory.
    for file in fs::read_dir(&messages_dir)? {
        let path = file?.path();
        if path.is_file() && path.extension() == Some("rs".as_ref()) {
            fs::remove_file(path)?;
        }
    }

    let mut input_file_paths = Vec::new();
    for file in fs::read_dir(&spec_dir)? {
        let path = file?.path();
        if path.is_file() && path.extension() == Some("json".as_ref()) {
            input_file_paths.push(path);
        }
    }
    if input_file_paths.is_empty() {
        bail!("no *.json message specs in {}", spec_dir.display());
    }

    generate_messages::run(messages_module_dir, input_file_paths)
}
