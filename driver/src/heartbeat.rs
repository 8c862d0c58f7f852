//! One heartbeat (seed 000 §5.1): heartbeat_begin → the §5.2 decision prompt, offering only
//! the actions this driver can perform → the smart model's JSON decision → heartbeat_commit
//! → the queued work → the narrative (model, or a plain template) → heartbeat_finish → the
//! outbox. When the model fails (§9.6): an unusable answer gives the default decision
//! (reflect + rest), a refusal the minimal one (observe and remember only), and an
//! unreachable model skips the heartbeat, recording why.
//!
//! While it works the driver touches its heartbeat every half minute: the scheduler closes
//! only a heartbeat whose driver fell silent, and a driver that finds its heartbeat closed
//! that way stops instead of mistaking the scheduler's commit for its own.
use crate::db::DbError;
use crate::jsonish::{self, list, text};
use crate::llm::{LlmError, Msg};
use crate::prompt::{self, bullets, render};
use crate::{outbox, work, Mind};
use serde_json::{json, Value};
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct Report {
    pub heartbeat_id: Uuid,
    pub number: i64,
    /// "model", "default" (unusable answer), "minimal" (refusal) or "skipped" (model unreachable).
    pub decided_by: &'static str,
    pub actions: Vec<String>,
    pub rejected: usize,
    pub work_settled: usize,
    pub narrative: String,
}

/// The decision's shape: an object; actions and goal_changes arrays of objects.
pub fn decision_shape(v: Value) -> Result<Value, String> {
    let actions = list(&v, "actions")?;
    if actions.iter().any(|a| !a.is_object()) {
        return Err("every action must be an object {action, params}".into());
    }
    if actions.iter().any(|a| text(a, "action").is_none()) {
        return Err("every action needs an \"action\" name".into());
    }
    let changes = list(&v, "goal_changes")?;
    if changes.iter().any(|c| !c.is_object()) {
        return Err("every goal change must be an object".into());
    }
    let reasoning = match v.get("reasoning") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Ok(json!({"reasoning": reasoning, "actions": actions, "goal_changes": changes}))
}

fn goal_lines(v: &Value) -> String {
    bullets(
        v.as_array().into_iter().flatten().map(|g| {
            format!("{} (id {}){}", g["title"].as_str().unwrap_or("?"), g["id"].as_str().unwrap_or("?"),
                g["description"].as_str().map(|d| format!(": {d}")).unwrap_or_default())
        }),
        "(none)",
    )
}

/// One line per offered action: `name: {"param": "kind", "other": "kind, optional"}`,
/// from the extension's `action_schema()`.
pub fn param_hints(schema: &Value, offered: &[&str]) -> Vec<String> {
    offered
        .iter()
        .filter_map(|a| {
            let params = schema.get(*a)?["params"].as_object()?;
            let fields: Vec<String> = params
                .iter()
                .map(|(name, p)| {
                    let kind = p["kind"].as_str().unwrap_or("?");
                    let optional = if p["required"] == Value::Bool(true) { "" } else { ", optional" };
                    format!("\"{name}\": \"{kind}{optional}\"")
                })
                .collect();
            Some(format!("{a}: {{{}}}", fields.join(", ")))
        })
        .collect()
}

/// Fills the §5.2 prompts from heartbeat_begin's context and the action schema.
pub fn decision_prompt(system: &str, user: &str, ctx: &Value, schema: &Value, offered: &[&str]) -> (String, String) {
    let env = &ctx["environment"];
    let goals = &ctx["goals"];
    let energy = ctx["energy"]["available"].as_f64().unwrap_or(0.0);
    let costs: Vec<(String, f64)> = ctx["action_costs"]
        .as_object()
        .map(|m| m.iter().filter(|(k, _)| offered.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0))).collect())
        .unwrap_or_default();
    let cost_table = bullets(costs.iter().map(|(k, c)| format!("{k}: {c}")), "(none)");
    let costed: Vec<&str> = offered.iter().copied().filter(|a| costs.iter().any(|(k, _)| k == a)).collect();
    let params = bullets(param_hints(schema, &costed), "(none)");
    let mut issues = Vec::new();
    for b in goals["blocked"].as_array().into_iter().flatten() {
        issues.push(format!("blocked: {} by {}", b["title"].as_str().unwrap_or("?"), b["blocked_by"]));
    }
    for s in goals["stale"].as_array().into_iter().flatten() {
        issues.push(format!("stale: {} ({} days untouched)", s["title"].as_str().unwrap_or("?"), s["days_untouched"]));
    }
    if goals["needs_brainstorm"] == Value::Bool(true) {
        issues.push("no goals at all: consider brainstorm_goals".into());
    }
    if let Some(s) = goals["suggest_promotion"].as_object() {
        issues.push(format!("no active goal: consider promoting {} (id {})", s["title"].as_str().unwrap_or("?"), s["id"].as_str().unwrap_or("?")));
    }
    let hours = env["hours_since_user"].as_f64().map(|h| format!("{h:.1} hours")).unwrap_or_else(|| "never".into());
    let vars = [
        ("energy", format!("{energy}")),
        ("max_energy", format!("{}", ctx["energy"]["max"].as_f64().unwrap_or(20.0))),
        ("action_cost_table", cost_table),
        ("action_params", params),
        ("timestamp", env["timestamp"].as_str().unwrap_or("").to_string()),
        ("user_present", if env["user_present"] == Value::Bool(true) { "yes".into() } else { "no".into() }),
        ("time_since_user", hours),
        ("pending_events", env["pending_events"].to_string()),
        // What matters most to each person keeps every heartbeat decision in its service.
        (
            "active_goals",
            prompt::with_north_stars(
                &format!("{system}{user}"),
                goal_lines(&goals["active"]),
                &bullets(
                    ctx["north_stars"].as_array().into_iter().flatten().map(|n| format!("{} (for {})", n["north_star"].as_str().unwrap_or(""), n["person"].as_str().unwrap_or(""))),
                    "",
                ),
                "",
            ),
        ),
        ("queued_goals", goal_lines(&goals["queued"])),
        ("goal_issues", bullets(issues, "(none)")),
        ("recent_memories", bullets(prompt::contents(&ctx["recent_memories"], 400), "(nothing yet)")),
        (
            "activated_clusters",
            bullets(
                ctx["activated_themes"].as_array().into_iter().flatten().map(|t| t["theme"].as_str().or(t["memory"].as_str()).unwrap_or("").to_string()),
                "(none)",
            ),
        ),
        (
            "identity_aspects",
            bullets(ctx["identity"].as_array().into_iter().flatten().map(|a| a["aspect"].as_str().unwrap_or("").to_string()), "(not yet formed)"),
        ),
        (
            "relevant_worldview",
            bullets(ctx["worldview"].as_array().into_iter().flatten().map(|b| b["belief"].as_str().unwrap_or("").to_string()), "(not yet formed)"),
        ),
        ("warnings", bullets(ctx["warnings"].as_array().into_iter().flatten().map(|w| w["message"].as_str().unwrap_or("").to_string()), "(none)")),
    ];
    (render(system, &vars), render(user, &vars))
}

/// Every action the prompt offers: the database's own, and the driver's available ones.
fn offered(mind: &Mind) -> Vec<&'static str> {
    let mut a = vec!["recall", "connect", "reprioritize", "remember", "rest"];
    a.extend(mind.config.available_actions());
    a
}

/// The decision, and who made it (§9.6 for the model's failures).
async fn decide(mind: &Mind, ctx: &Value, shown: &mut Option<String>) -> Result<(Value, &'static str), DbError> {
    let system = prompt::load(&mind.work_db, "heartbeat_system").await?;
    let user = prompt::load(&mind.work_db, "heartbeat_user").await?;
    let schema = mind.work_db.json("SELECT dionysus.action_schema()", &[]).await?;
    let (s, u) = decision_prompt(&system.text, &user.text, ctx, &schema, &offered(mind));
    let msgs = [Msg::system(s), Msg::user(u)];
    if crate::mirror::enabled(mind) {
        *shown = Some(crate::mirror::prompt_text(&msgs));
    }
    match mind.smart.json(&msgs, system.temperature, decision_shape).await {
        Ok(d) => Ok((d, "model")),
        Err(LlmError::BadAnswer(e)) => {
            tracing::warn!(error = %e, "no usable decision from the model; using the default decision");
            Ok((default_decision(mind).await?, "default"))
        }
        Err(LlmError::Refused(e)) => {
            tracing::warn!(error = %e, "the model declined to decide; observing and remembering only");
            Ok((json!({"reasoning": format!("The model declined to decide ({e}); observing and remembering only."),
                       "actions": [], "goal_changes": []}), "minimal"))
        }
        Err(e) => {
            tracing::warn!(error = %e, "the model is unreachable; this heartbeat is skipped");
            Ok((json!({"reasoning": format!("Skipped: the language model could not be reached ({e})."),
                       "actions": [], "goal_changes": []}), "skipped"))
        }
    }
}

/// Keeps the heartbeat alive while this driver works on it (the scheduler recovers only
/// silent ones). Ends when dropped.
struct Liveness(tokio::task::JoinHandle<()>);

impl Liveness {
    fn start(mind: &Mind, hb: Uuid) -> Liveness {
        // A connection of its own: the work connection may be busy in a long call.
        let db = crate::db::Db::new(&mind.config.database_url, "heartbeat liveness");
        Liveness(tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                if let Err(e) = db.query("SELECT dionysus.heartbeat_touch($1)", &[&hb]).await {
                    tracing::warn!(error = %e, "cannot touch the heartbeat");
                }
            }
        }))
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether the scheduler closed this heartbeat after its driver fell silent.
async fn recovered(mind: &Mind, hb: Uuid) -> bool {
    matches!(mind.work_db.json("SELECT to_jsonb(dionysus.heartbeat_touch($1))", &[&hb]).await, Ok(Value::String(s)) if s == "recovered")
}

fn superseded(number: i64) -> DbError {
    DbError::Sql {
        code: "55000".into(),
        message: format!("heartbeat {number} was recovered by the scheduler while this driver was silent; stopping"),
    }
}

async fn commit(mind: &Mind, hb: Uuid, decision: &Value) -> Result<Value, DbError> {
    let available: Vec<String> = mind.config.available_actions().iter().map(|s| s.to_string()).collect();
    mind.work_db.json("SELECT dionysus.heartbeat_commit($1, $2, $3)", &[&hb, decision, &available]).await
}

async fn default_decision(mind: &Mind) -> Result<Value, DbError> {
    mind.work_db.json("SELECT dionysus.heartbeat_default_decision()", &[]).await
}

/// Runs one heartbeat to the end (or resumes the one in flight).
pub async fn run_once(mind: &Mind) -> Result<Report, DbError> {
    let ctx = mind.work_db.json("SELECT dionysus.heartbeat_begin()", &[]).await?;
    let hb = ctx["heartbeat_id"].as_str().and_then(|s| Uuid::parse_str(s).ok()).ok_or_else(|| DbError::Sql {
        code: "XX000".into(),
        message: "heartbeat_begin returned no heartbeat_id".into(),
    })?;
    let number = ctx["heartbeat_number"].as_i64().unwrap_or(0);
    tracing::info!(heartbeat = number, energy = %ctx["energy"]["available"], "heartbeat begins");
    let _alive = Liveness::start(mind, hb);
    let mut decided_by = "model";
    let started = std::time::Instant::now();
    let mut shown = None;
    if !(ctx["resumed"] == Value::Bool(true) && ctx["status"] == "committed") {
        let decision;
        (decision, decided_by) = decide(mind, &ctx, &mut shown).await?;
        match commit(mind, hb, &decision).await {
            Ok(_) => {}
            // 55000: committed already — by a retried call whose first attempt landed, or by
            // the scheduler's recovery while this driver was silent (then stop).
            Err(DbError::Sql { code, .. }) if code == "55000" => {
                if recovered(mind, hb).await {
                    return Err(superseded(number));
                }
            }
            // The decision's shape was refused as a whole: the default decision instead.
            Err(DbError::Sql { code, message }) if code.starts_with("22") => {
                tracing::warn!(%code, %message, "decision refused; committing the default decision");
                decided_by = "default";
                commit(mind, hb, &default_decision(mind).await?).await?;
            }
            Err(e) => return Err(e),
        }
    }
    let work_settled = work::drain(mind, Some(hb)).await;
    let log = mind
        .work_db
        .json(
            "SELECT jsonb_build_object('reasoning', h.decision_reasoning, 'taken', h.actions_taken, 'rejected', h.actions_rejected, \
                    'work', (SELECT coalesce(jsonb_agg(jsonb_build_object('action', w.action, 'status', w.status, \
                                   'summary', w.result ->> 'summary', 'error', w.last_error) ORDER BY w.created_at), '[]') \
                             FROM dionysus.work_queue w WHERE w.heartbeat_id = h.id)) \
             FROM dionysus.heartbeat_log h WHERE h.id = $1",
            &[&hb],
        )
        .await?;
    let actions: Vec<String> = log["taken"].as_array().into_iter().flatten().filter_map(|a| a["action"].as_str().map(str::to_string)).collect();
    let rejected = log["rejected"].as_array().map_or(0, Vec::len);
    let (narrative, valence) = if decided_by == "skipped" {
        (format!("Heartbeat {number} was skipped: {}", log["reasoning"].as_str().unwrap_or("the model could not be reached")), 0.0)
    } else {
        narrate(mind, number, &log, &actions).await
    };
    match mind.work_db.query("SELECT dionysus.heartbeat_finish($1, $2, $3)", &[&hb, &narrative, &valence]).await {
        Ok(_) => {}
        Err(DbError::Sql { code, .. }) if code == "55000" && recovered(mind, hb).await => return Err(superseded(number)),
        Err(e) => return Err(e),
    }
    tracing::info!(heartbeat = number, decided_by, actions = ?actions, rejected, "heartbeat finished");
    let metrics = json!({"decided_by": decided_by, "model": mind.smart.role.model, "seconds": started.elapsed().as_secs(),
                         "energy_start": ctx["energy"]["available"], "rejected_actions": rejected});
    outbox::deliver(mind).await;
    // After what a person waits on: the dream channel is told last.
    crate::mirror::record(mind, "heartbeat", hb, shown, metrics, json!({})).await;
    Ok(Report { heartbeat_id: hb, number, decided_by, actions, rejected, work_settled, narrative })
}

async fn narrate(mind: &Mind, number: i64, log: &Value, actions: &[String]) -> (String, f64) {
    let plain = || {
        let done: Vec<String> = log["work"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| format!("{} ({}{})", w["action"].as_str().unwrap_or("?"), w["status"].as_str().unwrap_or("?"),
                w["summary"].as_str().map(|s| format!(": {s}")).unwrap_or_default()))
            .collect();
        format!(
            "Heartbeat {number}: {}. Actions: {}.{}",
            log["reasoning"].as_str().filter(|s| !s.is_empty()).unwrap_or("no reasoning recorded"),
            if actions.is_empty() { "none".to_string() } else { actions.join(", ") },
            if done.is_empty() { String::new() } else { format!(" Work: {}.", done.join("; ")) }
        )
    };
    let Ok(t) = prompt::load(&mind.work_db, "narrative").await else { return (plain(), 0.0) };
    let system = render(
        &t.text,
        &[
            ("reasoning", log["reasoning"].as_str().unwrap_or("").to_string()),
            ("actions", actions.join(", ")),
            ("rejected", log["rejected"].to_string()),
            ("results", log["work"].to_string()),
        ],
    );
    let shape = |v: Value| -> Result<Value, String> {
        let n = text(&v, "narrative").ok_or("\"narrative\" must be a non-empty string")?;
        Ok(json!({"narrative": n, "valence": jsonish::number(&v, "emotional_valence", -1.0, 1.0).unwrap_or(0.0)}))
    };
    match mind.fast.json(&[Msg::system(system), Msg::user("Answer with the JSON object now.")], t.temperature, shape).await {
        Ok(v) => (v["narrative"].as_str().unwrap_or_default().chars().take(4000).collect(), v["valence"].as_f64().unwrap_or(0.0)),
        Err(e) => {
            tracing::info!(error = %e, "plain narrative");
            (plain(), 0.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_checked_for_shape() {
        assert!(decision_shape(json!({"actions": "reflect"})).is_err());
        assert!(decision_shape(json!({"actions": [{"params": {}}]})).is_err());
        assert!(decision_shape(json!({"actions": [1]})).is_err());
        let d = decision_shape(json!({"reasoning": "x", "actions": [{"action": "rest"}]})).unwrap();
        assert_eq!(d["goal_changes"], json!([]));
    }

    #[test]
    fn the_prompt_offers_only_what_the_driver_can_do() {
        let ctx = json!({
            "energy": {"available": 12.0, "max": 20.0},
            "environment": {"timestamp": "2026-11-22T10:00:00Z", "user_present": false, "hours_since_user": 5.5},
            "goals": {"active": [{"id": "g1", "title": "Learn Rust"}], "queued": [], "blocked": [], "stale": [], "needs_brainstorm": false},
            "action_costs": {"reflect": 2, "inquire_deep": 6, "reach_out_user": 5, "rest": 0},
            "recent_memories": [{"content": "We talked about music"}],
            "activated_themes": [{"theme": "music"}], "identity": [], "worldview": [], "warnings": []
        });
        let schema = json!({
            "reflect": {"performer": "driver", "params": {"focus": {"kind": "text", "required": false}}},
            "inquire_deep": {"performer": "driver", "params": {"question": {"kind": "text", "required": true}}},
            "rest": {"performer": "database", "params": {}}
        });
        let (s, u) = decision_prompt("costs:\n{{action_cost_table}}\n{{action_params}}", "{{active_goals}} {{time_since_user}} {{energy}}", &ctx, &schema, &["reflect", "reach_out_user", "rest"]);
        assert!(s.contains("reflect: 2") && s.contains("reach_out_user: 5"));
        assert!(s.contains("- reflect: {\"focus\": \"text, optional\"}") && s.contains("- rest: {}"), "{s}");
        assert!(!s.contains("inquire_deep"), "{s}");
        assert!(u.contains("Learn Rust (id g1)") && u.contains("5.5 hours") && u.contains("12"), "{u}");
    }
}
