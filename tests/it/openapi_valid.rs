//! `GET /v1/openapi.json` is valid and describes what the server answers
//! (issues 6 and 12).
//!
//! utoipa 6 emits OpenAPI 3.1.0 (nullable fields as `"type": [.., "null"]`),
//! which the `openapiv3` crate (3.0.x only) cannot parse, so the document is
//! checked with `serde_json`: version, operations with responses, resolvable
//! `$ref`s, and every route of the router listed. `openapi_statuses` then
//! sends every operation good and bad requests and checks each answer
//! against the document (`scripts/test.sh` runs schemathesis against a real
//! daemon on top of this).

use std::collections::BTreeSet;

use crate::common::Scenario;
use serde_json::Value;
use txmgr::http::openapi::ROUTES;

pub(crate) const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Every `$ref` string anywhere in `value`, with its JSON path.
pub(crate) fn refs(value: &Value, path: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "$ref" {
                    if let Some(target) = child.as_str() {
                        out.push((path.clone(), target.to_string()));
                    }
                }
                refs(child, format!("{path}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                refs(child, format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Resolves a local JSON pointer (`#/a/b`) in `doc`.
pub(crate) fn resolve<'a>(doc: &'a Value, target: &str) -> Option<&'a Value> {
    let pointer = target.strip_prefix('#')?;
    doc.pointer(pointer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openapi_document_is_structurally_valid_and_lists_every_route() {
    let Scenario {
        db: _db,
        anvil: _anvil,
        node,
    } = Scenario::single_node("").await;
    let (status, doc) = node.request("GET", "/v1/openapi.json", None).await;
    assert_eq!(status, 200, "{doc}");

    let version = doc["openapi"].as_str().expect("openapi version string");
    assert!(version.starts_with("3."), "openapi = {version}");
    assert!(doc["info"]["title"].is_string(), "info.title required");
    assert!(doc["info"]["version"].is_string(), "info.version required");
    let paths = doc["paths"].as_object().expect("paths object");
    assert!(!paths.is_empty());

    let mut listed = BTreeSet::new();
    let mut operation_ids = BTreeSet::new();
    for (path, item) in paths {
        assert!(path.starts_with('/'), "path {path} must start with /");
        let item = item.as_object().expect("path item object");
        let mut operations = 0;
        for (method, operation) in item {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            operations += 1;
            listed.insert((method.clone(), path.clone()));
            let responses = operation["responses"]
                .as_object()
                .unwrap_or_else(|| panic!("{method} {path}: responses required"));
            assert!(!responses.is_empty(), "{method} {path}: no responses");
            for (code, response) in responses {
                assert!(
                    code == "default"
                        || (code.len() == 3
                            && code.chars().all(|c| c.is_ascii_digit() || c == 'X')),
                    "{method} {path}: bad response key {code}"
                );
                assert!(
                    response["description"].is_string() || response["$ref"].is_string(),
                    "{method} {path} {code}: description required: {response}"
                );
            }
            // What the layers around every handler answer (authentication,
            // body limit, concurrency limit, timeout) is documented everywhere.
            let open =
                ["/healthz", "/readyz", "/ops/", "/v1/openapi.json"].contains(&path.as_str());
            let mut edge = vec!["413", "503"];
            if !open {
                edge.push("401");
            }
            for code in edge {
                let error = &responses
                    .get(code)
                    .unwrap_or_else(|| panic!("{method} {path}: {code} undocumented"))["content"]
                    ["application/json"]["schema"];
                assert!(
                    error
                        .to_string()
                        .contains("#/components/schemas/ErrorResponse"),
                    "{method} {path} {code}: the error body: {error}"
                );
            }
            if let Some(id) = operation["operationId"].as_str() {
                assert!(
                    operation_ids.insert(id.to_string()),
                    "duplicate operationId {id}"
                );
            }
            // Every `{param}` in the path is declared as a path parameter.
            for segment in path.split('/') {
                if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    let declared = operation["parameters"].as_array().is_some_and(|ps| {
                        ps.iter().any(|p| p["name"] == name && p["in"] == "path")
                    });
                    assert!(
                        declared,
                        "{method} {path}: path parameter {name} undeclared"
                    );
                }
            }
        }
        assert!(operations > 0, "path {path} has no operation");
    }

    let mut found = Vec::new();
    refs(&doc, String::new(), &mut found);
    assert!(!found.is_empty(), "schemas are referenced");
    for (at, target) in &found {
        assert!(
            target.starts_with("#/components/"),
            "{at}: non-local $ref {target}"
        );
        assert!(
            resolve(&doc, target).is_some(),
            "{at}: $ref {target} does not resolve"
        );
    }

    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let missing: Vec<_> = expected.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "routes missing from the document: {missing:?}"
    );
    node.stop().await;
}

/// `clients/openapi.json` — what the TypeScript and Python SDKs are checked
/// against — is the document this build serves. After an API change:
/// `txmgr openapi > clients/openapi.json`, then regenerate the SDKs' types.
#[test]
fn the_clients_copy_of_the_document_is_current() {
    let served = txmgr::http::openapi::document()
        .to_pretty_json()
        .expect("document serialises");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/openapi.json");
    let copy = std::fs::read_to_string(path).expect("clients/openapi.json exists");
    assert!(
        copy.trim_end() == served,
        "clients/openapi.json is stale: run `txmgr openapi > clients/openapi.json` \
         and regenerate the SDKs' types (clients/typescript: npm run gen:types)"
    );
}
