//! A message is an event, not a heartbeat (seed 000 §5.3, seed 004 §3): log it once →
//! context from the database → the smart model's reply (or an honest fallback) → send →
//! log the reply → extraction by the fast model, after the reply and without delaying it.
use crate::channel::Incoming;
use crate::db::DbError;
use crate::llm::Msg;
use crate::prompt::{self, bullets, render};
use crate::actions::{self, Outcome};
use crate::work;
use crate::outbox;
use crate::{fallback, Mind};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use uuid::Uuid;

/// What happened to one incoming message (the tests and the benchmark read it).
#[derive(Debug, Clone, PartialEq)]
pub enum Handled {
    Ignored,
    Duplicate,
    Replied { message_id: Uuid, fallback: bool },
    /// The reply could not be delivered; it waits in the outbox.
    Queued { message_id: Uuid },
    /// The message could not be stored (the person was told).
    NotStored(String),
    /// Only an acknowledgement of what Dionysus said ("ok", "👍"): beliefs updated in the
    /// database, no model called, no reply (seed 003's layered processing).
    Acknowledged { message_id: Uuid },
    /// Invisible feedback (a reply to Dionysus's message, /feedback, /undo): never in the
    /// message log, never answered.
    Feedback(crate::alignment::Feedback),
}

pub async fn handle(mind: &Arc<Mind>, m: Incoming, extractions: &mut JoinSet<()>) -> Handled {
    let ch = &mind.channel;
    if !ch.allowed(&m.author_id) {
        tracing::info!(platform = ch.platform(), author = %m.author_id, "ignored a message from someone not allowed");
        return Handled::Ignored;
    }
    if m.content.trim().is_empty() {
        return Handled::Ignored;
    }
    // Feedback is not conversation: it goes to its own table, before anything is logged.
    match crate::alignment::feedback(mind, &m).await {
        crate::alignment::Feedback::NotFeedback => {}
        f => return Handled::Feedback(f),
    }
    let logged = mind
        .chat_db
        .json(
            "SELECT dionysus.log_message($1, $2, $3, $4, $5)",
            &[&ch.platform(), &m.message_id, &m.channel_id, &m.author_id, &m.content],
        )
        .await;
    let logged = match logged {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "cannot store the message");
            // The database's own words stay in the log: they are for the operator, not the chat.
            let text = match &e {
                DbError::Down(_) => "My memory is unreachable right now, so I can't take this in. Please tell me again in a few minutes.",
                DbError::Sql { .. } => "I couldn't take that message in; something on my side went wrong, and it has been logged.",
            };
            let _ = ch.send(&m.channel_id, text, &format!("x{}", m.message_id).chars().take(25).collect::<String>()).await;
            return Handled::NotStored(e.to_string());
        }
    };
    let Some(message_id) = logged["message_id"].as_str().and_then(|s| Uuid::parse_str(s).ok()) else {
        return Handled::NotStored("log_message returned no id".into());
    };
    if logged["duplicate"] == Value::Bool(true) && logged["replied"] == Value::Bool(true) {
        tracing::info!(%message_id, "redelivered message ignored (already answered)");
        return Handled::Duplicate;
    }
    if logged["duplicate"] == Value::Bool(true) && logged["reply_queued"] == Value::Bool(true) {
        // An earlier attempt composed the reply (and maybe sent part of it): that one goes
        // out, under its own nonces, never a second one.
        return match outbox::reserve_reply(mind, message_id, None).await {
            Ok(Some(r)) => deliver_reply(mind, message_id, &r, false).await,
            Ok(None) => Handled::Duplicate,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look up the queued reply");
                Handled::Queued { message_id }
            }
        };
    }
    let work_id = logged["work_id"].as_str().and_then(|s| Uuid::parse_str(s).ok());
    // An answer to a contact whose cues were mixed: the fast model reads it, off the reply's path.
    if let Some(contact) = logged["feedback_unsure"].as_str().and_then(|s| Uuid::parse_str(s).ok()) {
        let (mind, words) = (mind.clone(), m.content.clone());
        extractions.spawn(async move { crate::rules::judge_reply(&mind, contact, &words).await });
    }
    if logged["acknowledgement"] == Value::Bool(true) {
        tracing::info!(%message_id, "an acknowledgement: noted, no reply");
        return Handled::Acknowledged { message_id };
    }

    // Typing while composing (Discord shows it for ~10 s, so it is renewed).
    ch.typing(&m.channel_id).await;
    let typing = {
        let ch = ch.clone();
        let channel_id = m.channel_id.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(8)).await;
                ch.typing(&channel_id).await;
            }
        })
    };
    // "Remind me to call mom on Sundays": a rule in their words, confirmed instead of a chat reply.
    let person = logged["person"].as_str().unwrap_or_default().to_string();
    let rule = if crate::rules::may_ask_for_a_rule(&m.content) { crate::rules::from_words(mind, &person, &m.content).await } else { None };
    // "Never message me before 9": a censor in their words, acknowledged instead of a reply.
    let rule = match rule {
        Some(confirmation) => Some(confirmation),
        None => crate::censors::from_words(mind, &person, message_id, &m.content).await,
    };
    // "North star: …": stored as what matters most to them, and acknowledged instead of a reply.
    let said = match rule {
        Some(confirmation) => Some(confirmation),
        None => crate::alignment::north_star(mind, &person, message_id, &m.content).await,
    };
    let (reply, fallback, note) = match said {
        Some(acknowledgement) => (acknowledgement, false, Note::acknowledgement()),
        None => compose(mind, message_id, &person, &m.content, m.private).await,
    };
    typing.abort();

    // Reserve → send → confirm, through the outbox: a crash anywhere never sends it twice.
    let outcome = match outbox::reserve_reply(mind, message_id, Some(&reply)).await {
        Ok(Some(r)) => deliver_reply(mind, message_id, &r, fallback).await,
        Ok(None) => Handled::Duplicate, // sent already, or another driver is sending it
        Err(e) => {
            tracing::error!(error = %e, "the reply could not be queued");
            Handled::NotStored(e.to_string())
        }
    };
    // The dream channel sees the reply after it went out (its own task: nobody waits on it).
    crate::mirror::record_later(mind, "reply", message_id, note.prompt, note.metrics, note.context);
    // Extraction after the reply. With the model down it waits in the queue instead.
    if let (Some(work_id), false) = (work_id, fallback) {
        let mind = mind.clone();
        extractions.spawn(async move { extract_now(&mind, work_id).await });
    }
    outcome
}

/// Runs the message's extraction now, if no other worker has it.
pub async fn extract_now(mind: &Mind, work_id: Uuid) {
    let item = match work::claim_item(&mind.work_db, work_id, &mind.config.worker_name).await {
        Ok(Some(i)) => i,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot claim the extraction; the queue will retry it");
            return;
        }
    };
    let outcome = work::guarded(mind, actions::execute(mind, &item)).await.unwrap_or(Outcome::Release("driver shutting down".into(), 0));
    if let Err(e) = work::settle(&mind.work_db, &item, outcome).await {
        tracing::warn!(error = %e, "cannot settle the extraction (its lease will expire)");
    }
}

/// What the dream channel is told about a reply: the prompt, the metrics, the context used.
struct Note {
    prompt: Option<String>,
    metrics: Value,
    context: Value,
}

impl Note {
    fn acknowledgement() -> Note {
        Note { prompt: None, metrics: json!({"composed_by": "acknowledgement (no model)"}), context: json!({}) }
    }
}

/// The context's shape for the dream channel: its archetype, and what recall gave with scores.
fn context_used(ctx: &Value) -> Value {
    let scores: Vec<String> = ctx["memories"]
        .as_array()
        .into_iter()
        .flatten()
        .take(5)
        .map(|m| format!("{} ({})", m["score"], m["found_by"].as_str().unwrap_or("?")))
        .collect();
    json!({
        "archetype": ctx["archetype"]["name"].as_str().or(ctx["archetype"]["nearest"].as_str().map(|_| "none near enough")).unwrap_or("none"),
        "turns": ctx["recent_turns"].as_array().map_or(0, Vec::len),
        "memories": ctx["memories"].as_array().map_or(0, Vec::len),
        "recall_scores": if scores.is_empty() { Value::Null } else { json!(scores.join(", ")) },
        "triples": ctx["triples"].as_array().map_or(0, Vec::len),
        "people": ctx["people"].as_array().map_or(0, Vec::len),
        "working_memory": if ctx["working_memory"].is_object() {
            json!({"turn": ctx["working_memory"]["turn"], "focus": ctx["working_memory"]["focus"].is_string(),
                   "threads": ctx["working_memory"]["threads"].as_array().map_or(0, Vec::len),
                   "carried": ctx["working_memory"]["items"].as_array().map_or(0, Vec::len)})
        } else {
            Value::Null
        },
        "north_stars": ctx["north_stars"].as_array().map_or(0, Vec::len),
        "objectives": ctx["objectives"].as_array().map_or(0, Vec::len),
        // The token budget (027): its task, what it allowed, what was used, how many items it cut.
        "budget": if ctx["context_budget"].is_object() {
            let b = &ctx["context_budget"];
            let cut: u64 = b["sections"].as_object().into_iter().flatten().filter_map(|(_, s)| s["cut"].as_u64()).sum();
            json!({"task": b["task"], "tokens": b["budget"], "used": b["used"], "cut": cut})
        } else {
            Value::Null
        },
    })
}

/// The reply, whether it is the fallback (the model could not be used), and what the dream
/// channel is told. `private`: the channel is the person's alone (a DM), so the fallback may
/// quote what was recalled.
async fn compose(mind: &Mind, message_id: Uuid, person: &str, content: &str, private: bool) -> (String, bool, Note) {
    let started = std::time::Instant::now();
    let mut prompt_shown = None;
    let mut usage = None;
    let ctx = match mind
        .chat_db
        .json("SELECT dionysus.chat_context($1, $2, $3)", &[&message_id, &mind.config.max_memories, &mind.config.max_turns])
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the context");
            Value::Null
        }
    };
    let memories: Vec<String> = ctx["memories"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let when = m["created_at"].as_str().and_then(|t| t.get(..10)).unwrap_or("");
            let kind = if m["fact"] == Value::Bool(true) { "fact" } else { m["type"].as_str().unwrap_or("memory") };
            let who = m["role"].as_str().map(|r| format!(", said by {}", if r == "user" { "them" } else { "you" })).unwrap_or_default();
            format!("[{when}, {kind}{who}] {}", m["content"].as_str().unwrap_or(""))
        })
        .collect();
    let triples: Vec<String> = ctx["triples"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| format!("{} {} {}", t["subject"].as_str().unwrap_or(""), t["predicate"].as_str().unwrap_or("").replace('_', " "), t["object"].as_str().unwrap_or("")))
        .collect();
    let people = prompt::people(&ctx["people"]);
    let working = prompt::working_memory(&ctx["working_memory"]);
    let goals: Vec<String> = ctx["goals"].as_array().into_iter().flatten().filter_map(|g| g["title"].as_str().map(str::to_string)).collect();
    let north_stars = prompt::north_stars(&ctx["north_stars"]);
    let objectives: Vec<String> = ctx["objectives"].as_array().into_iter().flatten().filter_map(|o| o["description"].as_str().map(str::to_string)).collect();

    let reply = match prompt::load_for(&mind.chat_db, "chat_system", person).await {
        Ok(t) => {
            let objectives = bullets(objectives, "(none known)");
            let system = render(
                &t.text,
                &[
                    ("now", ctx["now"].as_str().unwrap_or("").to_string()),
                    ("memories", prompt::with_working_memory(&t.text, bullets(memories, "(nothing relevant)"), &working)),
                    ("working_memory", if working.is_empty() { "(nothing yet)".to_string() } else { working.clone() }),
                    ("triples", prompt::with_people(&t.text, bullets(triples, "(nothing)"), &people)),
                    ("people", if people.is_empty() { "(nobody named)".to_string() } else { people.clone() }),
                    ("goals", prompt::with_north_stars(&t.text, bullets(goals, "(none)"), &north_stars, &objectives)),
                    ("north_stars", north_stars.clone()),
                    ("objectives", objectives.clone()),
                ],
            );
            let mut msgs = vec![Msg::system(system)];
            for turn in ctx["recent_turns"].as_array().into_iter().flatten() {
                let c = turn["content"].as_str().unwrap_or("");
                // A turn shown at a shorter level (a tight budget's) is marked as such, not passed off as the words said.
                let c = match turn["level"].as_str() {
                    Some("full") | None => c.to_string(),
                    Some(level) => format!("[{level} of this turn] {c}"),
                };
                msgs.push(if turn["role"] == "assistant" { Msg::assistant(c) } else { Msg::user(c) });
            }
            msgs.push(Msg::user(content));
            if crate::mirror::enabled(mind) {
                prompt_shown = Some(crate::mirror::prompt_text(&msgs));
            }
            match mind.chat.chat_with_usage(&msgs, t.temperature).await.map_err(|e| e.to_string()) {
                Ok((draft, u)) => {
                    usage = u;
                    Ok(judged(mind, person, message_id, &mut msgs, draft, t.temperature).await)
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e.to_string()),
    };
    let mut metrics = json!({"latency_ms": started.elapsed().as_millis() as u64, "model": mind.chat.role.model});
    if let Some(u) = usage {
        metrics["prompt_tokens"] = u["prompt_tokens"].clone();
        metrics["completion_tokens"] = u["completion_tokens"].clone();
    }
    let context = context_used(&ctx);
    match reply {
        Ok(r) => (r, false, Note { prompt: prompt_shown, metrics, context }),
        Err(e) => {
            tracing::warn!(error = %e, "replying with the fallback");
            metrics["fallback"] = json!(e.chars().take(300).collect::<String>());
            let reply = crate::censors::allowed_or_censored(mind, person, message_id, fallback::reply(mind, &ctx, content, private).await).await;
            (reply, true, Note { prompt: prompt_shown, metrics, context })
        }
    }
}

/// The reply the censors allow: the draft, else one rewrite told why, else the censored line.
async fn judged(mind: &Mind, person: &str, message_id: Uuid, msgs: &mut Vec<Msg>, draft: String, temperature: f64) -> String {
    let Some(reasons) = crate::censors::blocks_reply(mind, person, message_id, &draft).await else {
        return draft;
    };
    tracing::info!(%message_id, ?reasons, "the draft reply was censored; writing it again");
    msgs.push(Msg::assistant(draft));
    msgs.push(Msg::system(crate::censors::rewrite_instruction(&reasons)));
    match mind.chat.chat(msgs, temperature).await {
        Ok(again) if crate::censors::blocks_reply(mind, person, message_id, &again).await.is_none() => again,
        _ => crate::censors::censored_reply(mind).await,
    }
}

/// Sends a reserved reply, with the 3 retries seed 003 gives a channel; if it still cannot
/// go out it waits in the outbox for the channel to come back.
async fn deliver_reply(mind: &Mind, message_id: Uuid, reply: &outbox::Reserved, fallback: bool) -> Handled {
    match outbox::send_reserved(mind, reply, 3).await {
        Ok(outbox::Delivery::Delivered(_)) => Handled::Replied { message_id, fallback },
        Ok(outbox::Delivery::Waiting) | Ok(outbox::Delivery::Rejected(_)) => Handled::Queued { message_id },
        Err(e) => {
            tracing::warn!(error = %e, "reply not confirmed; its reservation lapses and the outbox retries it");
            Handled::Queued { message_id }
        }
    }
}
