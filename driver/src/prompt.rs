//! Prompt templates live in the database (versioned, read through `dionysus.prompt_template`);
//! the driver only fills their `{{placeholders}}`.
use crate::api::{Content, PersonInLife, Procedure, Turn, WorkingMemory};
use crate::db::{Db, DbError};
use serde::{Deserialize, Serialize};

/// `prompt_template(key[, person])`: `{key, version, template, temperature, result_schema}`.
#[derive(Clone, Debug, Deserialize)]
pub struct Template {
    pub key: String,
    pub version: i64,
    #[serde(rename = "template")]
    pub text: String,
    pub temperature: f64,
    /// The JSON Schema of the task's answer (None: free text, or a person's own version).
    #[serde(default)]
    pub result_schema: Option<serde_json::Value>,
}

pub async fn load(db: &Db, key: &str) -> Result<Template, DbError> {
    db.one("SELECT dionysus.prompt_template($1)", &[&key]).await
}

/// The template as used for one person: their own version (an approved dream proposal of
/// theirs), else the shared one.
pub async fn load_for(db: &Db, key: &str, person: &str) -> Result<Template, DbError> {
    db.one("SELECT dionysus.prompt_template($1, $2)", &[&key, &person]).await
}

/// What reaches a helper as JSON from a caller not yet typed, or already typed, read into its
/// shape (the default when it is not that shape).
fn typed<T: serde::de::DeserializeOwned + Default, S: Serialize + ?Sized>(v: &S) -> T {
    serde_json::to_value(v).and_then(serde_json::from_value).unwrap_or_default()
}

/// The items of such a list that have their shape.
fn typed_items<T: serde::de::DeserializeOwned, S: Serialize + ?Sized>(v: &S) -> Vec<T> {
    let items: Vec<serde_json::Value> = typed(v);
    items.into_iter().filter_map(|i| serde_json::from_value(i).ok()).collect()
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

/// A person's north stars as a block for a prompt ("" when they have none).
pub fn north_stars<S: Serialize + ?Sized>(list: &S) -> String {
    let stars: Vec<String> = typed_items(list);
    if stars.is_empty() {
        String::new()
    } else {
        bullets(stars, "")
    }
}

/// The people in their life a message names (chat_context's people), a line each: who they
/// are to the person, how the person feels about them, and how they relate to the others.
pub fn people(list: &[PersonInLife]) -> String {
    let listed: Vec<&str> = list.iter().map(|p| p.name.as_str()).collect();
    let lines: Vec<String> = list
        .iter()
        .map(|p| {
            let mut line = p.name.clone();
            if let Some(r) = &p.relation {
                line.push_str(&format!(" (their {r})"));
            }
            if let Some(f) = p.feeling {
                let how = if f >= 0.3 { "fond of" } else if f <= -0.3 { "uneasy about" } else { "mixed about" };
                line.push_str(&format!("; they are {how} them ({f:+.1})"));
            }
            let (traits, topics) = (p.traits.join(", "), p.topics.join(", "));
            if !traits.is_empty() {
                line.push_str(&format!("; {traits}"));
            }
            if !topics.is_empty() {
                line.push_str(&format!("; comes up with: {topics}"));
            }
            // Each relation once: from its first end, or from here when that end is not listed.
            for r in &p.relations {
                let with = r.with.as_str();
                let kind = r.kind.replace('_', " ");
                let how = format!("({}, sentiment {:+.1})", r.source, r.sentiment.unwrap_or(0.0));
                if r.direction == "to" {
                    line.push_str(&format!("; {kind} {with} {how}"));
                } else if !listed.contains(&with) {
                    line.push_str(&format!("; {with} {kind} them {how}"));
                }
            }
            line
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
pub fn threads<S: Serialize + ?Sized>(wm: &S, empty: &str) -> String {
    let wm: Option<WorkingMemory> = typed(wm);
    bullets(wm.into_iter().flat_map(|wm| wm.threads).map(|t| t.content), empty)
}

/// What the session holds in mind beyond this turn's recall (chat_context's working_memory):
/// its focus, the threads still open, and what earlier turns brought up. "" when it holds nothing.
pub fn working_memory(wm: Option<&WorkingMemory>) -> String {
    let Some(wm) = wm else { return String::new() };
    let mut parts = Vec::new();
    if let Some(focus) = wm.focus.as_deref().filter(|f| !f.trim().is_empty()) {
        parts.push(format!("The conversation is on: {}", focus.trim()));
    }
    let open = threads(wm, "");
    if !open.is_empty() {
        parts.push(format!("Still open with them (pick up when it fits):\n{open}"));
    }
    let earlier = bullets(
        wm.items.iter().filter_map(|i| {
            let when = i.created_at.as_deref().and_then(|t| t.get(..10)).unwrap_or("");
            i.content.as_ref().map(|c| format!("[{when}, {}] {c}", i.kind.as_deref().unwrap_or("memory")))
        }),
        "",
    );
    if !earlier.is_empty() {
        parts.push(format!("Brought up earlier in this conversation:\n{earlier}"));
    }
    let procedures = bullets(wm.procedures.iter().map(procedure), "");
    if !procedures.is_empty() {
        parts.push(format!("How you handle this kind of moment (what you have learned works; effectiveness so far):\n{procedures}"));
    }
    parts.join("\n\n")
}

/// One procedure in working memory, a line: name, domain, effectiveness, then its bands from
/// the goals to the implementation notes.
fn procedure(p: &Procedure) -> String {
    let mut line = p.name.clone();
    if let Some(d) = &p.domain {
        line.push_str(&format!(" ({d})"));
    }
    let tried = p.successes.unwrap_or(0) + p.failures.unwrap_or(0);
    line.push_str(&format!(", effectiveness {:.2} over {tried} outcomes", p.effectiveness.unwrap_or(0.5)));
    let bands = [("for", &p.goals), ("how", &p.core_patterns), ("with", &p.core_tools), ("ideas", &p.core_concepts), ("notes", &p.implementation_notes)];
    for (label, words) in bands {
        if !words.is_empty() {
            line.push_str(&format!("; {label}: {}", words.join("; ")));
        }
    }
    line
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

/// Each text, cut at `max_chars`, after its speaker when it has one: "(user) …".
pub fn contents<S: Serialize + ?Sized>(list: &S, max_chars: usize) -> Vec<String> {
    typed_items::<Content, S>(list)
        .iter()
        .map(|m| {
            let c: String = m.content.chars().take(max_chars).collect();
            match &m.role {
                Some(r) => format!("({r}) {c}"),
                None => c,
            }
        })
        .collect()
}

/// Conversation turns as "user: …" / "assistant: …" lines.
pub fn transcript<S: Serialize + ?Sized>(turns: &S) -> String {
    let turns: Vec<Turn> = typed_items(turns);
    let lines: Vec<String> = turns
        .iter()
        .map(|t| {
            // A turn a tight budget shows at a shorter level says so (its words are not these).
            let short = if t.is_full() { String::new() } else { format!("[{}] ", t.level.as_deref().unwrap_or_default()) };
            format!("{}: {short}{}", t.role, t.content)
        })
        .collect();
    if lines.is_empty() {
        "(no earlier turns)".into()
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn shape<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    /// A session's working memory reads as its focus, its open threads and what earlier turns
    /// brought up; an old template gets it after the memories, a new one where it asks.
    #[test]
    fn working_memory_reads_as_focus_threads_and_what_came_up_earlier() {
        let wm = json!({"focus": "the interview", "threads": [{"content": "ask how Friday went"}],
                        "items": [{"kind": "fact", "content": "Works as a nurse", "created_at": "2026-11-20T10:00:00Z"}]});
        let text = working_memory(Some(&shape(wm)));
        assert_eq!(text, "The conversation is on: the interview\n\nStill open with them (pick up when it fits):\n- ask how Friday went\n\n\
                          Brought up earlier in this conversation:\n- [2026-11-20, fact] Works as a nurse");
        assert_eq!(working_memory(None), "");
        assert_eq!(with_working_memory("{{memories}}", "- m".into(), &text), format!("- m\n\nThis conversation so far:\n{text}"));
        assert_eq!(with_working_memory("{{memories}} {{working_memory}}", "- m".into(), &text), "- m");
        assert_eq!(with_working_memory("{{memories}}", "- m".into(), ""), "- m");
        assert_eq!(threads(&json!({"threads": []}), "(none)"), "(none)");
        let wm = json!({"procedures": [{"name": "Exam nerves", "domain": "study", "successes": 2, "failures": 1, "effectiveness": 0.6,
                                        "goals": ["steady her"], "core_patterns": ["name the fear", "one small step"], "core_tools": [],
                                        "implementation_notes": ["no pep talk"]}]});
        assert_eq!(working_memory(Some(&shape(wm))), "How you handle this kind of moment (what you have learned works; effectiveness so far):\n\
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
        let p = people(&shape::<Vec<PersonInLife>>(list));
        assert_eq!(p, "- Ana (their mother); they are fond of them (+0.6); patient; worries about Lea (said, sentiment -0.2); Tom likes them (said, sentiment +0.5)");
        assert_eq!(with_people("{{triples}}", "- a b c".into(), &p), format!("- a b c\n\nPeople in their life this message names:\n{p}"));
        assert_eq!(with_people("{{triples}} {{people}}", "- a b c".into(), &p), "- a b c");
        assert_eq!(people(&[]), "");
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
