//! What the commands print: JSON for scripts (`--json`), aligned tables
//! and `key: value` lines for people.

use serde::Serialize;
use serde_json::Value;
use txmgr_client::{
    api::{CompletionRow, TxView},
    Error,
};

/// One line for an error: the daemon's code, the field at fault, the message.
pub(super) fn error_text(error: &Error) -> String {
    match error {
        Error::Api {
            status,
            detail,
            retry_after,
            ..
        } => {
            let mut text = format!("{status} {}", detail.code);
            if let Some(field) = &detail.field {
                text.push_str(&format!(" (field {field})"));
            }
            text.push_str(&format!(": {}", detail.message));
            if let Some(tx_id) = detail.tx_id {
                text.push_str(&format!(" [tx_id {tx_id}]"));
            }
            if let Some(owner) = &detail.owner {
                text.push_str(&format!(" [owner {owner}]"));
            }
            for issue in detail.issues.iter().flatten() {
                text.push_str(&format!("\n  {}: {}", issue.key, issue.reason));
            }
            if let Some(after) = retry_after {
                text.push_str(&format!(" (retry after {} s)", after.as_secs()));
            }
            text
        }
        other => other.to_string(),
    }
}

/// Prints `value` as pretty JSON on stdout.
pub(super) fn json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        Err(e) => eprintln!("txmgr: cannot print the answer: {e}"),
    }
}

/// `key: value` lines of one transaction.
pub(super) fn tx(tx: &TxView) {
    let receipt = tx.receipt.as_ref();
    let lines: [(&str, Option<String>); 14] = [
        ("tx_id", Some(tx.tx_id.to_string())),
        ("chain_id", Some(tx.chain_id.to_string())),
        ("submitter", Some(tx.submitter.clone())),
        ("request_id", tx.request_id.clone()),
        ("state", Some(state_text(tx))),
        ("nonce", tx.nonce.map(|n| n.to_string())),
        ("to", tx.to.clone()),
        ("value", Some(tx.value.clone())),
        ("tx_hash", tx.tx_hash.clone()),
        ("mined_tx_hash", tx.mined_tx_hash.clone()),
        ("block", receipt.map(|r| r.block_number.to_string())),
        (
            "status",
            receipt.and_then(|r| r.status).map(|s| s.to_string()),
        ),
        ("attempts", Some(tx.attempts.to_string())),
        ("last_error", tx.last_error.clone()),
    ];
    for (key, value) in lines {
        println!("{key:<14} {}", value.as_deref().unwrap_or("-"));
    }
    println!("{:<14} {}", "created_at", tx.created_at.to_rfc3339());
}

/// `STATE` or `STATE (sub_state)`.
pub(super) fn state_text(tx: &TxView) -> String {
    match tx.sub_state {
        Some(sub) => format!("{} ({sub})", tx.state),
        None => tx.state.to_string(),
    }
}

/// A table of transactions.
pub(super) fn tx_table(items: &[TxView]) {
    let rows = items
        .iter()
        .map(|tx| {
            vec![
                tx.tx_id.to_string(),
                state_text(tx),
                opt(tx.nonce),
                tx.tx_hash.clone().unwrap_or_else(|| "-".into()),
                tx.request_id.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect::<Vec<_>>();
    table(&["TX_ID", "STATE", "NONCE", "TX_HASH", "REQUEST_ID"], &rows);
}

/// A table of feed rows.
pub(super) fn feed_table(items: &[CompletionRow], header: bool) {
    let rows = items
        .iter()
        .map(|row| {
            vec![
                row.cursor.clone(),
                row.state.to_string(),
                row.tx_id.map_or_else(|| "-".into(), |id| id.to_string()),
                row.submitter.clone(),
                opt(row.nonce),
                opt(row.block_number),
                row.reason.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect::<Vec<_>>();
    let columns = [
        "CURSOR",
        "EVENT",
        "TX_ID",
        "SUBMITTER",
        "NONCE",
        "BLOCK",
        "REASON",
    ];
    if header {
        table(&columns, &rows);
    } else {
        table(&[], &rows);
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

/// Columns padded to their widest cell (no header when `columns` is empty).
pub(super) fn table(columns: &[&str], rows: &[Vec<String>]) {
    let count = rows
        .iter()
        .map(Vec::len)
        .chain([columns.len()])
        .max()
        .unwrap_or(0);
    let mut widths = vec![0; count];
    let header: Vec<String> = columns.iter().map(|c| (*c).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |row: &[String]| {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| format!("{cell:<width$}", width = widths[i]))
            .collect();
        println!("{}", cells.join("  ").trim_end());
    };
    if !columns.is_empty() {
        line(&header);
    }
    for row in rows {
        line(row);
    }
}

/// Any JSON answer for people: objects as `key: value` lines (nested ones
/// indented), arrays of objects as tables of their scalar fields.
pub(super) fn value(value: &Value) {
    print_value(value, 0);
}

fn print_value(value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match inner {
                    Value::Object(_) => {
                        println!("{pad}{key}:");
                        print_value(inner, indent + 2);
                    }
                    Value::Array(items) if items.iter().any(Value::is_object) => {
                        println!("{pad}{key}:");
                        object_table(items, indent + 2);
                    }
                    _ => println!("{pad}{key}: {}", scalar(inner)),
                }
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => object_table(items, indent),
        other => println!("{pad}{}", scalar(other)),
    }
}

/// Rows of objects as a table of their scalar fields (first-seen order).
fn object_table(items: &[Value], indent: usize) {
    let mut columns: Vec<&str> = Vec::new();
    for item in items.iter().filter_map(Value::as_object) {
        for (key, value) in item {
            if !value.is_object() && !columns.contains(&key.as_str()) {
                columns.push(key);
            }
        }
    }
    let pad = " ".repeat(indent);
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| {
            columns
                .iter()
                .enumerate()
                .map(|(i, column)| {
                    let cell = item.get(*column).map_or_else(|| "-".into(), scalar);
                    if i == 0 {
                        format!("{pad}{cell}")
                    } else {
                        cell
                    }
                })
                .collect()
        })
        .collect();
    let header: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i == 0 {
                format!("{pad}{}", c.to_uppercase())
            } else {
                c.to_uppercase()
            }
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    table(&header, &rows);
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}
