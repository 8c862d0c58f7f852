//! One heartbeat: heartbeat_begin → the decision prompt, offering only the actions this driver
//! can perform → the smart model's JSON decision → heartbeat_commit → the queued work → the
//! narrative (model, or a plain template) → heartbeat_finish → the outbox. When the model
//! fails: an unusable answer gives the default decision (reflect + rest), a refusal the minimal
//! one (observe and remember only), and an unreachable model skips the heartbeat, recording why.
//!
//! While it works the driver touches its heartbeat every half minute: the scheduler closes
//! only a heartbeat whose driver fell silent, and a driver that finds its heartbeat closed
//! that way stops instead of mistaking the scheduler's commit for its own.
use crate::api::Content;
use crate::db::DbError;
use crate::jsonish::{self, list, text};
use crate::llm::{LlmError, Msg};
use crate::prompt::{self, bullets, render};
use crate::{outbox, work, Mind};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

/// `heartbeat_begin()`: the heartbeat's context (see its COMMENT). A resumed heartbeat's comes
/// back as it was begun, with `resumed` true and its `status`.
#[derive(Debug, Clone, Deserialize)]
pub struct Context {
    pub heartbeat_id: Uuid,
    pub heartbeat_number: i64,
    #[serde(default)]
    pub resumed: bool,
    pub status: Option<String>,
    pub energy: Energy,
    pub environment: Environment,
    pub goals: GoalReview,
    pub recent_memories: Vec<Content>,
    pub activated_themes: Vec<Theme>,
    pub identity: Vec<Aspect>,
    pub worldview: Vec<Belief>,
    /// Each action's energy cost (`action_costs()`).
    pub action_costs: BTreeMap<String, f64>,
    pub warnings: Vec<Warning>,
    pub north_stars: Vec<NorthStar>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Energy {
    pub available: f64,
    pub max: f64,
}

/// `heartbeat_observe()`: what the heartbeat finds around it.
#[derive(Debug, Clone, Deserialize)]
pub struct Environment {
    pub timestamp: String,
    pub user_present: bool,
    pub hours_since_user: Option<f64>,
    /// Shown to the model as it is (`{requested, work_pending, outbox_pending}`).
    pub pending_events: Value,
}

/// `review_goals()`: the goals by priority and what needs attention.
#[derive(Debug, Clone, Deserialize)]
pub struct GoalReview {
    pub active: Vec<Goal>,
    pub queued: Vec<Goal>,
    pub blocked: Vec<BlockedGoal>,
    pub stale: Vec<StaleGoal>,
    pub needs_brainstorm: bool,
    pub suggest_promotion: Option<Goal>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Goal {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BlockedGoal {
    pub title: String,
    /// The goal ids or texts it waits on, shown as they are.
    pub blocked_by: Value,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StaleGoal {
    pub title: String,
    pub days_untouched: Value,
}

/// `activated_themes()`: a theme, or the memory that stands for it.
#[derive(Debug, Clone, Deserialize)]
pub struct Theme {
    pub theme: Option<String>,
    pub memory: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Aspect {
    pub aspect: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Belief {
    pub belief: String,
}

/// `heartbeat_warnings()`: one warning.
#[derive(Debug, Clone, Deserialize)]
pub struct Warning {
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct NorthStar {
    pub person: String,
    pub north_star: String,
}

/// `action_schema()`: per action, its parameters.
pub type ActionSchema = BTreeMap<String, ActionSpec>;

#[derive(Debug, Clone, Deserialize)]
pub struct ActionSpec {
    pub params: BTreeMap<String, ParamSpec>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ParamSpec {
    pub kind: String,
    pub required: bool,
}

/// `heartbeat_outcome(id)`: what the heartbeat did.
#[derive(Debug, Clone, Deserialize)]
pub struct Outcome {
    pub reasoning: Option<String>,
    /// The actions taken, as recorded (`{action, ...}`).
    pub taken: Vec<Taken>,
    /// The actions refused, with why; shown to the narrative as they are.
    pub rejected: Value,
    pub work: Vec<WorkDone>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Taken {
    pub action: Option<String>,
}

/// Its keys in the order the narrative prompt has always shown them (JSON's, alphabetical).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct WorkDone {
    pub action: String,
    pub error: Option<String>,
    pub status: String,
    pub summary: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub heartbeat_id: Uuid,
    pub number: i64,
    /// "model", "default" (unusable answer, or none within its bound), "minimal" (refusal) or
    /// "skipped" (model unreachable).
    pub decided_by: &'static str,
    pub actions: Vec<String>,
    pub rejected: usize,
    pub work_settled: usize,
    pub narrative: String,
}

/// The decision's shape: an object; actions and goal_changes arrays of objects. A decision
/// with neither its actions nor its reasoning (`{}`, an echo of another shape) is not one: the
/// default decision is taken instead.
pub fn decision_shape(v: Value) -> Result<Value, String> {
    let reasoned = v.get("reasoning").and_then(Value::as_str).is_some_and(|r| !r.trim().is_empty());
    if !v.get("actions").is_some_and(Value::is_array) && !reasoned {
        return Err("a decision needs its \"actions\" or its \"reasoning\"".into());
    }
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

fn goal_lines(goals: &[Goal]) -> String {
    bullets(goals.iter().map(|g| format!("{} (id {}){}", g.title, g.id, g.description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())), "(none)")
}

/// One line per offered action: `name: {"param": "kind", "other": "kind, optional"}`,
/// from the extension's `action_schema()`.
pub fn param_hints(schema: &ActionSchema, offered: &[&str]) -> Vec<String> {
    offered
        .iter()
        .filter_map(|a| {
            let fields: Vec<String> = schema
                .get(*a)?
                .params
                .iter()
                .map(|(name, p)| {
                    let optional = if p.required { "" } else { ", optional" };
                    format!("\"{name}\": \"{}{optional}\"", p.kind)
                })
                .collect();
            Some(format!("{a}: {{{}}}", fields.join(", ")))
        })
        .collect()
}

/// Fills the decision prompts from heartbeat_begin's context and the action schema.
pub fn decision_prompt(system: &str, user: &str, ctx: &Context, schema: &ActionSchema, offered: &[&str]) -> (String, String) {
    let env = &ctx.environment;
    let goals = &ctx.goals;
    let energy = ctx.energy.available;
    let costs: Vec<(String, f64)> = ctx.action_costs.iter().filter(|(k, _)| offered.contains(&k.as_str())).map(|(k, v)| (k.clone(), *v)).collect();
    let cost_table = bullets(costs.iter().map(|(k, c)| format!("{k}: {c}")), "(none)");
    let costed: Vec<&str> = offered.iter().copied().filter(|a| costs.iter().any(|(k, _)| k == a)).collect();
    let params = bullets(param_hints(schema, &costed), "(none)");
    let mut issues = Vec::new();
    for b in &goals.blocked {
        issues.push(format!("blocked: {} by {}", b.title, b.blocked_by));
    }
    for s in &goals.stale {
        issues.push(format!("stale: {} ({} days untouched)", s.title, s.days_untouched));
    }
    if goals.needs_brainstorm {
        issues.push("no goals at all: consider brainstorm_goals".into());
    }
    if let Some(s) = &goals.suggest_promotion {
        issues.push(format!("no active goal: consider promoting {} (id {})", s.title, s.id));
    }
    let hours = env.hours_since_user.map(|h| format!("{h:.1} hours")).unwrap_or_else(|| "never".into());
    let vars = [
        ("energy", format!("{energy}")),
        ("max_energy", format!("{}", ctx.energy.max)),
        ("action_cost_table", cost_table),
        ("action_params", params),
        ("timestamp", env.timestamp.clone()),
        ("user_present", if env.user_present { "yes".into() } else { "no".into() }),
        ("time_since_user", hours),
        ("pending_events", env.pending_events.to_string()),
        // What matters most to each person keeps every heartbeat decision in its service.
        (
            "active_goals",
            prompt::with_north_stars(
                &format!("{system}{user}"),
                goal_lines(&goals.active),
                &bullets(ctx.north_stars.iter().map(|n| format!("{} (for {})", n.north_star, n.person)), ""),
                "",
            ),
        ),
        ("queued_goals", goal_lines(&goals.queued)),
        ("goal_issues", bullets(issues, "(none)")),
        ("recent_memories", bullets(prompt::contents(&ctx.recent_memories, 400), "(nothing yet)")),
        (
            "activated_clusters",
            bullets(ctx.activated_themes.iter().map(|t| t.theme.clone().or(t.memory.clone()).unwrap_or_default()), "(none)"),
        ),
        ("identity_aspects", bullets(ctx.identity.iter().map(|a| a.aspect.clone()), "(not yet formed)")),
        ("relevant_worldview", bullets(ctx.worldview.iter().map(|b| b.belief.clone()), "(not yet formed)")),
        ("warnings", bullets(ctx.warnings.iter().map(|w| w.message.clone()), "(none)")),
    ];
    (render(system, &vars), render(user, &vars))
}

/// Every action the prompt offers: the database's own, and the driver's available ones.
fn offered(mind: &Mind) -> Vec<&'static str> {
    let mut a = vec!["recall", "connect", "reprioritize", "remember", "rest"];
    a.extend(mind.config.available_actions());
    a
}

/// The decision, and who made it (and how, when the model failed).
async fn decide(mind: &Mind, ctx: &Context, shown: &mut Option<String>) -> Result<(Value, &'static str), DbError> {
    let system = prompt::load(&mind.work_db, "heartbeat_system").await?;
    let user = prompt::load(&mind.work_db, "heartbeat_user").await?;
    let schema: ActionSchema = mind.work_db.one("SELECT dionysus.action_schema()", &[]).await?;
    let (s, u) = decision_prompt(&system.text, &user.text, ctx, &schema, &offered(mind));
    let msgs = [Msg::system(s), Msg::user(u)];
    if crate::mirror::enabled(mind) {
        *shown = Some(crate::mirror::prompt_text(&msgs));
    }
    match mind.smart.json_with_schema(&system.key, &msgs, system.temperature, system.result_schema.as_ref(), decision_shape).await {
        Ok(d) => Ok((d, "model")),
        Err(LlmError::BadAnswer(e)) => {
            tracing::warn!(error = %e, "no usable decision from the model; using the default decision");
            Ok((default_decision(mind).await?, "default"))
        }
        // A model that answers, but not within the decision's bound (a small model on a CPU),
        // gave no decision either: the default one, not a skipped beat.
        Err(LlmError::Timeout) => {
            tracing::warn!(bound = ?mind.smart.bounds(&system.key).timeout, "no decision within its bound; using the default decision");
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
    matches!(mind.work_db.one::<String>("SELECT to_jsonb(dionysus.heartbeat_touch($1))", &[&hb]).await, Ok(s) if s == "recovered")
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
    let ctx: Context = mind.work_db.one("SELECT dionysus.heartbeat_begin()", &[]).await?;
    let (hb, number) = (ctx.heartbeat_id, ctx.heartbeat_number);
    tracing::info!(heartbeat = number, energy = ctx.energy.available, "heartbeat begins");
    let _alive = Liveness::start(mind, hb);
    let mut decided_by = "model";
    let started = std::time::Instant::now();
    let mut shown = None;
    if !(ctx.resumed && ctx.status.as_deref() == Some("committed")) {
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
    let log: Outcome = mind.work_db.one("SELECT dionysus.heartbeat_outcome($1)", &[&hb]).await?;
    let actions: Vec<String> = log.taken.iter().filter_map(|a| a.action.clone()).collect();
    let rejected = log.rejected.as_array().map_or(0, Vec::len);
    let (narrative, valence) = if decided_by == "skipped" {
        (format!("Heartbeat {number} was skipped: {}", log.reasoning.as_deref().unwrap_or("the model could not be reached")), 0.0)
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
                         "energy_start": ctx.energy.available, "rejected_actions": rejected});
    outbox::deliver(mind).await;
    // After what a person waits on: the dream channel is told last.
    crate::mirror::record(mind, "heartbeat", hb, shown, metrics, json!({})).await;
    Ok(Report { heartbeat_id: hb, number, decided_by, actions, rejected, work_settled, narrative })
}

async fn narrate(mind: &Mind, number: i64, log: &Outcome, actions: &[String]) -> (String, f64) {
    let plain = || {
        let done: Vec<String> = log
            .work
            .iter()
            .map(|w| format!("{} ({}{})", w.action, w.status, w.summary.as_deref().map(|s| format!(": {s}")).unwrap_or_default()))
            .collect();
        format!(
            "Heartbeat {number}: {}. Actions: {}.{}",
            log.reasoning.as_deref().filter(|s| !s.is_empty()).unwrap_or("no reasoning recorded"),
            if actions.is_empty() { "none".to_string() } else { actions.join(", ") },
            if done.is_empty() { String::new() } else { format!(" Work: {}.", done.join("; ")) }
        )
    };
    let Ok(t) = prompt::load(&mind.work_db, "narrative").await else { return (plain(), 0.0) };
    let system = render(
        &t.text,
        &[
            ("reasoning", log.reasoning.clone().unwrap_or_default()),
            ("actions", actions.join(", ")),
            ("rejected", log.rejected.to_string()),
            ("results", json!(log.work).to_string()),
        ],
    );
    let shape = |v: Value| -> Result<Value, String> {
        let n = text(&v, "narrative").ok_or("\"narrative\" must be a non-empty string")?;
        Ok(json!([n, jsonish::number(&v, "emotional_valence", -1.0, 1.0).unwrap_or(0.0)]))
    };
    match mind.fast.json(&t.key, &[Msg::system(system), Msg::user("Answer with the JSON object now.")], t.temperature, shape).await {
        Ok(v) => {
            let (narrative, valence): (String, f64) = serde_json::from_value(v).unwrap_or_default();
            let narrative: String = narrative.chars().take(4000).collect();
            // The one grounding check (a "..." or the prompt's own words is no narrative); it records a refusal.
            match mind.work_db.one::<Option<String>>("SELECT to_jsonb(dionysus.check_model_text('narrative', $1))", &[&narrative]).await {
                Ok(None) => (narrative, valence),
                Ok(Some(why)) => {
                    tracing::info!(%why, "narrative refused; the plain one instead");
                    (plain(), 0.0)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "narrative not checked; the plain one instead");
                    (plain(), 0.0)
                }
            }
        }
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
        for empty in [json!({}), json!({"reasoning": " "}), json!({"goal_changes": []}), json!({"narrative": "..."})] {
            assert!(decision_shape(empty.clone()).is_err(), "{empty}");
        }
        assert!(decision_shape(json!({"actions": []})).is_ok() && decision_shape(json!({"reasoning": "quiet"})).is_ok());
        let d = decision_shape(json!({"reasoning": "x", "actions": [{"action": "rest"}]})).unwrap();
        assert_eq!(d.get("goal_changes"), Some(&json!([])));
    }

    #[test]
    fn the_prompt_offers_only_what_the_driver_can_do() {
        let ctx = json!({
            "heartbeat_id": "00000000-0000-0000-0000-000000000001", "heartbeat_number": 1, "north_stars": [],
            "energy": {"available": 12.0, "max": 20.0},
            "environment": {"timestamp": "2026-11-22T10:00:00Z", "user_present": false, "hours_since_user": 5.5, "pending_events": {}},
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
        let (ctx, schema) = (serde_json::from_value(ctx).unwrap(), serde_json::from_value(schema).unwrap());
        let (s, u) = decision_prompt("costs:\n{{action_cost_table}}\n{{action_params}}", "{{active_goals}} {{time_since_user}} {{energy}}", &ctx, &schema, &["reflect", "reach_out_user", "rest"]);
        assert!(s.contains("reflect: 2") && s.contains("reach_out_user: 5"));
        assert!(s.contains("- reflect: {\"focus\": \"text, optional\"}") && s.contains("- rest: {}"), "{s}");
        assert!(!s.contains("inquire_deep"), "{s}");
        assert!(u.contains("Learn Rust (id g1)") && u.contains("5.5 hours") && u.contains("12"), "{u}");
    }
}
