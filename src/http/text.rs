//! Identifiers and free text that clients and operators send (request ids,
//! action reasons): bounded, and free of characters that would make what is
//! stored or shown differ from what a reader sees.

use super::{error::ApiError, intent_body::MAX_REQUEST_ID_CHARS};

/// 1..=256 characters, none of them control characters (they break logs,
/// and PostgreSQL text cannot hold NUL) or format characters (see
/// [`is_format_char`]). Used for the body, the
/// `Idempotency-Key` header and the `request_id` query parameter alike.
pub(crate) fn validate_request_id(id: &str) -> Result<(), ApiError> {
    let chars = id.chars().count();
    if chars == 0 || chars > MAX_REQUEST_ID_CHARS {
        return Err(ApiError::invalid(
            "request_id",
            format!("request_id must be 1 to {MAX_REQUEST_ID_CHARS} characters"),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "request_id",
            "request_id must not contain control characters",
        ));
    }
    if let Some(c) = id.chars().find(|c| is_format_char(*c)) {
        return Err(ApiError::invalid(
            "request_id",
            format!(
                "request_id must not contain invisible format characters (found U+{:04X})",
                u32::from(c)
            ),
        ));
    }
    Ok(())
}

/// Unicode format characters (general category Cf): bidi overrides and
/// isolates (U+202E, U+2066…), zero-width joiners, the BOM. Invisible on
/// screen, they let two ids or two audit reasons look alike while they
/// differ, or reorder what an operator reads.
fn is_format_char(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    c.general_category() == GeneralCategory::Format
}

/// Free text from a client or an operator (action reasons): at most `max`
/// characters, no control characters other than line breaks and tabs and no
/// format characters,
/// so that whatever is accepted can be stored (PostgreSQL text holds no NUL)
/// and logged.
pub(crate) fn validate_text(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    if text.chars().count() > max {
        return Err(ApiError::invalid(
            field,
            format!("{field} is longer than {max} characters"),
        ));
    }
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(ApiError::invalid(
            field,
            format!("{field} must not contain control characters"),
        ));
    }
    if let Some(c) = text.chars().find(|c| is_format_char(*c)) {
        return Err(ApiError::invalid(
            field,
            format!(
                "{field} must not contain invisible format characters (found U+{:04X})",
                u32::from(c)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_id_bounds() {
        assert!(validate_request_id("a").is_ok());
        assert!(validate_request_id(&"é".repeat(256)).is_ok());
        assert!(validate_request_id("").is_err());
        assert!(validate_request_id(&"a".repeat(257)).is_err());
        assert!(validate_request_id("a\nb").is_err());
        // Bidi override, isolate, zero-width joiner, BOM: invisible, refused.
        for bad in ["pay\u{202E}txt", "a\u{2066}b", "a\u{200D}b", "\u{FEFF}a"] {
            assert!(validate_request_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reasons_keep_line_breaks_but_not_format_characters() {
        assert!(validate_text("reason", "line one\nline two\ttab", 100).is_ok());
        assert!(validate_text("reason", "ok \u{202E}kcatta", 100).is_err());
        assert!(validate_text("reason", "nul \u{0}", 100).is_err());
        assert!(validate_text("reason", &"x".repeat(101), 100).is_err());
    }
}
