//! What each queued action does: the heartbeat's actions that need language or the network
//! (reflect, maintain, brainstorm_goals, inquire, synthesize, reach_out_user) and the worker's
//! language jobs (extract_message, reindex_message, summarize_episode, condense_memory,
//! extract_concepts, heartbeat_censors, dream). Each builds its prompt from what the extension
//! gives it and returns an [`Outcome`]; the queue ([`crate::work`]) claims and settles. No memory logic here: results go back through complete_work.
use crate::db::{Db, DbError};
use crate::jsonish::{count, items, list, number, strings, text};
use crate::llm::{Llm, LlmError, Msg};
use crate::prompt::{self, bullets, contents, render};
use crate::{search, web, Mind};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

/// A claimed work item: what [`execute`] performs and [`crate::work`] settles.
#[derive(Clone, Debug)]
pub struct WorkItem {
    pub id: Uuid,
    pub action: String,
    pub params: Value,
    pub heartbeat_id: Option<Uuid>,
    /// The claim's fencing token: settling needs it, so a driver whose lease lapsed and whose
    /// item was claimed again cannot settle it.
    pub lease: Option<Uuid>,
}

#[derive(Debug, Clone)]
pub enum Outcome {
    Done(Value),
    /// The item itself went wrong; retry (with back-off) or give up.
    Fail(String, bool),
    /// The driver could not work on it now (LLM down, shutting down): no attempt spent.
    Release(String, i32),
}

pub(crate) fn from_llm(e: LlmError) -> Outcome {
    if e.unavailable() {
        Outcome::Release(format!("LLM {e}"), 60)
    } else {
        Outcome::Fail(format!("LLM {e}"), true)
    }
}

pub(crate) fn from_db(e: DbError) -> Outcome {
    match e {
        DbError::Down(m) => Outcome::Release(format!("database {m}"), 30),
        other => Outcome::Fail(other.to_string(), false),
    }
}


/// Performs one item.
pub async fn execute(mind: &Mind, item: &WorkItem) -> Outcome {
    tracing::info!(action = %item.action, id = %item.id, "working");
    let p = &item.params;
    let r = match item.action.as_str() {
        "extract_message" => extract_message(mind, p, true).await,
        // A turn read again by `dionysus reindex`: the same reading, with today's template.
        "reindex_message" => extract_message(mind, p, false).await,
        "summarize_episode" => summarize_episode(mind, p).await,
        "condense_memory" => condense_memory(mind, p).await,
        "heartbeat_censors" => heartbeat_censors(mind, item.id).await,
        "extract_concepts" => return extract_concepts(mind, std::slice::from_ref(item)).await.pop().unwrap(),
        "reflect" => reflect(mind, p).await,
        "maintain" => maintain(mind, p, item.id).await,
        "brainstorm_goals" => brainstorm_goals(mind, p).await,
        "inquire_shallow" | "inquire_deep" => inquire(mind, p, item.action == "inquire_deep").await,
        "synthesize" => synthesize(mind, p).await,
        "reach_out_user" => reach_out(mind, p).await,
        "dream" => dream(mind, p).await,
        other => Err(Outcome::Fail(format!("this driver cannot perform \"{other}\""), false)),
    };
    r.unwrap_or_else(|o| o)
}

type Step<T> = Result<T, Outcome>;

async fn template(db: &Db, key: &str) -> Step<prompt::Template> {
    prompt::load(db, key).await.map_err(from_db)
}

async fn ask(llm: &Llm, t: &prompt::Template, system: String, user: Option<String>, shape: impl Fn(Value) -> Result<Value, String>) -> Step<Value> {
    let mut msgs = vec![Msg::system(system)];
    msgs.push(Msg::user(user.unwrap_or_else(|| "Answer with the JSON object now.".into())));
    llm.json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), shape).await.map_err(from_llm)
}

async fn json_of(db: &Db, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> Step<Value> {
    db.json(sql, params).await.map_err(from_db)
}

/// Memories shown to the model: the prompt lines, and their ids (the result's `basis`, from
/// which the extension learns how private what the model writes is). Web-derived memories
/// are marked as unverified quotes, never as the agent's own knowledge.
#[derive(Default)]
struct Shown {
    lines: Vec<String>,
    basis: Vec<String>,
}

impl Shown {
    fn from(v: &Value) -> Shown {
        Shown::clipped(v, 500)
    }

    /// Each memory's content up to `max_chars`.
    fn clipped(v: &Value, max_chars: usize) -> Shown {
        let mut s = Shown::default();
        for m in v.as_array().into_iter().flatten() {
            let (Some(id), Some(c)) = (m["id"].as_str(), m["content"].as_str()) else { continue };
            if s.basis.iter().any(|b| b == id) {
                continue;
            }
            let c: String = c.chars().take(max_chars).collect();
            s.lines.push(if m["source"] == "web" { format!("[from the web, unverified, quoted] {c}") } else { c });
            s.basis.push(id.to_string());
        }
        s
    }
}

/// Recalled memories for a query; with `person`, only what that person may see.
async fn recalled(db: &Db, query: &str, k: i32, person: Option<&str>) -> Step<Shown> {
    Ok(Shown::from(&recalled_json(db, query, k, person).await?))
}

/// What recall finds, best first, with each memory's shorter levels (for a budget).
async fn recalled_json(db: &Db, query: &str, k: i32, person: Option<&str>) -> Step<Value> {
    json_of(
        db,
        "SELECT coalesce(jsonb_agg(to_jsonb(m) - 'n' ORDER BY m.n), '[]') \
         FROM dionysus.memory_levels(ARRAY(SELECT r.memory_id FROM dionysus.recall($1, $2, person => $3) r ORDER BY r.score DESC)) \
              WITH ORDINALITY m(id, content, source, summary, micro, n)",
        &[&query, &k, &person],
    )
    .await
}

async fn recent(db: &Db, k: i32) -> Step<Shown> {
    Ok(Shown::from(&recent_json(db, k).await?))
}

/// The newest memories, with their shorter levels.
async fn recent_json(db: &Db, k: i32) -> Step<Value> {
    json_of(
        db,
        "SELECT coalesce(jsonb_agg(to_jsonb(m) - 'n' ORDER BY m.n), '[]') \
         FROM dionysus.memory_levels(ARRAY(SELECT r.memory_id FROM dionysus.recall_recent($1) r ORDER BY r.created_at DESC, r.memory_id)) \
              WITH ORDINALITY m(id, content, source, summary, micro, n)",
        &[&k],
    )
    .await
}

/// Memories within a task's token budget (027): each at the richest of its levels that fits,
/// in their order; what does not fit is not shown (nor in the basis).
async fn within_budget(db: &Db, task: &str, memories: Value) -> Step<Shown> {
    let fitted = json_of(db, "SELECT dionysus.fit_to_budget($1, jsonb_build_object('memories', $2::jsonb)) -> 'memories'", &[&task, &memories]).await?;
    Ok(Shown::clipped(&fitted, 8000))
}

/// Two lists of memories as one, the first's first, each memory once.
fn joined(mut a: Value, b: Value) -> Value {
    if let (Some(x), Value::Array(y)) = (a.as_array_mut(), b) {
        for m in y {
            if !x.iter().any(|k| k["id"] == m["id"]) {
                x.push(m);
            }
        }
    }
    a
}

fn uuid_param(p: &Value, key: &str) -> Step<Uuid> {
    p.get(key)
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| Outcome::Fail(format!("params.{key} is missing or not a uuid"), false))
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

// ---------------------------------------------------------------------------------------
// Conversation extraction: after the reply, by the fast model
// ---------------------------------------------------------------------------------------

/// Normalises an extraction: keeps the well-formed items, drops the rest.
pub fn extraction_shape(v: Value) -> Result<Value, String> {
    let facts: Vec<Value> = list(&v, "facts")?
        .iter()
        .filter_map(|f| {
            let content = text(f, "content")?;
            Some(json!({"content": clip(&content, 1000), "subject": text(f, "subject").map(|s| clip(&s, 200)),
                        "category": text(f, "category").map(|s| clip(&s, 60)),
                        "confidence": number(f, "confidence", 0.0, 1.0).unwrap_or(0.8)}))
        })
        .take(10)
        .collect();
    let triples: Vec<Value> = list(&v, "triples")?
        .iter()
        .filter_map(|t| {
            Some(json!({"subject": clip(&text(t, "subject")?, 200), "predicate": clip(&text(t, "predicate")?, 100),
                        "object": clip(&text(t, "object")?, 200), "confidence": number(t, "confidence", 0.0, 1.0).unwrap_or(0.8)}))
        })
        .take(10)
        .collect();
    // The person's objectives: optional, so a template without them still works.
    let objectives: Vec<Value> = items(&v, "objectives")
        .iter()
        .filter_map(|o| {
            let status = text(o, "status").filter(|s| matches!(s.as_str(), "pending" | "completed" | "archived"));
            Some(json!({"description": clip(&text(o, "description")?, 1000), "saliency": number(o, "saliency", 0.0, 1.0).unwrap_or(0.5), "status": status}))
        })
        .take(5)
        .collect();
    let goals: Vec<Value> = list(&v, "goals")?
        .iter()
        .filter_map(|g| {
            Some(json!({"title": clip(&text(g, "title")?, 200), "description": text(g, "description").map(|s| clip(&s, 1000)),
                        "source": "user_request"}))
        })
        .take(3)
        .collect();
    let (people, relations) = people_shape(&v);
    let mut out = json!({"facts": facts, "triples": triples, "goals": goals, "objectives": objectives, "people": people, "relations": relations});
    // The session's focus and threads (working memory): optional, only what is well formed.
    let wordy = |s: &str| s.chars().any(char::is_alphanumeric);
    if let Some(focus) = text(&v, "focus").filter(|f| wordy(f)) {
        out["focus"] = json!(clip(&focus, 200));
    }
    let threads = |key: &str| -> Vec<Value> {
        v.get("threads").map_or(&[][..], |t| items(t, key)).iter().filter_map(Value::as_str).map(str::trim).filter(|t| wordy(t)).map(|t| json!(clip(t, 300))).take(5).collect()
    };
    let (opened, closed) = (threads("opened"), threads("closed"));
    if !opened.is_empty() || !closed.is_empty() {
        out["threads"] = json!({"opened": opened, "closed": closed});
    }
    Ok(out)
}

/// The people a turn speaks of and how they relate (sql/023_people.sql): optional, so an older
/// template still works; an item the model got wrong is dropped, never the whole extraction.
fn people_shape(v: &Value) -> (Vec<Value>, Vec<Value>) {
    let strings = |x: &Value, key: &str, len: usize, n: usize| -> Vec<String> {
        items(x, key).iter().filter_map(|s| s.as_str()).map(str::trim).filter(|s| !s.is_empty()).map(|s| clip(s, len)).take(n).collect()
    };
    let myself = |s: &str| matches!(s.trim().to_lowercase().as_str(), "user" | "me" | "i" | "myself" | "you" | "yourself" | "the user");
    let wordy = |s: &str| s.chars().any(char::is_alphanumeric);
    let people = items(v, "people")
        .iter()
        .filter_map(|p| {
            let name = text(p, "name").filter(|n| !myself(n) && wordy(n))?;
            Some(json!({"name": clip(&name, 200), "aliases": strings(p, "aliases", 200, 5), "same_as": text(p, "same_as").map(|s| clip(&s, 200)),
                        "relation": text(p, "relation").map(|s| clip(&s, 60)), "feeling": number(p, "feeling", -1.0, 1.0),
                        "traits": strings(p, "traits", 80, 8), "topics": strings(p, "topics", 80, 8),
                        "confidence": number(p, "confidence", 0.0, 1.0).unwrap_or(0.7)}))
        })
        .take(10)
        .collect();
    let relations = items(v, "relations")
        .iter()
        .filter_map(|r| {
            let source = text(r, "source").filter(|s| s == "said" || s == "inferred").unwrap_or_else(|| "inferred".into());
            let end = |key: &str| text(r, key).filter(|n| !myself(n) && wordy(n)).map(|n| clip(&n, 200));
            Some(json!({"a": end("a")?, "b": end("b")?, "kind": clip(&text(r, "kind").filter(|k| wordy(k))?, 60),
                        "sentiment": number(r, "sentiment", -1.0, 1.0).unwrap_or(0.0), "source": source,
                        "confidence": number(r, "confidence", 0.0, 1.0)}))
        })
        .take(10)
        .collect();
    (people, relations)
}

async fn extract_message(mind: &Mind, p: &Value, mirrored: bool) -> Step<Outcome> {
    let message = uuid_param(p, "message_id")?;
    let ctx: crate::api::ChatContext =
        mind.work_db.one("SELECT dionysus.chat_context($1, 0, 6, use_archetype => false)", &[&message]).await.map_err(from_db)?;
    // Theirs when the turn is a person's (their own version of the extraction, if they approved one).
    let t = match text(p, "person").as_deref() {
        Some(person) => prompt::load_for(&mind.work_db, "extract_message", person).await.map_err(from_db)?,
        None => template(&mind.work_db, "extract_message").await?,
    };
    let system = render(
        &t.text,
        &[
            ("turns", prompt::transcript(&ctx.recent_turns)),
            ("threads", prompt::threads(&ctx.working_memory, "(none)")),
            ("message", ctx.message.map(|m| m.content).unwrap_or_default()),
        ],
    );
    let shown = mind.channel.dream_channel().filter(|_| mirrored).map(|d| (format!("[system]\n{system}"), d.owner));
    let started = std::time::Instant::now();
    let mut v = ask(&mind.fast, &t, system, None, extraction_shape).await?;
    if let Some((prompt, owner)) = shown {
        // For the dream channel: work::settle takes it out of the result and records it.
        v["mirror"] = json!({"prompt": prompt, "metrics": {"latency_ms": started.elapsed().as_millis() as u64, "model": mind.fast.role.model},
                             "platform": mind.channel.platform(), "owner": owner});
    }
    let counts = format!(
        "{} facts, {} triples, {} goals, {} objectives, {} people",
        count(&v, "facts"),
        count(&v, "triples"),
        count(&v, "goals"),
        count(&v, "objectives"),
        count(&v, "people")
    );
    v["summary"] = json!(format!("extracted {counts}"));
    Ok(Outcome::Done(v))
}

// ---------------------------------------------------------------------------------------
// The worker's language jobs: episode summaries, shorter levels, censors, concepts
// ---------------------------------------------------------------------------------------

async fn summarize_episode(mind: &Mind, p: &Value) -> Step<Outcome> {
    let episode = uuid_param(p, "episode_id")?;
    let transcript = json_of(&mind.work_db, "SELECT dionysus.episode_transcript($1)", &[&episode]).await?;
    if transcript.as_array().is_none_or(Vec::is_empty) {
        return Ok(Outcome::Done(json!({"summary": "empty episode: nothing to summarise"})));
    }
    let t = template(&mind.work_db, "summarize_episode").await?;
    let lines = prompt::transcript(&transcript);
    let system = render(&t.text, &[("transcript", clip(&lines, 12_000))]);
    let v = ask(&mind.fast, &t, system, None, episode_shape).await?;
    let mut done = json!({"episode_summary": v["summary"], "summary": "episode summarised"});
    if !v["episode"].is_null() {
        done["episode"] = v["episode"].clone();
        done["summary"] = json!(format!("episode summarised: {}", v["episode"]["outcome"].as_str().unwrap_or("")));
    }
    Ok(Outcome::Done(done))
}

/// An episode's summary and, when the template asks (sql/024_episodes.sql), how it went: an
/// outcome the model got wrong drops the judgement, never the summary.
pub fn episode_shape(v: Value) -> Result<Value, String> {
    let summary = text(&v, "summary").ok_or("\"summary\" must be a non-empty string")?;
    let outcome = text(&v, "outcome").map(|o| o.to_lowercase()).filter(|o| matches!(o.as_str(), "success" | "failure" | "mixed" | "neutral"));
    let strings = |key: &str, len: usize, n: usize| -> Vec<String> {
        items(&v, key).iter().filter_map(|s| s.as_str()).map(str::trim).filter(|s| !s.is_empty()).map(|s| clip(s, len)).take(n).collect()
    };
    let episode = outcome.map(|o| {
        let candidates: Vec<Value> = if o == "failure" {
            items(&v, "censor_candidates")
                .iter()
                .filter_map(|c| Some(json!({"trigger": clip(&text(c, "trigger")?, 500), "reason": clip(&text(c, "reason")?, 500)})))
                .take(3)
                .collect()
        } else {
            Vec::new()
        };
        json!({"outcome": o, "surprise": number(&v, "surprise", 0.0, 1.0), "lessons": strings("lessons", 300, 3), "censor_candidates": candidates})
    });
    Ok(json!({"summary": summary, "episode": episode}))
}

/// A fading memory's shorter forms (sql/021_decay.sql): its summary and micro line, from its
/// own words only. The model's answer is clipped to the levels' limits, never trusted to keep them.
async fn condense_memory(mind: &Mind, p: &Value) -> Step<Outcome> {
    let memory = uuid_param(p, "memory_id")?;
    let source = json_of(&mind.work_db, "SELECT dionysus_internal.condense_source($1)", &[&memory]).await?;
    let Some(content) = text(&source, "content") else {
        return Ok(Outcome::Done(json!({"summary": "memory no longer exists"})));
    };
    let t = template(&mind.work_db, "condense_memory").await?;
    let system = render(&t.text, &[("memory", clip(&content, 8_000))]);
    let v = ask(&mind.fast, &t, system, None, |v| match (text(&v, "summary"), text(&v, "micro")) {
        (Some(s), Some(m)) => Ok(json!({"summary": clip(&s, 2_000), "micro": clip(&m, 400)})),
        _ => Err("\"summary\" and \"micro\" must be non-empty strings".into()),
    })
    .await?;
    Ok(Outcome::Done(json!({"levels": v, "summary": "memory condensed"})))
}

/// A heartbeat's reach-out the person found unwelcome: what not to do again, as censor
/// candidates the person will be asked to keep (028). The model sees only the message they got
/// and their words about it.
async fn heartbeat_censors(mind: &Mind, work_id: Uuid) -> Step<Outcome> {
    let source = json_of(&mind.work_db, "SELECT dionysus_internal.heartbeat_lesson_source($1)", &[&work_id]).await?;
    let (Some(message), Some(feedback)) = (text(&source, "message"), text(&source, "feedback")) else {
        return Ok(Outcome::Done(json!({"summary": "the feedback was taken back"})));
    };
    let t = template(&mind.work_db, "heartbeat_censors").await?;
    let system = render(&t.text, &[("message", clip(&message, 4_000)), ("feedback", clip(&feedback, 4_000))]);
    let v = ask(&mind.fast, &t, system, None, |v| {
        let candidates: Vec<Value> = list(&v, "censor_candidates")?
            .iter()
            .filter_map(|c| Some(json!({"trigger": clip(&text(c, "trigger")?, 300), "reason": clip(&text(c, "reason")?, 500)})))
            .take(3)
            .collect();
        Ok(json!(candidates))
    })
    .await?;
    let n = v.as_array().map_or(0, Vec::len);
    Ok(Outcome::Done(json!({"censor_candidates": v, "summary": format!("{n} censor candidates from an unwelcome reach-out")})))
}

pub(crate) async fn extract_concepts(mind: &Mind, batch: &[WorkItem]) -> Vec<Outcome> {
    let ids: Vec<Uuid> = batch.iter().filter_map(|i| uuid_param(&i.params, "memory_id").ok()).collect();
    // Each memory's words and its circle (memory_circles): one model call sees one circle
    // only, so a concept named for one person's memory is never drawn from another's words.
    let mems = match mind
        .work_db
        .json(
            "SELECT coalesce(jsonb_object_agg(m.id::text, jsonb_build_object('content', left(m.content, 600), 'circle', to_jsonb(m.circle))), '{}') \
               FROM dionysus.memory_circles($1) m",
            &[&ids],
        )
        .await
    {
        Ok(v) => v,
        Err(e) => return batch.iter().map(|_| from_db(e.clone())).collect(),
    };
    // One call for the first memory's circle (the batch's oldest item); the others' items are
    // handed back, to be asked in a call of their own next (one call a batch, within its lease).
    let circle = ids.iter().find_map(|id| mems.get(id.to_string())).map(|m| m["circle"].clone());
    let members: Vec<Uuid> = ids.iter().filter(|id| mems.get(id.to_string()).map(|m| &m["circle"]) == circle.as_ref()).copied().collect();
    let answer = if members.is_empty() {
        Ok(json!({"memories": []}))
    } else {
        match template(&mind.work_db, "extract_concepts").await {
            Ok(t) => {
                let listed: Vec<String> =
                    members.iter().map(|id| format!("[{id}] {}", mems[id.to_string()]["content"].as_str().unwrap_or_default())).collect();
                let system = render(&t.text, &[("memories", listed.join("\n"))]);
                ask(&mind.fast, &t, system, None, |v| list(&v, "memories").map(|_| v.clone())).await
            }
            Err(o) => Err(o),
        }
    };
    batch
        .iter()
        .map(|item| {
            let Ok(id) = uuid_param(&item.params, "memory_id") else {
                return Outcome::Fail("params.memory_id is missing".into(), false);
            };
            if mems.get(id.to_string()).is_none() {
                return Outcome::Done(json!({"summary": "memory no longer exists"}));
            }
            if !members.contains(&id) {
                return Outcome::Release("another circle's memories: asked in a call of their own".into(), 0);
            }
            let answer = match &answer {
                Ok(a) => a,
                // The call failed: every item of its circle shares its fate.
                Err(o) => return o.clone(),
            };
            let concepts: Vec<Value> = answer["memories"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["id"].as_str().map(|s| s.trim_matches(['[', ']', ' '])) == Some(&id.to_string()))
                .flat_map(|m| m["concepts"].as_array().cloned().unwrap_or_default())
                .filter_map(|c| c.as_str().map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty() && s.chars().count() <= 60))
                .take(4)
                .map(|name| json!({"memory_id": id, "name": name}))
                .collect();
            let n = concepts.len();
            Outcome::Done(json!({"concepts": concepts, "summary": format!("{n} concepts")}))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// The nightly dream (sql/017_alignment.sql decides what a proposal may change)
// ---------------------------------------------------------------------------------------

/// Keeps the proposals that have the shape of one (the extension checks what they say).
pub fn dream_shape(v: Value) -> Result<Value, String> {
    let proposals: Vec<Value> = list(&v, "proposals")?
        .iter()
        .filter(|p| text(p, "kind").is_some() && text(p, "target").is_some() && p["proposal"].is_object() && text(p, "rationale").is_some())
        .take(5)
        .cloned()
        .collect();
    Ok(json!({"proposals": proposals, "note": text(&v, "note").unwrap_or_default()}))
}

/// The dream's prompt from its evidence; the answer goes back through complete_work.
async fn dream(mind: &Mind, p: &Value) -> Step<Outcome> {
    let dream_id = uuid_param(p, "dream_id")?;
    let evidence = json_of(&mind.work_db, "SELECT dionysus.dream_evidence($1)", &[&dream_id]).await?;
    let t = template(&mind.work_db, "dream").await?;
    let system = render(&t.text, &[("evidence", serde_json::to_string_pretty(&evidence).unwrap_or_default())]);
    let msgs = [Msg::system(system), Msg::user("Answer with the JSON object now.")];
    let mut v = mind.smart.json_with_schema(&t.key, &msgs, t.temperature, t.result_schema.as_ref(), dream_shape).await.map_err(from_llm)?;
    let n = count(&v, "proposals");
    if crate::mirror::enabled(mind) {
        // record_dream posts the proposals to the dream channel with the prompt behind them.
        v["mirror"] = json!({"prompt": crate::mirror::prompt_text(&msgs)});
    }
    Ok(Outcome::Done(json!({"dream": v, "summary": format!("dreamt: {n} proposals")})))
}

// ---------------------------------------------------------------------------------------
// Heartbeat actions: what the heartbeat decided that needs a model or the web
// ---------------------------------------------------------------------------------------

/// `self_model()`: the agent's identity aspects and worldview beliefs, each with its confidence.
#[derive(Debug, Deserialize)]
struct SelfModel {
    identity: Vec<String>,
    worldview: Vec<String>,
}

async fn self_model(db: &Db) -> Step<(String, String)> {
    let v: SelfModel = db.one("SELECT dionysus.self_model()", &[]).await.map_err(from_db)?;
    Ok((bullets(v.identity, "(not yet formed)"), bullets(v.worldview, "(not yet formed)")))
}

async fn reflect(mind: &Mind, p: &Value) -> Step<Outcome> {
    let focus = text(p, "focus");
    // Reflection has the largest budget (027's 'reflection'): more to look at, each memory at
    // the richest level that fits.
    let mut found = recent_json(&mind.work_db, 20).await?;
    if let Some(f) = &focus {
        found = joined(found, recalled_json(&mind.work_db, f, 12, None).await?);
    }
    let mems = within_budget(&mind.work_db, "reflection", found).await?;
    let (identity, worldview) = self_model(&mind.work_db).await?;
    let t = template(&mind.work_db, "reflect").await?;
    let system = render(
        &t.text,
        &[
            ("focus", focus.as_ref().map(|f| format!(" (focus: {f})")).unwrap_or_default()),
            ("memories", bullets(mems.lines, "(nothing yet)")),
            ("identity", identity),
            ("worldview", worldview),
        ],
    );
    let v = ask(&mind.smart, &t, system, None, |v| {
        let insights: Vec<Value> = list(&v, "insights")?
            .iter()
            .filter_map(|i| i.as_str().or_else(|| i["content"].as_str()).map(str::trim).filter(|s| !s.is_empty()).map(|s| clip(s, 1000)))
            .take(5)
            .map(|s| json!({"content": s, "type": "semantic", "importance": 0.6}))
            .collect();
        let identity: Vec<Value> = list(&v, "identity")?
            .iter()
            .filter_map(|a| Some(json!({"aspect": clip(&text(a, "aspect")?, 300), "confidence": number(a, "confidence", 0.0, 1.0).unwrap_or(0.5)})))
            .take(3)
            .collect();
        let worldview: Vec<Value> = list(&v, "worldview")?
            .iter()
            .filter_map(|b| Some(json!({"belief": clip(&text(b, "belief")?, 300), "confidence": number(b, "confidence", 0.0, 1.0).unwrap_or(0.5)})))
            .take(3)
            .collect();
        Ok(json!({"memories": insights, "identity": identity, "worldview": worldview}))
    })
    .await?;
    let mut v = v;
    v["summary"] = json!(format!("{} insights", count(&v, "memories")));
    v["basis"] = json!(mems.basis);
    Ok(Outcome::Done(v))
}

/// One belief, identity aspect or memory, loaded with its evidence by the extension;
/// the model judges whether it still holds; complete_work applies the verdict and records it.
async fn maintain(mind: &Mind, p: &Value, _work: Uuid) -> Step<Outcome> {
    let memory_id = p.get("memory_id").and_then(Value::as_str).and_then(|s| Uuid::parse_str(s).ok());
    let target = json_of(&mind.work_db, "SELECT dionysus.maintain_target($1, $2)", &[&text(p, "target"), &memory_id]).await?;
    if target.is_null() {
        return Ok(Outcome::Done(json!({"summary": "nothing to maintain"})));
    }
    let evidence = Shown::from(&target["evidence"]);
    let t = template(&mind.work_db, "maintain").await?;
    let system = render(
        &t.text,
        &[
            ("kind", target["kind"].as_str().unwrap_or("memory").to_string()),
            ("content", target["content"].as_str().unwrap_or("").to_string()),
            ("confidence", target["confidence"].to_string()),
            ("evidence", bullets(evidence.lines, "(nothing else is known about it)")),
        ],
    );
    let v = ask(&mind.fast, &t, system, None, |v| {
        let verdict = text(&v, "verdict").map(|s| s.to_ascii_lowercase()).filter(|s| ["keep", "update", "retire"].contains(&s.as_str()));
        let verdict = verdict.ok_or("\"verdict\" must be keep, update or retire")?;
        Ok(json!({
            "verdict": verdict,
            "confidence": number(&v, "confidence", 0.0, 1.0),
            "content": text(&v, "content").map(|c| clip(&c, 2000)),
            "reason": text(&v, "reason").map(|r| clip(&r, 1000)),
        }))
    })
    .await?;
    let mut change = v.clone();
    change["kind"] = target["kind"].clone();
    change["id"] = target["id"].clone();
    if change["confidence"].is_null() {
        change.as_object_mut().map(|o| o.remove("confidence"));
    }
    let summary = format!("{} the {} \"{}\"", v["verdict"].as_str().unwrap_or("kept"), target["kind"].as_str().unwrap_or("memory"),
        clip(target["content"].as_str().unwrap_or(""), 80));
    Ok(Outcome::Done(json!({"maintenance": change, "basis": evidence.basis, "summary": summary})))
}

async fn brainstorm_goals(mind: &Mind, p: &Value) -> Step<Outcome> {
    let focus = text(p, "focus");
    let goals = json_of(
        &mind.work_db,
        "SELECT coalesce(jsonb_agg(jsonb_build_object('content', g.title || ' [' || g.priority || ']')), '[]') FROM dionysus.open_goals() g",
        &[],
    )
    .await?;
    let mems = recent(&mind.work_db, 8).await?;
    let t = template(&mind.work_db, "brainstorm_goals").await?;
    let system = render(
        &t.text,
        &[
            ("focus", focus.map(|f| format!(" (focus: {f})")).unwrap_or_default()),
            ("goals", bullets(contents(&goals, 200), "(none)")),
            ("memories", bullets(mems.lines, "(nothing yet)")),
        ],
    );
    let v = ask(&mind.smart, &t, system, None, |v| {
        let goals: Vec<Value> = list(&v, "goals")?
            .iter()
            .filter_map(|g| {
                let title = g.as_str().map(str::to_string).or_else(|| text(g, "title"))?;
                Some(json!({"title": clip(title.trim(), 200), "description": text(g, "description").map(|d| clip(&d, 1000)), "source": "curiosity"}))
            })
            .take(5)
            .collect();
        if goals.len() < 2 {
            return Err(format!("brainstorm_goals needs 2 to 5 goals, got {}", goals.len()));
        }
        Ok(json!({"goals": goals}))
    })
    .await?;
    let mut v = v;
    v["summary"] = json!(format!("{} goals proposed", count(&v, "goals")));
    v["basis"] = json!(mems.basis);
    Ok(Outcome::Done(v))
}

/// An inquiry. Shallow: one search, its top 2 pages, an answer. Deep: 3–5 searches the fast model
/// plans, up to 8 distinct pages, related memories recalled, a multi-source synthesis, and an
/// evaluation of how far it can be trusted; the answer is stored with that confidence (the
/// extension keeps web-derived memories at low trust whatever it says).
async fn inquire(mind: &Mind, p: &Value, deep: bool) -> Step<Outcome> {
    let Some(url) = mind.config.search_url.clone() else {
        return Ok(Outcome::Fail("no search endpoint configured (DIONYSUS_SEARCH_URL)".into(), false));
    };
    let question = text(p, "question").ok_or_else(|| Outcome::Fail("params.question is missing".into(), false))?;
    let queries = if deep { plan_queries(mind, &question).await } else { vec![question.clone()] };
    let mut results: Vec<search::Hit> = Vec::new();
    for q in &queries {
        match search::search(&mind.web, &url, q, 5).await {
            Ok(hits) => {
                for h in hits {
                    if !results.iter().any(|r| r.url == h.url) {
                        results.push(h);
                    }
                }
            }
            Err(e) if results.is_empty() && q == queries.last().unwrap() => return Err(Outcome::Fail(format!("search failed: {e}"), true)),
            Err(e) => tracing::info!(error = %e, query = %q, "one search failed"),
        }
    }
    // Everything the web said is quoted inside fences, so a page cannot pose as instructions.
    let mut lines: Vec<String> = results.iter().map(|r| web::fence(&r.url, &format!("{}\n{}", r.title, r.snippet))).collect();
    let mut pages = 0;
    for r in results.iter().take(if deep { 8 } else { 2 }) {
        match search::fetch_text(&mind.web, &r.url, 3000).await {
            Ok(page) => {
                lines.push(web::fence(&r.url, &page));
                pages += 1;
            }
            Err(e) => tracing::info!(error = %e, "page not read"),
        }
    }
    let known = if deep { recalled(&mind.work_db, &question, 3, None).await? } else { Shown::default() };
    if !known.lines.is_empty() {
        lines.push(format!("What you already remember about it:\n{}", bullets(known.lines.clone(), "")));
    }
    let t = template(&mind.work_db, "inquire").await?;
    let system = format!("{}\n\n{}", render(&t.text, &[("question", question.clone()), ("results", bullets(lines, "(no results)"))]), web::FENCE_RULE);
    let v = ask(&mind.smart, &t, system, None, |v| {
        let answer = text(&v, "answer").ok_or("\"answer\" must be a non-empty string")?;
        let sources: Vec<String> = list(&v, "sources")?.iter().filter_map(|s| s.as_str().map(str::to_string)).take(10).collect();
        Ok(json!({"answer": answer, "sources": sources}))
    })
    .await?;
    let sources = strings(&v, "sources").unwrap_or_default().join(", ");
    let answer = text(&v, "answer").unwrap_or_default();
    let answer = answer.as_str();
    let (confidence, caveats) = if deep { evaluate(mind, &question, answer, &sources).await } else { (0.5, None) };
    let content = clip(
        &format!("Question: {question}\nAnswer: {answer}\nSources: {sources}{}", caveats.map(|c| format!("\nCaveats: {c}")).unwrap_or_default()),
        8000,
    );
    Ok(Outcome::Done(json!({
        "memories": [{"content": content, "type": "semantic", "importance": if deep { 0.7 } else { 0.6 }, "confidence": confidence}],
        "basis": known.basis,
        "summary": format!("answered \"{}\" from {} searches, {} results and {pages} pages (confidence {confidence:.2})",
            clip(&question, 80), queries.len(), results.len())
    })))
}

/// inquire_deep's searches: 3–5 queries from the fast model; the question itself if it fails.
async fn plan_queries(mind: &Mind, question: &str) -> Vec<String> {
    let Ok(t) = template(&mind.work_db, "inquiry_queries").await else { return vec![question.to_string()] };
    let system = render(&t.text, &[("question", question.to_string())]);
    let planned = ask(&mind.fast, &t, system, None, |v| {
        let q: Vec<Value> = list(&v, "queries")?.iter().filter_map(|q| q.as_str()).map(|q| json!(clip(q.trim(), 200))).take(5).collect();
        if q.is_empty() { Err("no queries".into()) } else { Ok(json!(q)) }
    })
    .await;
    let mut queries = vec![question.to_string()];
    for q in planned.ok().and_then(|v| v.as_array().cloned()).unwrap_or_default() {
        if let Some(q) = q.as_str().filter(|q| !q.is_empty() && !queries.iter().any(|x| x.eq_ignore_ascii_case(q))) {
            queries.push(q.to_string());
        }
    }
    queries.truncate(5);
    queries
}

/// inquire_deep's second look: how far the sources support the answer (0.5 when unknown).
async fn evaluate(mind: &Mind, question: &str, answer: &str, sources: &str) -> (f64, Option<String>) {
    let Ok(t) = template(&mind.work_db, "inquiry_confidence").await else { return (0.5, None) };
    let system = render(&t.text, &[("question", question.to_string()), ("answer", answer.to_string()), ("sources", sources.to_string())]);
    match ask(&mind.fast, &t, system, None, |v| {
        Ok(json!({"confidence": number(&v, "confidence", 0.0, 1.0).ok_or("\"confidence\" must be a number in [0, 1]")?, "caveats": text(&v, "caveats")}))
    })
    .await
    {
        Ok(v) => (number(&v, "confidence", 0.0, 1.0).unwrap_or(0.5), text(&v, "caveats").map(|c| clip(&c, 500))),
        Err(_) => (0.5, None),
    }
}

async fn synthesize(mind: &Mind, p: &Value) -> Step<Outcome> {
    let topic = text(p, "topic").ok_or_else(|| Outcome::Fail("params.topic is missing".into(), false))?;
    let ids: Vec<Uuid> = items(p, "memory_ids").iter().filter_map(|v| v.as_str().and_then(|s| Uuid::parse_str(s).ok())).collect();
    let mut found = json!([]);
    if !ids.is_empty() {
        found = json_of(
            &mind.work_db,
            "SELECT coalesce(jsonb_agg(to_jsonb(m)), '[]') FROM dionysus.memory_levels($1) m",
            &[&ids],
        )
        .await?;
    }
    // A synthesis has reflection's budget (027): what it names and what recall adds, fitted.
    found = joined(found, recalled_json(&mind.work_db, &topic, 20, None).await?);
    let mems = within_budget(&mind.work_db, "reflection", found).await?;
    let t = template(&mind.work_db, "synthesize").await?;
    let system = render(&t.text, &[("topic", topic.clone()), ("memories", bullets(mems.lines, "(nothing yet)"))]);
    let v = ask(&mind.smart, &t, system, None, |v| {
        let artifact = text(&v, "artifact").ok_or("\"artifact\" must be a non-empty string")?;
        Ok(json!({"title": text(&v, "title").unwrap_or_else(|| "Synthesis".into()), "artifact": artifact}))
    })
    .await?;
    let content = clip(&format!("{}\n\n{}", text(&v, "title").unwrap_or_default(), text(&v, "artifact").unwrap_or_default()), 8000);
    Ok(Outcome::Done(json!({
        "memories": [{"content": content, "type": "semantic", "importance": 0.7}],
        "summary": format!("synthesized \"{}\"", clip(&topic, 80)),
        "basis": mems.basis
    })))
}

/// A message to one person, written only from what that person may see: their own turns and
/// memories visible to them. The extension still refuses it if the decision behind it drew
/// on someone else's private words.
async fn reach_out(mind: &Mind, p: &Value) -> Step<Outcome> {
    let intent = text(p, "intent").unwrap_or_else(|| "check in".into());
    let draft = text(p, "content");
    // Whom it is for; nobody yet (no one has talked): the home channel, with nothing private.
    let target = json_of(&mind.work_db, "SELECT dionysus.reach_out_target($1)", &[&text(p, "person")]).await?;
    let person = target["person"].as_str().map(str::to_string);
    let viewer = person.clone().unwrap_or_else(|| "nobody:".into());
    let turns: Vec<crate::api::Turn> =
        mind.work_db.all("SELECT to_jsonb(t) FROM dionysus.person_turns($1, 8) t", &[&viewer]).await.map_err(from_db)?;
    let mems = recalled(&mind.work_db, draft.as_deref().unwrap_or(&intent), 6, Some(&viewer)).await?;
    let t = template(&mind.work_db, "reach_out").await?;
    let system = render(
        &t.text,
        &[
            ("intent", intent.clone()),
            ("draft", draft.map(|d| format!("A draft you had in mind: {d}\n")).unwrap_or_default()),
            ("turns", prompt::transcript(&turns)),
            ("memories", bullets(mems.lines, "(nothing relevant)")),
        ],
    );
    let v = ask(&mind.smart, &t, system, None, |v| text(&v, "message").map(|m| json!(clip(&m, 4000))).ok_or_else(|| "\"message\" must be a non-empty string".into())).await?;
    let to = person.as_deref().unwrap_or("the home channel");
    Ok(Outcome::Done(json!({"message": v, "person": person, "basis": mems.basis, "summary": format!("wrote to {to} ({intent})")})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_keeps_well_formed_items_only() {
        let v = json!({
            "facts": [{"content": "User has a dog named Rex", "subject": "user", "confidence": "0.9"}, {"subject": "no content"}, 7],
            "triples": [{"subject": "user", "predicate": "has_dog", "object": "Rex"}, {"subject": "", "predicate": "x", "object": "y"}],
            "goals": [{"title": "Remind user about the vet"}]
        });
        let out = extraction_shape(v).unwrap();
        assert_eq!(out["facts"].as_array().unwrap().len(), 1);
        assert_eq!(out["facts"][0]["confidence"], json!(0.9));
        assert_eq!(out["triples"].as_array().unwrap().len(), 1);
        assert_eq!(out["goals"][0]["source"], json!("user_request"));
        assert!(extraction_shape(json!({"facts": "nope"})).is_err());
        assert_eq!(extraction_shape(json!({})).unwrap()["facts"], json!([]));
    }

    #[test]
    fn an_episode_judgement_the_model_got_wrong_keeps_the_summary() {
        let v = episode_shape(json!({"summary": "We argued.", "outcome": "Failure", "surprise": 3, "lessons": ["Ask first", "", 5],
                                     "censor_candidates": [{"trigger": "joking about her job", "reason": "it hurt"}, {"trigger": "x"}]})).unwrap();
        assert_eq!(v["episode"], json!({"outcome": "failure", "surprise": 1.0, "lessons": ["Ask first"],
                                        "censor_candidates": [{"trigger": "joking about her job", "reason": "it hurt"}]}));
        let v = episode_shape(json!({"summary": "A nice chat.", "outcome": "great", "censor_candidates": [{"trigger": "a", "reason": "b"}]})).unwrap();
        assert_eq!((v["summary"].as_str(), v["episode"].is_null()), (Some("A nice chat."), true));
        let v = episode_shape(json!({"summary": "Fine.", "outcome": "success", "censor_candidates": [{"trigger": "a", "reason": "b"}]})).unwrap();
        assert_eq!(v["episode"]["censor_candidates"], json!([]), "only a failure proposes censors");
        assert!(episode_shape(json!({"outcome": "success"})).is_err());
    }

    /// The session's focus and threads pass through clipped; a malformed one is left out,
    /// never the extraction.
    #[test]
    fn an_extraction_keeps_a_well_formed_focus_and_threads_only() {
        let v = extraction_shape(json!({"focus": " the interview ", "threads": {"opened": ["Friday's interview", "", 7, "...", "a"],
                                                                              "closed": ["the move"]}})).unwrap();
        assert_eq!(v["focus"], "the interview");
        assert_eq!(v["threads"], json!({"opened": ["Friday's interview", "a"], "closed": ["the move"]}));
        let v = extraction_shape(json!({"focus": 3, "threads": ["not", "an object"]})).unwrap();
        assert!(v.get("focus").is_none() && v.get("threads").is_none(), "{v}");
        let long = "x".repeat(500);
        let v = extraction_shape(json!({"focus": long, "threads": {"opened": [long]}})).unwrap();
        assert_eq!(v["focus"].as_str().unwrap().len(), 200);
        assert_eq!(v["threads"]["opened"][0].as_str().unwrap().len(), 300);
    }

    #[test]
    fn a_dream_keeps_only_proposals_with_their_parts() {
        let v = dream_shape(json!({"proposals": [
            {"kind": "prompt_template", "target": "chat_system", "proposal": {"template": "x"}, "rationale": "shorter"},
            {"kind": "prompt_template", "target": "chat_system", "proposal": "not an object", "rationale": "?"},
            {"target": "chat_system", "proposal": {}, "rationale": "no kind"}
        ], "note": "one idea"}))
        .unwrap();
        assert_eq!(v["proposals"].as_array().unwrap().len(), 1);
        assert_eq!(v["note"], "one idea");
        assert_eq!(dream_shape(json!({"note": "nothing tonight"})).unwrap()["proposals"], json!([]));
        assert!(dream_shape(json!({"proposals": "not a list"})).is_err());
    }
}
