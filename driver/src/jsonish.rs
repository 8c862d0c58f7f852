//! Reading a language model's answer (#35). Reasoning blocks (`<think>…</think>`) are dropped
//! first. JSON is read robustly: fenced code, prose around the object, trailing commas, smart
//! quotes as delimiters; of several objects the fenced or last one whose keys the task expects,
//! never one copied from the prompt. A reply is refused when it echoes the prompt or is not
//! language. What cannot be read is an error, never a panic.
use serde_json::{Map, Value};

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

/// The answer without its reasoning: each `<think>…</think>` (also `<thinking>`, `<reasoning>`)
/// removed, and an unterminated one removed to the end (the model ran out while thinking).
pub fn without_reasoning(text: &str) -> String {
    let mut out = text.to_string();
    for tag in ["think", "thinking", "reasoning"] {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        while let Some(start) = out.find(&open) {
            match out[start..].find(&close) {
                Some(end) => out.replace_range(start..start + end + close.len(), ""),
                None => out.truncate(start),
            }
        }
        // A closing tag with no opening one: the template opened it for the model.
        if let Some(end) = out.find(&close) {
            out.replace_range(..end + close.len(), "");
        }
    }
    out
}

/// The JSON object a task asked for, read from its answer. `prompt`: the request's messages —
/// an object that also appears in them (an example shape echoed back) is never taken. `keys`:
/// the keys the task's object has (its schema's properties); of several objects, the last one
/// holding any of them wins, fenced ones first, else the last object. An array holding exactly
/// one object stands for that object.
pub fn task_object(text: &str, prompt: &[&str], keys: &[&str]) -> Result<Map<String, Value>, String> {
    let text = without_reasoning(text);
    let echoed: Vec<Value> = prompt.iter().flat_map(|p| candidates(p).into_iter().map(|(v, _)| v)).collect();
    let found = candidates(&text);
    if found.is_empty() {
        return object(&text); // its error names what is wrong
    }
    let mut objects: Vec<(Map<String, Value>, bool)> = Vec::new();
    let mut rejected = None;
    for (v, fenced) in found {
        if echoed.contains(&v) {
            rejected = Some("the only JSON in the answer is copied from the prompt".to_string());
            continue;
        }
        match v {
            Value::Object(m) => objects.push((m, fenced)),
            Value::Array(mut a) if a.len() == 1 && a[0].is_object() => {
                if let Some(Value::Object(m)) = a.pop() {
                    objects.push((m, fenced))
                }
            }
            other => rejected = Some(format!("expected a JSON object, got {}", kind(&other))),
        }
    }
    let fits = |m: &Map<String, Value>| keys.is_empty() || keys.iter().any(|k| m.contains_key(*k));
    let pick = objects.iter().rposition(|(m, f)| *f && fits(m)).or_else(|| objects.iter().rposition(|(m, _)| fits(m)));
    let pick = pick.or_else(|| objects.iter().rposition(|(_, f)| *f)).or(objects.len().checked_sub(1));
    match pick {
        Some(i) => Ok(objects.swap_remove(i).0),
        None => Err(rejected.unwrap_or_else(|| "no JSON object in the answer".into())),
    }
}

/// Every top-level JSON value in `text` that parses (leniently), in order, each marked true when
/// it stood in a ``` fence.
fn candidates(text: &str) -> Vec<(Value, bool)> {
    let mut found = Vec::new();
    let mut outside = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        outside.push_str(&rest[..start]);
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
        let (body, next) = match after[body_start..].find("```") {
            Some(end) => (&after[body_start..body_start + end], &after[body_start + end + 3..]),
            None => (&after[body_start..], ""),
        };
        found.extend(top_level(body).into_iter().map(|v| (v, true)));
        rest = next;
    }
    outside.push_str(rest);
    found.extend(top_level(&outside.replace(['\u{201c}', '\u{201d}'], "\"")).into_iter().map(|v| (v, false)));
    found
}

/// The balanced {...}/[...] spans of `s` that parse, outermost only.
fn top_level(s: &str) -> Vec<Value> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(off) = s[i..].find(['{', '[']) {
        let start = i + off;
        match matching_end(&s[start..]).and_then(|end| {
            serde_json::from_str::<Value>(&remove_trailing_commas(&s[start..start + end])).ok().map(|v| (v, end))
        }) {
            Some((v, end)) => {
                found.push(v);
                i = start + end;
            }
            None => i = start + 1,
        }
    }
    found
}

/// Why a reply may not be shown (None: it may): it repeats the prompt (begins with a prompt
/// message's opening, carries a template's `TASK:` line or `{{placeholder}}`, or shares a long
/// verbatim run with the system prompt or the context), or it is mostly not language (symbols,
/// one word over and over). `prompt`: the request's messages, the system prompt first.
pub fn reply_problem(reply: &str, prompt: &[&str]) -> Option<String> {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let said = words(reply);
    if said.is_empty() {
        return Some("no words".into());
    }
    if reply.lines().any(|l| l.trim_start().starts_with("TASK:")) || reply.contains("{{") {
        return Some("it repeats the prompt's template".into());
    }
    // A line of the prompt (its instructions, a turn; not a listed memory) the reply begins with.
    const OPENING: usize = 6;
    let lines = prompt.iter().flat_map(|p| p.lines()).filter(|l| !l.trim_start().starts_with(['-', '*', '['])).map(words);
    if said.len() >= OPENING && lines.filter(|l| l.len() >= OPENING).any(|l| said[..OPENING] == l[..OPENING]) {
        return Some("it begins with the prompt's own words".into());
    }
    // Runs of 8 words found verbatim in the system prompt or the context: a reply may quote a
    // memory (short), but one made mostly of the prompt's words is an echo.
    const RUN: usize = 8;
    if said.len() >= RUN {
        let haystack: Vec<String> = prompt.iter().map(|p| format!(" {} ", words(p).join(" "))).collect();
        let mut covered = vec![false; said.len()];
        for (i, w) in said.windows(RUN).enumerate() {
            let needle = format!(" {} ", w.join(" "));
            if haystack.iter().any(|h| h.contains(&needle)) {
                covered[i..i + RUN].iter_mut().for_each(|c| *c = true);
            }
        }
        let share = covered.iter().filter(|c| **c).count() as f64 / said.len() as f64;
        if said.len() >= 3 * RUN && share >= 0.6 {
            return Some(format!("{:.0}% of it is the prompt's words, verbatim", share * 100.0));
        }
    }
    let visible: Vec<char> = reply.chars().filter(|c| !c.is_whitespace()).collect();
    let letters = visible.iter().filter(|c| c.is_alphabetic()).count();
    if visible.len() >= 12 && (letters as f64) < 0.5 * visible.len() as f64 {
        return Some("it is mostly not letters".into());
    }
    let distinct: std::collections::HashSet<&String> = said.iter().collect();
    if said.len() >= 20 && (distinct.len() as f64) < 0.25 * said.len() as f64 {
        return Some("it repeats the same few words".into());
    }
    None
}

/// A reply cut at the length limit, ended at its last full sentence (None: no full sentence).
pub fn to_last_sentence(reply: &str) -> Option<String> {
    let end = reply.char_indices().filter(|(_, c)| matches!(c, '.' | '!' | '?' | '…')).map(|(i, c)| i + c.len_utf8()).last()?;
    let kept = reply[..end].trim();
    (kept.split_whitespace().count() >= 2).then(|| kept.to_string())
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
    fn reasoning_echoes_and_fences_are_read_as_a_person_would() {
        let keys = ["facts", "triples"];
        // The draft inside <think> is not the answer; the one after it is.
        let a = "<think>maybe {\"facts\": [\"draft\"]}</think>\n{\"facts\": [\"final\"]}";
        assert_eq!(task_object(a, &[], &keys).unwrap()["facts"], json!(["final"]));
        assert_eq!(without_reasoning("<think>never closed {\"a\": 1}"), "");
        // The prompt's example echoed back first, then the real object.
        let prompt = "TASK: extract\nAnswer like {\"facts\": [\"a self-contained statement\"]}";
        let a = format!("{prompt}\nSure: {{\"facts\": [\"Ada keeps bees\"]}}");
        assert_eq!(task_object(&a, &[prompt], &keys).unwrap()["facts"], json!(["Ada keeps bees"]));
        // Only the echo: nothing is taken.
        assert!(task_object(prompt, &[prompt], &keys).unwrap_err().contains("copied from the prompt"));
        // Prose with an unrelated object, then the fenced answer.
        let a = "Here is {\"note\": 1} and:\n```json\n{\"triples\": [],}\n```\nDone {\"x\": 2}";
        assert_eq!(task_object(a, &[], &keys).unwrap(), json!({"triples": []}).as_object().unwrap().clone());
        // An array of one object stands for it; a longer array is not an object.
        assert_eq!(task_object("[{\"facts\": []}]", &[], &keys).unwrap()["facts"], json!([]));
        assert!(task_object("[{\"facts\": []}, {\"facts\": []}]", &[], &keys).is_err());
    }

    #[test]
    fn echoed_or_meaningless_replies_are_refused() {
        let system = "TASK: chat\nYou are Dionysus, a companion who remembers what people tell you. Be warm and brief.\n## Memories\n- Ada keeps bees in the garden";
        assert!(reply_problem("TASK: chat\nYou are Dionysus, a companion... ok", &[system]).is_some());
        assert!(reply_problem("You are Dionysus, a companion who remembers it all", &[system]).is_some());
        assert!(reply_problem("#### ---- **** 12345 ==== ////", &[system]).is_some());
        assert!(reply_problem(&"bees ".repeat(40), &[system]).is_some());
        assert!(reply_problem("Hello {{name}}, nice to see you", &[system]).is_some());
        // A reply that quotes a memory is fine.
        assert_eq!(reply_problem("You told me: Ada keeps bees in the garden. How are they doing?", &[system]), None);
        assert_eq!(reply_problem("Lovely to hear. 🐝", &[system]), None);
        assert_eq!(to_last_sentence("It was a fine day. Then we walked to the riv").as_deref(), Some("It was a fine day."));
        assert_eq!(to_last_sentence("no sentence at all and then"), None);
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
