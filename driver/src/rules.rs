//! Rules in the person's own words: "remind me to call mom on Sundays". A cheap
//! look at the words decides whether to ask at all; the fast model turns them into a rule in
//! the extension's vocabulary; `add_rule` checks it and stores it as theirs. The driver keeps
//! no rule logic: what a rule may say, and what it does, live in the database.
use crate::grounding;
use crate::jsonish::text;
use crate::llm::Msg;
use crate::prompt::{self, render};
use crate::Mind;
use serde::Deserialize;
use serde_json::Value;

/// `add_rule(person, words, rule)`'s answer: the rule stored as theirs (see its COMMENT).
#[derive(Debug, Deserialize)]
struct Stored {
    rule_id: i64,
    name: String,
    description: Option<String>,
}

/// Words that may ask for something scheduled or recurring (cheap, before any model).
pub fn may_ask_for_a_rule(words: &str) -> bool {
    let w = words.to_lowercase();
    let days = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
    w.contains("remind me")
        || w.contains("check on me")
        || w.contains("check in on me")
        || w.contains("every morning")
        || w.contains("every evening")
        || w.contains("every day")
        || w.contains("every night")
        || w.contains("every week")
        || days.iter().any(|d| w.contains(&format!("every {d}")) || w.contains(&format!("on {d}s")))
}

/// A rule made from the person's words: the confirmation to send them; when a rule was proposed
/// but could not be made (the model unreachable, or the extension refused what it proposed), an
/// honest sentence saying so; None when the words asked for nothing scheduled (the conversation
/// then goes on as usual).
pub async fn from_words(mind: &Mind, person: &str, words: &str) -> Option<String> {
    let t = match prompt::load(&mind.chat_db, "rule_from_words").await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "no rule_from_words template");
            return None;
        }
    };
    let vocabulary = mind.chat_db.json("SELECT dionysus.rule_vocabulary()", &[]).await.ok()?;
    let local_time: String = mind.chat_db.one("SELECT to_jsonb(dionysus.person_local_time($1))", &[&person]).await.ok()?;
    let system = render(
        &t.text,
        &[
            ("words", words.to_string()),
            ("local_time", local_time),
            ("vocabulary", serde_json::to_string_pretty(&vocabulary).unwrap_or_default()),
        ],
    );
    let msgs = [Msg::system(system), Msg::user("Answer with the JSON object now.".to_string())];
    let answer = mind
        .fast
        .json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), |v| match v.get("rule") {
            // No rule, said or not: not a request for one.
            Some(Value::Object(_)) | Some(Value::Null) | None => Ok(v),
            _ => Err("\"rule\" must be an object or null".into()),
        })
        .await;
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "no rule from the words (the model could not be used)");
            return Some(could_not("my model gave no usable answer just now"));
        }
    };
    let rule = answer.get("rule").filter(|r| r.is_object())?.clone();
    // Grounded in their words (the one grounding check): a name the model made up, or copied
    // from the prompt's shape ("<a few words>"), is refused and they are told.
    let named = text(&rule, "name").or_else(|| text(&rule, "description")).unwrap_or_default();
    let private = vec![person.to_string()];
    if let Some(why) = grounding::refused(mind, "rule", &named, Some(words), &private).await {
        tracing::warn!(%why, "the proposed rule is not grounded in their words");
        return Some(could_not("what I made of it did not match your words"));
    }
    match mind.chat_db.one::<Stored>("SELECT dionysus.add_rule($1, $2, $3)", &[&person, &words, &rule]).await {
        Ok(stored) => {
            tracing::info!(%person, rule = stored.rule_id, name = %stored.name, "a rule in their words");
            // The model's words back to them pass the same check (a copied "<...>" is never sent).
            let said = match text(&answer, "confirmation") {
                Some(said) if grounding::refused(mind, "acknowledgement", &said, None, &private).await.is_none() => said,
                _ => match stored.description.as_deref() {
                    Some(d) if grounding::refused(mind, "acknowledgement", d, None, &private).await.is_none() => format!("Noted: {d}."),
                    _ => format!("Noted: \"{}\".", stored.name),
                },
            };
            Some(format!("{said} (rule {}: `dionysus rules` lists it)", stored.rule_id))
        }
        Err(e) => {
            // The extension refused what the model proposed (its message names the part).
            tracing::warn!(error = %e, "the proposed rule was refused");
            Some(could_not("what I made of it did not hold up"))
        }
    }
}

/// What the person is told when they asked for something scheduled and no rule came of it.
fn could_not(why: &str) -> String {
    format!("I could not set that up as a reminder ({why}); please tell me again, with a day and a time.")
}

/// The fast model's reading of a reply to a contact that the cheap cues could not judge.
pub async fn judge_reply(mind: &Mind, contact_id: uuid::Uuid, reply: &str) {
    let Ok(t) = prompt::load(&mind.work_db, "contact_feedback").await else { return };
    let contact = mind
        .work_db
        .one::<Option<String>>("SELECT to_jsonb(dionysus.contact_message($1))", &[&contact_id])
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    let system = render(&t.text, &[("contact", contact), ("reply", reply.to_string())]);
    let msgs = [Msg::system(system), Msg::user("Answer with the JSON object now.".to_string())];
    let verdict = mind
        .fast
        .json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), |v| match text(&v, "sentiment").as_deref() {
            Some("positive" | "neutral" | "negative") => Ok(v),
            _ => Err("\"sentiment\" must be positive, neutral or negative".into()),
        })
        .await;
    match verdict {
        Ok(v) => {
            let sentiment = text(&v, "sentiment").unwrap_or_default();
            let reason = text(&v, "reason");
            if let Err(e) = mind.work_db.json("SELECT to_jsonb(dionysus.contact_feedback($1, $2, $3))", &[&contact_id, &sentiment, &reason]).await {
                tracing::warn!(error = %e, "the reading of a reply was not stored");
            }
        }
        Err(e) => tracing::info!(error = %e, "a reply stays unjudged (the model could not be used)"),
    }
}
