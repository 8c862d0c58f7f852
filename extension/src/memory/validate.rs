//! Argument checks shared by the memory functions. Each failure names its argument.
use crate::errors;
use pgrx::datum::TimestampWithTimeZone;

pub const MEMORY_TYPES: [&str; 4] = ["episodic", "semantic", "procedural", "strategic"];
pub const RELATIONS: [&str; 8] = [
    "TEMPORAL_NEXT",
    "CAUSES",
    "DERIVED_FROM",
    "CONTRADICTS",
    "SUPPORTS",
    "INSTANCE_OF",
    "PARENT_OF",
    "ASSOCIATED",
];

/// A memory type, case-insensitive; unknown types are an error.
pub fn memory_type(arg: &str, t: Option<&str>) -> &'static str {
    let Some(t) = t else { errors::null_arg(arg) };
    let t = t.trim().to_ascii_lowercase();
    MEMORY_TYPES
        .iter()
        .find(|&&k| k == t)
        .copied()
        .unwrap_or_else(|| errors::invalid_arg(arg, format!("unknown memory type '{t}' (expected one of {})", MEMORY_TYPES.join(", "))))
}

/// A graph relation, case-insensitive; unknown relations are an error.
pub fn relation(arg: &str, r: Option<&str>) -> &'static str {
    let Some(r) = r else { errors::null_arg(arg) };
    let r = r.trim().to_ascii_uppercase();
    RELATIONS
        .iter()
        .find(|&&k| k == r)
        .copied()
        .unwrap_or_else(|| errors::invalid_arg(arg, format!("unknown relation '{r}' (expected one of {})", RELATIONS.join(", "))))
}

pub fn unit(arg: &str, v: Option<f64>) -> f64 {
    let Some(v) = v else { errors::null_arg(arg) };
    errors::check_range(arg, v, 0.0, 1.0)
}

pub fn signed_unit(arg: &str, v: Option<f64>) -> f64 {
    let Some(v) = v else { errors::null_arg(arg) };
    errors::check_range(arg, v, -1.0, 1.0)
}

/// A JSON object (NULL becomes `{}`); arrays and scalars are an error.
pub fn object(arg: &str, v: Option<serde_json::Value>) -> serde_json::Value {
    match v {
        None => serde_json::json!({}),
        Some(serde_json::Value::Object(m)) => serde_json::Value::Object(m),
        Some(other) => errors::invalid_arg(arg, format!("must be a JSON object, not {}", json_kind(&other))),
    }
}

pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Optional short text: trimmed, empty becomes None, bounded by the content limit.
pub fn optional_text(arg: &str, v: Option<&str>) -> Option<String> {
    let v = v?.trim();
    if v.is_empty() {
        return None;
    }
    Some(crate::embed::check_text(arg, Some(v)).to_string())
}

pub fn required_name(arg: &str, v: Option<&str>) -> String {
    let Some(v) = v else { errors::null_arg(arg) };
    let v = v.trim();
    if v.is_empty() {
        errors::invalid_arg(arg, "must not be empty");
    }
    if v.chars().count() > 1000 {
        errors::too_long(arg, v.chars().count(), 1000);
    }
    v.to_string()
}

/// Earliest accepted time of a memory or episode: 1900-01-01 00:00 UTC, in PostgreSQL's
/// microseconds since 2000-01-01 (older history is not a companion's).
const EARLIEST_TIME: i64 = -3_155_673_600_000_000;
/// How far ahead of now() a time may lie: clock skew between machines, not the future.
const FUTURE_SLACK_MICROS: i64 = 86_400_000_000;

/// A point in time a memory can carry: finite, from 1900-01-01 to one day after now(). An
/// infinite or absurd time would poison every later recency and age computation.
pub fn timestamp(arg: &str, v: Option<TimestampWithTimeZone>) -> Option<TimestampWithTimeZone> {
    let t = v?;
    if !t.is_finite() {
        errors::invalid_arg(arg, "must be a finite time (not infinity)");
    }
    let micros = t.into_inner();
    let latest = unsafe { pgrx::pg_sys::GetCurrentTransactionStartTimestamp() } + FUTURE_SLACK_MICROS;
    if micros < EARLIEST_TIME || micros > latest {
        errors::invalid_arg(arg, "must lie between 1900-01-01 and one day after now()");
    }
    Some(t)
}

/// Most people one memory can be private to.
const MAX_PRIVATE_TO: usize = 32;

/// The people a memory is private to, as person keys ("discord:123", "terminal:me"): trimmed,
/// sorted, without duplicates. NULL or an empty list means nobody's private words.
pub fn private_to(arg: &str, v: Option<Vec<Option<String>>>) -> Option<Vec<String>> {
    let mut keys: Vec<String> = v?
        .into_iter()
        .map(|k| required_name(arg, k.as_deref()))
        .collect();
    keys.sort();
    keys.dedup();
    if keys.len() > MAX_PRIVATE_TO {
        errors::invalid_arg(arg, format!("names {} people, at most {MAX_PRIVATE_TO}", keys.len()));
    }
    (!keys.is_empty()).then_some(keys)
}

pub fn positive(arg: &str, v: Option<i32>, max: i32) -> i32 {
    let Some(v) = v else { errors::null_arg(arg) };
    if v < 1 || v > max {
        errors::invalid_arg(arg, format!("{v} is outside [1, {max}]"));
    }
    v
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    #[pg_test]
    fn names_are_case_insensitive() {
        assert_eq!(super::memory_type("type", Some(" Semantic ")), "semantic");
        assert_eq!(super::relation("relation", Some("causes")), "CAUSES");
    }

    #[pg_test(error = "dionysus: invalid argument \"weight\": NaN is not a finite number")]
    fn nan_is_rejected() {
        super::unit("weight", Some(f64::NAN));
    }

    #[pg_test(error = "dionysus: invalid argument \"relation\": unknown relation 'LOVES' (expected one of TEMPORAL_NEXT, CAUSES, DERIVED_FROM, CONTRADICTS, SUPPORTS, INSTANCE_OF, PARENT_OF, ASSOCIATED)")]
    fn unknown_relations_are_listed() {
        super::relation("relation", Some("loves"));
    }
}
