//! The shipped prompt templates' texts: one file each under sql/prompts/ (`<key>.txt` the
//! version shipped now, `superseded/<key>.v<N>.txt` the older ones an updated database keeps
//! and activate_prompt_template can return to), compiled into the library. The organ files
//! insert each version's row of prompt_templates (key, version, temperature, note) with its
//! text from `dionysus_internal.shipped_prompt(key, version)`. A new version is a new file and
//! a new row; a released version's file never changes.

/// Every shipped (key, version) and its text, the file's final newline not part of it.
const SHIPPED: &[(&str, i32, &str)] = &[
    ("brainstorm_goals", 1, include_str!("../../sql/prompts/superseded/brainstorm_goals.v1.txt")),
    ("brainstorm_goals", 2, include_str!("../../sql/prompts/brainstorm_goals.txt")),
    ("censor_from_words", 1, include_str!("../../sql/prompts/superseded/censor_from_words.v1.txt")),
    ("censor_from_words", 2, include_str!("../../sql/prompts/censor_from_words.txt")),
    ("censored_reply", 1, include_str!("../../sql/prompts/censored_reply.txt")),
    ("chat_system", 1, include_str!("../../sql/prompts/chat_system.txt")),
    ("chat_unavailable", 1, include_str!("../../sql/prompts/superseded/chat_unavailable.v1.txt")),
    ("chat_unavailable", 2, include_str!("../../sql/prompts/chat_unavailable.txt")),
    ("condense_memory", 1, include_str!("../../sql/prompts/superseded/condense_memory.v1.txt")),
    ("condense_memory", 2, include_str!("../../sql/prompts/superseded/condense_memory.v2.txt")),
    ("condense_memory", 3, include_str!("../../sql/prompts/condense_memory.txt")),
    ("contact_feedback", 1, include_str!("../../sql/prompts/contact_feedback.txt")),
    ("dream", 1, include_str!("../../sql/prompts/dream.txt")),
    ("extract_concepts", 1, include_str!("../../sql/prompts/extract_concepts.txt")),
    ("extract_message", 1, include_str!("../../sql/prompts/superseded/extract_message.v1.txt")),
    ("extract_message", 2, include_str!("../../sql/prompts/superseded/extract_message.v2.txt")),
    ("extract_message", 3, include_str!("../../sql/prompts/superseded/extract_message.v3.txt")),
    ("extract_message", 4, include_str!("../../sql/prompts/superseded/extract_message.v4.txt")),
    ("extract_message", 5, include_str!("../../sql/prompts/extract_message.txt")),
    ("heartbeat_censors", 1, include_str!("../../sql/prompts/superseded/heartbeat_censors.v1.txt")),
    ("heartbeat_censors", 2, include_str!("../../sql/prompts/heartbeat_censors.txt")),
    ("heartbeat_system", 1, include_str!("../../sql/prompts/heartbeat_system.txt")),
    ("heartbeat_user", 1, include_str!("../../sql/prompts/heartbeat_user.txt")),
    ("inquire", 1, include_str!("../../sql/prompts/inquire.txt")),
    ("inquiry_confidence", 1, include_str!("../../sql/prompts/inquiry_confidence.txt")),
    ("inquiry_queries", 1, include_str!("../../sql/prompts/inquiry_queries.txt")),
    ("maintain", 1, include_str!("../../sql/prompts/maintain.txt")),
    ("narrative", 1, include_str!("../../sql/prompts/superseded/narrative.v1.txt")),
    ("narrative", 2, include_str!("../../sql/prompts/narrative.txt")),
    ("north_star_ack", 1, include_str!("../../sql/prompts/north_star_ack.txt")),
    ("north_star_check", 1, include_str!("../../sql/prompts/north_star_check.txt")),
    ("proactive_compose", 1, include_str!("../../sql/prompts/proactive_compose.txt")),
    ("proactive_decision", 1, include_str!("../../sql/prompts/proactive_decision.txt")),
    ("reach_out", 1, include_str!("../../sql/prompts/reach_out.txt")),
    ("reflect", 1, include_str!("../../sql/prompts/superseded/reflect.v1.txt")),
    ("reflect", 2, include_str!("../../sql/prompts/reflect.txt")),
    ("rule_from_words", 1, include_str!("../../sql/prompts/superseded/rule_from_words.v1.txt")),
    ("rule_from_words", 2, include_str!("../../sql/prompts/rule_from_words.txt")),
    ("summarize_episode", 1, include_str!("../../sql/prompts/superseded/summarize_episode.v1.txt")),
    ("summarize_episode", 2, include_str!("../../sql/prompts/superseded/summarize_episode.v2.txt")),
    ("summarize_episode", 3, include_str!("../../sql/prompts/summarize_episode.txt")),
    ("synthesize", 1, include_str!("../../sql/prompts/synthesize.txt")),
];

/// The text of one shipped version of a prompt template.
pub fn shipped(key: &str, version: i32) -> Option<&'static str> {
    SHIPPED
        .iter()
        .find(|(k, v, _)| *k == key && *v == version)
        .map(|(_, _, text)| text.strip_suffix('\n').unwrap_or(text))
}

#[pgrx::pg_schema]
mod dionysus_internal {
    use pgrx::prelude::*;

    /// The text of a shipped prompt template's version (sql/prompts/), for the organ files'
    /// rows of prompt_templates; 22023 naming the arguments for a version never shipped.
    #[pg_extern(immutable, parallel_safe)]
    fn shipped_prompt(key: &str, version: i32) -> &'static str {
        super::shipped(key, version).unwrap_or_else(|| {
            crate::errors::invalid_arg("key", format!("no shipped prompt template {key:?} of version {version}"))
        })
    }
}

#[cfg(test)]
mod tests {
    /// Every file under sql/prompts/ is shipped, under the key and version its name says.
    #[test]
    fn every_prompt_file_is_shipped() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/prompts");
        let mut files = Vec::new();
        for sub in ["", "superseded"] {
            for entry in std::fs::read_dir(format!("{dir}/{sub}")).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                if let Some(stem) = name.strip_suffix(".txt") {
                    files.push(if sub.is_empty() { stem.to_string() } else { format!("{sub}/{stem}") });
                }
            }
        }
        let mut listed: Vec<String> = super::SHIPPED
            .iter()
            .map(|(k, v, _)| {
                let newest = super::SHIPPED.iter().filter(|(x, _, _)| x == k).map(|(_, n, _)| *n).max() == Some(*v);
                if newest { k.to_string() } else { format!("superseded/{k}.v{v}") }
            })
            .collect();
        files.sort();
        listed.sort();
        assert_eq!(files, listed);
        assert!(super::SHIPPED.iter().all(|(_, _, t)| !t.trim().is_empty()));
    }
}
