//! The workspace's module graph has no circle: within each crate, no two
//! source files reach each other through `crate::` or `super::` paths
//! (a file and its own parent or child modules aside), so dependencies
//! point down (docs/architecture.md, "Rules of the code", rule 3).
//!
//! A file is a module (`foo.rs`, `foo/bar.rs`; `lib.rs` and `main.rs` are
//! the root); a path names the deepest file module it starts with. Comment
//! lines and a file's trailing `mod tests { .. }` are not read; test files
//! (`tests.rs`, anything under a `tests/` folder) are left out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// The source files of the crate at `src`, by module path.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    dirs.push(path);
                }
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let module: Module = rel
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if path.extension().is_none_or(|e| e != "rs")
                || module.last().is_some_and(|m| m == "tests")
            {
                continue;
            }
            let module = if module == ["lib"] || module == ["main"] {
                Vec::new()
            } else {
                module
            };
            out.insert(module, path);
        }
    }
    out
}

/// The paths that follow `prefix` (`crate::` or `super::`) in `text`, a
/// brace group split into its items: `a::b::C`, as segments.
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        let group = if let Some(inner) = rest.strip_prefix('{') {
            inner.split('}').next().unwrap_or("").to_owned()
        } else {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect()
        };
        for item in group.split(',') {
            let item = item.split(" as ").next().unwrap_or("").trim();
            let segments: Vec<String> = item
                .split("::")
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty() && s != "super" && s != "self" && !s.starts_with('{'))
                .collect();
            if !segments.is_empty() {
                out.push(segments);
            }
        }
    }
    out
}

/// The edges between the files of one crate: module -> modules it uses.
fn edges(modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let resolve = |path: &[String]| {
        (0..=path.len())
            .rev()
            .map(|k| path[..k].to_vec())
            .find(|m| modules.contains_key(m))
    };
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in modules {
        let text = std::fs::read_to_string(file).unwrap();
        let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let parent = &module[..module.len().saturating_sub(1)];
        let mut targets: Vec<Module> = Vec::new();
        for path in paths_after(&code, "crate::") {
            targets.extend(resolve(&path));
        }
        for path in paths_after(&code, "super::") {
            let full: Vec<String> = parent.iter().cloned().chain(path).collect();
            targets.extend(resolve(&full));
        }
        for target in targets {
            let related = module.starts_with(&target) || target.starts_with(module);
            if !related {
                out.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    out
}

/// One circle of `edges`, if any, as the modules along it.
fn a_circle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        at: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, bool>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(at.clone(), true);
        stack.push(at.clone());
        for next in edges.get(at).into_iter().flatten() {
            match state.get(next) {
                Some(true) => {
                    let from = stack.iter().position(|m| m == next).unwrap_or(0);
                    let mut circle = stack[from..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                Some(false) => {}
                None => {
                    if let Some(circle) = visit(next, edges, state, stack) {
                        return Some(circle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(at.clone(), false);
        None
    }
    let mut state = BTreeMap::new();
    for start in edges.keys() {
        if !state.contains_key(start)
            && let Some(circle) = visit(start, edges, &mut state, &mut Vec::new())
        {
            return Some(circle);
        }
    }
    None
}

fn show(circle: &[Module]) -> String {
    circle
        .iter()
        .map(|m| {
            if m.is_empty() {
                "crate".to_owned()
            } else {
                m.join("/")
            }
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

#[test]
fn no_crate_of_the_workspace_has_a_module_circle() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let modules = modules(&src);
        checked += modules.len();
        if let Some(circle) = a_circle(&edges(&modules)) {
            panic!("{}: modules in a circle: {}", src.display(), show(&circle));
        }
    }
    assert!(checked > 100, "read only {checked} source files");
}

#[test]
fn a_circle_between_two_sibling_modules_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    // A child using its parent, a comment and a child's own use: no edge.
    std::fs::write(src.join("a.rs"), "mod inner;\n// use crate::b;\n").unwrap();
    std::fs::write(src.join("a/inner.rs"), "use super::Thing;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{a::inner::X, c};\n").unwrap();
    assert_eq!(a_circle(&edges(&modules(src))), None);
    // Now a uses b, which uses a's child: a circle between a and b.
    std::fs::write(src.join("a/inner.rs"), "use crate::b::Y;\n").unwrap();
    let circle = a_circle(&edges(&modules(src))).expect("a circle");
    assert_eq!(show(&circle), "a/inner -> b -> a/inner");
}
