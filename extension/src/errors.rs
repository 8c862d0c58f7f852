//! Clear errors: every rejection carries an SQLSTATE and names the argument at fault.
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// Raises an ERROR with the given SQLSTATE, message and optional hint. Never returns.
pub fn raise(code: PgSqlErrorCode, msg: String, hint: Option<String>) -> ! {
    let mut report = ErrorReport::new(code, msg, "dionysus");
    if let Some(h) = hint {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// 22023 invalid_parameter_value, naming the argument.
pub fn invalid_arg(arg: &str, msg: impl std::fmt::Display) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("dionysus: invalid argument \"{arg}\": {msg}"),
        None,
    )
}

/// 22004 null_value_not_allowed.
pub fn null_arg(arg: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        format!("dionysus: argument \"{arg}\" must not be null"),
        None,
    )
}

/// 22001 string_data_right_truncation for oversized text.
pub fn too_long(arg: &str, len: usize, limit: usize) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
        format!("dionysus: argument \"{arg}\" is {len} characters, over the limit of {limit}"),
        Some("Raise dionysus.max_content_length, or split the text.".into()),
    )
}

/// 54000 program_limit_exceeded: a call asks for more than one call may do, naming the argument.
pub fn limit_exceeded(arg: &str, msg: impl std::fmt::Display) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!("dionysus: argument \"{arg}\": {msg}"),
        Some("Split the work into several calls.".into()),
    )
}

/// P0002 no_data_found for ids that do not exist.
pub fn not_found(arg: &str, what: &str, id: impl std::fmt::Display) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_NO_DATA_FOUND,
        format!("dionysus: argument \"{arg}\": no {what} with id {id}"),
        None,
    )
}

/// 22P02 invalid_text_representation for malformed JSON documents.
pub fn bad_json(arg: &str, msg: impl std::fmt::Display) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        format!("dionysus: argument \"{arg}\": {msg}"),
        None,
    )
}

/// 58P01 undefined_file: the model is missing.
pub fn model_missing(msg: impl std::fmt::Display, hint: impl std::fmt::Display) -> ! {
    raise(PgSqlErrorCode::ERRCODE_UNDEFINED_FILE, format!("dionysus: {msg}"), Some(hint.to_string()))
}

/// 38000 external_routine_exception: the embedding provider failed.
pub fn embedding_failed(msg: impl std::fmt::Display) -> ! {
    raise(PgSqlErrorCode::ERRCODE_EXTERNAL_ROUTINE_EXCEPTION, format!("dionysus: {msg}"), None)
}

/// 22000 data_exception for a vector of the wrong size: never truncated silently.
pub fn dimension_mismatch(got: usize, want: usize, provider: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        format!("dionysus: the {provider} embedding provider returned {got} dimensions, the store holds vector({want})"),
        Some(format!(
            "Dionysus never truncates or pads vectors. To move the store to a model of another width, set the \
             dionysus.embedding_* settings to it and run `dionysus reindex` (dionysus.reindex_start()); until the \
             swap, the store keeps vector({want})."
        )),
    )
}

/// Checks a float is a finite number within [lo, hi].
pub fn check_range(arg: &str, v: f64, lo: f64, hi: f64) -> f64 {
    if !v.is_finite() {
        invalid_arg(arg, format!("{v} is not a finite number"));
    }
    if v < lo || v > hi {
        invalid_arg(arg, format!("{v} is outside [{lo}, {hi}]"));
    }
    v
}
