//! Robust JSON from a language model: fenced code, prose around the object, trailing commas,
//! smart quotes as delimiters. What cannot be parsed is an error, never a panic.
use serde_json::Value;

/// The first JSON object (or array) in `text`.
pub fn parse(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        if v.is_object() || v.is_array() {
            return Ok(v);
        }
    }
    let unfenced = strip_fences(text);
    let mut last_err = String::from("no JSON object in the answer");
    // Try each plausible start: the model may write "{curly} prose" before the real object.
    for (start, _) in unfenced.char_indices().filter(|(_, c)| *c == '{' || *c == '[') {
        if let Some(end) = matching_end(&unfenced[start..]) {
            let candidate = remove_trailing_commas(&unfenced[start..start + end]);
            match serde_json::from_str::<Value>(&candidate) {
                Ok(v) => return Ok(v),
                Err(e) => last_err = format!("unparseable JSON: {e}"),
            }
        }
    }
    Err(last_err)
}

/// Parses and requires an object.
pub fn object(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    match parse(text)? {
        Value::Object(m) => Ok(m),
        other => Err(format!("expected a JSON object, got {}", kind(&other))),
    }
}

pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn strip_fences(text: &str) -> String {
    if let Some(start) = text.find("```") {
        let after = &text[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        if let Some(end) = body.find("```") {
            return body[..end].to_string();
        }
        return body.to_string();
    }
    text.replace(['\u{201c}', '\u{201d}'], "\"")
}

/// The characters of `s` with their byte offsets, each marked true when it lies outside a
/// JSON string (the quotes themselves count as inside).
fn outside_strings(s: &str) -> impl Iterator<Item = (usize, char, bool)> + '_ {
    let (mut in_str, mut escaped) = (false, false);
    s.char_indices().map(move |(i, c)| {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            return (i, c, false);
        }
        if c == '"' {
            in_str = true;
        }
        (i, c, !in_str)
    })
}

/// Byte length of the balanced {...} or [...] at the start of `s`, strings respected.
fn matching_end(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c, outside) in outside_strings(s) {
        match c {
            '{' | '[' if outside => depth += 1,
            '}' | ']' if outside => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Drops commas directly before a closing bracket, outside strings.
fn remove_trailing_commas(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, c, outside) in outside_strings(s) {
        if c == ',' && outside && matches!(s[i + 1..].trim_start().chars().next(), Some('}' | ']')) {
            continue;
        }
        out.push(c);
    }
    out
}

/// A string field, trimmed and non-empty.
pub fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// A number field clamped into [lo, hi]; strings holding numbers are accepted.
pub fn number(v: &Value, key: &str, lo: f64, hi: f64) -> Option<f64> {
    let n = match v.get(key)? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    n.is_finite().then(|| n.clamp(lo, hi))
}

/// An array field (a missing or null one is empty; anything else is an error naming the key).
pub fn list<'a>(v: &'a Value, key: &str) -> Result<&'a [Value], String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(format!("\"{key}\" must be an array, not {}", kind(other))),
    }
}

/// The items of an array field; anything else (missing, null, not an array) has none. For a
/// model's optional parts, where a malformed one is dropped rather than failing the answer.
pub fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The strings of an array field (other items skipped), or None when it is not an array.
pub fn strings(v: &Value, key: &str) -> Option<Vec<String>> {
    v.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// A boolean field.
pub fn flag(v: &Value, key: &str) -> Option<bool> {
    v.get(key).and_then(Value::as_bool)
}

/// How many items an array field holds (0 when it is not an array).
pub fn count(v: &Value, key: &str) -> usize {
    items(v, key).len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fenced_prose_and_trailing_commas() {
        assert_eq!(parse("{\"a\": 1}").unwrap(), json!({"a": 1}));
        assert_eq!(parse("```json\n{\"a\": [1, 2,],}\n```").unwrap(), json!({"a": [1, 2]}));
        assert_eq!(parse("Sure! Here is my decision:\n{\"a\": \"x}y\"}\nHope that helps.").unwrap(), json!({"a": "x}y"}));
        assert_eq!(parse("I think {maybe} this: {\"ok\": true}").unwrap(), json!({"ok": true}));
        assert_eq!(parse("```\n[1, 2]\n```").unwrap(), json!([1, 2]));
        assert_eq!(parse("{\"s\": \"a, }\"}").unwrap(), json!({"s": "a, }"}));
        // Escaped quotes inside strings do not end them, and a comma there is kept.
        assert_eq!(parse(r#"note: {"a": "q\" } ,", "b": [1,],}"#).unwrap(), json!({"a": "q\" } ,", "b": [1]}));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in ["", "no json here", "{", "{\"a\": }", "```json\n{oops\n```", "\u{0}\u{fffd}{[", "42", "\"str\""] {
            assert!(object(bad).is_err(), "{bad:?} parsed");
        }
        assert!(object("[1]").unwrap_err().contains("array"));
    }

    #[test]
    fn field_helpers_validate() {
        let v = json!({"t": "  hi ", "n": "0.5", "big": 7, "l": "x", "e": ""});
        assert_eq!(text(&v, "t").as_deref(), Some("hi"));
        assert_eq!(text(&v, "e"), None);
        assert_eq!(number(&v, "n", 0.0, 1.0), Some(0.5));
        assert_eq!(number(&v, "big", 0.0, 1.0), Some(1.0));
        assert!(list(&v, "l").is_err());
        assert!(list(&v, "missing").unwrap().is_empty());
    }
}
