//! The proactive mind's thinking layer: woken by NOTIFY dionysus_contact when the
//! extension's contact pressure crossed its threshold with every gate open. The fast model
//! decides "message" or "wait"; on "message" the smart model writes it in the personality's
//! voice; `decide_contact` records the decision (and queues the message, exactly once). The
//! model is called here and nowhere else for unprompted contact: never on a timer.
use crate::jsonish::text;
use crate::llm::Msg;
use crate::prompt::{self, bullets, render};
use crate::{api, outbox, Mind};
use serde::Deserialize;
use serde_json::{json, Number, Value};
use uuid::Uuid;

/// `contact_opportunity(evaluation_id)`: what the thinking layer needs at a crossing (see its
/// COMMENT). Only the person's own turns and what they may see.
#[derive(Debug, Deserialize)]
struct Opportunity {
    decided: bool,
    person: String,
    /// A contact their own rule asked for (a reminder): no decision, only the words.
    solicited: bool,
    /// What they asked to be reminded of.
    request: Option<String>,
    explanation: Option<String>,
    #[serde(default)]
    inputs: Vec<Input>,
    #[serde(default)]
    recent_turns: Vec<api::Turn>,
    #[serde(default)]
    their_requests: Vec<String>,
    /// The personality's traits, shown to the model as they are.
    #[serde(default)]
    personality: Value,
    #[serde(default)]
    north_stars: Vec<String>,
    #[serde(default)]
    objectives: Vec<String>,
}

/// One input of the contact pressure, as the evaluation wrote it down.
#[derive(Debug, Deserialize)]
struct Input {
    input: String,
    value: Number,
    weight: Number,
    why: Option<String>,
}

/// `decide_contact(...)`'s answer: `censored` when a censor held the message back.
#[derive(Debug, Deserialize)]
struct Decided {
    censored: Option<Value>,
}

/// The time zones the configuration gives (`time_zones`), told to the extension: they outrank
/// what a person says and what is guessed. A zone the extension refuses is logged, not fatal.
pub async fn apply_time_zones(mind: &Mind) {
    for (person, zone) in &mind.config.time_zones {
        match mind.work_db.json("SELECT to_jsonb(dionysus.set_person_time_zone($1, $2, 'config'))", &[person, zone]).await {
            Ok(_) => tracing::info!(%person, %zone, "time zone from the configuration"),
            Err(e) => tracing::warn!(%person, %zone, error = %e, "time zone from the configuration refused"),
        }
    }
}

/// Decides every crossing still open (a wake-up may stand for several, or for none).
pub async fn decide_open(mind: &Mind) -> usize {
    let open = mind.work_db.all::<Uuid>("SELECT to_jsonb(o) FROM dionysus.open_contact_opportunities(5) o", &[]).await;
    let ids = match open {
        Ok(ids) => ids,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the open contact opportunities");
            return 0;
        }
    };
    let mut decided = 0;
    for id in ids {
        if mind.shutdown.is_cancelled() {
            break;
        }
        match decide(mind, id).await {
            Ok(d) => {
                tracing::info!(evaluation = %id, decision = %d, "contact decided");
                decided += 1;
            }
            Err(e) => tracing::warn!(evaluation = %id, error = %e, "contact not decided (the scheduler announces it again)"),
        }
    }
    if decided > 0 {
        outbox::deliver(mind).await;
    }
    decided
}

/// One crossing: its context, the fast model's decision, the smart model's message.
async fn decide(mind: &Mind, id: Uuid) -> Result<String, String> {
    let started = std::time::Instant::now();
    let mut shown = Vec::new();
    let r = decide_with(mind, id, &mut shown).await;
    // A check-in that went out (a decision to wait is in contact_evaluations, not the channel).
    if r.as_deref() == Ok("message") {
        let prompt = (!shown.is_empty()).then(|| shown.join("\n\n"));
        let metrics = json!({"latency_ms": started.elapsed().as_millis() as u64, "fast_model": mind.fast.role.model,
                             "smart_model": mind.smart.role.model, "decision": r.as_deref().unwrap_or("")});
        crate::mirror::record(mind, "check_in", id, prompt, metrics, json!({})).await;
    }
    r
}

async fn decide_with(mind: &Mind, id: Uuid, shown: &mut Vec<String>) -> Result<String, String> {
    let ctx: Opportunity = mind.work_db.one("SELECT dionysus.contact_opportunity($1)", &[&id]).await.map_err(|e| e.to_string())?;
    if ctx.decided {
        return Ok("already decided".into());
    }
    let person = ctx.person.clone();
    let turns = prompt::transcript(&ctx.recent_turns);
    // A contact they asked for (their rule: a reminder) needs no decision, only the words.
    if ctx.solicited {
        let intent = format!("what they asked you to remind them of: {}", ctx.request.as_deref().unwrap_or("their request"));
        return match compose(mind, &ctx, &person, &intent, &turns, shown).await {
            Ok(message) => record(mind, id, "message", Some(&message), "they asked for it (their rule)", "model").await,
            Err(why) => record(mind, id, "wait", None, &format!("could not compose: {why}"), "skipped").await,
        };
    }
    let (decision, reason, intent) = match ask_decision(mind, &ctx, &person, &turns, shown).await {
        Ok(d) => d,
        // No mind available: wait (the cadence backs off), written down as skipped.
        Err(why) => return record(mind, id, "wait", None, &format!("model unreachable: {why}"), "skipped").await,
    };
    if decision == "wait" {
        return record(mind, id, "wait", None, &reason, "model").await;
    }
    match compose(mind, &ctx, &person, &intent, &turns, shown).await {
        Ok(message) => record(mind, id, "message", Some(&message), &reason, "model").await,
        Err(why) => record(mind, id, "wait", None, &format!("could not compose: {why}"), "skipped").await,
    }
}

async fn ask_decision(mind: &Mind, ctx: &Opportunity, person: &str, turns: &str, shown: &mut Vec<String>) -> Result<(String, String, String), String> {
    let t = prompt::load(&mind.work_db, "proactive_decision").await.map_err(|e| e.to_string())?;
    let inputs = ctx.inputs.iter().map(|i| format!("{}: {} (weight {}, {})", i.input, i.value, i.weight, i.why.as_deref().unwrap_or("")));
    let requests = ctx.their_requests.iter().cloned();
    // What matters most to them and what they work toward weigh on every proactive decision.
    let stars = prompt::north_stars(&ctx.north_stars);
    let objectives = bullets(ctx.objectives.iter().cloned(), "(none known)");
    let system = render(
        &t.text,
        &[
            ("person", person.to_string()),
            ("explanation", ctx.explanation.clone().unwrap_or_default()),
            ("inputs", bullets(inputs, "(none)")),
            ("requests", prompt::with_north_stars(&t.text, bullets(requests, "(nothing)"), &stars, &objectives)),
            ("north_stars", stars.clone()),
            ("objectives", objectives.clone()),
            ("turns", turns.to_string()),
        ],
    );
    let msgs = [Msg::system(system), Msg::user("Answer with the JSON object now.".to_string())];
    if crate::mirror::enabled(mind) {
        shown.push(format!("--- the decision (fast model) ---\n{}", crate::mirror::prompt_text(&msgs)));
    }
    let v = mind
        .fast
        .json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), |v| match text(&v, "decision").as_deref() {
            Some("message") | Some("wait") => Ok(v),
            _ => Err("\"decision\" must be \"message\" or \"wait\"".into()),
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok((
        text(&v, "decision").unwrap_or_else(|| "wait".into()),
        text(&v, "reason").unwrap_or_else(|| "(no reason given)".into()),
        text(&v, "intent").unwrap_or_else(|| "check in".into()),
    ))
}

async fn compose(mind: &Mind, ctx: &Opportunity, person: &str, intent: &str, turns: &str, shown: &mut Vec<String>) -> Result<String, String> {
    let t = prompt::load_for(&mind.work_db, "proactive_compose", person).await.map_err(|e| e.to_string())?;
    let system = render(
        &t.text,
        &[
            ("person", person.to_string()),
            ("intent", intent.to_string()),
            ("personality", ctx.personality.to_string()),
            ("turns", turns.to_string()),
        ],
    );
    let msgs = [Msg::system(system), Msg::user("Answer with the JSON object now.".to_string())];
    if crate::mirror::enabled(mind) {
        shown.push(format!("--- the message (smart model) ---\n{}", crate::mirror::prompt_text(&msgs)));
    }
    let v = mind
        .smart
        .json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), |v| {
            text(&v, "message").map(|m| json!(m.chars().take(4000).collect::<String>())).ok_or_else(|| "\"message\" must be a non-empty string".into())
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(v.as_str().unwrap_or_default().to_string())
}

async fn record(mind: &Mind, id: Uuid, decision: &str, message: Option<&str>, reason: &str, by: &str) -> Result<String, String> {
    let sql = "SELECT dionysus.decide_contact($1, $2, $3, $4, $5)";
    match mind.work_db.one::<Decided>(sql, &[&id, &decision, &message, &reason, &by]).await {
        // A censor may hold the message back: the evaluation then says wait, and so do we.
        Ok(Decided { censored: Some(censors) }) => Ok(format!("wait (censored: {censors})")),
        Ok(_) => Ok(decision.to_string()),
        // The extension checks the gates again and may refuse the message (a contact meanwhile,
        // energy spent, a web-only basis): that is a decision too, or the crossing would be
        // announced and the models asked again every minute.
        Err(crate::db::DbError::Sql { code, message: refusal }) if decision == "message" && (code == "55000" || code == "42501") => {
            let why = format!("refused: {refusal}");
            mind.work_db.json(sql, &[&id, &"wait", &None::<&str>, &why, &"default"]).await.map_err(|e| e.to_string())?;
            Ok("wait (the message was refused)".into())
        }
        Err(e) => Err(e.to_string()),
    }
}
