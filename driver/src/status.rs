//! `dionysus status`: energy, goals, the last heartbeats, queue and outbox, memory health —
//! one screen, readable at a glance.
use crate::config::{redact, Config};
use crate::db::Db;
use serde::Deserialize;
use serde_json::Number;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// `status_report()`: what the screen shows (see its COMMENT).
#[derive(Debug, Deserialize)]
pub struct Report {
    pub now: String,
    pub hb: HeartbeatHealth,
    pub goals: Vec<GoalLine>,
    pub beats: Vec<Beat>,
    /// The work queue's items by status.
    pub queue: BTreeMap<String, f64>,
    pub messages: Messages,
    pub memory: MemoryHealth,
    pub mind: Option<ProactiveHealth>,
    pub imports: Vec<Import>,
    /// The people written with last, each in their own time.
    #[serde(default)]
    pub people: Vec<PersonTime>,
    pub waited_s: Waited,
}

/// A person's local time and where their time zone came from (status_report's `people`).
#[derive(Debug, Deserialize)]
pub struct PersonTime {
    pub person: String,
    pub time_zone: Option<String>,
    /// Where the zone came from, in the extension's words (`time_zone_source_said`).
    pub source_said: Option<String>,
    pub local_time: Option<String>,
}

/// The `heartbeat_health` view's row.
#[derive(Debug, Deserialize)]
pub struct HeartbeatHealth {
    pub current_energy: Option<f64>,
    pub total_heartbeats: Option<f64>,
    pub last_heartbeat: Option<String>,
    pub next_heartbeat: Option<String>,
    pub paused: Option<bool>,
    pub session_active: Option<bool>,
    pub active_goals: Option<f64>,
    pub queued_goals: Option<f64>,
    pub outbox_backlog: Option<f64>,
    pub awaiting_approval: Option<f64>,
    pub reach_outs_24h: Option<f64>,
    pub last_scheduler_tick: Option<String>,
    pub last_scheduler_error: Option<String>,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Deserialize)]
pub struct Warning {
    pub message: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct GoalLine {
    pub title: String,
    pub priority: String,
}

/// One heartbeat of the last five.
#[derive(Debug, Deserialize)]
pub struct Beat {
    pub n: i64,
    pub status: String,
    pub started: Option<String>,
    pub energy_start: Option<f64>,
    pub energy_end: Option<f64>,
    pub actions: Vec<Option<String>>,
    pub narrative: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Messages {
    pub total: f64,
    pub last: Option<String>,
}

/// The `memory_health` view's row.
#[derive(Debug, Deserialize)]
pub struct MemoryHealth {
    pub memories: Option<f64>,
    pub active_memories: Option<f64>,
    pub stale_neighborhoods: Option<f64>,
    pub last_worker_run: Option<String>,
    pub last_worker_error: Option<String>,
}

/// The `proactive_health` view's row.
#[derive(Debug, Deserialize)]
pub struct ProactiveHealth {
    pub mode: Option<String>,
    pub vitality: Option<f64>,
    pub pressure: Option<f64>,
    pub next_tick_at: Option<String>,
    pub last_evaluation: Option<LastEvaluation>,
}

#[derive(Debug, Deserialize)]
pub struct LastEvaluation {
    pub person: Option<String>,
    pub at: Option<String>,
    pub explanation: Option<String>,
    pub decision: Option<String>,
}

/// One import of `import_status(3)`.
#[derive(Debug, Deserialize)]
pub struct Import {
    pub kind: Option<String>,
    pub label: Option<String>,
    pub position: Option<f64>,
    pub total: Option<f64>,
    pub imported: Option<f64>,
    pub finished_at: Option<String>,
    pub extractions_waiting: Option<f64>,
}

/// How long the oldest pending work and stale neighbourhood have waited, in seconds.
#[derive(Debug, Deserialize)]
pub struct Waited {
    pub work: Option<f64>,
    pub stale: Option<f64>,
}

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
fn ago(now: &str, t: Option<&str>) -> String {
    let (Ok(n), Some(Ok(t))) = (chrono::DateTime::parse_from_rfc3339(now), t.map(chrono::DateTime::parse_from_rfc3339)) else {
        return "never".into();
    };
    let s = (n - t).num_seconds();
    if s >= 0 {
        format!("{} ago", age(s as f64))
    } else {
        format!("in {}", age(s as f64))
    }
}

/// A count as a whole number, 0 when there is none.
fn n(x: Option<f64>) -> String {
    format!("{:.0}", x.unwrap_or(0.0))
}

pub fn render(v: &Report) -> String {
    let now = v.now.as_str();
    let (hb, mem) = (&v.hb, &v.memory);
    let mut out = vec![];
    out.push(format!(
        "energy     {:.1} / 20   heartbeats {} (last {}, next {}){}{}",
        hb.current_energy.unwrap_or(0.0),
        n(hb.total_heartbeats),
        ago(now, hb.last_heartbeat.as_deref()),
        if hb.next_heartbeat.is_none() { "when due".into() } else { ago(now, hb.next_heartbeat.as_deref()) },
        if hb.paused == Some(true) { "  PAUSED" } else { "" },
        if hb.session_active == Some(true) { "  [in conversation]" } else { "" },
    ));
    out.push(format!("goals      {} active, {} queued", n(hb.active_goals), n(hb.queued_goals)));
    for g in &v.goals {
        out.push(format!("           {:<7} {}", g.priority, g.title));
    }
    out.push("heartbeats".into());
    if v.beats.is_empty() {
        out.push("           (none yet)".into());
    }
    for b in &v.beats {
        let acts: Vec<&str> = b.actions.iter().flatten().map(String::as_str).collect();
        out.push(format!(
            "           #{:<4} {:<9} {:>10}  energy {}→{}  {}",
            b.n,
            b.status,
            ago(now, b.started.as_deref()),
            n(b.energy_start),
            b.energy_end.map(|f| format!("{f:.0}")).unwrap_or_else(|| "?".into()),
            if acts.is_empty() { "(no actions)".into() } else { acts.join(", ") }
        ));
        if let Some(t) = &b.narrative {
            out.push(format!("                  \"{t}\""));
        }
    }
    let q = |status: &str| n(v.queue.get(status).copied());
    out.push(format!(
        "queue      {} pending, {} claimed, {} failed, {} done{}",
        q("pending"), q("claimed"), q("failed"), q("done"),
        v.waited_s.work.map(|s| format!("  (oldest waiting {})", age(s))).unwrap_or_default()
    ));
    out.push(format!(
        "outbox     {} pending, {} awaiting approval   reach-outs 24h: {}",
        n(hb.outbox_backlog), n(hb.awaiting_approval), n(hb.reach_outs_24h)
    ));
    out.push(format!("messages   {} logged, last {}", n(Some(v.messages.total)), ago(now, v.messages.last.as_deref())));
    for i in &v.imports {
        out.push(format!(
            "import     {} {}: {}/{} turns ({} new){}, {} extractions waiting",
            i.kind.as_deref().unwrap_or("?"),
            i.label.as_deref().unwrap_or(""),
            n(i.position),
            n(i.total),
            n(i.imported),
            match &i.finished_at {
                None => ", unfinished: run it again to resume".to_string(),
                Some(at) => format!(", done {}", ago(now, Some(at))),
            },
            n(i.extractions_waiting)
        ));
    }
    out.push(format!(
        "memory     {} memories ({} active), {} stale neighbourhoods{}, worker {}{}",
        n(mem.memories), n(mem.active_memories), n(mem.stale_neighborhoods),
        v.waited_s.stale.map(|s| format!(" (oldest {})", age(s))).unwrap_or_default(),
        ago(now, mem.last_worker_run.as_deref()),
        mem.last_worker_error.as_deref().map(|e| format!("  ERROR: {e}")).unwrap_or_default()
    ));
    for (i, p) in v.people.iter().enumerate() {
        out.push(format!(
            "{}{} — {} {} ({})",
            if i == 0 { "people     " } else { "           " },
            p.person,
            p.local_time.as_deref().unwrap_or("?"),
            p.time_zone.as_deref().unwrap_or("UTC"),
            p.source_said.as_deref().unwrap_or("?")
        ));
    }
    if let Some(mind) = &v.mind {
        out.push(format!(
            "mind       {}, vitality {:.2}, pressure {:.2}, next tick {}{}",
            mind.mode.as_deref().unwrap_or("?"),
            mind.vitality.unwrap_or(0.0),
            mind.pressure.unwrap_or(0.0),
            ago(now, mind.next_tick_at.as_deref()),
            match &mind.last_evaluation {
                Some(last) => format!(
                    "\n           last thought of {} ({}): {}{}",
                    last.person.as_deref().unwrap_or("?"),
                    ago(now, last.at.as_deref()),
                    last.explanation.as_deref().unwrap_or(""),
                    last.decision.as_deref().map(|d| format!(" → {d}")).unwrap_or_default()
                ),
                None => String::new(),
            }
        ));
    }
    out.push(format!(
        "scheduler  last tick {}{}",
        ago(now, hb.last_scheduler_tick.as_deref()),
        hb.last_scheduler_error.as_deref().map(|e| format!("  ERROR: {e}")).unwrap_or_default()
    ));
    let warnings: Vec<&str> = hb.warnings.iter().filter_map(|w| w.message.as_deref()).collect();
    if !warnings.is_empty() {
        out.push(format!("warnings   {}", warnings.join("\n           ")));
    }
    out.join("\n")
}

pub async fn run(config: &Config) -> ExitCode {
    let db = Db::new(&config.database_url, "status").with_patience(std::time::Duration::from_secs(5));
    match db.one::<Report>("SELECT dionysus.status_report()", &[]).await {
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
    let sql = "SELECT to_jsonb(e) || jsonb_build_object('now', now()) FROM dionysus.explain_contact($1, 5) e";
    match db.all::<Evaluation>(sql, &[&person]).await {
        Ok(rows) => {
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
    let answer = match db.all::<Rule>("SELECT to_jsonb(r) FROM dionysus.person_rules($1) r", &[&person]).await {
        Ok(rules) => db.all::<Learned>("SELECT to_jsonb(l) FROM dionysus.explain_learning($1, 10) l", &[&person]).await.map(|l| (rules, l)),
        Err(e) => Err(e),
    };
    match answer {
        Ok((rules, learned)) => {
            println!("Rules acting on {person}:");
            for r in rules {
                println!(
                    "  {:>4} {:<9} {:<9} {:<17} w {:.2} used {:>4}×  {} — {}",
                    r.rule_id,
                    r.origin.as_deref().unwrap_or("?"),
                    r.status.as_deref().unwrap_or("?"),
                    r.repeats.as_deref().unwrap_or("repeats"),
                    r.weight.unwrap_or(0.0),
                    r.use_count,
                    r.name.as_deref().unwrap_or("?"),
                    r.description.as_deref().unwrap_or("")
                );
            }
            if !learned.is_empty() {
                println!("Learned from their answers (newest first):");
            }
            for l in learned {
                println!(
                    "  {:<11} {:<22} {:.3} → {:.3}  ({})",
                    l.kind.as_deref().unwrap_or("?"),
                    l.target.as_deref().unwrap_or("?"),
                    l.before.unwrap_or(0.0),
                    l.after.unwrap_or(0.0),
                    l.cause.as_deref().unwrap_or("")
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

/// `person_rules(person)`: one rule acting on them.
#[derive(Debug, Deserialize)]
pub struct Rule {
    pub rule_id: i64,
    pub name: Option<String>,
    pub origin: Option<String>,
    pub status: Option<String>,
    pub weight: Option<f64>,
    pub use_count: i64,
    pub description: Option<String>,
    /// 'once' (retires after it fires), 'repeats', or 'until YYYY-MM-DD'.
    #[serde(default)]
    pub repeats: Option<String>,
}

/// `explain_learning(person, n)`: one thing learned from their answers.
#[derive(Debug, Deserialize)]
pub struct Learned {
    pub kind: Option<String>,
    pub target: Option<String>,
    pub before: Option<f64>,
    pub after: Option<f64>,
    pub cause: Option<String>,
}

/// `explain_contact(person, n)`'s row, with the time it was read (`now`).
#[derive(Debug, Deserialize)]
pub struct Evaluation {
    pub now: String,
    pub at: Option<String>,
    pub person: Option<String>,
    pub outcome: Option<String>,
    pub explanation: Option<String>,
    pub decision: Option<String>,
    pub reason: Option<String>,
    pub inputs: Option<Vec<ContactInput>>,
    pub gates: Option<Vec<Gate>>,
}

/// What pushed toward contact: an input, its value and weight, and what they gave.
#[derive(Debug, Deserialize)]
pub struct ContactInput {
    pub input: Option<String>,
    pub value: Option<Number>,
    pub weight: Option<Number>,
    pub contribution: Option<Number>,
}

/// What held contact back, or let it through.
#[derive(Debug, Deserialize)]
pub struct Gate {
    pub gate: Option<String>,
    pub passed: Option<bool>,
    pub detail: Option<String>,
}

/// A number as JSON shows it ("null" when there is none).
fn shown(x: &Option<Number>) -> String {
    x.as_ref().map_or("null".into(), Number::to_string)
}

/// One evaluation, as a person reads it.
pub fn explain(e: &Evaluation) -> String {
    let now = e.now.as_str();
    let mut out = vec![format!(
        "{} — {} ({}){}",
        e.person.as_deref().unwrap_or("?"),
        e.outcome.as_deref().unwrap_or("?"),
        ago(now, e.at.as_deref()),
        e.decision.as_deref().map(|d| format!(", decided: {d}{}", e.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())).unwrap_or_default()
    )];
    out.push(format!("  {}", e.explanation.as_deref().unwrap_or("")));
    for i in e.inputs.iter().flatten() {
        out.push(format!("  {:<14} {:>5} × {:<4} = {}", i.input.as_deref().unwrap_or("?"), shown(&i.value), shown(&i.weight), shown(&i.contribution)));
    }
    for g in e.gates.iter().flatten() {
        let passed = g.passed == Some(true);
        out.push(format!("  {} {:<13} {}", if passed { "open  " } else { "closed" }, g.gate.as_deref().unwrap_or("?"), g.detail.as_deref().unwrap_or("")));
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
        let text = explain(&serde_json::from_value(e).unwrap());
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
        assert_eq!(ago("2026-03-02T10:00:00+00:00", Some("2026-03-02T09:22:00+00:00")), "38 min ago");
        assert_eq!(ago("2026-03-02T10:00:00+00:00", Some("2026-03-02T12:00:00+00:00")), "in 2 h");
        assert_eq!(ago("2026-03-02T10:00:00+00:00", None), "never");
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
            "waited_s": {"work": 2250.011953, "stale": 183600.0}, "imports": [],
        });
        let screen = render(&serde_json::from_value(v).unwrap());
        for expected in ["last 38 min ago, next in 60 min", "3 d ago", "(oldest waiting 37 min)", "2 stale neighbourhoods (oldest 2 d)",
                         "last 2 h ago", "worker 60 s ago", "last tick 2 s ago"] {
            assert!(screen.contains(expected), "missing {expected:?} in\n{screen}");
        }
        assert!(!screen.contains("00:37") && !screen.contains("2026-") && !screen.contains("days"), "{screen}");
    }

    /// Each person in their own time, with where the zone came from.
    #[test]
    fn each_person_shows_their_local_time_and_its_source() {
        let v = json!({
            "now": "2026-03-02T10:00:00+00:00", "hb": {"warnings": []}, "goals": [], "queue": {}, "beats": [],
            "messages": {"total": 0}, "memory": {}, "waited_s": {}, "imports": [],
            "people": [{"person": "discord:owl", "time_zone": "Etc/GMT+4", "source": "inferred", "source_said": "inferred from when they write", "local_time": "Mon 06:00"},
                       {"person": "discord:ada", "time_zone": "Europe/Berlin", "source": "words", "source_said": "from their words", "local_time": "Mon 11:00"},
                       {"person": "discord:cy", "time_zone": "UTC", "source": "default", "source_said": "not known yet: UTC", "local_time": "Mon 10:00"}],
        });
        let screen = render(&serde_json::from_value(v).unwrap());
        for expected in ["people     discord:owl — Mon 06:00 Etc/GMT+4 (inferred from when they write)",
                         "           discord:ada — Mon 11:00 Europe/Berlin (from their words)",
                         "discord:cy — Mon 10:00 UTC (not known yet: UTC)"] {
            assert!(screen.contains(expected), "missing {expected:?} in\n{screen}");
        }
    }
}
