//! A message is an event, not a heartbeat: log it once → context from the database → the smart
//! model's reply (or an honest fallback) → send → log the reply → extraction by the fast model,
//! after the reply and without delaying it.
use crate::api::ChatContext;
use crate::channel::Incoming;
use crate::db::DbError;
use crate::llm::Msg;
use crate::prompt::{self, bullets, render};
use crate::actions::{self, Outcome};
use crate::work;
use crate::outbox;
use crate::{fallback, Mind};
use serde::Deserialize;
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
    /// database, no model called, no reply (the cheapest layer of processing a turn).
    Acknowledged { message_id: Uuid },
    /// Invisible feedback (a reply to Dionysus's message, /feedback, /undo): never in the
    /// message log, never answered.
    Feedback(crate::alignment::Feedback),
}

/// `log_message(...)`'s answer (see its COMMENT). `replied` and `reply_queued` come with a
/// duplicate only, `acknowledgement` and `feedback_unsure` with a new turn: absent means false/none.
#[derive(Debug, Deserialize)]
struct Logged {
    message_id: Uuid,
    duplicate: bool,
    #[serde(default)]
    replied: bool,
    #[serde(default)]
    reply_queued: bool,
    work_id: Option<Uuid>,
    person: Option<String>,
    #[serde(default)]
    acknowledgement: bool,
    /// A contact whose answer the cues could not judge.
    feedback_unsure: Option<Uuid>,
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
    // While someone is being answered, background language work waits for the model.
    let _person_first = (mind.chat.person_first(), mind.fast.person_first());
    // Feedback is not conversation: it goes to its own table, before anything is logged.
    match crate::alignment::feedback(mind, &m).await {
        crate::alignment::Feedback::NotFeedback => {}
        f => return Handled::Feedback(f),
    }
    let logged = mind
        .chat_db
        .one::<Logged>(
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
    let message_id = logged.message_id;
    if logged.duplicate && logged.replied {
        tracing::info!(%message_id, "redelivered message ignored (already answered)");
        return Handled::Duplicate;
    }
    if logged.duplicate && logged.reply_queued {
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
    let work_id = logged.work_id;
    // An answer to a contact whose cues were mixed: the fast model reads it, off the reply's path.
    if let Some(contact) = logged.feedback_unsure {
        let (mind, words) = (mind.clone(), m.content.clone());
        extractions.spawn(async move { crate::rules::judge_reply(&mind, contact, &words).await });
    }
    if logged.acknowledgement {
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
    let person = logged.person.unwrap_or_default();
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
fn context_used(ctx: &ChatContext) -> Value {
    let scores: Vec<String> = ctx
        .memories
        .iter()
        .take(5)
        .map(|m| format!("{} ({})", m.score.as_ref().map_or("null".to_string(), |s| s.to_string()), m.found_by.as_deref().unwrap_or("?")))
        .collect();
    let archetype = ctx.archetype.as_ref();
    json!({
        "archetype": archetype.and_then(|a| a.name.as_deref().or(a.nearest.as_ref().map(|_| "none near enough"))).unwrap_or("none"),
        "turns": ctx.recent_turns.len(),
        "memories": ctx.memories.len(),
        "recall_scores": if scores.is_empty() { Value::Null } else { json!(scores.join(", ")) },
        "triples": ctx.triples.len(),
        "people": ctx.people.len(),
        "working_memory": ctx.working_memory.as_ref().map(|wm| {
            json!({"turn": wm.turn, "focus": wm.focus.is_some(), "threads": wm.threads.len(), "carried": wm.items.len()})
        }),
        "north_stars": ctx.north_stars.len(),
        "objectives": ctx.objectives.len(),
        // The token budget (027): its task, what it allowed, what was used, how many items it cut.
        "budget": ctx.context_budget.as_ref().map(|b| {
            let cut: u64 = b.sections.values().filter_map(|s| s.cut).sum();
            json!({"task": b.task, "tokens": b.budget, "used": b.used, "cut": cut})
        }),
    })
}

/// The reply, whether it is the fallback (the model could not be used), and what the dream
/// channel is told. `private`: the channel is the person's alone (a DM), so the fallback may
/// quote what was recalled.
async fn compose(mind: &Mind, message_id: Uuid, person: &str, content: &str, private: bool) -> (String, bool, Note) {
    let started = std::time::Instant::now();
    let mut prompt_shown = None;
    let mut usage = None;
    let ctx: ChatContext = match mind
        .chat_db
        .one("SELECT dionysus.chat_context($1, $2, $3)", &[&message_id, &mind.config.max_memories, &mind.config.max_turns])
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the context");
            ChatContext::default()
        }
    };
    let memories: Vec<String> = ctx
        .memories
        .iter()
        .map(|m| {
            let when = m.created_at.as_deref().and_then(|t| t.get(..10)).unwrap_or("");
            let kind = if m.fact { "fact" } else { m.kind.as_deref().unwrap_or("memory") };
            let who = m.role.as_deref().map(|r| format!(", said by {}", if r == "user" { "them" } else { "you" })).unwrap_or_default();
            format!("[{when}, {kind}{who}] {}", m.content)
        })
        .collect();
    let triples: Vec<String> = ctx.triples.iter().map(|t| format!("{} {} {}", t.subject, t.predicate.replace('_', " "), t.object)).collect();
    let people = prompt::people(&ctx.people);
    let working = prompt::working_memory(ctx.working_memory.as_ref());
    let goals: Vec<String> = ctx.goals.iter().map(|g| g.title.clone()).collect();
    let north_stars = prompt::north_stars(&ctx.north_stars);
    let objectives: Vec<String> = ctx.objectives.iter().map(|o| o.description.clone()).collect();

    let reply = match prompt::load_for(&mind.chat_db, "chat_system", person).await {
        Ok(t) => {
            let objectives = bullets(objectives, "(none known)");
            let system = render(
                &t.text,
                &[
                    ("now", ctx.now.clone().unwrap_or_default()),
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
            for turn in &ctx.recent_turns {
                // A turn shown at a shorter level (a tight budget's) is marked as such, not passed off as the words said.
                let c = match turn.level.as_deref() {
                    Some("full") | None => turn.content.clone(),
                    Some(level) => format!("[{level} of this turn] {}", turn.content),
                };
                msgs.push(if turn.role == "assistant" { Msg::assistant(c) } else { Msg::user(c) });
            }
            msgs.push(Msg::user(content));
            if crate::mirror::enabled(mind) {
                prompt_shown = Some(crate::mirror::prompt_text(&msgs));
            }
            match mind.chat.chat_with_usage(&t.key, &msgs, t.temperature).await.map_err(|e| (e.to_string(), fallback::why(&e))) {
                Ok((draft, u)) => {
                    usage = u;
                    Ok(judged(mind, person, message_id, &mut msgs, draft, t.temperature).await)
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err((e.to_string(), fallback::NOT_AVAILABLE)),
    };
    let mut metrics = serde_json::Map::new();
    metrics.insert("latency_ms".into(), json!(started.elapsed().as_millis() as u64));
    metrics.insert("model".into(), json!(mind.chat.role.model));
    if let Some(u) = usage {
        metrics.insert("prompt_tokens".into(), json!(u.prompt_tokens));
        metrics.insert("completion_tokens".into(), json!(u.completion_tokens));
    }
    let context = context_used(&ctx);
    match reply {
        Ok(r) => (r, false, Note { prompt: prompt_shown, metrics: Value::Object(metrics), context }),
        Err((e, why)) => {
            tracing::warn!(error = %e, "replying with the fallback");
            metrics.insert("fallback".into(), json!(e.chars().take(300).collect::<String>()));
            let reply = crate::censors::allowed_or_censored(mind, person, message_id, fallback::reply(mind, &ctx, content, private, why).await).await;
            (reply, true, Note { prompt: prompt_shown, metrics: Value::Object(metrics), context })
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
    match mind.chat.chat("chat_system", msgs, temperature).await {
        Ok(again) if crate::censors::blocks_reply(mind, person, message_id, &again).await.is_none() => again,
        _ => crate::censors::censored_reply(mind).await,
    }
}

/// Sends a reserved reply, with 3 retries on the channel; if it still cannot
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
