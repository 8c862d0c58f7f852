//! The alignment loop in the driver: north stars recognised and acknowledged, invisible
//! feedback (a reply to one of Dionysus's messages, `/feedback`, `/undo`, 🗑️), and the person's
//! word on what the nightly dream proposes (`dionysus proposals`, `approve`, `reject`; the dream
//! itself is a queued action, in [`crate::actions`]). What is a north star, whose feedback counts, what a proposal may change and when
//! it takes effect are the extension's (`sql/017_alignment.sql`); this moves words.
use crate::channel::{Incoming, Reaction};
use crate::config::Config;
use crate::db::Db;
use crate::jsonish::{flag, text};
use crate::llm::Msg;
use crate::prompt::{self, render};
use crate::Mind;
use serde::Deserialize;
use serde_json::Value;
use std::process::ExitCode;
use uuid::Uuid;

/// `set_north_star(person, words, origin_message_id)`'s answer (see its COMMENT).
#[derive(Debug, Deserialize)]
struct NorthStarSet {
    north_star_id: Uuid,
    duplicate: bool,
    /// The acknowledgement to send instead of a reply.
    ack: Option<String>,
}

/// `undo_feedback(platform, author_id, platform_message_id)`'s answer: whether feedback was
/// taken back, and the message that carried it (its 🫡 comes off).
#[derive(Debug, Deserialize)]
struct Undone {
    undone: bool,
    platform_message_id: Option<String>,
}

/// `give_feedback(...)`'s answer: stored (with its id and sentiment), or why not.
#[derive(Debug, Deserialize)]
struct Given {
    stored: bool,
    feedback_id: Option<Uuid>,
    sentiment: Option<String>,
    reason: Option<String>,
}

/// A row of `person_north_stars(for_person)`.
#[derive(Debug, Deserialize)]
struct NorthStar {
    north_star_id: Uuid,
    content: String,
}

/// A row of `pending_proposals(for_person)`: a proposal waiting for the person's word.
#[derive(Debug, Deserialize)]
struct Pending {
    proposal_id: Uuid,
    kind: String,
    target: String,
    status: String,
    rationale: String,
    /// What it proposes: a template's text under "template", anything else shown as JSON.
    proposal: Value,
}

/// The acknowledgement of feedback: seen, and nothing said in the conversation.
pub const SALUTE: &str = "🫡";

/// Whether an emoji takes feedback back (🗑️, with or without its variation selector).
pub fn is_wastebasket(emoji: &str) -> bool {
    emoji.trim_end_matches('\u{fe0f}') == "🗑"
}

/// A north star in this turn, stored: the acknowledgement to send instead of a reply. An
/// explicit prefix is enough; a cue phrase asks the fast model; anything else costs one query.
pub async fn north_star(mind: &Mind, person: &str, message_id: Uuid, words: &str) -> Option<String> {
    let cue = match mind.chat_db.json("SELECT to_jsonb(dionysus.north_star_cue($1))", &[&words]).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look for a north star");
            return None;
        }
    };
    let statement = match cue.as_str() {
        Some("explicit") => words.to_string(),
        Some("maybe") => confirm_north_star(mind, words).await?,
        _ => return None,
    };
    match mind.chat_db.one::<NorthStarSet>("SELECT dionysus.set_north_star($1, $2, $3)", &[&person, &statement, &message_id]).await {
        Ok(v) => {
            tracing::info!(%person, north_star = %v.north_star_id, duplicate = v.duplicate, "a north star");
            v.ack
        }
        Err(e) => {
            tracing::warn!(error = %e, "the north star was not stored");
            None
        }
    }
}

/// The fast model's reading of words that may declare a north star: its statement, or None.
async fn confirm_north_star(mind: &Mind, words: &str) -> Option<String> {
    let t = prompt::load(&mind.chat_db, "north_star_check").await.ok()?;
    let msgs = [Msg::system(render(&t.text, &[("message", words.to_string())])), Msg::user("Answer with the JSON object now.")];
    let answer = mind
        .fast
        .json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), |v| match v.get("north_star") {
            Some(Value::Bool(_)) => Ok(v),
            _ => Err("\"north_star\" must be true or false".into()),
        })
        .await;
    match answer {
        Ok(a) if flag(&a, "north_star") == Some(true) => text(&a, "statement"),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "could not ask whether this is a north star");
            None
        }
    }
}

/// What happened to a message that may be feedback.
#[derive(Debug, Clone, PartialEq)]
pub enum Feedback {
    /// Stored (or already stored): acknowledged with 🫡, not logged, not answered.
    Stored,
    /// `/undo`: the person's latest feedback taken back (or there was none).
    Undone(bool),
    /// `/northstars` or `/retire N`: answered on the side, not part of the conversation.
    Command,
    /// Not feedback: the conversation goes on as usual.
    NotFeedback,
    /// Feedback that could not be stored now (the database); the person was told.
    Failed,
}

/// A reply to one of Dionysus's messages, or `/feedback …` and `/undo`: feedback, never a turn.
pub async fn feedback(mind: &Mind, m: &Incoming) -> Feedback {
    let ch = &mind.channel;
    let platform = ch.platform();
    let words = m.content.trim();
    let (content, about, source) = if let Some(rest) = command(words, "/feedback") {
        (rest.to_string(), None, "command")
    } else if command(words, "/undo").is_some_and(str::is_empty) {
        let sql = "SELECT dionysus.undo_feedback($1, $2)";
        return match mind.chat_db.one::<Undone>(sql, &[&platform, &m.author_id]).await {
            Ok(v) => {
                let undone = v.undone;
                if let Some(carrier) = v.platform_message_id.as_deref() {
                    ch.react(&m.channel_id, carrier, SALUTE, false).await;
                }
                let _ = ch.send(&m.channel_id, if undone { "(feedback taken back)" } else { "(no feedback to take back)" }, &nonce(m)).await;
                Feedback::Undone(undone)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot undo feedback");
                Feedback::Failed
            }
        };
    } else if crate::censors::command(mind, &m.channel_id, &m.author_id, words, &nonce(m), m.private).await
        || crate::people::command(mind, &m.channel_id, &m.author_id, words, &nonce(m), m.private).await
        || crate::forgetme::command(mind, &m.channel_id, &m.author_id, words, &nonce(m)).await
    {
        return Feedback::Command;
    } else if command(words, "/northstars").is_some_and(str::is_empty) || command(words, "/retire").is_some() {
        north_star_command(mind, m, words).await;
        return Feedback::Command;
    } else if let Some(about) = &m.reply_to {
        (words.to_string(), Some(about.clone()), "reply")
    } else {
        return Feedback::NotFeedback;
    };
    if content.is_empty() {
        let _ = ch.send(&m.channel_id, "(write the feedback after /feedback)", &nonce(m)).await;
        return Feedback::Failed;
    }
    let sql = "SELECT dionysus.give_feedback($1, $2, $3, $4, $5, source => $6)";
    match mind.chat_db.one::<Given>(sql, &[&platform, &m.message_id, &m.author_id, &content, &about, &source]).await {
        Ok(v) if v.stored => {
            tracing::info!(feedback = ?v.feedback_id, sentiment = ?v.sentiment, "invisible feedback");
            ch.react(&m.channel_id, &m.message_id, SALUTE, true).await;
            Feedback::Stored
        }
        // A reply to someone else's message (or to nothing Dionysus sent them) is conversation.
        Ok(v) if source == "reply" => {
            tracing::debug!(reason = ?v.reason, "a reply that is not feedback");
            Feedback::NotFeedback
        }
        Ok(v) => {
            let _ = ch.send(&m.channel_id, &format!("(no feedback stored: {})", v.reason.as_deref().unwrap_or("nothing to give it on")), &nonce(m)).await;
            Feedback::Failed
        }
        Err(e) => {
            tracing::warn!(error = %e, "feedback not stored");
            let _ = ch.send(&m.channel_id, "(I couldn't store that feedback just now; please try again later)", &nonce(m)).await;
            Feedback::Failed
        }
    }
}

/// `/northstars` lists the person's north stars, numbered; `/retire N` is their word retiring one.
async fn north_star_command(mind: &Mind, m: &Incoming, words: &str) {
    let ch = &mind.channel;
    let person = format!("{}:{}", ch.platform(), m.author_id);
    let sql = "SELECT to_jsonb(n) FROM dionysus.person_north_stars($1) n ORDER BY n.created_at";
    let stars = match mind.chat_db.all::<NorthStar>(sql, &[&person]).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list north stars");
            let _ = ch.send(&m.channel_id, "(I couldn't read your north stars just now)", &nonce(m)).await;
            return;
        }
    };
    let text = match command(words, "/retire") {
        Some(n) => match n.parse::<usize>().ok().and_then(|i| stars.get(i.wrapping_sub(1))) {
            Some(star) => {
                match mind.chat_db.json("SELECT to_jsonb(dionysus.retire_north_star($1, $2))", &[&person, &star.north_star_id]).await {
                    Ok(Value::Bool(true)) => format!("(retired: \"{}\")", star.content),
                    Ok(_) => "(that north star was retired already)".to_string(),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot retire a north star");
                        "(I couldn't retire it just now)".to_string()
                    }
                }
            }
            None => "(which one? /northstars lists them, numbered)".to_string(),
        },
        None if stars.is_empty() => "(no north stars yet: start a message with \"North star:\")".to_string(),
        None => stars.iter().enumerate().map(|(i, s)| format!("{}. {}", i + 1, s.content)).collect::<Vec<_>>().join("\n"),
    };
    let _ = ch.send(&m.channel_id, &text, &nonce(m)).await;
}

/// `words` without the command, when they start with it (`/feedback too long` → "too long").
fn command<'a>(words: &'a str, name: &str) -> Option<&'a str> {
    let rest = words.strip_prefix(name)?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

fn nonce(m: &Incoming) -> String {
    format!("f{}", m.message_id).chars().take(25).collect()
}

/// 🗑️ on a message that carried feedback: the feedback is taken back and the 🫡 removed.
pub async fn undo_by_reaction(mind: &Mind, r: &Reaction) -> bool {
    let platform = mind.channel.platform();
    match mind.chat_db.one::<Undone>("SELECT dionysus.undo_feedback($1, $2, $3)", &[&platform, &r.author_id, &r.message_id]).await {
        Ok(v) if v.undone => {
            mind.channel.react(&r.channel_id, &r.message_id, SALUTE, false).await;
            true
        }
        Ok(_) => false,
        Err(e) => {
            tracing::warn!(error = %e, "cannot undo feedback");
            false
        }
    }
}

// ---------------------------------------------------------------------------------------
// `dionysus proposals | approve ID | reject ID [WHY]`: the person's word, from the terminal
// ---------------------------------------------------------------------------------------

/// Who decides at the terminal: the owner's person, as `dionysus mcp` acts (mcp.person, else
/// the only allowed Discord user, else the terminal's person). A proposal is decided only by the
/// person whose dream wrote it: anyone else's is refused (42501).
fn who(config: &Config) -> String {
    config.mcp_person()
}

pub async fn proposals(config: &Config) -> ExitCode {
    let db = Db::new(&config.database_url, "cli").with_patience(std::time::Duration::from_secs(5));
    // Only the proposals this person may decide: a dream's proposals are its person's.
    let sql = "SELECT to_jsonb(p) FROM dionysus.pending_proposals($1) p ORDER BY p.created_at";
    match db.all::<Pending>(sql, &[&who(config)]).await {
        Ok(items) => {
            if items.is_empty() {
                println!("no proposals waiting");
            }
            for p in items {
                println!("{}  {} → {}  ({})", p.proposal_id, p.kind, p.target, p.status);
                println!("    why: {}", p.rationale);
                let body = p.proposal.get("template").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| p.proposal.to_string());
                for line in body.lines().take(12) {
                    println!("    | {line}");
                }
            }
            println!("approve with `dionysus approve ID`, reject with `dionysus reject ID [why]`");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dionysus proposals: {e}");
            ExitCode::FAILURE
        }
    }
}

pub async fn decide(config: &Config, approve: bool, id: Option<&str>, why: Option<&str>) -> ExitCode {
    let Some(id) = id.and_then(|s| Uuid::parse_str(s.trim()).ok()) else {
        eprintln!("dionysus {}: give the proposal's id (from `dionysus proposals`)", if approve { "approve" } else { "reject" });
        return ExitCode::from(2);
    };
    let db = Db::new(&config.database_url, "cli").with_patience(std::time::Duration::from_secs(5));
    let by = who(config);
    let done = if approve {
        db.one::<crate::api::ProposalDecision>("SELECT dionysus.approve_proposal($1, $2)", &[&id, &by]).await.map(|v| {
            if v.approved == Some(true) {
                format!("approved: {}", v.applied)
            } else {
                format!("not approved: {}", v.reason.as_deref().unwrap_or(""))
            }
        })
    } else {
        db.json("SELECT to_jsonb(dionysus.reject_proposal($1, $2, $3))", &[&id, &by, &why]).await.map(|v| {
            if v == Value::Bool(true) { "rejected".to_string() } else { "not open (decided already, or no such proposal)".to_string() }
        })
    };
    match done {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dionysus: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_need_their_whole_word() {
        assert_eq!(command("/feedback too long", "/feedback"), Some("too long"));
        assert_eq!(command("/feedback", "/feedback"), Some(""));
        assert_eq!(command("/feedbacks", "/feedback"), None);
        assert_eq!(command("/undo", "/undo"), Some(""));
        assert_eq!(command("say /undo", "/undo"), None);
    }

    #[test]
    fn the_wastebasket_with_or_without_its_selector() {
        assert!(is_wastebasket("🗑️") && is_wastebasket("🗑"));
        assert!(!is_wastebasket("👍"));
    }
}
