//! Which commit a build is from, for `sluice --version` and the build-info
//! metric. Shared by `build.rs` and a unit test of the binary (through
//! `#[path]`), so that the fallback a build outside git takes is tested.

use std::process::Command;

/// What a build says when it cannot tell its commit: a source tarball (no
/// `.git`), or a machine without git.
pub(crate) const UNKNOWN: &str = "unknown";

/// Runs `git` (as prepared by the caller: directory, environment) with
/// `args`; its trimmed output when it ran and succeeded with some output.
pub(crate) fn git_output(mut git: Command, args: &[&str]) -> Option<String> {
    let out = git.args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

/// The commit to record: `given` when set (a packager building from a
/// tarball names the commit in `SLUICE_BUILD_COMMIT`); else git's short
/// HEAD, with `-modified` when tracked files differ from it; else
/// [`UNKNOWN`].
pub(crate) fn describe(given: Option<String>, git: &dyn Fn(&[&str]) -> Option<String>) -> String {
    if let Some(given) = given.map(|g| g.trim().to_owned()).filter(|g| !g.is_empty()) {
        return given;
    }
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) if git(&["status", "--porcelain", "--untracked-files=no"]).is_some() => {
            format!("{commit}-modified")
        }
        Some(commit) => commit,
        None => UNKNOWN.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn no_git(_: &[&str]) -> Option<String> {
        None
    }

    #[test]
    fn a_build_outside_git_says_unknown() {
        assert_eq!(describe(None, &no_git), UNKNOWN);
        // The real git, in a directory that is no repository.
        let dir = std::env::temp_dir().join(format!("sluice-no-git-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let real = |args: &[&str]| {
            let mut git = Command::new("git");
            git.current_dir(&dir)
                .env("GIT_DIR", dir.join("no-such-repo"));
            git_output(git, args)
        };
        assert_eq!(describe(None, &real), UNKNOWN);
        let _ = std::fs::remove_dir_all(&dir);
        // No git at all.
        let missing = |args: &[&str]| git_output(Command::new("/nonexistent/git"), args);
        assert_eq!(describe(None, &missing), UNKNOWN);
    }

    #[test]
    fn a_given_commit_wins() {
        assert_eq!(describe(Some(" 0123abcd ".into()), &no_git), "0123abcd");
        let any = |_: &[&str]| Some("fedcba987654".to_owned());
        assert_eq!(describe(Some("0123abcd".into()), &any), "0123abcd");
        // An empty one is no commit.
        assert_eq!(describe(Some(String::new()), &no_git), UNKNOWN);
    }

    #[test]
    fn local_changes_are_marked() {
        let clean = |args: &[&str]| (args[0] == "rev-parse").then(|| "fedcba987654".to_owned());
        assert_eq!(describe(None, &clean), "fedcba987654");
        let dirty = |args: &[&str]| match args[0] {
            "rev-parse" => Some("fedcba987654".to_owned()),
            _ => Some("M crates/sluice/src/main.rs".to_owned()),
        };
        assert_eq!(describe(None, &dirty), "fedcba987654-modified");
    }
}
