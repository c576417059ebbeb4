//! The shipped `config.toml` documents what the code reads: the sections
//! environment variables may set, each connection's `allow_insecure`, and
//! what a full ingress queue answers.

use txmgr::config::TOP_LEVEL_KEYS;

use super::shipped_path;

fn shipped() -> String {
    std::fs::read_to_string(shipped_path()).expect("read config.toml")
}

/// The lines from the table header `header` (uncommented) to the next one.
fn table<'a>(text: &'a str, header: &str) -> &'a str {
    let start = text
        .find(&format!("\n{header}\n"))
        .unwrap_or_else(|| panic!("config.toml has no {header}"));
    let rest = &text[start + 1..];
    let end = rest[1..].find("\n[").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The comment lines from the first one containing `opening` to the first
/// after it whose text starts with `closing` (included).
fn comment_block<'a>(text: &'a str, opening: &str, closing: &str) -> &'a str {
    let start = text
        .find(opening)
        .unwrap_or_else(|| panic!("config.toml has no {opening}"));
    let rest = &text[start..];
    let end = rest
        .match_indices("\n#")
        .map(|(i, _)| i)
        .find(|&i| rest[i + 2..].trim_start().starts_with(closing))
        .map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

#[test]
fn the_environment_sections_listed_are_the_ones_read() {
    let text = shipped();
    let start = text
        .find("top-level key below (")
        .expect("the header lists the sections")
        + "top-level key below (".len();
    let listed: Vec<&str> = text[start..]
        .split(';')
        .next()
        .expect("a list")
        .split([',', '\n', '#'])
        .map(str::trim)
        .filter(|word| !word.is_empty())
        .collect();
    assert_eq!(
        listed, TOP_LEVEL_KEYS,
        "config.toml header vs config::TOP_LEVEL_KEYS"
    );
}

#[test]
fn every_allow_insecure_key_is_documented() {
    let text = shipped();
    let places = [
        ("[database]", table(&text, "[database]")),
        (
            "[chain] rpc_url",
            comment_block(&text, "\nrpc_url = ", "Several endpoints"),
        ),
        (
            "[chain] rpc_urls[]",
            comment_block(&text, "# rpc_urls = [", "]"),
        ),
        (
            "remote signer",
            comment_block(&text, "{ kind = \"remote\"", "{ kind ="),
        ),
    ];
    let missing: Vec<&str> = places
        .iter()
        .filter(|(_, block)| !block.contains("allow_insecure"))
        .map(|(name, _)| *name)
        .collect();
    assert!(
        missing.is_empty(),
        "allow_insecure not documented for {missing:?}"
    );
}

#[test]
fn ingress_capacity_says_what_a_full_queue_answers() {
    let text = shipped();
    let lines: Vec<&str> = table(&text, "[defaults]").lines().collect();
    let at = lines
        .iter()
        .position(|line| line.starts_with("ingress_capacity = "))
        .expect("[defaults] ingress_capacity");
    let mut doc: Vec<&str> = lines[..at]
        .iter()
        .rev()
        .take_while(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim())
        .collect();
    doc.reverse();
    let doc = doc.join(" ");
    assert!(
        doc.contains("429 `overloaded`"),
        "ingress_capacity's comment does not name 429 `overloaded`: {doc}"
    );
}
