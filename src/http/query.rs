//! Query strings checked by hand, so that each problem names its parameter:
//! every key at most once, no unknown key, and the shared `limit` rule.

use super::error::{ApiError, ApiResult};

/// Calls `each` for every pair, refusing a key given twice; `each` answers
/// `Ok(false)` for a key it does not know, which is refused as well.
pub(crate) fn each_once(
    pairs: Vec<(String, String)>,
    mut each: impl FnMut(&str, String) -> ApiResult<bool>,
) -> ApiResult<()> {
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in pairs {
        if seen.contains(&key) {
            return Err(ApiError::invalid(&key, format!("{key} is given twice")));
        }
        if !each(&key, value)? {
            return Err(ApiError::invalid(
                &key,
                format!("unknown query parameter {key}"),
            ));
        }
        seen.push(key);
    }
    Ok(())
}

/// A `limit` parameter: an integer from 1 to `max`.
pub(crate) fn limit(value: &str, max: u32) -> ApiResult<u32> {
    value
        .parse::<u32>()
        .ok()
        .filter(|limit| (1..=max).contains(limit))
        .ok_or_else(|| {
            ApiError::invalid("limit", format!("limit must be an integer from 1 to {max}"))
        })
}

/// A `chain_id` parameter: a positive decimal integer (whether it is served
/// here is the caller's check).
pub(crate) fn chain_id(field: &str, value: &str) -> ApiResult<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::invalid(
            field,
            format!("{field} must be a positive decimal integer"),
        ));
    }
    match value.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(ApiError::invalid(
            field,
            format!("{field} must be between 1 and 2^64-1"),
        )),
    }
}
