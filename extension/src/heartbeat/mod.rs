//! The heartbeat organ. Energy, goals, the queue, the outbox, sessions,
//! `heartbeat_begin` and `heartbeat_finish` are SQL (`sql/003_heartbeat_api.sql`); this module
//! holds the part that needs a real parser: `heartbeat_commit`, which validates the LLM's
//! decision action by action, trims it to the energy available, applies what the database can
//! do itself and queues the rest for the driver — all in the caller's one transaction.
pub mod actions;

use crate::errors;
use crate::json_arg::JsonArg;
use crate::spi_util::in_subtransaction;
use actions::Performer;
use pgrx::prelude::*;
use pgrx::{JsonB, PgSqlErrorCode, Uuid};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

/// Most actions one decision may carry.
pub const MAX_ACTIONS: usize = 50;
pub const GOAL_CHANGES: [&str; 8] = ["promote", "demote", "activate", "queue", "backburner", "complete", "abandon", "progress"];

fn state_error(msg: String) -> ! {
    errors::raise(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, msg, None)
}

/// Runs one SQL call that yields a jsonb, in a subtransaction: an error becomes a reason.
fn try_json(sql: &str, args: Vec<pgrx::datum::DatumWithOid<'static>>) -> Result<Value, String> {
    let sql = sql.to_string();
    in_subtransaction(AssertUnwindSafe(move || {
        Spi::get_one_with_args::<JsonB>(&sql, &args).map(|v| v.map(|j| j.0).unwrap_or(Value::Null))
    }))
    .and_then(|r| r.map_err(|e| e.to_string()))
}

fn text(params: &Map<String, Value>, key: &str) -> Option<String> {
    params.get(key).and_then(|v| v.as_str()).map(|s| s.to_string())
}

fn uuid(params: &Map<String, Value>, key: &str) -> Option<Uuid> {
    text(params, key).and_then(|s| actions::parse_uuid(&s))
}

fn number(params: &Map<String, Value>, key: &str) -> Option<f64> {
    params.get(key).and_then(|v| v.as_f64())
}

/// What the database does for one of its own actions.
fn perform(hb: Uuid, name: &str, params: &Map<String, Value>) -> Result<Value, String> {
    match name {
        "observe" => try_json("SELECT dionysus.heartbeat_observe()", vec![]),
        "review_goals" => try_json("SELECT dionysus.review_goals()", vec![]),
        "rest" => Ok(json!({"rested": true})),
        // As private as what the heartbeat saw (its taint), like its narrative and its work's results.
        "remember" => try_json(
            "SELECT jsonb_build_object('memory_id', dionysus.remember($1, coalesce($2, 'episodic'), coalesce($3, 0.5), 0.0, \
                    jsonb_build_object('heartbeat_id', $4::uuid), 'heartbeat', \
                    private_to => (SELECT h.private_to FROM dionysus.heartbeat_log h WHERE h.id = $4::uuid)))",
            vec![text(params, "content").into(), text(params, "type").into(), number(params, "importance").into(), hb.into()],
        ),
        "recall" => try_json(
            "SELECT jsonb_build_object('memories', coalesce(jsonb_agg(jsonb_build_object('id', r.memory_id, \
                    'content', r.content, 'type', r.type, 'score', round(r.score::numeric, 4), 'found_by', r.found_by) \
                    ORDER BY r.score DESC), '[]'::jsonb)) FROM dionysus.recall($1, coalesce($2, 5)) r",
            vec![text(params, "query").into(), params.get("k").and_then(|v| v.as_i64()).map(|k| k as i32).into()],
        ),
        "connect" => try_json(
            "SELECT jsonb_build_object('created', dionysus.connect($1, $2, coalesce($3, 'ASSOCIATED'), coalesce($4, 1.0)))",
            vec![
                uuid(params, "from_id").into(),
                uuid(params, "to_id").into(),
                text(params, "relation").into(),
                number(params, "weight").into(),
            ],
        ),
        "reprioritize" => try_json(
            "SELECT jsonb_build_object('goal_id', $1::uuid, 'priority', dionysus.change_goal_priority($1, $2, $3))",
            vec![uuid(params, "goal_id").into(), text(params, "priority").into(), text(params, "reason").into()],
        ),
        other => Err(format!("{other} is not a database action")),
    }
}

/// Queues a driver action; the key makes a repeated commit of the same heartbeat a no-op.
/// Queues an action for the driver, with the energy it costs (refunded if it fails for good).
fn enqueue(hb: Uuid, index: usize, name: &str, params: &Map<String, Value>, max_attempts: i32, cost: f64) -> Result<Value, String> {
    try_json(
        "WITH ins AS (INSERT INTO dionysus.work_queue (idempotency_key, heartbeat_id, action, params, max_attempts, energy_cost) \
                      VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id) \
         SELECT jsonb_build_object('work_id', coalesce((SELECT id FROM ins), \
                (SELECT id FROM dionysus.work_queue WHERE idempotency_key = $1)), 'queued', true)",
        vec![
            format!("{hb}:{index}:{name}").into(),
            hb.into(),
            name.into(),
            JsonB(Value::Object(params.clone())).into(),
            max_attempts.into(),
            cost.into(),
        ],
    )
}

/// Applies one entry of `goal_changes`.
fn goal_change(item: &Value) -> Result<Value, String> {
    let obj = item.as_object().ok_or("a goal change must be an object")?;
    let goal = obj.get("goal_id").and_then(|v| v.as_str()).ok_or("\"goal_id\" is required")?;
    let goal: Uuid = actions::parse_uuid(goal).ok_or_else(|| format!("\"goal_id\" {goal} is not a uuid"))?;
    let change = obj.get("change").and_then(|v| v.as_str()).ok_or("\"change\" is required")?.to_ascii_lowercase();
    if !GOAL_CHANGES.contains(&change.as_str()) {
        return Err(format!("unknown change \"{change}\" (expected one of {})", GOAL_CHANGES.join(", ")));
    }
    let note = obj.get("note").or_else(|| obj.get("reason")).and_then(|v| v.as_str()).map(String::from);
    if change == "progress" {
        return try_json(
            "SELECT jsonb_build_object('progress', true) FROM (SELECT dionysus.add_goal_progress($1, $2)) x",
            vec![goal.into(), note.into()],
        );
    }
    // promote/demote move one level; the others name their target.
    try_json(
        "SELECT jsonb_build_object('priority', dionysus.change_goal_priority($1, \
           CASE $2 WHEN 'promote' THEN (SELECT CASE priority WHEN 'backburner' THEN 'queued' WHEN 'queued' THEN 'active' ELSE priority::text END \
                                        FROM dionysus.goals WHERE id = $1) \
                   WHEN 'demote' THEN (SELECT CASE priority WHEN 'active' THEN 'queued' WHEN 'queued' THEN 'backburner' ELSE priority::text END \
                                       FROM dionysus.goals WHERE id = $1) \
                   WHEN 'activate' THEN 'active' WHEN 'complete' THEN 'completed' WHEN 'abandon' THEN 'abandoned' ELSE $2 END, $3))",
        vec![goal.into(), change.into(), note.into()],
    )
}

/// The action taxonomy as jsonb: performer and parameter kinds per action.
#[pg_extern(immutable, parallel_safe)]
fn action_schema() -> JsonB {
    JsonB(actions::schema())
}

/// Validates, trims and applies a decision ({reasoning, actions[], goal_changes[]}) for the
/// heartbeat in flight. Bad actions are rejected one by one with their reason; the list is
/// walked in order and an action that no longer fits the energy is dropped; reach_out_user is
/// refused inside the cooldown unless the user spoke since. Committing twice is an error.
#[pg_extern(volatile, parallel_unsafe)]
fn heartbeat_commit(
    heartbeat_id: Option<Uuid>,
    decision: Option<JsonArg>,
    available_actions: default!(Option<Vec<Option<String>>>, "NULL"),
) -> JsonB {
    // The driver's own abilities: an action it cannot perform is refused, not queued forever.
    let available: Option<Vec<String>> =
        available_actions.map(|v| v.into_iter().flatten().map(|s| s.trim().to_ascii_lowercase()).collect());
    let Some(hb) = heartbeat_id else { errors::null_arg("heartbeat_id") };
    let Some(decision) = decision.map(|j| j.parse("decision")) else { errors::null_arg("decision") };
    let Value::Object(doc) = &decision else {
        errors::bad_json("decision", format!("must be a JSON object, not {}", crate::memory::validate::json_kind(&decision)))
    };
    let list = |key: &str| -> Vec<Value> {
        match doc.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(other) => errors::bad_json(
                "decision",
                format!("\"{key}\" must be an array, not {}", crate::memory::validate::json_kind(other)),
            ),
        }
    };
    let actions = list("actions");
    let changes = list("goal_changes");
    if actions.len() > MAX_ACTIONS || changes.len() > MAX_ACTIONS {
        errors::bad_json("decision", format!("at most {MAX_ACTIONS} actions and {MAX_ACTIONS} goal changes"));
    }
    let reasoning = match doc.get("reasoning") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => errors::bad_json("decision", format!("\"reasoning\" must be a string, not {}", crate::memory::validate::json_kind(other))),
    };

    // The state row's lock orders this commit after any begin/commit/finish in progress; the
    // goals lock comes next (the global lock order in 002_heartbeat.sql).
    // The cooldown counts from the last delivered contact, and a reach-out still on its way
    // (queued or in the outbox) counts as one: contact time is set when it is delivered.
    let (mut energy, cooldown_blocks) = Spi::connect_mut(|c| {
        let t = c
            .update(
                "SELECT current_energy, \
                        (last_user_contact_at IS NOT NULL \
                         AND last_user_contact_at > now() - make_interval(secs => coalesce((SELECT value FROM dionysus.heartbeat_config WHERE key = 'reach_out_cooldown_hours'), 4) * 3600) \
                         AND NOT coalesce(last_user_interaction_at > last_user_contact_at, false)) \
                        OR EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.action = 'reach_out_user' AND q.status IN ('pending', 'claimed')) \
                        OR EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.status = 'pending' AND o.work_id IS NOT NULL) \
                 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE",
                None,
                &[],
            )
            .expect("heartbeat state")
            .first();
        (t.get::<f64>(1).unwrap().unwrap_or(0.0), t.get::<bool>(2).unwrap().unwrap_or(false))
    });
    Spi::run("SELECT pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0))").expect("goals lock");
    let log = Spi::connect_mut(|c| {
        c.update(
            "SELECT status::text, heartbeat_number, energy_start FROM dionysus.heartbeat_log WHERE id = $1 FOR UPDATE",
            None,
            &[hb.into()],
        )
        .expect("heartbeat log")
        .into_iter()
        .next()
        .map(|t| (t.get::<String>(1).unwrap().unwrap(), t.get::<i32>(2).unwrap().unwrap(), t.get::<f64>(3).unwrap().unwrap()))
    });
    let Some((status, number, energy_start)) = log else { errors::not_found("heartbeat_id", "heartbeat", hb) };
    if status != "in_flight" {
        state_error(format!("dionysus: argument \"heartbeat_id\": heartbeat {number} is already {status}; a decision is committed once"));
    }
    let config: HashMap<String, f64> = Spi::connect(|c| {
        c.select("SELECT key, value FROM dionysus.heartbeat_config", None, &[])
            .expect("heartbeat config")
            .filter_map(|t| Some((t.get::<String>(1).ok()??, t.get::<f64>(2).ok()??)))
            .collect()
    });
    let max_attempts = config.get("work_max_attempts").copied().unwrap_or(3.0).clamp(1.0, 100.0) as i32;

    let mut taken = Vec::new();
    let mut rejected = Vec::new();
    let mut work_ids = Vec::new();
    let mut cooldown = cooldown_blocks;
    let mut remembered = false;
    let mut out_of_energy: Option<String> = None;
    // Which rejections a censor made, and which censors (joined to them after the walk).
    let mut censored: Vec<(usize, Value)> = Vec::new();
    let mut judgements: Vec<crate::censors::Judged> = Vec::new();
    for (index, item) in actions.iter().enumerate() {
        let mut reject = |action: Value, reason: String| rejected.push(json!({"index": index, "action": action, "reason": reason}));
        // The walk stops at the first action that does not fit; the rest are not done.
        if let Some(why) = &out_of_energy {
            reject(item.get("action").cloned().unwrap_or(Value::Null), why.clone());
            continue;
        }
        let Some(obj) = item.as_object() else {
            reject(Value::Null, format!("an action must be an object, not {}", crate::memory::validate::json_kind(item)));
            continue;
        };
        let Some(name) = obj.get("action").and_then(|v| v.as_str()).map(|s| s.trim().to_ascii_lowercase()) else {
            reject(Value::Null, "\"action\" must name the action".into());
            continue;
        };
        let Some(action) = actions::find(&name) else {
            reject(json!(name), format!("unknown action \"{name}\""));
            continue;
        };
        let params = match obj.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                reject(json!(name), format!("\"params\" must be an object, not {}", crate::memory::validate::json_kind(other)));
                continue;
            }
        };
        if let Err(why) = actions::validate(action, &params) {
            reject(json!(name), why);
            continue;
        }
        if action.performer == Performer::Driver && available.as_ref().is_some_and(|a| !a.contains(&name)) {
            reject(json!(name), format!("\"{name}\" is not available to this driver"));
            continue;
        }
        let Some(&cost) = config.get(&format!("cost_{name}")) else {
            reject(json!(name), format!("no cost configured for {name} (heartbeat_config.cost_{name})"));
            continue;
        };
        if cost > energy + 1e-9 {
            reject(json!(name), format!("over budget: costs {cost}, {energy} left"));
            out_of_energy = Some(format!("not reached: the walk stopped at \"{name}\", which did not fit the energy left"));
            continue;
        }
        if name == "reach_out_user" && cooldown {
            reject(json!(name), "cooldown: the user was contacted recently (or a message is on its way) and has not spoken since".into());
            continue;
        }
        if name == "reach_out_public" {
            // A public post needs a person's approval before it goes out, and no channel
            // offers that yet: refused rather than queued where nothing can approve it.
            reject(json!(name), "no public channel with an approval path exists".into());
            continue;
        }
        // Censors (sql/022_censors.sql) judge the action by its name and words: a block rejects
        // it with the reasons, a warn lets it through noted.
        let addressee = if name == "reach_out_user" {
            params.get("person").and_then(|v| v.as_str()).map(str::to_string).or_else(|| {
                // The last to write (reach_out_target's default), read without its errors:
                // complete_work asks again with the real addressee before the outbox.
                crate::spi_util::first_or_none::<String>(
                    "SELECT m.person FROM dionysus.messages m WHERE NOT m.is_bot AND m.person IS NOT NULL ORDER BY m.created_at DESC LIMIT 1",
                    &[],
                )
            })
        } else {
            None
        };
        let judged = crate::censors::judge_action(index, &name, &params, addressee);
        let verdict = crate::censors::verdict(&judged.hits);
        judgements.push(judged);
        let warned = match verdict {
            crate::censors::Verdict::Block(why, censors) => {
                reject(json!(name), why);
                censored.push((index, censors));
                continue;
            }
            crate::censors::Verdict::Warn(censors) => Some(censors),
            crate::censors::Verdict::Pass => None,
        };
        if name == "remember" {
            // The heartbeat is remembered through its narrative; one explicit memory at most.
            if remembered {
                reject(json!(name), "one remember per heartbeat (its narrative is remembered anyway)".into());
                continue;
            }
            remembered = true;
        }
        let outcome = match action.performer {
            Performer::Database => perform(hb, &name, &params),
            Performer::Driver => enqueue(hb, index, &name, &params, max_attempts, cost),
        };
        let result = match outcome {
            Ok(r) => r,
            Err(why) => {
                reject(json!(name), why);
                continue;
            }
        };
        if cost > 0.0 {
            energy = Spi::get_one_with_args::<f64>(
                "SELECT dionysus.update_energy($1, $2, $3, 'action')",
                &[(-cost).into(), hb.into(), name.clone().into()],
            )
            .expect("spend energy")
            .unwrap_or(energy - cost);
        }
        if name == "reach_out_user" {
            // On its way: a second one waits (contact time itself is set on delivery).
            cooldown = true;
        }
        if let Some(id) = result.get("work_id").and_then(|v| v.as_str()) {
            work_ids.push(id.to_string());
        }
        let result = if name == "rest" { json!({"banked": energy}) } else { result };
        let mut entry = json!({"index": index, "action": name, "params": params, "cost": cost, "result": result});
        if let Some(censors) = warned {
            entry["censor_warnings"] = censors;
        }
        taken.push(entry);
    }

    for (index, censors) in censored {
        if let Some(r) = rejected.iter_mut().find(|r| r["index"] == json!(index)) {
            r["censors"] = censors;
        }
    }
    let goals_modified: Vec<Value> = changes
        .iter()
        .map(|item| {
            let goal_id = item.get("goal_id").cloned().unwrap_or(Value::Null);
            let change = item.get("change").cloned().unwrap_or(Value::Null);
            match goal_change(item) {
                Ok(result) => json!({"goal_id": goal_id, "change": change, "applied": true, "result": result}),
                Err(reason) => json!({"goal_id": goal_id, "change": change, "applied": false, "reason": reason}),
            }
        })
        .collect();

    // The censors' activations, counted last: their rows come last in the lock order.
    crate::censors::record(hb, &judgements);

    let summary = json!({
        "heartbeat_id": hb.to_string(),
        "heartbeat_number": number,
        "energy_start": energy_start,
        "energy_end": energy,
        "actions_taken": taken,
        "actions_rejected": rejected,
        "goals_modified": goals_modified,
        "work_ids": work_ids,
    });
    Spi::run_with_args(
        "UPDATE dionysus.heartbeat_log SET status = 'committed', committed_at = now(), decision = $2, \
                decision_reasoning = $3, actions_taken = $4, actions_rejected = $5, goals_modified = $6, energy_end = $7 \
         WHERE id = $1",
        &[
            hb.into(),
            JsonB(decision.clone()).into(),
            reasoning.into(),
            JsonB(summary["actions_taken"].clone()).into(),
            JsonB(summary["actions_rejected"].clone()).into(),
            JsonB(summary["goals_modified"].clone()).into(),
            energy.into(),
        ],
    )
    .expect("record commit");
    if !work_ids.is_empty() {
        Spi::run_with_args("SELECT pg_notify('dionysus_work', $1)", &[hb.to_string().into()]).expect("notify");
    }
    JsonB(summary)
}
