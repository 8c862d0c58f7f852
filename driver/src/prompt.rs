//! Prompt templates live in the database (`dionysus.prompt_templates`, versioned); the driver
//! only fills their `{{placeholders}}`.
use crate::db::{Db, DbError};
use serde_json::Value;

#[derive(Clone, Debug)]
pub struct Template {
    pub key: String,
    pub version: i64,
    pub text: String,
    pub temperature: f64,
}

pub async fn load(db: &Db, key: &str) -> Result<Template, DbError> {
    let v = db.json("SELECT dionysus.prompt_template($1)", &[&key]).await?;
    Ok(Template {
        key: key.to_string(),
        version: v["version"].as_i64().unwrap_or(0),
        text: v["template"].as_str().unwrap_or_default().to_string(),
        temperature: v["temperature"].as_f64().unwrap_or(0.7),
    })
}

/// Replaces each `{{name}}` with its value; unknown placeholders become empty.
pub fn render(text: &str, vars: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                if let Some((_, v)) = vars.iter().find(|(k, _)| *k == name) {
                    out.push_str(v);
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// "- a\n- b", or the placeholder for an empty list.
pub fn bullets<I: IntoIterator<Item = String>>(items: I, empty: &str) -> String {
    let lines: Vec<String> = items.into_iter().filter(|s| !s.trim().is_empty()).map(|s| format!("- {}", s.trim())).collect();
    if lines.is_empty() {
        empty.to_string()
    } else {
        lines.join("\n")
    }
}

/// The `content` of each element of a JSON array, with an optional prefix field.
pub fn contents(list: &Value, max_chars: usize) -> Vec<String> {
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    let c = m["content"].as_str()?;
                    let c: String = c.chars().take(max_chars).collect();
                    Some(match m["role"].as_str() {
                        Some(r) => format!("({r}) {c}"),
                        None => c,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Conversation turns as "user: …" / "assistant: …" lines.
pub fn transcript(turns: &Value) -> String {
    let lines: Vec<String> = turns
        .as_array()
        .map(|a| a.iter().map(|t| format!("{}: {}", t["role"].as_str().unwrap_or("user"), t["content"].as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    if lines.is_empty() {
        "(no earlier turns)".into()
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_filled_and_unknown_ones_dropped() {
        let t = "Hi {{name}}, it is {{ now }}.{{missing}} {{unclosed";
        assert_eq!(render(t, &[("name", "Ada".into()), ("now", "noon".into())]), "Hi Ada, it is noon. {{unclosed");
        // A value containing braces is not expanded again.
        assert_eq!(render("{{a}}", &[("a", "{{a}}".into())]), "{{a}}");
    }

    #[test]
    fn lists_render_as_bullets() {
        assert_eq!(bullets(vec!["a".into(), " ".into(), "b".into()], "(none)"), "- a\n- b");
        assert_eq!(bullets(Vec::<String>::new(), "(none)"), "(none)");
        let turns = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]);
        assert_eq!(transcript(&turns), "user: hi\nassistant: hello");
        assert_eq!(contents(&json!([{"content": "abcdef", "role": "user"}]), 3), vec!["(user) abc"]);
    }
}
