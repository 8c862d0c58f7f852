//! The honest answer when the model cannot be used: it says so, and, where only the person
//! reads it, shows what was recalled that is about their message.
use crate::api::ChatContext;
use crate::llm::LlmError;
use crate::prompt::{self, bullets, render};
use crate::Mind;
use std::collections::HashSet;

/// At most this many remembered things in a fallback.
const SHOWN: usize = 3;

/// Why there is no reply from the model, as the fallback opens: a model that was only slow, or
/// answered with an echo of its prompt, is not one that "can't be reached".
pub fn why(e: &LlmError) -> &'static str {
    match e {
        LlmError::Timeout | LlmError::Preempted => "My language model is taking too long to answer right now",
        // (The breaker opens after failures of any kind: slow ones too.)
        LlmError::CircuitOpen => "My language model isn't answering right now",
        LlmError::Http(429, _) => "My language model is too busy to answer right now",
        LlmError::Transport(_) => "My language model can't be reached right now",
        LlmError::Http(s, _) if *s >= 500 => "My language model can't be reached right now",
        LlmError::Http(..) => "My language model turned the request down",
        LlmError::Refused(_) => "My language model declined to answer",
        LlmError::BadAnswer(_) => "My language model gave me an answer I can't use",
    }
}

/// Why, when the reply failed before the model was asked (its prompt could not be read).
pub const NOT_AVAILABLE: &str = "Something went wrong on my side";

/// `ctx` is the message's `chat_context`. `private`: the channel is the person's alone; in a
/// channel others read, the fallback quotes nothing remembered. `why`: [`why`]'s words.
pub async fn reply(mind: &Mind, ctx: &ChatContext, content: &str, private: bool, why: &str) -> String {
    let shown = if private { recalled_about(ctx, content) } else { Vec::new() };
    let recalled = if shown.is_empty() {
        String::new()
    } else {
        format!("\n\nWhat I remember that seems related:\n{}", bullets(shown, ""))
    };
    let template = prompt::load(&mind.chat_db, "chat_unavailable").await.map(|t| t.text).unwrap_or_else(|_| {
        "{{why}}, so I can't answer you properly. Your message is saved.{{recalled}}".into()
    });
    render(&template, &[("why", why.to_string()), ("recalled", recalled)])
}

/// What the person told that is about this message: facts and their own words, recalled memories
/// first (best score first), then their turns still in view (latest first). Without the model to
/// weigh recall, "about" means sharing the message's words: the database's full-text match for
/// memories (`found_by` names it), the words themselves for the turns. What the companion thought
/// (heartbeat narratives, reflections, web pages) and its own turns are not shown: they are not
/// what the person said, and a narrative of a failure is no answer.
pub fn recalled_about(ctx: &ChatContext, content: &str) -> Vec<String> {
    let said = |at: Option<&str>, text: &str| match at.and_then(|t| t.get(..10)) {
        Some(day) => format!("you said on {day}: \"{text}\""),
        None => format!("you said: \"{text}\""),
    };
    let memories = ctx
        .memories
        .iter()
        .filter(|m| m.found_by.as_deref().is_some_and(|f| f.contains("lexical")))
        .filter_map(|m| {
            // Only their own words are quoted: a summary, micro line or clipped text (a tight
            // budget's shorter level) is not what they said.
            if m.level.as_deref().is_some_and(|l| l != "full") {
                None
            } else if m.fact {
                Some(m.content.clone())
            } else if m.role.as_deref() == Some("user") {
                Some(said(m.created_at.as_deref(), &m.content))
            } else {
                None
            }
        });
    let asked = subject_words(content);
    let turns = ctx
        .recent_turns
        .iter()
        .rev()
        .filter(|t| t.role == "user" && t.is_full())
        .filter(|t| !subject_words(&t.content).is_disjoint(&asked))
        .map(|t| said(t.at.as_deref(), &t.content));
    memories.chain(turns).take(SHOWN).collect()
}

/// Common English words that say nothing about a message's subject.
const COMMON: &[&str] = &[
    "about", "again", "all", "and", "any", "are", "but", "can", "could", "did", "does", "for", "from", "get", "got", "had",
    "has", "have", "her", "him", "his", "how", "its", "just", "know", "like", "mine", "not", "now", "our", "out", "please",
    "remember", "she", "should", "some", "tell", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "was", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "yes", "you",
    "your",
];

/// The words of a text that carry its subject: lower case, three letters or more, common words left out.
fn subject_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !COMMON.contains(&w.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn memory(content: &str, found_by: &str, fact: bool, role: Option<&str>) -> Value {
        json!({"content": content, "found_by": found_by, "fact": fact, "role": role, "type": "episodic",
               "created_at": "2026-03-01T10:00:00+00:00", "score": 0.8})
    }

    /// A chat_context answer with only its memories and recent turns.
    fn context(memories: Value, recent_turns: Value) -> ChatContext {
        ChatContext {
            memories: serde_json::from_value(memories).unwrap(),
            recent_turns: serde_json::from_value(recent_turns).unwrap(),
            ..ChatContext::default()
        }
    }

    #[test]
    fn the_fallback_shows_what_the_person_told_about_the_message() {
        let ctx = context(
            json!([
                memory("Ada's sister is called Mira", "vector+lexical", true, None),
                memory("While resting I wondered how Mira is doing.", "vector+lexical", false, None),
                memory("I told Ada that Mira sounds lovely.", "lexical", false, Some("assistant")),
                memory("Ada's favourite colour is green", "vector", true, None),
                memory("Mira and I grew up in Braga.", "lexical", false, Some("user")),
            ]),
            json!([
                {"role": "user", "content": "Mira moved to Porto last spring.", "at": "2026-03-02T09:00:00+00:00"},
                {"role": "assistant", "content": "Porto is beautiful, and Mira will love it.", "at": "2026-03-02T09:00:05+00:00"},
                {"role": "user", "content": "I had pasta for lunch today.", "at": "2026-03-02T09:01:00+00:00"},
            ]),
        );
        let shown = recalled_about(&ctx, "Where does my sister Mira live now?");
        assert_eq!(
            shown,
            vec![
                "Ada's sister is called Mira".to_string(),
                "you said on 2026-03-01: \"Mira and I grew up in Braga.\"".to_string(),
                "you said on 2026-03-02: \"Mira moved to Porto last spring.\"".to_string(),
            ]
        );
    }

    #[test]
    fn nothing_is_shown_when_nothing_recalled_is_about_the_message() {
        let ctx = context(
            json!([memory("Heartbeat 3: the model was unreachable.", "vector", false, None)]),
            json!([{"role": "user", "content": "What do you think of the weather?", "at": "2026-03-02T09:00:00+00:00"}]),
        );
        assert!(recalled_about(&ctx, "Are you there?").is_empty());
        // No context (chat_context answered nothing): nothing to show.
        assert!(recalled_about(&ChatContext::default(), "Are you there?").is_empty());
    }

    #[test]
    fn subject_words_leave_out_the_common_ones() {
        let w = subject_words("What is the name of my dog, Rex's brother?");
        assert_eq!(w, ["name", "dog", "rex", "brother"].iter().map(|s| s.to_string()).collect());
    }
}
