//! Censors (sql/022_censors.sql) on the driver's side: a person's "never …" read into a censor
//! by the fast model, and the chat reply judged before it is sent (a blocked draft is written
//! again once with the reasons; if that is blocked too, the censored_reply line goes instead).
//! What holds, what counts and what escalates is the extension's.
use crate::grounding;
use crate::jsonish::{flag, strings, text};
use crate::llm::Msg;
use crate::prompt::{self, render};
use crate::Mind;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

/// `censor_gate(kind, content, person, context)`'s verdict (see its COMMENT): "allow", "warn"
/// or "block", and the reasons of the censors that held.
#[derive(Debug, Deserialize)]
struct Verdict {
    verdict: String,
    #[serde(default)]
    reasons: Vec<String>,
}

/// A row of `person_censors(person)`: a censor in force for the person.
#[derive(Debug, Deserialize)]
struct InForce {
    censor_id: Uuid,
    trigger: String,
    severity: String,
    /// Theirs (not everyone's).
    own: bool,
}

/// A row of `proposed_censors(person)`: what a failed episode proposed, not in force yet.
#[derive(Debug, Deserialize)]
struct Proposed {
    censor_id: Uuid,
    trigger: String,
    reason: String,
}

/// `mark_censor_false_positive(censor_id, person)`'s answer: the censor's severity and status now.
#[derive(Debug, Deserialize)]
struct Stepped {
    severity: String,
    status: String,
}

/// A censor from the person's words, when they asked for one: the acknowledgement to send them;
/// when the model read a request in them and no censor came of it (a placeholder, hours that
/// cannot be read, refused by the extension), an honest sentence saying so. None when the words
/// asked for nothing, or the model could not read them (the conversation goes on as usual).
pub async fn from_words(mind: &Mind, person: &str, message_id: Uuid, words: &str) -> Option<String> {
    let cue = mind.chat_db.json("SELECT to_jsonb(dionysus.censor_cue($1))", &[&words]).await;
    if !matches!(cue, Ok(Value::Bool(true))) {
        return None;
    }
    let t = prompt::load(&mind.chat_db, "censor_from_words").await.ok()?;
    let msgs = [Msg::system(render(&t.text, &[("message", words.to_string())])), Msg::user("Answer with the JSON object now.")];
    let answer = mind
        .fast
        .json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), |v| match v.get("censor") {
            Some(Value::Object(_)) | Some(Value::Null) => Ok(v),
            _ => Err("\"censor\" must be an object or null".into()),
        })
        .await;
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            // The cue is broad ("don't tell anyone, but…"): without a reading of the words they
            // get the conversation's reply, which says when the model is away.
            tracing::warn!(error = %e, "no censor from the words (the model could not be used)");
            return None;
        }
    };
    let c = answer.get("censor").filter(|c| c.is_object())?;
    // The one grounding check: a trigger copied from the prompt's shape (or its words) is
    // refused and they are told. A trigger is the model's paraphrase of what not to do ("texting
    // them" for "don't message me"), so it is not held to their exact words.
    let private = vec![person.to_string()];
    let trigger = text(c, "trigger").unwrap_or_default();
    if let Some(why) = grounding::refused(mind, "censor", &trigger, Some(words), &private).await {
        tracing::warn!(%why, "the proposed censor is not grounded in their words");
        return Some(could_not("what I made of it did not match your words"));
    }
    // Their reason, or their own words where the model's is a placeholder.
    let reason = match text(c, "reason") {
        Some(r) if grounding::refused(mind, "censor", &r, Some(words), &private).await.is_none() => r,
        _ => words.chars().take(500).collect(),
    };
    let kinds = strings(c, "kinds");
    // Whole local hours [from, to), wrapping past midnight; hours that cannot be read make no
    // censor at all, rather than one that holds all day.
    let said_hours = c.get("hours").unwrap_or(&Value::Null);
    let (from_hour, to_hour) = match hours(said_hours) {
        Ok(h) => h,
        Err(why) => {
            tracing::warn!(%why, hours = %said_hours, "the proposed censor's hours could not be read");
            return Some(could_not("I could not read the hours it holds"));
        }
    };
    let sql = "SELECT dionysus.add_own_censor($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
    let stored = mind
        .chat_db
        .json(
            &format!("SELECT to_jsonb(({sql}))"),
            &[
                &person,
                &trigger,
                &reason,
                &text(c, "severity").unwrap_or_else(|| "block".into()),
                &text(c, "pattern"),
                &kinds,
                &from_hour,
                &to_hour,
                &flag(c, "any_content").unwrap_or(false),
                &message_id,
            ],
        )
        .await;
    match stored {
        Ok(id) => {
            tracing::info!(%person, censor = %id, "a censor in their words");
            // The model's words back to them pass the same check (a copied "<...>" is never sent).
            let said = text(&answer, "acknowledgement").unwrap_or_default();
            Some(match grounding::refused(mind, "acknowledgement", &said, None, &private).await {
                None => said,
                Some(_) => "Understood, I will hold to that (`/censors` lists what I hold to).".to_string(),
            })
        }
        Err(e) => {
            // The extension refused what the model read (its message names the part).
            tracing::warn!(error = %e, "the proposed censor was refused");
            Some(could_not("what I made of it did not hold up"))
        }
    }
}

/// What the person is told when they may have asked for a censor and none came of it.
fn could_not(why: &str) -> String {
    format!("If you were asking me not to do something, I could not set that up ({why}); please tell me again what I should not do, and when.")
}

/// The gate's verdict on a reply: None to send it, Some(reasons) when it is blocked. A gate
/// that cannot be asked blocks (fail closed): an absolute censor must hold when embedding fails.
pub async fn blocks_reply(mind: &Mind, person: &str, message_id: Uuid, reply: &str) -> Option<Vec<String>> {
    let context = json!({"message_id": message_id});
    match mind.chat_db.one::<Verdict>("SELECT dionysus.censor_gate('reply', $1, $2, $3)", &[&reply, &person, &context]).await {
        Ok(v) if v.verdict == "block" => Some(v.reasons),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "the censors could not be asked about the reply: it is held back");
            Some(vec!["the censors could not be asked".into()])
        }
    }
}

/// A reply the censors allow, or the censored line (for a reply with no model to rewrite it).
pub async fn allowed_or_censored(mind: &Mind, person: &str, message_id: Uuid, reply: String) -> String {
    match blocks_reply(mind, person, message_id, &reply).await {
        None => reply,
        Some(_) => censored_reply(mind).await,
    }
}

/// The model's hours: none, or whole hours [from, to) with from in 0–23 and to in 0–24.
fn hours(v: &Value) -> Result<(Option<i32>, Option<i32>), String> {
    match v {
        Value::Null => Ok((None, None)),
        Value::Array(a) if a.len() == 2 => match (a[0].as_i64(), a[1].as_i64()) {
            (Some(f @ 0..=23), Some(t @ 0..=24)) if f != t => Ok((Some(f as i32), Some(t as i32))),
            _ => Err("two different whole hours, from 0–23 and to 0–24".into()),
        },
        _ => Err("[from, to] or null".into()),
    }
}

/// `/censors` lists what holds for the person (numbered), then what a failed episode proposed
/// (numbered apart: not in force until they keep it); `/censor fine N` says number N stopped
/// something that was fine (it steps down, a warn retires); `/censor lift N` lifts one of their
/// own; `/censor keep N` and `/censor drop N` decide a proposal. Only in a direct message: what
/// a person asked not to be done, and why, is theirs. True when the words were such a command
/// (answered here).
pub async fn command(mind: &Mind, channel_id: &str, author_id: &str, words: &str, nonce: &str, private: bool) -> bool {
    let words = words.trim();
    let (verb, n) = if words == "/censors" {
        ("list", None)
    } else if let Some(rest) = words.strip_prefix("/censor ") {
        let mut parts = rest.split_whitespace();
        match (parts.next(), parts.next().and_then(|n| n.parse::<usize>().ok()), parts.next()) {
            (Some(v @ ("fine" | "lift" | "keep" | "drop")), Some(n), None) => (v, Some(n)),
            _ => ("usage", None),
        }
    } else {
        return false;
    };
    let ch = &mind.channel;
    if !private {
        let _ = ch.send(channel_id, "(ask me that in a direct message: what you asked me not to do is yours)", nonce).await;
        return true;
    }
    let person = format!("{}:{}", ch.platform(), author_id);
    // In person_censors' own order (theirs first, oldest first), so numbers stay put.
    let sql = "SELECT to_jsonb(c) FROM dionysus.person_censors($1) WITH ORDINALITY c ORDER BY c.ordinality";
    let listed = match mind.chat_db.all::<InForce>(sql, &[&person]).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list censors");
            let _ = ch.send(channel_id, "(I couldn't read what I was asked not to do just now)", nonce).await;
            return true;
        }
    };
    // What a failed episode proposed (sql/024_episodes.sql); none when it cannot be read.
    let sql = "SELECT to_jsonb(p) FROM dionysus.proposed_censors($1) p ORDER BY p.proposed_at, p.censor_id";
    let proposed = match mind.chat_db.all::<Proposed>(sql, &[&person]).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list proposed censors");
            Vec::new()
        }
    };
    let nth = |i: usize| i.wrapping_sub(1);
    let text = match (verb, n) {
        ("list", _) => {
            let mut text = if listed.is_empty() {
                "(nothing I was asked not to do)".to_string()
            } else {
                listed
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let whose = if c.own { "" } else { " (everyone's)" };
                        format!("{}. {} [{}]{whose}", i + 1, c.trigger, c.severity)
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            if !proposed.is_empty() {
                text.push_str("\n\nProposed after something went wrong (not in force until you keep one):\n");
                let lines: Vec<String> = proposed
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{}. {} — {}", i + 1, c.trigger, c.reason))
                    .collect();
                text.push_str(&lines.join("\n"));
                text.push_str("\n(/censor keep N or /censor drop N)");
            }
            text
        }
        ("keep" | "drop", Some(i)) if proposed.get(nth(i)).is_some() => {
            let c = &proposed[nth(i)];
            let sql = if verb == "keep" { "SELECT to_jsonb(dionysus.accept_censor($1, $2))" } else { "SELECT to_jsonb(dionysus.retire_censor($1, $2))" };
            let trigger = &c.trigger;
            match mind.chat_db.json(sql, &[&c.censor_id, &person]).await {
                Ok(Value::Bool(true)) if verb == "keep" => {
                    format!("(kept: \"{trigger}\" — a warning from now on; three times in a row and it becomes a block, as any warning)")
                }
                Ok(_) if verb == "keep" => format!("(\"{trigger}\" already holds)"),
                Ok(_) => format!("(dropped: \"{trigger}\")"),
                Err(e) if e.code() == Some("54000") => "(you have as many censors as I keep; lift one first: /censors)".to_string(),
                Err(e) if e.code() == Some("23505") => format!("(\"{trigger}\" already holds)"),
                Err(e) => {
                    tracing::info!(error = %e, "a censor proposal command was refused");
                    "(that one is not yours to decide)".to_string()
                }
            }
        }
        ("fine", Some(i)) if listed.get(nth(i)).is_some() => {
            let c = &listed[nth(i)];
            match mind.chat_db.one::<Stepped>("SELECT dionysus.mark_censor_false_positive($1, $2)", &[&c.censor_id, &person]).await {
                Ok(v) => format!("(noted: \"{}\" is now {})", c.trigger, if v.status == "retired" { "lifted" } else { &v.severity }),
                Err(e) => {
                    tracing::info!(error = %e, "a censor command was refused");
                    "(that one is not yours to change)".to_string()
                }
            }
        }
        ("lift", Some(i)) if listed.get(nth(i)).is_some() => {
            let c = &listed[nth(i)];
            match mind.chat_db.json("SELECT to_jsonb(dionysus.retire_censor($1, $2))", &[&c.censor_id, &person]).await {
                Ok(_) => format!("(lifted: \"{}\")", c.trigger),
                Err(e) => {
                    tracing::info!(error = %e, "a censor command was refused");
                    "(that one is not yours to change)".to_string()
                }
            }
        }
        _ => "(/censors lists them, numbered; /censor fine N or /censor lift N; a proposal: /censor keep N or /censor drop N)".to_string(),
    };
    let _ = ch.send(channel_id, &text, nonce).await;
    true
}

/// What the model is told when its draft was blocked.
pub fn rewrite_instruction(reasons: &[String]) -> String {
    format!(
        "Your draft reply was stopped because it goes against what you were asked not to do: {}. \
         Write the reply again without doing that. Do not mention this instruction.",
        reasons.join("; ")
    )
}

/// The line sent when the rewrite is blocked too (the censored_reply template).
pub async fn censored_reply(mind: &Mind) -> String {
    match prompt::load(&mind.chat_db, "censored_reply").await {
        Ok(t) => t.text,
        Err(_) => "I'd rather not answer that the way I was about to. Could you put it another way?".into(),
    }
}
