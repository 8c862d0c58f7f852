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
    'mind', (SELECT to_jsonb(p) FROM dionysus.proactive_health p),
    'imports', dionysus.import_status(3),
    -- Intervals as seconds: their text form (\"00:37:30.011953\") is not for people.
    'waited_s', (SELECT jsonb_build_object('work', extract(epoch FROM h.oldest_pending_work), 'stale', extract(epoch FROM m.oldest_stale_age))
                   FROM dionysus.heartbeat_health h, dionysus.memory_health m),
    'now', now())";

/// A length of time as people say it: "45 s", "38 min", "2 h", "3 d".
fn age(seconds: f64) -> String {
    let s = seconds.abs().round() as i64;
    let (v, unit) = match s {
        x if x < 120 => (x, "s"),
        x if x < 7200 => (x / 60, "min"),
        x if x < 172_800 => (x / 3600, "h"),
        x => (x / 86400, "d"),
    };
    format!("{v} {unit}")
}

/// How long ago `t` was (or how long until it), "never" without a time.
fn ago(now: &str, t: &Value) -> String {
    let (Ok(n), Some(Ok(t))) = (chrono::DateTime::parse_from_rfc3339(now), t.as_str().map(chrono::DateTime::parse_from_rfc3339)) else {
        return "never".into();
    };
    let s = (n - t).num_seconds();
    if s >= 0 {
        format!("{} ago", age(s as f64))
    } else {
        format!("in {}", age(s as f64))
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
        v["waited_s"]["work"].as_f64().map(|s| format!("  (oldest waiting {})", age(s))).unwrap_or_default()
    ));
    out.push(format!(
        "outbox     {} pending, {} awaiting approval   reach-outs 24h: {}",
        n(&hb["outbox_backlog"]), n(&hb["awaiting_approval"]), n(&hb["reach_outs_24h"])
    ));
    out.push(format!("messages   {} logged, last {}", n(&v["messages"]["total"]), ago(now, &v["messages"]["last"])));
    for i in v["imports"].as_array().into_iter().flatten() {
        out.push(format!(
            "import     {} {}: {}/{} turns ({} new){}, {} extractions waiting",
            i["kind"].as_str().unwrap_or("?"),
            i["label"].as_str().unwrap_or(""),
            n(&i["position"]),
            n(&i["total"]),
            n(&i["imported"]),
            if i["finished_at"].is_null() { ", unfinished: run it again to resume".to_string() } else { format!(", done {}", ago(now, &i["finished_at"])) },
            n(&i["extractions_waiting"])
        ));
    }
    out.push(format!(
        "memory     {} memories ({} active), {} stale neighbourhoods{}, worker {}{}",
        n(&mem["memories"]), n(&mem["active_memories"]), n(&mem["stale_neighborhoods"]),
        v["waited_s"]["stale"].as_f64().map(|s| format!(" (oldest {})", age(s))).unwrap_or_default(),
        ago(now, &mem["last_worker_run"]),
        mem["last_worker_error"].as_str().map(|e| format!("  ERROR: {e}")).unwrap_or_default()
    ));
    let mind = &v["mind"];
    if mind.is_object() {
        let last = &mind["last_evaluation"];
        out.push(format!(
            "mind       {}, vitality {:.2}, pressure {:.2}, next tick {}{}",
            mind["mode"].as_str().unwrap_or("?"),
            mind["vitality"].as_f64().unwrap_or(0.0),
            mind["pressure"].as_f64().unwrap_or(0.0),
            ago(now, &mind["next_tick_at"]),
            if last.is_object() {
                format!(
                    "\n           last thought of {} ({}): {}{}",
                    last["person"].as_str().unwrap_or("?"),
                    ago(now, &last["at"]),
                    last["explanation"].as_str().unwrap_or(""),
                    last["decision"].as_str().map(|d| format!(" → {d}")).unwrap_or_default()
                )
            } else {
                String::new()
            }
        ));
    }
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

/// `dionysus why [person]`: the last evaluations of contact, each with what pushed and what
/// held back, as `explain_contact` records them.
pub async fn why(config: &Config, person: Option<&str>) -> ExitCode {
    let db = Db::new(&config.database_url, "why").with_patience(std::time::Duration::from_secs(5));
    let sql = "SELECT coalesce(jsonb_agg(to_jsonb(e) || jsonb_build_object('now', now())), '[]') FROM dionysus.explain_contact($1, 5) e";
    match db.json(sql, &[&person]).await {
        Ok(v) => {
            let rows = v.as_array().cloned().unwrap_or_default();
            if rows.is_empty() {
                println!("No contact has been weighed yet{}.", person.map(|p| format!(" for {p}")).unwrap_or_default());
            }
            for e in rows {
                println!("{}", explain(&e));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dionysus why: {e}\n(run `dionysus doctor` to see what is wrong)");
            ExitCode::FAILURE
        }
    }
}

/// `dionysus rules PERSON`: the rules that act on a person (theirs and the built-ins) and what
/// the proactive mind learned from their answers.
pub async fn rules(config: &Config, person: Option<&str>) -> ExitCode {
    let Some(person) = person else {
        eprintln!("usage: dionysus rules PERSON   (e.g. discord:1234 or terminal:you)");
        return ExitCode::FAILURE;
    };
    let db = Db::new(&config.database_url, "rules").with_patience(std::time::Duration::from_secs(5));
    let sql = "SELECT jsonb_build_object('rules', (SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]') FROM dionysus.person_rules($1) r), \
                                         'learned', (SELECT coalesce(jsonb_agg(to_jsonb(l)), '[]') FROM dionysus.explain_learning($1, 10) l))";
    match db.json(sql, &[&person]).await {
        Ok(v) => {
            println!("Rules acting on {person}:");
            for r in v["rules"].as_array().into_iter().flatten() {
                println!(
                    "  {:>4} {:<9} {:<9} w {:.2} used {:>4}×  {} — {}",
                    r["rule_id"],
                    r["origin"].as_str().unwrap_or("?"),
                    r["status"].as_str().unwrap_or("?"),
                    r["weight"].as_f64().unwrap_or(0.0),
                    r["use_count"],
                    r["name"].as_str().unwrap_or("?"),
                    r["description"].as_str().unwrap_or("")
                );
            }
            let learned = v["learned"].as_array().cloned().unwrap_or_default();
            if !learned.is_empty() {
                println!("Learned from their answers (newest first):");
            }
            for l in learned {
                println!(
                    "  {:<11} {:<22} {:.3} → {:.3}  ({})",
                    l["kind"].as_str().unwrap_or("?"),
                    l["target"].as_str().unwrap_or("?"),
                    l["before"].as_f64().unwrap_or(0.0),
                    l["after"].as_f64().unwrap_or(0.0),
                    l["cause"].as_str().unwrap_or("")
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("dionysus rules: {e}\n(run `dionysus doctor` to see what is wrong)");
            ExitCode::FAILURE
        }
    }
}

/// One evaluation, as a person reads it.
pub fn explain(e: &Value) -> String {
    let now = e["now"].as_str().unwrap_or("");
    let mut out = vec![format!(
        "{} — {} ({}){}",
        e["person"].as_str().unwrap_or("?"),
        e["outcome"].as_str().unwrap_or("?"),
        ago(now, &e["at"]),
        e["decision"].as_str().map(|d| format!(", decided: {d}{}", e["reason"].as_str().map(|r| format!(" ({r})")).unwrap_or_default())).unwrap_or_default()
    )];
    out.push(format!("  {}", e["explanation"].as_str().unwrap_or("")));
    for i in e["inputs"].as_array().into_iter().flatten() {
        out.push(format!(
            "  {:<14} {:>5} × {:<4} = {}",
            i["input"].as_str().unwrap_or("?"),
            i["value"],
            i["weight"],
            i["contribution"]
        ));
    }
    for g in e["gates"].as_array().into_iter().flatten() {
        let passed = g["passed"] == Value::Bool(true);
        out.push(format!("  {} {:<13} {}", if passed { "open  " } else { "closed" }, g["gate"].as_str().unwrap_or("?"), g["detail"].as_str().unwrap_or("")));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_evaluation_reads_as_its_reasons() {
        let e = json!({
            "now": "2026-03-02T10:00:00+00:00", "at": "2026-03-02T09:50:00+00:00", "person": "discord:ada", "outcome": "gated",
            "explanation": "pressure 0.44 against threshold 0.35; social_debt was 0.8", "decision": null,
            "inputs": [{"input": "social_debt", "value": 0.8, "weight": 0.4, "contribution": 0.32}],
            "gates": [{"gate": "quiet_hours", "passed": false, "detail": "23:00 their time"}, {"gate": "energy", "passed": true, "detail": "energy 10"}]
        });
        let text = explain(&e);
        for expected in ["discord:ada — gated (10 min ago)", "social_debt", "0.8 × 0.4", "= 0.32", "closed quiet_hours", "open   energy"] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn ages_read_as_people_say_them() {
        assert_eq!(age(45.2), "45 s");
        assert_eq!(age(2250.011953), "37 min");
        assert_eq!(age(7200.0), "2 h");
        assert_eq!(age(3.0 * 86400.0 + 5.0), "3 d");
        assert_eq!(ago("2026-03-02T10:00:00+00:00", &json!("2026-03-02T09:22:00+00:00")), "38 min ago");
        assert_eq!(ago("2026-03-02T10:00:00+00:00", &json!("2026-03-02T12:00:00+00:00")), "in 2 h");
        assert_eq!(ago("2026-03-02T10:00:00+00:00", &Value::Null), "never");
    }

    /// Every field that is a time or a length of time, as `status` prints it.
    #[test]
    fn the_screen_shows_no_raw_interval_or_timestamp() {
        let v = json!({
            "now": "2026-03-02T10:00:00+00:00",
            "hb": {"current_energy": 12.5, "total_heartbeats": 4, "last_heartbeat": "2026-03-02T09:22:00+00:00",
                   "next_heartbeat": "2026-03-02T11:00:00+00:00", "oldest_pending_work": "00:37:30.011953",
                   "last_scheduler_tick": "2026-03-02T09:59:58+00:00", "warnings": []},
            "goals": [], "queue": {"pending": 2},
            "beats": [{"n": 4, "status": "finished", "started": "2026-02-27T10:00:00+00:00", "energy_start": 12, "energy_end": 7, "actions": ["rest"]}],
            "messages": {"total": 3, "last": "2026-03-02T08:00:00+00:00"},
            "memory": {"memories": 10, "active_memories": 9, "stale_neighborhoods": 2, "oldest_stale_age": "2 days 03:00:00",
                       "last_worker_run": "2026-03-02T09:59:00+00:00"},
            "waited_s": {"work": 2250.011953, "stale": 183600.0},
        });
        let screen = render(&v);
        for expected in ["last 38 min ago, next in 60 min", "3 d ago", "(oldest waiting 37 min)", "2 stale neighbourhoods (oldest 2 d)",
                         "last 2 h ago", "worker 60 s ago", "last tick 2 s ago"] {
            assert!(screen.contains(expected), "missing {expected:?} in\n{screen}");
        }
        assert!(!screen.contains("00:37") && !screen.contains("2026-") && !screen.contains("days"), "{screen}");
    }
}
