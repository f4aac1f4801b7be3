//! Records the commit the binary is built from, for `sluice --version` and
//! the `sluice_build_info` metric: an operator running a binary must be able
//! to tell which code it is. Outside a git checkout (a source tarball) the
//! commit is `unknown`, unless `SLUICE_BUILD_COMMIT` names it (see
//! `build/commit.rs`).

#[path = "build/commit.rs"]
mod commit;

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    commit::git_output(Command::new("git"), args)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_BUILD_COMMIT");
    let given = std::env::var("SLUICE_BUILD_COMMIT").ok();
    let commit = commit::describe(given, &git);
    println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
    // Rebuild when HEAD moves (a commit, a checkout) or the index changes.
    // Only files that exist: cargo reruns a script for a missing one every
    // build (a fresh clone keeps its branch in packed-refs, not a file).
    let mut watched = vec![
        "HEAD".to_owned(),
        "index".to_owned(),
        "packed-refs".to_owned(),
    ];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for path in &watched {
        if let Some(p) = git(&["rev-parse", "--git-path", path])
            && std::path::Path::new(&p).exists()
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/commit.rs");
}
