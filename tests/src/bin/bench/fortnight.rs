//! The simulated fortnight (issue #11 §4): 14 days replayed in minutes against the real
//! extension and the driver's thinking layer, with a scripted person and the scripted LLM.
//!
//! The person (UTC): asleep 23:00–07:00, at work 09:00–17:00 (answers slowly, half the time),
//! chatty in the evening (writes twice), answers other contacts within half an hour most of the
//! time — except on days 4–9, away and silent (no message, no answer: the mind must hold back
//! after three ignored contacts), after which they are back and warm again. At work their answer
//! is "busy at work, talk later"; in the evening a warm one. On day 0 they ask (as a rule) to be
//! reminded to stretch at 20:00 on weekdays. The model always says "message", so what is
//! measured is the base layer's timing. Real heartbeats run on the same clock (the driver's
//! heartbeat with a scripted "rest" decision), so contacts spend the energy they regenerate;
//! the conversation session ends 15 simulated minutes after the person's last message.
//! Figures, not assertions.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::{contact, heartbeat, Mind};
use dionysus_tests::fake_llm::FakeLlm;
use dionysus_tests::{driver_conninfo, p50_p95, scripted_driver_config, TestDb};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// A small deterministic generator: the same fortnight every run.
struct Lcg(u64);
impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

const STEP_MINUTES: i64 = 5;

fn asleep(minute_of_day: i64) -> bool {
    !(7 * 60..23 * 60).contains(&minute_of_day)
}

fn at_work(day: i64, minute_of_day: i64) -> bool {
    day % 7 < 5 && (9 * 60..17 * 60).contains(&minute_of_day)
}

fn minute_zero() -> i64 {
    7 * 60 + 30
}

pub async fn fortnight(days: i64) {
    let db = TestDb::new("bench_fortnight").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    llm.json("TASK: proactive_decision", json!({"decision": "message", "reason": "scripted", "intent": "check in"}));
    llm.json("TASK: proactive_compose && remind them of", json!({"message": "20:00 — time to stretch, as you asked."}));
    llm.json("TASK: proactive_compose", json!({"message": "Thinking of you — how is your day going?"}));
    llm.json("TASK: heartbeat", json!({"reasoning": "A quiet hour; nothing needs me.", "actions": [{"action": "rest", "params": {}}], "goal_changes": []}));
    llm.json("TASK: narrative", json!({"narrative": "I rested.", "emotional_valence": 0.0}));
    let channel = Arc::new(TestChannel::new(&["alice"]));
    let mind = Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone());
    c.batch_execute("SELECT dionysus.set_clock('2026-11-23 07:30+00')").await.unwrap(); // a Monday morning
    let mut rng = Lcg(20261123);
    let mut n_msg = 0;
    let mut say = |words: &str| {
        n_msg += 1;
        format!("SELECT dionysus.log_message('test', 'p{n_msg}', 'dm:alice', 'alice', '{}')", words.replace('\'', "''"))
    };
    c.batch_execute(&say("Hi! Nice to meet you. I just started a new job.")).await.unwrap();
    // What the fast model makes of "remind me to stretch at 8 pm on weekdays" (see rules.rs).
    c.batch_execute(
        "SELECT dionysus.add_rule('test:alice', 'remind me to stretch at 8 pm on weekdays', \
           '{\"name\": \"stretch\", \"trigger\": \"time.hour\", \"condition\": {\"all\": [{\"var\": \"person.local_dow\", \"op\": \"<=\", \"value\": 5}, \
             {\"var\": \"person.local_hour\", \"op\": \"=\", \"value\": 20}]}, \"intents\": [{\"request_contact\": \"stretch\"}]}')",
    )
    .await
    .unwrap();
    let traits_before: serde_json::Value =
        c.query_one("SELECT jsonb_object_agg(trait, round(value::numeric, 4)) FROM dionysus.personality", &[]).await.unwrap().get(0);
    let mut last_said = minute_zero();
    let mut heartbeats = 0;

    let mut tick_ms = vec![];
    let mut reminders: Vec<(i64, i64)> = vec![];
    let mut contacts: Vec<(i64, i64)> = vec![]; // (day, minute of day)
    let mut replies_due: Vec<i64> = vec![]; // absolute minute
    let mut seen_sent = 0;
    let mut evening_messages: Vec<i64> = vec![];
    let start = Instant::now();
    let total_minutes = days * 24 * 60;
    let mut minute = 7 * 60 + 30;
    while minute < total_minutes + 7 * 60 + 30 {
        minute += STEP_MINUTES;
        let (day, mod_) = (minute / 1440, minute % 1440);
        c.batch_execute(&format!("SELECT dionysus.advance_clock('{STEP_MINUTES} minutes')")).await.unwrap();
        // The heartbeat, hourly on the same clock (paused while a conversation is on).
        if minute - last_said >= 15 {
            c.batch_execute("SELECT dionysus.session_end(false) WHERE (SELECT session_active FROM dionysus.heartbeat_state)").await.unwrap();
        }
        let hb_due: bool = c.query_one("SELECT dionysus.heartbeat_due()", &[]).await.unwrap().get(0);
        if hb_due {
            heartbeat::run_once(&mind).await.expect("heartbeat");
            heartbeats += 1;
        }
        // The person's own evening messages: two a day, at random times 18:00–22:00.
        let away = (4..10).contains(&day);
        if mod_ == 18 * 60 && !away {
            evening_messages = (0..2).map(|_| day * 1440 + 18 * 60 + (rng.unit() * 240.0) as i64).collect();
        }
        let mine: Vec<i64> = evening_messages.iter().copied().filter(|&m| m <= minute).collect();
        evening_messages.retain(|&m| m > minute);
        for _ in mine {
            c.batch_execute(&say("Long day! Just relaxing now.")).await.unwrap();
            last_said = minute;
        }
        let due: Vec<i64> = replies_due.iter().copied().filter(|&m| m <= minute).collect();
        replies_due.retain(|&m| m > minute);
        for _ in due {
            let words = if at_work(day, mod_) { "Busy at work, talk later." } else { "Thanks for checking in! All good here, had a lovely walk." };
            c.batch_execute(&say(words)).await.unwrap();
            last_said = minute;
        }
        // The tick, when its dynamic interval is up (as the scheduler runs it).
        let due: bool = c.query_one("SELECT dionysus_internal.proactive_tick_due()", &[]).await.unwrap().get(0);
        if due {
            let t = Instant::now();
            c.batch_execute("SELECT dionysus.proactive_tick()").await.unwrap();
            tick_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        // The thinking layer: only at a crossing (it reads the open ones).
        contact::decide_open(&mind).await;
        let sent = channel.sent();
        for (_, text) in &sent[seen_sent..] {
            if text.starts_with("20:00 — time to stretch") {
                reminders.push((day, mod_));
                continue; // they asked for it: no answer expected
            }
            contacts.push((day, mod_));
            let (answers, delay) = if away || asleep(mod_) {
                (false, 0)
            } else if at_work(day, mod_) {
                (rng.unit() < 0.5, 60 + (rng.unit() * 90.0) as i64)
            } else {
                (rng.unit() < 0.85, 5 + (rng.unit() * 25.0) as i64)
            };
            if answers {
                replies_due.push(minute + delay);
            }
        }
        seen_sent = sent.len();
    }
    let wall = start.elapsed().as_secs_f64();
    let model_calls = llm.requests_with("TASK: proactive").len();
    let reminder_calls = llm.requests_with("remind them of").len();
    let per_day = |from: i64, to: i64| contacts.iter().filter(|(d, _)| (from..to).contains(d)).count() as f64 / (to - from) as f64;
    let in_sleep = contacts.iter().filter(|(_, m)| asleep(*m)).count();
    let available = contacts.iter().filter(|(d, m)| !asleep(*m) && !at_work(*d, *m)).count();
    let max_day = (0..days).map(|d| contacts.iter().filter(|(x, _)| *x == d).count()).max().unwrap_or(0);
    let (p50, p95) = p50_p95(&mut tick_ms);
    println!("## The simulated fortnight ({days} days, {STEP_MINUTES}-minute steps, replayed in {wall:.1} s)\n");
    println!("| figure | value | target |");
    println!("|---|---|---|");
    println!("| contacts | {} ({:.2} a day, at most {max_day} in a day) | ≤ 5 unsolicited a day |", contacts.len(), contacts.len() as f64 / days as f64);
    println!("| contacts while asleep (23:00–07:00) | {in_sleep} | 0 |");
    println!(
        "| inside available hours (awake, not at work) | {:.0} % | ≥ 90 % of awake hours |",
        100.0 * available as f64 / contacts.len().max(1) as f64
    );
    println!(
        "| inside waking hours (07:00–23:00) | {:.0} % | |",
        100.0 * (contacts.len() - in_sleep) as f64 / contacts.len().max(1) as f64
    );
    println!(
        "| model calls for unsolicited contacts | {} ({:.2} a day; {:.2} per contact) | ≤ 2 × contacts |",
        model_calls - reminder_calls,
        (model_calls - reminder_calls) as f64 / days as f64,
        (model_calls - reminder_calls) as f64 / contacts.len().max(1) as f64
    );
    let weekdays_20 = (0..days).filter(|d| d % 7 < 5).count();
    let on_time = reminders.iter().filter(|(d, m)| d % 7 < 5 && (20 * 60..20 * 60 + 15).contains(m)).count();
    println!(
        "| reminders they asked for (weekdays 20:00) | {} sent, {on_time} within 15 min of 20:00, of {weekdays_20} weekdays; {reminder_calls} model calls | one each weekday, on time |",
        reminders.len()
    );
    // When the third unanswered contact was counted (the first evaluation whose ignore gate closed).
    let paused_day: Option<f64> = c
        .query_one(
            "SELECT (extract(epoch FROM min(at) - timestamptz '2026-11-23 00:00+00') / 86400)::float8 FROM dionysus.contact_evaluations \
              WHERE gates @> '[{\"gate\": \"ignored\", \"passed\": false}]'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let during = |from: f64, to: f64| {
        contacts.iter().filter(|(d, m)| { let x = *d as f64 + *m as f64 / 1440.0; x >= from && x < to }).count() as f64 / (to - from).max(1e-9)
    };
    println!("| contacts a day, days 0–3 (answered) | {:.2} | |", per_day(0, 4));
    match paused_day {
        Some(p) if p < 10.0 => println!(
            "| contacts a day, away after three went unanswered (day {p:.1} to 10) | {:.2} | at least halved |",
            during(p, 10.0)
        ),
        _ => println!("| contacts a day after three unanswered | (never three in a row) | at least halved |"),
    }
    println!("| contacts a day, days 4–9 (away, all of it) | {:.2} | |", per_day(4, 10));
    println!("| contacts a day, days 10–13 (back, answering) | {:.2} | recovers |", per_day(10, 14.min(days)));
    println!("| proactive_tick, database time | p50 {p50:.2} ms, p95 {p95:.2} ms over {} ticks | < 5 ms |", tick_ms.len());
    let explained: i64 = c
        .query_one("SELECT count(*) FROM dionysus.contact_evaluations WHERE decision = 'message' AND explanation <> '' AND inputs <> '[]'", &[])
        .await
        .unwrap()
        .get(0);
    println!("| contacts with a logged explanation | {explained} of {} (reminders included) |  all |", contacts.len() + reminders.len());
    println!("| heartbeats on the clock | {heartbeats} ({:.1} a day) | hourly |", heartbeats as f64 / days as f64);
    let learned: serde_json::Value = c
        .query_one("SELECT coalesce(jsonb_object_agg(kind, n), '{}') FROM (SELECT kind, count(*) AS n FROM dionysus.learning_log GROUP BY kind) k", &[])
        .await
        .unwrap()
        .get(0);
    let traits_after: serde_json::Value =
        c.query_one("SELECT jsonb_object_agg(trait, round(value::numeric, 4)) FROM dionysus.personality", &[]).await.unwrap().get(0);
    let factors: serde_json::Value = c
        .query_one("SELECT coalesce(jsonb_object_agg(input, round(factor::numeric, 3)), '{}') FROM dionysus.person_contact_weights", &[])
        .await
        .unwrap()
        .get(0);
    println!("| changes learned from answers | {learned} | logged with cause |");
    println!("| personality | {traits_before} → {traits_after} | moves very slowly |");
    println!("| learned weight factors (topic) | {factors} | |");
    let when: Vec<String> = contacts.iter().map(|(d, m)| format!("day {d} {:02}:{:02}", m / 60, m % 60)).collect();
    println!("\ncontacts at: {}", when.join(", "));
    let when: Vec<String> = reminders.iter().map(|(d, m)| format!("day {d} {:02}:{:02}", m / 60, m % 60)).collect();
    println!("reminders at: {}", when.join(", "));
}
