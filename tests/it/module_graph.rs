//! The engine's (and the daemon's) top-level modules form a DAG (DESIGN.md §3: domain at the
//! bottom, node at the top; a type two modules share lives in the lower
//! one). Every `crate::<module>` path in `actors/src` — `use` lines,
//! brace groups and inline paths, comments left out — is an edge; a circle
//! among the top-level modules fails this test with the circle's files.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Edges between top-level modules: `from → to → files that make the edge`.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn engine_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("actors/src")
}

/// The daemon's sources (`src/`: config, http, daemon).
fn daemon_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("actors/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments (doc comments included: an intra-doc
/// link is not a dependency) and without `/* */` blocks.
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, tail)| tail);
        } else if rest.starts_with("//") {
            rest = rest.split_once('\n').map_or("", |(_, tail)| tail);
            out.push('\n');
        } else if rest.starts_with("'\"'") {
            // The character literal '"' opens no string.
            out.push_str("'\"'");
            rest = &rest[3..];
        } else if rest.starts_with('"') {
            // String literals are blanked: a `//` or a `crate::` inside one
            // is neither a comment nor a path.
            let body = &rest[1..];
            let mut end = 0;
            let mut escaped = false;
            for (i, c) in body.char_indices() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    end = i + 1;
                    break;
                }
            }
            out.push_str("\"\"");
            rest = &rest[end + 1..];
        } else {
            let c = rest.chars().next().expect("rest is not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first path segment of each entry of a `{ … }` group that starts
/// `text` (nested groups belong to their entry).
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_entry_start = false;
    for (i, c) in text.char_indices() {
        match c {
            '{' => {
                depth += 1;
                at_entry_start = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => at_entry_start = true,
            c if c.is_whitespace() => {}
            _ if at_entry_start => {
                heads.push(ident(&text[i..]).to_owned());
                at_entry_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The top-level modules `source` names through `crate::`.
fn referenced_modules(source: &str) -> BTreeSet<String> {
    let code = without_comments(source);
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let after = &code[at + "crate::".len()..];
        if after.starts_with('{') {
            found.extend(group_heads(after));
        } else {
            found.insert(ident(after).to_owned());
        }
    }
    found
}

fn module_graph(root: PathBuf) -> (BTreeSet<String>, Graph) {
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let top_of = |path: &Path| -> String {
        let relative = path.strip_prefix(&root).expect("under actors/src");
        let first = relative.components().next().expect("a file under the root");
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned()
    };
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| top_of(f))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut graph = Graph::new();
    for file in &files {
        let from = top_of(file);
        if from == "lib" || from == "main" {
            continue;
        }
        let source = fs::read_to_string(file).expect("a readable source file");
        for to in referenced_modules(&source) {
            if to != from && modules.contains(&to) {
                let shown = file.strip_prefix(&root).expect("under root").display();
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(shown.to_string());
            }
        }
    }
    (modules, graph)
}

/// A circle through the graph, if there is one (depth-first search).
fn find_cycle(modules: &BTreeSet<String>, graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flat_map(|m| m.keys()) {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    modules
        .iter()
        .find_map(|m| visit(m, graph, &mut done, &mut Vec::new()))
}

#[test]
fn the_engines_top_level_modules_form_a_dag() {
    let (modules, graph) = module_graph(engine_src());
    assert!(
        modules.contains("domain") && modules.contains("node") && modules.len() > 8,
        "the walk found the engine's modules: {modules:?}"
    );
    if let Some(cycle) = find_cycle(&modules, &graph) {
        let edges: Vec<String> = cycle
            .windows(2)
            .map(|pair| {
                let files = &graph[&pair[0]][&pair[1]];
                format!(
                    "{} -> {} ({})",
                    pair[0],
                    pair[1],
                    files.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!(
            "the engine's modules form a circle:\n  {}",
            edges.join("\n  ")
        );
    }
}

#[test]
fn the_daemons_top_level_modules_form_a_dag() {
    let (modules, graph) = module_graph(daemon_src());
    assert!(
        modules.contains("http") && modules.contains("daemon"),
        "the walk found the daemon's modules: {modules:?}"
    );
    assert_eq!(find_cycle(&modules, &graph), None, "edges: {graph:?}");
}

#[test]
fn the_domain_module_depends_on_no_other_engine_module() {
    let (_, graph) = module_graph(engine_src());
    let uses: Vec<&String> = graph
        .get("domain")
        .into_iter()
        .flat_map(|m| m.keys())
        .collect();
    assert!(
        uses.is_empty(),
        "domain is the bottom layer but uses {uses:?}: {:?}",
        graph.get("domain")
    );
}

#[test]
fn the_parser_sees_use_groups_inline_paths_and_skips_comments() {
    let source = "use crate::{chain::X, store::{a, b}, metrics};\n\
                  // crate::node::Ignored\n\
                  /// [`crate::webhook::Doc`]\n\
                  fn f() { crate::domain::g(); let s = \"// crate::tls\"; }\n";
    let found = referenced_modules(source);
    let expected: BTreeSet<String> = ["chain", "store", "metrics", "domain"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(found, expected);
}
