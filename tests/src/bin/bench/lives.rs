//! Many lives (issue #36): a fortnight replayed for seven people at once, each with their own
//! time zone and day, against the real extension, the driver's thinking layer and real
//! heartbeats on the same clock (as fortnight.rs, which is written around one day-worker).
//! Every person is away and silent on days 6–9 (no message, no answer), back from day 10.
//! The model always says "message": what is measured is the base layer's timing.
//! Figures, not assertions.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::{contact, heartbeat, Mind};
use dionysus_tests::fake_llm::FakeLlm;
use dionysus_tests::{driver_conninfo, p50_p95, scripted_driver_config, TestDb};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

struct Lcg(u64);
impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

const STEP_MINUTES: i64 = 5;
const AWAY: std::ops::Range<i64> = 6..10;

/// Where a person is at a local minute of a local day (0 = Monday of the first week).
#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    Asleep,
    Busy,
    Free,
}

/// A life: how they tell us their time zone, their day, when they write, how they answer.
struct Life {
    name: &'static str,
    /// Hours ahead of UTC in late November (no daylight-saving change in the fortnight).
    offset_hours: i64,
    /// How the driver learns it: the configuration (`set_person_time_zone`, as the driver's
    /// per-person setting does), their first words, or not at all (they stay in UTC).
    zone: Zone,
    first_words: &'static str,
    state: fn(i64, i64) -> State,
    /// Local minutes of the day they may write, each with its chance.
    writes: fn(i64) -> Vec<(i64, f64)>,
    /// Chance of answering a contact while free (busy: half of it, an hour or two later).
    answers: f64,
}

enum Zone {
    Config(&'static str),
    Words,
    Unknown,
}

fn between(m: i64, from_h: f64, to_h: f64) -> bool {
    let (a, b) = ((from_h * 60.0) as i64, (to_h * 60.0) as i64);
    if a <= b { (a..b).contains(&m) } else { m >= a || m < b }
}

fn the_lives() -> Vec<Life> {
    vec![
        Life {
            name: "dayworker",
            offset_hours: 0,
            zone: Zone::Config("UTC"),
            first_words: "Hi! I just started a new job.",
            state: |d, m| if between(m, 23.0, 7.0) { State::Asleep } else if d % 7 < 5 && between(m, 9.0, 17.0) { State::Busy } else { State::Free },
            writes: |_| vec![(18 * 60 + 30, 0.9), (21 * 60, 0.7)],
            answers: 0.85,
        },
        Life {
            // Sleeps 08:00–15:30, works four nights a week (Mon–Thu 21:00–07:00), writes in the
            // afternoon and sometimes on a break at 03:00.
            name: "nurse",
            offset_hours: 1,
            zone: Zone::Words,
            first_words: "Hello! I'm in Berlin, I work nights at the hospital.",
            state: |d, m| {
                if between(m, 8.0, 15.5) { State::Asleep } else if (d % 7 < 4 && m >= 21 * 60) || ((1..5).contains(&(d % 7)) && m < 7 * 60) { State::Busy } else { State::Free }
            },
            writes: |d| { let mut w = vec![(16 * 60 + 40, 0.9), (17 * 60 + 30, 0.6)]; if (1..5).contains(&(d % 7)) { w.push((3 * 60, 0.3)); } w },
            answers: 0.8,
        },
        Life {
            // Irregular: up late, classes on weekday afternoons, sleeps in at weekends.
            name: "student",
            offset_hours: -5,
            zone: Zone::Config("America/New_York"),
            first_words: "hey, it's finals season so I'm up at weird hours",
            state: |d, m| {
                let weekend = d % 7 >= 5;
                if (!weekend && between(m, 3.0, 11.0)) || (weekend && between(m, 4.0, 12.5)) { State::Asleep }
                else if !weekend && between(m, 13.0, 16.0) { State::Busy } else { State::Free }
            },
            writes: |d| vec![(12 * 60 + 15 + (d * 37) % 90, 0.6), (17 * 60 + (d * 53) % 120, 0.8), (23 * 60 + (d * 29) % 150, 0.8)],
            answers: 0.7,
        },
        Life {
            // Up at five, in bed by nine; free all day. Tells nobody her time zone.
            name: "retiree",
            offset_hours: 9,
            zone: Zone::Unknown,
            first_words: "Good morning. My grandson set this up for me.",
            state: |_, m| if between(m, 21.0, 5.0) { State::Asleep } else { State::Free },
            writes: |_| vec![(6 * 60, 0.9), (14 * 60, 0.5)],
            answers: 0.9,
        },
        Life {
            // Weekdays taken by work and children until 21:00; free at weekends.
            name: "parent",
            offset_hours: 0,
            zone: Zone::Config("Europe/London"),
            first_words: "Hi. Weekdays are chaos here, weekends are better.",
            state: |d, m| {
                if between(m, 23.0, 6.5) { State::Asleep } else if d % 7 < 5 && between(m, 6.5, 21.0) { State::Busy } else { State::Free }
            },
            writes: |d| if d % 7 >= 5 { vec![(10 * 60, 0.9), (16 * 60, 0.7)] } else { vec![(21 * 60 + 30, 0.4)] },
            answers: 0.8,
        },
        Life {
            // Writes rarely, answers seldom but warmly; says her clock.
            name: "rare",
            offset_hours: 11,
            zone: Zone::Words,
            first_words: "hi! it's 5 pm here, just trying this out",
            state: |d, m| if between(m, 23.0, 7.0) { State::Asleep } else if d % 7 < 5 && between(m, 9.0, 17.0) { State::Busy } else { State::Free },
            writes: |d| if d % 3 == 0 { vec![(19 * 60, 0.8)] } else { vec![] },
            answers: 0.35,
        },
        Life {
            // A night owl in UTC (not a Berliner): up from noon to four in the morning.
            name: "owl",
            offset_hours: 0,
            zone: Zone::Unknown,
            first_words: "yo. I'm a night person, fair warning",
            state: |_, m| if between(m, 4.0, 12.0) { State::Asleep } else { State::Free },
            writes: |d| vec![(14 * 60, 0.6), (22 * 60 + (d * 41) % 120, 0.9), (1 * 60 + 30, 0.7)],
            answers: 0.8,
        },
    ]
}

#[derive(Default)]
struct Tally {
    contacts: Vec<(i64, i64, State)>, // local day, local minute, their state then
    reminders: Vec<(i64, i64)>,
    /// From their third day, a contact while they were asleep or busy, with what its evaluation believed.
    misses: Vec<String>,
    /// The local day of their first message: the days are counted from it.
    first_day: i64,
}

pub async fn lives(days: i64) {
    let db = TestDb::new("bench_lives").await;
    let c = &db.client;
    // DIONYSUS_BENCH_LIVES_SQL: SQL run first (a setting tried across every life, say
    // `UPDATE dionysus.proactive_config SET value = 0.2 WHERE key = 'better_moment_margin'`).
    if let Ok(sql) = std::env::var("DIONYSUS_BENCH_LIVES_SQL") {
        c.batch_execute(&sql).await.expect("DIONYSUS_BENCH_LIVES_SQL");
    }
    let llm = FakeLlm::start().await;
    llm.json("TASK: proactive_decision", json!({"decision": "message", "reason": "scripted", "intent": "check in"}));
    llm.json("TASK: proactive_compose && remind them of", json!({"message": "Reminder: call Mia, as you asked."}));
    llm.json("TASK: proactive_compose", json!({"message": "Thinking of you — how are things?"}));
    llm.json("TASK: heartbeat", json!({"reasoning": "A quiet hour.", "actions": [{"action": "rest", "params": {}}], "goal_changes": []}));
    llm.json("TASK: narrative", json!({"narrative": "I rested.", "emotional_valence": 0.0}));
    let people = the_lives();
    let names: Vec<&str> = people.iter().map(|l| l.name).collect();
    let channel = Arc::new(TestChannel::new(&names));
    let mind = Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone());
    c.batch_execute("SELECT dionysus.set_clock('2026-11-23 00:00+00')").await.unwrap(); // a Monday
    let mut rng = Lcg(20261123);
    let mut n_msg = 0;
    let mut tally: Vec<Tally> = people.iter().map(|_| Tally::default()).collect();
    let mut replies_due: Vec<(usize, i64, &'static str)> = vec![];
    let mut planned: Vec<(usize, i64)> = vec![]; // (person, absolute UTC minute)
    let mut tick_ms = vec![];
    // (people the tick evaluated, its time): a tick's cost is mostly the people it evaluates.
    let mut tick_by_evaluated: Vec<(i64, f64)> = vec![];
    let mut seen_sent = 0;
    let mut last_said = 0;
    let start = Instant::now();
    let local = |l: &Life, minute: i64| { let x = minute + l.offset_hours * 60; (x.div_euclid(1440), x.rem_euclid(1440)) };
    for (i, l) in people.iter().enumerate() {
        if let Zone::Config(z) = l.zone {
            c.execute("SELECT dionysus.set_person_time_zone($1, $2, 'config')", &[&format!("test:{}", l.name), &z]).await.unwrap();
        }
        let _ = i;
    }
    let mut minute: i64 = 0;
    let mut said_first = vec![false; people.len()];
    while minute < days * 1440 {
        minute += STEP_MINUTES;
        c.batch_execute(&format!("SELECT dionysus.advance_clock('{STEP_MINUTES} minutes')")).await.unwrap();
        if minute - last_said >= 15 {
            c.batch_execute("SELECT dionysus.session_end(false) WHERE (SELECT session_active FROM dionysus.heartbeat_state)").await.unwrap();
        }
        if c.query_one("SELECT dionysus.heartbeat_due()", &[]).await.unwrap().get::<_, bool>(0) {
            heartbeat::run_once(&mind).await.expect("heartbeat");
        }
        let mut say = |who: usize, words: &str| {
            n_msg += 1;
            let n = people[who].name;
            format!("SELECT dionysus.log_message('test', 'p{n_msg}', 'dm:{n}', '{n}', '{}')", words.replace('\'', "''"))
        };
        for (i, l) in people.iter().enumerate() {
            let (d, m) = local(l, minute);
            // Their own messages: planned at local midnight for the day, from their habits.
            if m < STEP_MINUTES && !AWAY.contains(&d) {
                for (at, p) in (l.writes)(d) {
                    if rng.unit() < p {
                        planned.push((i, minute - m + at + (rng.unit() * 20.0) as i64));
                    }
                }
            }
            if !said_first[i] && (l.state)(d, m) == State::Free && m >= 6 * 60 + 50 && m < 20 * 60 {
                said_first[i] = true;
                tally[i].first_day = d;
                c.batch_execute(&say(i, l.first_words)).await.unwrap();
                last_said = minute;
                if l.name == "nurse" {
                    // A one-off in her words, as the fast model makes it (rule_from_words v2).
                    c.batch_execute(
                        "SELECT dionysus.add_rule('test:nurse', 'remind me to call Mia on Sunday at 18:00', \
                           '{\"name\": \"call Mia\", \"trigger\": \"time.hour\", \"once\": true, \"condition\": {\"all\": [\
                             {\"var\": \"person.local_dow\", \"op\": \"=\", \"value\": 7}, {\"var\": \"person.local_hour\", \"op\": \"=\", \"value\": 18}]}, \
                             \"intents\": [{\"request_contact\": \"call Mia\"}]}')",
                    )
                    .await
                    .unwrap();
                }
            }
        }
        let mine: Vec<(usize, i64)> = planned.iter().copied().filter(|&(_, at)| at <= minute).collect();
        planned.retain(|&(_, at)| at > minute);
        for (i, _) in mine {
            if said_first[i] {
                c.batch_execute(&say(i, "Just checking in myself — long day.")).await.unwrap();
                last_said = minute;
            }
        }
        let due: Vec<(usize, i64, &str)> = replies_due.iter().copied().filter(|&(_, at, _)| at <= minute).collect();
        replies_due.retain(|&(_, at, _)| at > minute);
        for (i, _, words) in due {
            c.batch_execute(&say(i, words)).await.unwrap();
            last_said = minute;
        }
        if c.query_one("SELECT dionysus_internal.proactive_tick_due()", &[]).await.unwrap().get::<_, bool>(0) {
            let t = Instant::now();
            let r: serde_json::Value = c.query_one("SELECT dionysus.proactive_tick()", &[]).await.unwrap().get(0);
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            tick_ms.push(ms);
            tick_by_evaluated.push((r["evaluated"].as_i64().unwrap_or(0), ms));
        }
        contact::decide_open(&mind).await;
        let sent = channel.sent();
        for (chan, text) in &sent[seen_sent..] {
            let Some(i) = people.iter().position(|l| chan == &format!("dm:{}", l.name)) else { continue };
            let l = &people[i];
            let (d, m) = local(l, minute);
            if text.starts_with("Reminder:") {
                tally[i].reminders.push((d, m));
                continue;
            }
            let st = (l.state)(d, m);
            tally[i].contacts.push((d, m, st));
            if d >= tally[i].first_day + 3 && st != State::Free {
                let why: String = c
                    .query_one(
                        "SELECT coalesce(string_agg(g ->> 'gate' || ': ' || (g ->> 'detail'), '; '), '') FROM dionysus.contact_evaluations e, \
                                jsonb_array_elements(e.gates) g \
                          WHERE e.id = (SELECT id FROM dionysus.contact_evaluations WHERE person = $1 AND decision = 'message' \
                                         ORDER BY decided_at DESC, recorded_at DESC LIMIT 1) \
                            AND g ->> 'gate' IN ('quiet_hours', 'availability', 'better_moment')",
                        &[&format!("test:{}", l.name)],
                    )
                    .await
                    .map(|r| r.get(0))
                    .unwrap_or_default();
                tally[i].misses.push(format!("day {d} {:02}:{:02} ({st:?}): {why}", m / 60, m % 60));
            }
            let (p, delay, words) = match st {
                _ if AWAY.contains(&d) => (0.0, 0, ""),
                State::Asleep => (0.0, 0, ""),
                State::Busy => (l.answers * 0.5, 60 + (rng.unit() * 60.0) as i64, "Not now, busy — talk later."),
                State::Free => (l.answers, 5 + (rng.unit() * 25.0) as i64, "Thanks for checking in! All good here."),
            };
            if rng.unit() < p {
                replies_due.push((i, minute + delay, words));
            }
        }
        seen_sent = sent.len();
    }
    let wall = start.elapsed().as_secs_f64();
    let proactive_calls = llm.requests_with("TASK: proactive").len() - llm.requests_with("remind them of").len();
    let (p50, p95) = p50_p95(&mut tick_ms);
    println!("## Many lives ({days} days, {} people, {STEP_MINUTES}-minute steps, replayed in {wall:.1} s)\n", people.len());
    println!("| person | zone (source) | contacts | asleep (from their day 3) | in free hours from their day 3 | max a day | before / away / back a day | away ÷ before | after 3 ignored ÷ before | recovered | reminders |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let (mut all_n, mut all_sleep, mut all_sleep3, mut all_free3, mut all_n3, mut all_max) = (0, 0, 0, 0, 0, 0);
    let (mut all_before, mut all_away, mut all_back, mut all_after) = (0.0, 0.0, 0.0, 0.0);
    for (i, l) in people.iter().enumerate() {
        let t = &tally[i];
        // From their third day: someone who first writes on a Saturday is new on the Monday.
        let from3: Vec<_> = t.contacts.iter().filter(|(d, _, _)| *d >= t.first_day + 3).collect();
        let free3 = from3.iter().filter(|(_, _, s)| *s == State::Free).count();
        let asleep = t.contacts.iter().filter(|(_, _, s)| *s == State::Asleep).count();
        let asleep3 = from3.iter().filter(|(_, _, s)| *s == State::Asleep).count();
        let max_day = (0..=days).map(|d| t.contacts.iter().filter(|(x, _, _)| *x == d).count()).max().unwrap_or(0);
        let rate = |r: std::ops::Range<i64>| t.contacts.iter().filter(|(d, _, _)| r.contains(d)).count() as f64 / (r.end - r.start) as f64;
        let (before, away, back) = (rate(2..AWAY.start), rate(AWAY), rate(AWAY.end..days));
        // From the third contact left unanswered in the away days to their end: what the pause holds.
        let third = t.contacts.iter().filter(|(d, _, _)| AWAY.contains(d)).nth(2).map(|(d, m, _)| *d as f64 + *m as f64 / 1440.0);
        let after_third = third.map(|x| {
            let n = t.contacts.iter().filter(|(d, m, _)| { let y = *d as f64 + *m as f64 / 1440.0; y > x && y < AWAY.end as f64 }).count();
            n as f64 / (AWAY.end as f64 - x).max(0.25)
        });
        let recovered: bool = c
            .query_one("SELECT coalesce((SELECT ignored_in_row = 0 FROM dionysus.people WHERE person = $1), false)", &[&format!("test:{}", l.name)])
            .await
            .map(|r| r.get(0))
            .unwrap_or(false);
        let zone: (String, String) = c
            .query_one("SELECT time_zone, time_zone_source FROM dionysus.people WHERE person = $1", &[&format!("test:{}", l.name)])
            .await
            .map(|r| (r.get(0), r.get(1)))
            .unwrap_or_default();
        println!(
            "| {} | {} ({}) | {} | {asleep} ({asleep3}) | {} | {max_day} | {before:.2} / {away:.2} / {back:.2} | {} | {} | {} | {} |",
            l.name,
            zone.0,
            zone.1,
            t.contacts.len(),
            if from3.is_empty() { "–".into() } else { format!("{:.0} % ({free3} of {})", 100.0 * free3 as f64 / from3.len() as f64, from3.len()) },
            if before > 0.0 { format!("{:.2}", away / before) } else { "–".into() },
            match after_third { Some(a) if before > 0.0 => format!("{:.2}", a / before), _ => "–".into() },
            if recovered { "yes" } else { "no" },
            if t.reminders.is_empty() { String::new() } else { t.reminders.iter().map(|(d, m)| format!("day {d} {:02}:{:02}", m / 60, m % 60)).collect::<Vec<_>>().join(", ") }
        );
        all_n += t.contacts.len();
        all_sleep += asleep;
        all_sleep3 += asleep3;
        all_free3 += free3;
        all_n3 += from3.len();
        all_max = all_max.max(max_day);
        all_before += before;
        all_away += away;
        all_back += back;
        all_after += after_third.unwrap_or(0.0);
    }
    println!(
        "| **all** | | {all_n} | {all_sleep} (**{all_sleep3}**, goal 0) | **{:.0} %** (goal ≥ 90 %) | **{all_max}** (≤ 5) | {all_before:.2} / {all_away:.2} / {all_back:.2} | {:.2} | **{:.2}** (≤ 0.5) | | |",
        100.0 * all_free3 as f64 / all_n3.max(1) as f64,
        if all_before > 0.0 { all_away / all_before } else { f64::NAN },
        if all_before > 0.0 { all_after / all_before } else { f64::NAN }
    );
    println!();
    println!("| figure | value | goal |");
    println!("|---|---|---|");
    println!("| model calls per unsolicited contact | {:.2} ({proactive_calls} for {all_n}) | ≤ 2 |", proactive_calls as f64 / all_n.max(1) as f64);
    println!("| proactive_tick | p50 {p50:.2} ms, p95 {p95:.2} ms over {} ticks | ≤ 5 ms |", tick_ms.len());
    for (what, range) in [("nobody", 0..=0), ("1–3 people", 1..=3), ("4 or more", 4..=i64::MAX)] {
        let mut ms: Vec<f64> = tick_by_evaluated.iter().filter(|(n, _)| range.contains(n)).map(|&(_, ms)| ms).collect();
        if !ms.is_empty() {
            let (a, b) = p50_p95(&mut ms);
            println!("| proactive_tick evaluating {what} | p50 {a:.2} ms, p95 {b:.2} ms over {} ticks | ≤ 5 ms |", ms.len());
        }
    }
    let rules: Vec<(String, String)> = c
        .query("SELECT name, status || ' (' || repeats || ')' FROM dionysus.person_rules('test:nurse') WHERE origin = 'person'", &[])
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .unwrap_or_default();
    println!("| the nurse's \"call Mia on Sunday at 18:00\" | {rules:?} | sent once, then done |");
    db.hold_worker_off().await; // (its own passes would compete for the locks timed)
    history_figures(c, days).await;
    for (i, l) in people.iter().enumerate() {
        let when: Vec<String> = tally[i].contacts.iter().map(|(d, m, s)| format!("{d} {:02}:{:02}{}", m / 60, m % 60, match s { State::Asleep => "z", State::Busy => "b", State::Free => "" })).collect();
        println!("{}: {}", l.name, when.join(", "));
    }
    for (i, l) in people.iter().enumerate() {
        for miss in &tally[i].misses {
            println!("{} at a wrong hour, {miss}", l.name);
        }
    }
}

/// A tick and a message, each in a transaction rolled back, on the replay's history and then on
/// the history of a season: what they read of the past must not grow with it (an answer to a
/// contact once read every evaluation of theirs kept: 96 a day, for retention_days).
async fn history_figures(c: &tokio_postgres::Client, days: i64) {
    /// Per call, each in a transaction rolled back: a tick, an answer, retention's pass, the scheduler's tick.
    async fn timed(c: &tokio_postgres::Client) -> [Vec<f64>; 4] {
        let (mut tick, mut message, mut prune, mut scheduler) = (vec![], vec![], vec![], vec![]);
        for k in 0..40 {
            c.batch_execute("BEGIN; SELECT dionysus.advance_clock('20 minutes')").await.unwrap();
            let t = Instant::now();
            c.batch_execute("SELECT dionysus.proactive_tick()").await.unwrap();
            tick.push(t.elapsed().as_secs_f64() * 1000.0);
            // Her answer to a contact sent ten minutes before (the path that reads the last one sent).
            c.batch_execute(
                "ROLLBACK; BEGIN; UPDATE dionysus.people SET awaiting_reply = true, last_contact_at = dionysus.clock_now() - interval '10 minutes' \
                  WHERE person = 'test:nurse'",
            )
            .await
            .unwrap();
            let t = Instant::now();
            c.batch_execute(&format!("SELECT dionysus.log_message('test', 'history{k}', 'dm:nurse', 'nurse', 'Back from the night shift, so tired')"))
                .await
                .unwrap();
            message.push(t.elapsed().as_secs_f64() * 1000.0);
            for (sql, into) in [("SELECT dionysus.prune_history()", &mut prune), ("SELECT dionysus.scheduler_tick()", &mut scheduler)] {
                c.batch_execute("ROLLBACK; BEGIN").await.unwrap();
                let t = Instant::now();
                c.batch_execute(sql).await.unwrap();
                into.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            c.batch_execute("ROLLBACK").await.unwrap();
        }
        [tick, message, prune, scheduler]
    }
    let mut before = timed(c).await;
    // The replay's past again, each copy a replay further back, up to 12 weeks (inside the
    // default 90 days of retention): evaluations, handled events, rule firings, finished
    // heartbeats and their energy, finished work, delivered messages, turns and episodes.
    let copies = (84 / days.max(1) - 1).max(1);
    c.batch_execute(&format!(
        "INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, threshold_parts, gates, outcome, explanation,
                                                   decision, decided_by, decided_at, reason, solicited, feedback, feedback_at)
         SELECT person, at - k * interval '{days} days', inputs, pressure, threshold, threshold_parts, gates, outcome, explanation,
                decision, decided_by, decided_at - k * interval '{days} days', reason, solicited, feedback, feedback_at - k * interval '{days} days'
           FROM dionysus.contact_evaluations, generate_series(1, {copies}) k;
         INSERT INTO dionysus.events (source, channel, type, priority, person, payload, at, status, handled_at, reason, merged)
         SELECT source, channel, type, priority, person, payload, at - k * interval '{days} days', status, handled_at - k * interval '{days} days', reason, merged
           FROM dionysus.events, generate_series(1, {copies}) k WHERE status NOT IN ('queued', 'scheduled');
         INSERT INTO dionysus.rule_firings (at, person, trigger, inputs, fired)
         SELECT at - k * interval '{days} days', person, trigger, inputs, fired FROM dionysus.rule_firings, generate_series(1, {copies}) k;
         INSERT INTO dionysus.heartbeat_log (heartbeat_number, status, started_at, committed_at, ended_at, energy_start, energy_end, context, decision,
                                             actions_taken, narrative, last_alive_at)
         SELECT heartbeat_number, status, started_at - k * interval '{days} days', committed_at - k * interval '{days} days',
                ended_at - k * interval '{days} days', energy_start, energy_end, context, decision, actions_taken, narrative,
                last_alive_at - k * interval '{days} days'
           FROM dionysus.heartbeat_log, generate_series(1, {copies}) k WHERE status IN ('finished', 'recovered');
         INSERT INTO dionysus.energy_ledger (at, action, delta, energy_before, energy_after, reason)
         SELECT at - k * interval '{days} days', action, delta, energy_before, energy_after, reason FROM dionysus.energy_ledger, generate_series(1, {copies}) k;
         INSERT INTO dionysus.work_queue (idempotency_key, action, params, status, attempts, result, created_at, available_at, completed_at)
         SELECT idempotency_key || ':aged' || k, action, params, status, attempts, result, created_at - k * interval '{days} days',
                available_at - k * interval '{days} days', completed_at - k * interval '{days} days'
           FROM dionysus.work_queue, generate_series(1, {copies}) k WHERE status IN ('done', 'failed');
         INSERT INTO dionysus.outbox (audience, content, status, attempts, platform_message_id, created_at, sent_at, person, platform, channel_id)
         SELECT audience, content, status, attempts, platform_message_id || ':aged' || k, created_at - k * interval '{days} days',
                sent_at - k * interval '{days} days', person, platform, channel_id
           FROM dionysus.outbox, generate_series(1, {copies}) k WHERE status = 'sent';
         INSERT INTO dionysus.messages (platform, platform_message_id, channel_id, author_id, is_bot, is_proactive, content, created_at, person)
         SELECT platform, platform_message_id || ':aged' || k, channel_id, author_id, is_bot, is_proactive, content,
                created_at - k * interval '{days} days', person
           FROM dionysus.messages, generate_series(1, {copies}) k;
         INSERT INTO dionysus.episodes (source, title, started_at, last_event_at, ended_at, memory_count, summary, summary_embedding, person)
         SELECT source, title, started_at - k * interval '{days} days', last_event_at - k * interval '{days} days',
                coalesce(ended_at, last_event_at) - k * interval '{days} days', memory_count, coalesce(summary, 'summarised'), summary_embedding, person
           FROM dionysus.episodes, generate_series(1, {copies}) k;
         ANALYZE;"
    ))
    .await
    .unwrap();
    let mut after = timed(c).await;
    let weeks = ((copies + 1) * days) as f64 / 7.0;
    let what = ["a tick 20 minutes on", "an answer to a contact", "retention's pass (prune_history)", "the scheduler's tick"];
    for (i, what) in what.iter().enumerate() {
        let ((b50, b95), (a50, a95)) = (p50_p95(&mut before[i]), p50_p95(&mut after[i]));
        println!("| {what}, rolled back (40): {days} days of history → {weeks:.0} weeks | p50 {b50:.2} → {a50:.2} ms ({:.2}×), p95 {b95:.2} → {a95:.2} ms | ≈ 1× |", a50 / b50);
    }
}
