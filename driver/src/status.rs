//! `dionysus status`: energy, goals, the last heartbeats, queue and outbox, memory health —
//! one screen, readable at a glance.
use crate::config::{redact, Config};
use crate::db::Db;
use serde_json::Value;
use std::process::ExitCode;

const SQL: &str = "SELECT jsonb_build_object(
    'hb', (SELECT to_jsonb(h) FROM dionysus.heartbeat_health h),
    'goals', (SELECT coalesce(jsonb_agg(jsonb_build_object('title', title, 'priority', priority) ORDER BY priority, last_touched DESC), '[]')
                FROM (SELECT * FROM dionysus.goals WHERE priority IN ('active', 'queued') ORDER BY priority, last_touched DESC LIMIT 8) g),
    'beats', (SELECT coalesce(jsonb_agg(b ORDER BY (b ->> 'n')::int DESC), '[]') FROM (
                SELECT jsonb_build_object('n', heartbeat_number, 'status', status, 'started', started_at,
                       'energy_start', energy_start, 'energy_end', energy_end,
                       'actions', (SELECT coalesce(jsonb_agg(a ->> 'action'), '[]') FROM jsonb_array_elements(actions_taken) a),
                       'narrative', left(narrative, 140)) AS b
                  FROM dionysus.heartbeat_log ORDER BY heartbeat_number DESC LIMIT 5) x),
    'queue', (SELECT jsonb_object_agg(status, n) FROM (SELECT status, count(*) AS n FROM dionysus.work_queue GROUP BY status) q),
    'messages', (SELECT jsonb_build_object('total', count(*), 'last', max(created_at)) FROM dionysus.messages),
    'memory', (SELECT to_jsonb(m) FROM dionysus.memory_health m),
    'now', now())";

fn ago(now: &str, t: &Value) -> String {
    let (Ok(n), Some(Ok(t))) = (chrono::DateTime::parse_from_rfc3339(now), t.as_str().map(chrono::DateTime::parse_from_rfc3339)) else {
        return "never".into();
    };
    let s = (n - t).num_seconds();
    let (v, unit) = match s.abs() {
        x if x < 120 => (x, "s"),
        x if x < 7200 => (x / 60, "min"),
        x if x < 172_800 => (x / 3600, "h"),
        x => (x / 86400, "d"),
    };
    if s >= 0 {
        format!("{v} {unit} ago")
    } else {
        format!("in {v} {unit}")
    }
}

pub fn render(v: &Value) -> String {
    let now = v["now"].as_str().unwrap_or("");
    let hb = &v["hb"];
    let mem = &v["memory"];
    let n = |x: &Value| x.as_f64().map(|f| format!("{f:.0}")).unwrap_or_else(|| "0".into());
    let mut out = vec![];
    out.push(format!(
        "energy     {:.1} / 20   heartbeats {} (last {}, next {}){}{}",
        hb["current_energy"].as_f64().unwrap_or(0.0),
        n(&hb["total_heartbeats"]),
        ago(now, &hb["last_heartbeat"]),
        if hb["next_heartbeat"].is_null() { "when due".into() } else { ago(now, &hb["next_heartbeat"]) },
        if hb["paused"] == Value::Bool(true) { "  PAUSED" } else { "" },
        if hb["session_active"] == Value::Bool(true) { "  [in conversation]" } else { "" },
    ));
    out.push(format!("goals      {} active, {} queued", n(&hb["active_goals"]), n(&hb["queued_goals"])));
    for g in v["goals"].as_array().into_iter().flatten() {
        out.push(format!("           {:<7} {}", g["priority"].as_str().unwrap_or(""), g["title"].as_str().unwrap_or("")));
    }
    out.push("heartbeats".into());
    let beats = v["beats"].as_array().cloned().unwrap_or_default();
    if beats.is_empty() {
        out.push("           (none yet)".into());
    }
    for b in beats {
        let acts: Vec<&str> = b["actions"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        out.push(format!(
            "           #{:<4} {:<9} {:>10}  energy {}→{}  {}",
            b["n"],
            b["status"].as_str().unwrap_or(""),
            ago(now, &b["started"]),
            n(&b["energy_start"]),
            b["energy_end"].as_f64().map(|f| format!("{f:.0}")).unwrap_or_else(|| "?".into()),
            if acts.is_empty() { "(no actions)".into() } else { acts.join(", ") }
        ));
        if let Some(t) = b["narrative"].as_str() {
            out.push(format!("                  \"{t}\""));
        }
    }
    let q = &v["queue"];
    out.push(format!(
        "queue      {} pending, {} claimed, {} failed, {} done{}",
        n(&q["pending"]), n(&q["claimed"]), n(&q["failed"]), n(&q["done"]),
        hb["oldest_pending_work"].as_str().map(|a| format!("  (oldest waiting {a})")).unwrap_or_default()
    ));
    out.push(format!(
        "outbox     {} pending, {} awaiting approval   reach-outs 24h: {}",
        n(&hb["outbox_backlog"]), n(&hb["awaiting_approval"]), n(&hb["reach_outs_24h"])
    ));
    out.push(format!("messages   {} logged, last {}", n(&v["messages"]["total"]), ago(now, &v["messages"]["last"])));
    out.push(format!(
        "memory     {} memories ({} active), {} stale neighbourhoods, worker {}{}",
        n(&mem["memories"]), n(&mem["active_memories"]), n(&mem["stale_neighborhoods"]),
        ago(now, &mem["last_worker_run"]),
        mem["last_worker_error"].as_str().map(|e| format!("  ERROR: {e}")).unwrap_or_default()
    ));
    out.push(format!(
        "scheduler  last tick {}{}",
        ago(now, &hb["last_scheduler_tick"]),
        hb["last_scheduler_error"].as_str().map(|e| format!("  ERROR: {e}")).unwrap_or_default()
    ));
    let warnings: Vec<String> = hb["warnings"].as_array().into_iter().flatten().filter_map(|w| w["message"].as_str().map(str::to_string)).collect();
    if !warnings.is_empty() {
        out.push(format!("warnings   {}", warnings.join("\n           ")));
    }
    out.join("\n")
}

pub async fn run(config: &Config) -> ExitCode {
    let db = Db::new(&config.database_url, "status").with_patience(std::time::Duration::from_secs(5));
    match db.json(SQL, &[]).await {
        Ok(v) => {
            println!("dionysus status — {}\n{}", redact(&config.database_url), render(&v));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dionysus status: {e}\n(run `dionysus doctor` to see what is wrong)");
            ExitCode::FAILURE
        }
    }
}
