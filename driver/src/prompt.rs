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
    Ok(template(key, v))
}

/// The template as used for one person: their own version (an approved dream proposal of
/// theirs), else the shared one.
pub async fn load_for(db: &Db, key: &str, person: &str) -> Result<Template, DbError> {
    let v = db.json("SELECT dionysus.prompt_template($1, $2)", &[&key, &person]).await?;
    Ok(template(key, v))
}

fn template(key: &str, v: Value) -> Template {
    Template {
        key: key.to_string(),
        version: v["version"].as_i64().unwrap_or(0),
        text: v["template"].as_str().unwrap_or_default().to_string(),
        temperature: v["temperature"].as_f64().unwrap_or(0.7),
    }
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
/// A person's north stars as a block for a prompt ("" when they have none).
pub fn north_stars(list: &Value) -> String {
    let stars: Vec<String> = list.as_array().into_iter().flatten().filter_map(|n| n.as_str().map(str::to_string)).collect();
    if stars.is_empty() {
        String::new()
    } else {
        bullets(stars, "")
    }
}

/// The people in their life a message names (chat_context's people), a line each: who they
/// are to the person, how the person feels about them, and how they relate to the others.
pub fn people(list: &Value) -> String {
    let listed: Vec<&str> = list.as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    let lines: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p["name"].as_str()?;
            let mut line = name.to_string();
            if let Some(r) = p["relation"].as_str() {
                line.push_str(&format!(" (their {r})"));
            }
            if let Some(f) = p["feeling"].as_f64() {
                let how = if f >= 0.3 { "fond of" } else if f <= -0.3 { "uneasy about" } else { "mixed about" };
                line.push_str(&format!("; they are {how} them ({f:+.1})"));
            }
            let words = |key: &str| p[key].as_array().into_iter().flatten().filter_map(Value::as_str).collect::<Vec<_>>().join(", ");
            let (traits, topics) = (words("traits"), words("topics"));
            if !traits.is_empty() {
                line.push_str(&format!("; {traits}"));
            }
            if !topics.is_empty() {
                line.push_str(&format!("; comes up with: {topics}"));
            }
            // Each relation once: from its first end, or from here when that end is not listed.
            for r in p["relations"].as_array().into_iter().flatten() {
                let with = r["with"].as_str().unwrap_or("");
                let kind = r["kind"].as_str().unwrap_or("").replace('_', " ");
                let how = format!("({}, sentiment {:+.1})", r["source"].as_str().unwrap_or(""), r["sentiment"].as_f64().unwrap_or(0.0));
                if r["direction"] == "to" {
                    line.push_str(&format!("; {kind} {with} {how}"));
                } else if !listed.contains(&with) {
                    line.push_str(&format!("; {with} {kind} them {how}"));
                }
            }
            Some(line)
        })
        .collect();
    if lines.is_empty() {
        String::new()
    } else {
        bullets(lines, "")
    }
}

/// The open threads of a session's working memory (chat_context's working_memory), a line
/// each, or `empty`.
pub fn threads(wm: &Value, empty: &str) -> String {
    bullets(wm["threads"].as_array().into_iter().flatten().filter_map(|t| t["content"].as_str().map(str::to_string)), empty)
}

/// What the session holds in mind beyond this turn's recall (chat_context's working_memory):
/// its focus, the threads still open, and what earlier turns brought up. "" when it holds nothing.
pub fn working_memory(wm: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(focus) = wm["focus"].as_str().filter(|f| !f.trim().is_empty()) {
        parts.push(format!("The conversation is on: {}", focus.trim()));
    }
    let open = threads(wm, "");
    if !open.is_empty() {
        parts.push(format!("Still open with them (pick up when it fits):\n{open}"));
    }
    let earlier = bullets(
        wm["items"].as_array().into_iter().flatten().filter_map(|i| {
            let when = i["created_at"].as_str().and_then(|t| t.get(..10)).unwrap_or("");
            i["content"].as_str().map(|c| format!("[{when}, {}] {c}", i["kind"].as_str().unwrap_or("memory")))
        }),
        "",
    );
    if !earlier.is_empty() {
        parts.push(format!("Brought up earlier in this conversation:\n{earlier}"));
    }
    let procedures = bullets(wm["procedures"].as_array().into_iter().flatten().filter_map(procedure), "");
    if !procedures.is_empty() {
        parts.push(format!("How you handle this kind of moment (what you have learned works; effectiveness so far):\n{procedures}"));
    }
    parts.join("\n\n")
}

/// One procedure in working memory, a line: name, domain, effectiveness, then its bands from
/// the goals to the implementation notes.
fn procedure(p: &Value) -> Option<String> {
    let list = |key: &str| p[key].as_array().into_iter().flatten().filter_map(Value::as_str).collect::<Vec<_>>().join("; ");
    let mut line = p["name"].as_str()?.to_string();
    if let Some(d) = p["domain"].as_str() {
        line.push_str(&format!(" ({d})"));
    }
    let tried = p["successes"].as_i64().unwrap_or(0) + p["failures"].as_i64().unwrap_or(0);
    line.push_str(&format!(", effectiveness {:.2} over {tried} outcomes", p["effectiveness"].as_f64().unwrap_or(0.5)));
    for (label, key) in [("for", "goals"), ("how", "core_patterns"), ("with", "core_tools"), ("ideas", "core_concepts"), ("notes", "implementation_notes")] {
        let words = list(key);
        if !words.is_empty() {
            line.push_str(&format!("; {label}: {words}"));
        }
    }
    Some(line)
}

/// A template written before working memory existed has no place for it: it follows the
/// memories, so a conversation keeps what it is on when the words that found it are gone.
pub fn with_working_memory(template: &str, memories: String, wm: &str) -> String {
    if wm.is_empty() || template.contains("{{working_memory}}") {
        return memories;
    }
    format!("{memories}\n\nThis conversation so far:\n{wm}")
}

/// A template written before people existed has no place for them: they follow its triples.
pub fn with_people(template: &str, triples: String, people: &str) -> String {
    if people.is_empty() || template.contains("{{people}}") {
        return triples;
    }
    format!("{triples}\n\nPeople in their life this message names:\n{people}")
}

/// A template written before north stars and objectives existed has no place for them: they
/// follow its goals, so every context still carries what matters most to the person.
pub fn with_north_stars(template: &str, goals: String, north_stars: &str, objectives: &str) -> String {
    let mut out = goals;
    if !north_stars.is_empty() && !template.contains("{{north_stars}}") {
        out.push_str("\n\nWhat matters most to them (their north stars; everything you do serves these):\n");
        out.push_str(north_stars);
    }
    if objectives.starts_with("- ") && !template.contains("{{objectives}}") {
        out.push_str("\n\nWhat they are working toward:\n");
        out.push_str(objectives);
    }
    out
}

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
        .map(|a| {
            a.iter()
                .map(|t| {
                    // A turn a tight budget shows at a shorter level says so (its words are not these).
                    let short = match t["level"].as_str() {
                        Some("full") | None => String::new(),
                        Some(level) => format!("[{level}] "),
                    };
                    format!("{}: {short}{}", t["role"].as_str().unwrap_or("user"), t["content"].as_str().unwrap_or(""))
                })
                .collect()
        })
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

    /// A session's working memory reads as its focus, its open threads and what earlier turns
    /// brought up; an old template gets it after the memories, a new one where it asks.
    #[test]
    fn working_memory_reads_as_focus_threads_and_what_came_up_earlier() {
        let wm = json!({"focus": "the interview", "threads": [{"content": "ask how Friday went"}],
                        "items": [{"kind": "fact", "content": "Works as a nurse", "created_at": "2026-11-20T10:00:00Z"}]});
        let text = working_memory(&wm);
        assert_eq!(text, "The conversation is on: the interview\n\nStill open with them (pick up when it fits):\n- ask how Friday went\n\n\
                          Brought up earlier in this conversation:\n- [2026-11-20, fact] Works as a nurse");
        assert_eq!(working_memory(&Value::Null), "");
        assert_eq!(with_working_memory("{{memories}}", "- m".into(), &text), format!("- m\n\nThis conversation so far:\n{text}"));
        assert_eq!(with_working_memory("{{memories}} {{working_memory}}", "- m".into(), &text), "- m");
        assert_eq!(with_working_memory("{{memories}}", "- m".into(), ""), "- m");
        assert_eq!(threads(&json!({"threads": []}), "(none)"), "(none)");
        let wm = json!({"procedures": [{"name": "Exam nerves", "domain": "study", "successes": 2, "failures": 1, "effectiveness": 0.6,
                                        "goals": ["steady her"], "core_patterns": ["name the fear", "one small step"], "core_tools": [],
                                        "implementation_notes": ["no pep talk"]}]});
        assert_eq!(working_memory(&wm), "How you handle this kind of moment (what you have learned works; effectiveness so far):\n\
                                         - Exam nerves (study), effectiveness 0.60 over 3 outcomes; for: steady her; how: name the fear; one small step; notes: no pep talk");
    }

    #[test]
    fn placeholders_are_filled_and_unknown_ones_dropped() {
        let t = "Hi {{name}}, it is {{ now }}.{{missing}} {{unclosed";
        assert_eq!(render(t, &[("name", "Ada".into()), ("now", "noon".into())]), "Hi Ada, it is noon. {{unclosed");
        // A value containing braces is not expanded again.
        assert_eq!(render("{{a}}", &[("a", "{{a}}".into())]), "{{a}}");
    }

    #[test]
    fn people_are_a_line_each_and_follow_the_triples_of_an_older_template() {
        let list = serde_json::json!([{"name": "Ana", "relation": "mother", "feeling": 0.6, "traits": ["patient"], "topics": [],
                                       "relations": [{"with": "Lea", "kind": "worries_about", "direction": "to", "source": "said", "sentiment": -0.2},
                                                     {"with": "Tom", "kind": "likes", "direction": "from", "source": "said", "sentiment": 0.5}]}]);
        let p = people(&list);
        assert_eq!(p, "- Ana (their mother); they are fond of them (+0.6); patient; worries about Lea (said, sentiment -0.2); Tom likes them (said, sentiment +0.5)");
        assert_eq!(with_people("{{triples}}", "- a b c".into(), &p), format!("- a b c\n\nPeople in their life this message names:\n{p}"));
        assert_eq!(with_people("{{triples}} {{people}}", "- a b c".into(), &p), "- a b c");
        assert_eq!(people(&serde_json::json!([])), "");
    }

    #[test]
    fn north_stars_follow_the_goals_of_an_older_template() {
        let stars = north_stars(&serde_json::json!(["finish my thesis"]));
        let g = with_north_stars("Goals:\n{{goals}}", "- learn Rust".into(), &stars, "- move house");
        assert!(g.starts_with("- learn Rust") && g.contains("north stars") && g.contains("- finish my thesis") && g.contains("- move house"), "{g}");
        let g = with_north_stars("{{goals}} {{north_stars}} {{objectives}}", "- learn Rust".into(), &stars, "- move house");
        assert_eq!(g, "- learn Rust");
        assert_eq!(with_north_stars("{{goals}}", "(none)".into(), "", "(none known)"), "(none)");
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
