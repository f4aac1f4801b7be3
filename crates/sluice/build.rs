//! Records the commit the binary is built from, for `sluice --version` and
//! the `sluice_build_info` metric: an operator running a binary must be able
//! to tell which code it is. Outside a git checkout (a source tarball) the
//! commit is `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    let commit = match commit {
        Some(c) if dirty => format!("{c}-modified"),
        Some(c) => c,
        None => "unknown".to_owned(),
    };
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
}
