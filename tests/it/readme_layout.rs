//! README "Layout" against the tree: every top-level module of the engine
//! (`actors/src`) and of the daemon (`src`) is named there, every file it
//! names exists, and so does every Rust file the README names anywhere
//! (files move; the text did not follow once).

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README")
}

/// The code block of README "Layout".
fn layout(readme: &str) -> &str {
    let start = readme.find("\n## Layout\n").expect("README has ## Layout");
    let block = &readme[start..];
    let open = block.find("```\n").expect("a code block") + 4;
    let close = block[open..].find("```").expect("its end") + open;
    &block[open..close]
}

/// The entries of `dir` as the layout names them: `name/` for a folder,
/// `name.rs` for a file; `skip` left out.
fn entries(dir: &str, skip: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join(dir))
        .expect(dir)
        .map(|entry| entry.expect("entry"))
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                Some(format!("{name}/"))
            } else {
                name.ends_with(".rs").then_some(name)
            }
        })
        .filter(|name| !skip.contains(&name.as_str()))
        .collect();
    names.sort();
    names
}

/// Every file under the repository's source folders (not `target/`).
fn source_files() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = ["actors", "src", "tests", "testkit", "bench", "deploy"]
        .iter()
        .map(|dir| root().join(dir))
        .collect();
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn the_layout_names_every_top_level_module() {
    let readme = readme();
    let block = layout(&readme);
    let mut missing = Vec::new();
    for name in entries("actors/src", &["lib.rs"]) {
        if !block.contains(&format!("  src/{name}")) {
            missing.push(format!("actors/src/{name}"));
        }
    }
    for name in entries("src", &["lib.rs", "main.rs"]) {
        if !block.contains(&format!("\n  {name}")) {
            missing.push(format!("src/{name}"));
        }
    }
    assert!(
        missing.is_empty(),
        "README \"Layout\" does not name {missing:?}"
    );
}

#[test]
fn every_rust_file_the_readme_names_exists() {
    let readme = readme();
    let files = source_files();
    let exists = |name: &str| {
        files
            .iter()
            .any(|path| path.to_string_lossy().ends_with(&format!("/{name}")))
    };
    // In the layout, file names stand alone (relative to their folder).
    let mut absent: Vec<String> = layout(&readme)
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '/'))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| word.ends_with(".rs") && !exists(word))
        .map(str::to_owned)
        .collect();
    // Elsewhere, paths in backticks are from the repository's root.
    absent.extend(
        readme
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|token| token.ends_with(".rs") && !token.contains(' '))
            .filter(|token| !root().join(token).is_file())
            .map(str::to_owned),
    );
    assert!(
        absent.is_empty(),
        "README names files that do not exist: {absent:?}"
    );
}
