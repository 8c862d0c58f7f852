//! A mind that fits any life (#36): evidence beats the prior, silence slows contact at once,
//! a one-off stays a one-off, each person lives in their own time zone, and the session's
//! idleness is read on the same clock. Days pass by driving the extension's clock.
use dionysus_tests::{expect_error, TestDb};
use serde_json::{json, Value};
use tokio_postgres::Client;

async fn at(c: &Client, t: &str) {
    c.execute("SELECT dionysus.set_clock($1::text::timestamptz)", &[&t]).await.unwrap();
}

async fn advance(c: &Client, by: &str) {
    c.execute("SELECT dionysus.advance_clock($1::text::interval)", &[&by]).await.unwrap();
}

async fn say(c: &Client, who: &str, id: &str, words: &str) -> Value {
    c.query_one("SELECT dionysus.log_message('test', $1, $2, $3, $4)", &[&id, &format!("dm:{who}"), &who, &words]).await.unwrap().get(0)
}

/// The availability believed for a person at an instant (their local time given with its zone).
async fn belief(c: &Client, who: &str, when: &str) -> f64 {
    c.query_one("SELECT belief FROM dionysus_internal.availability($1, $2::text::timestamptz)", &[&who, &when]).await.unwrap().get(0)
}

/// A night-shift nurse in Berlin who writes around 16:30 every day: within three days her
/// sleeping morning is believed unavailable whatever the day-worker prior said, an hour she
/// writes at is believed free on a weekday she never wrote on yet, and one ignored contact at
/// an hour nothing was learned about pulls that hour down, prior included.
#[tokio::test]
async fn evidence_beats_the_prior_within_three_days() {
    let db = TestDb::new("lives_prior").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 15:30+00").await; // Monday 16:30 in Berlin
    c.execute("SELECT dionysus.set_person_time_zone('test:nurse', 'Europe/Berlin')", &[]).await.unwrap();
    for day in 0..3 {
        say(c, "nurse", &format!("a{day}"), "Up again, coffee first.").await;
        advance(c, "1 hour").await;
        say(c, "nurse", &format!("b{day}"), "Off to work soon.").await;
        advance(c, "23 hours").await;
    }
    let min: f64 = c.query_one("SELECT value FROM dionysus.proactive_config WHERE key = 'min_availability'", &[]).await.unwrap().get(0);
    // Thursday 08:00 Berlin: she is asleep; the prior alone believed 0.6.
    let asleep = belief(c, "test:nurse", "2026-11-26 08:00+01").await;
    assert!(asleep < min, "her sleeping morning is believed available ({asleep:.2}, min {min})");
    // Friday 16:00 Berlin: no Friday seen yet, but she writes at 16:30 every day.
    let friday = belief(c, "test:nurse", "2026-11-27 16:00+01").await;
    assert!(friday >= 0.5, "an hour she writes at every day is not believed on a new weekday ({friday:.2})");
    // One contact at Saturday 11:00 went unanswered: that hour falls, prior and all.
    let before = belief(c, "test:stranger", "2026-11-28 11:00+00").await;
    c.batch_execute("SELECT dionysus_internal.person_row('test:stranger'); \
                     SELECT dionysus_internal.note_miss('test:stranger', '2026-11-28 11:00+00', 1)")
        .await
        .unwrap();
    let after = belief(c, "test:stranger", "2026-11-28 11:00+00").await;
    assert!(after < before * 0.8, "an ignored contact left the prior's hour at {after:.2} (was {before:.2})");
    // The prior is data per person too: her own quiet hours.
    c.execute("SELECT dionysus.set_person_prior('test:stranger', '{\"quiet_start_hour\": 8, \"quiet_end_hour\": 16}')", &[]).await.unwrap();
    assert!(belief(c, "test:stranger", "2026-11-30 10:00+00").await < 0.1, "her own quiet hours were not used");
    let (code, msg) = expect_error(c, "SELECT dionysus.set_person_prior('test:stranger', '{\"bedtime\": 3}')").await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("prior"), "{msg}");
}

/// A parent busy until 21:00 on weekdays who writes at 21:30 and at weekends: once her rhythm is
/// trusted, a contact due at 20:00 waits for her free hour, though what she taught us makes
/// 21:00 less than the full margin better (a trusted rhythm needs less of a difference); a
/// stranger's prior alone (busy at 10, free at 17) still waits for nothing.
#[tokio::test]
async fn a_trusted_rhythm_waits_for_the_free_hour_it_knows() {
    let db = TestDb::new("lives_better").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 21:30+00").await; // Monday 21:30 in London
    c.execute("SELECT dionysus.set_person_time_zone('test:parent', 'Europe/London', 'config')", &[]).await.unwrap();
    // Two weeks from Monday 23 November: weekdays at 21:30, Saturdays and Sundays at 10 and 16.
    for day in 0..14 {
        let date = format!("2026-{}", if day < 8 { format!("11-{}", 23 + day) } else { format!("12-{:02}", day - 7) });
        if day % 7 >= 5 {
            at(c, &format!("{date} 10:00+00")).await;
            say(c, "parent", &format!("w{day}a"), "Finally a slow morning.").await;
            at(c, &format!("{date} 16:00+00")).await;
            say(c, "parent", &format!("w{day}b"), "Park with the kids, then tea.").await;
        } else {
            at(c, &format!("{date} 21:30+00")).await;
            say(c, "parent", &format!("d{day}"), "Kids in bed at last.").await;
        }
    }
    // Two weeks later (a holiday: nothing from her since Sunday the 6th at 16:00, so her rhythm
    // is trusted less than fully), Tuesday 20:00: she is still busy, from 21:00 she is not.
    at(c, "2026-12-22 20:00+00").await;
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20; \
                     UPDATE dionysus.people SET social_debt = 0.95, next_check_at = NULL WHERE person = 'test:parent'; \
                     SELECT dionysus.proactive_tick()")
        .await
        .unwrap();
    let e: Value = c.query_one("SELECT to_jsonb(e) FROM dionysus.explain_contact('test:parent') e", &[]).await.unwrap().get(0);
    let now = belief(c, "test:parent", "2026-12-22 20:00+00").await;
    let later = belief(c, "test:parent", "2026-12-22 21:00+00").await;
    let margin: f64 = c.query_one("SELECT value FROM dionysus.proactive_config WHERE key = 'better_moment_margin'", &[]).await.unwrap().get(0);
    assert!(later > now && later - now < margin, "21:00 is better by {:.2} (the full margin is {margin})", later - now);
    let gate = e["gates"].as_array().unwrap().iter().find(|g| g["gate"] == "better_moment").cloned().unwrap_or_else(|| panic!("{e}"));
    assert_eq!(gate["passed"], json!(false), "a contact at 20:00 did not wait for 21:00: {e}");
    assert!(gate["detail"].as_str().unwrap().contains("21:00"), "{gate}");
}

/// Each contact left unanswered doubles the wait before the next, so three ignored contacts
/// cannot fall into one day (6-hour answer window + 4-hour cooldown fitted three before).
#[tokio::test]
async fn each_ignored_contact_doubles_the_wait() {
    let db = TestDb::new("lives_ignored").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "alice", "a1", "Hello there").await;
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20; \
                     UPDATE dionysus.people SET awaiting_reply = true, last_contact_at = dionysus.clock_now() WHERE person = 'test:alice'")
        .await
        .unwrap();
    // Seven hours later: the contact counts as ignored, and the wait is now eight hours.
    advance(c, "7 hours").await;
    c.batch_execute("UPDATE dionysus.people SET next_check_at = NULL WHERE person = 'test:alice'; SELECT dionysus.proactive_tick()").await.unwrap();
    let e: Value = c.query_one("SELECT to_jsonb(e) FROM dionysus.explain_contact('test:alice') e", &[]).await.unwrap().get(0);
    let cooldown = e["gates"].as_array().unwrap().iter().find(|g| g["gate"] == "cooldown").unwrap().clone();
    assert_eq!(cooldown["passed"], json!(false), "7 hours after an ignored contact the next may go: {cooldown}");
    assert!(cooldown["detail"].as_str().unwrap().contains("doubled"), "{cooldown}");
}

/// "on Sunday" fires once and retires itself, "every Sunday" repeats, an end date ends a rule;
/// person_rules says which is which.
#[tokio::test]
async fn a_one_off_fires_once_and_an_end_ends() {
    let db = TestDb::new("lives_once").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-20 09:00+00").await; // Friday
    say(c, "alice", "a1", "hi").await;
    let rule = |name: &str, extra: &str| {
        format!(
            "SELECT dionysus.add_rule('test:alice', 'words', '{{\"name\": \"{name}\", \"trigger\": \"time.hour\", {extra} \
               \"condition\": {{\"all\": [{{\"var\": \"person.local_dow\", \"op\": \"=\", \"value\": 7}}, {{\"var\": \"person.local_hour\", \"op\": \"=\", \"value\": 11}}]}}, \
               \"intents\": [{{\"adjust\": \"person.curiosity\", \"by\": 0.01}}]}}')"
        )
    };
    c.batch_execute(&rule("once", "\"once\": true,")).await.unwrap();
    c.batch_execute(&rule("every", "\"once\": false,")).await.unwrap();
    c.batch_execute(&rule("until", "\"ends_on\": \"2026-11-25\",")).await.unwrap();
    let (code, msg) = expect_error(c, &rule("past", "\"ends_on\": \"2026-01-01\",")).await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("ends_on"), "{msg}");
    // Two Sundays at 11:00.
    for sunday in ["2026-11-22", "2026-11-29"] {
        at(c, &format!("{sunday} 10:50+00")).await;
        c.batch_execute("SELECT dionysus.proactive_tick()").await.unwrap();
        advance(c, "11 minutes").await;
        c.batch_execute("SELECT dionysus.proactive_tick()").await.unwrap();
    }
    let rows: Vec<(String, String, String, i64)> = c
        .query("SELECT name, status, repeats, use_count FROM dionysus.person_rules('test:alice') WHERE origin = 'person' ORDER BY name", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("every".to_string(), "active".to_string(), "repeats".to_string(), 2),
            ("once".to_string(), "done".to_string(), "once".to_string(), 1),
            ("until".to_string(), "ended".to_string(), "until 2026-11-25".to_string(), 1),
        ]
    );
}

/// "I'm in Berlin", "it's 3 am here": the words set the time zone (and what was learned of the
/// rhythm moves with it); the configuration outranks words, words outrank a guess.
#[tokio::test]
async fn their_words_and_the_configuration_set_the_time_zone() {
    let db = TestDb::new("lives_zone").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 14:00+00").await;
    let zone = |who: &'static str| async move {
        let r = c.query_one("SELECT time_zone, time_zone_source FROM dionysus.people WHERE person = $1", &[&who]).await.unwrap();
        (r.get::<_, String>(0), r.get::<_, String>(1))
    };
    say(c, "ada", "a1", "Hi! I'm in Berlin for the winter.").await;
    assert_eq!(zone("test:ada").await, ("Europe/Berlin".to_string(), "words".to_string()));
    let hour: i16 = c.query_one("SELECT hour_of_week FROM dionysus.person_rhythm WHERE person = 'test:ada'", &[]).await.unwrap().get(0);
    assert_eq!(hour, 15, "her first message is at 15:00 Berlin time");
    say(c, "bo", "b1", "it's 3 am here and I can't sleep").await;
    assert_eq!(zone("test:bo").await, ("Etc/GMT+11".to_string(), "words".to_string()));
    say(c, "cy", "c1", "I'm in a meeting, talk later").await;
    assert_eq!(zone("test:cy").await, ("UTC".to_string(), "default".to_string()));
    // The configuration outranks words; words do not override it.
    c.execute("SELECT dionysus.set_person_time_zone('test:cy', 'America/New_York', 'config')", &[]).await.unwrap();
    let hour: i16 = c.query_one("SELECT hour_of_week FROM dionysus.person_rhythm WHERE person = 'test:cy'", &[]).await.unwrap().get(0);
    assert_eq!(hour, 9, "the rhythm did not move with the zone (14:00 UTC is 09:00 in New York)");
    say(c, "cy", "c2", "I'm in Tokyo now").await;
    assert_eq!(zone("test:cy").await, ("America/New_York".to_string(), "config".to_string()));
    let (code, msg) = expect_error(c, "SELECT dionysus.set_person_time_zone('test:cy', 'Europe/Paris', 'rumour')").await;
    assert_eq!(code, "22023", "{msg}");
}

/// The session's idleness is read on the driven clock: a conversation an hour ago by the clock
/// is idle, however recent it is in real time (end_idle_session compared with now()).
#[tokio::test]
async fn an_idle_session_is_idle_by_the_driven_clock() {
    let db = TestDb::new("lives_session").await;
    // A scheduler pass on the advanced clock would end the session before this test asks.
    db.hold_worker_off().await;
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "ada", "a1", "hello").await;
    assert!(!c.query_one("SELECT dionysus.end_idle_session()", &[]).await.unwrap().get::<_, bool>(0), "ended at once");
    advance(c, "1 hour").await;
    assert!(c.query_one("SELECT dionysus.end_idle_session()", &[]).await.unwrap().get::<_, bool>(0), "an hour of silence by the clock did not end it");
}

/// Nobody said where they are: when they write shows where their night is. A night owl in UTC
/// (up from noon to four) gets a zone that puts their night in their quiet hours, and is then
/// believed asleep at 08:00 UTC; a Berliner who said so keeps Berlin, and someone whose day is
/// the prior's keeps the default. The inferred zone is the weakest: their words replace it.
#[tokio::test]
async fn when_they_write_gives_a_zone_to_someone_who_never_said_it() {
    let db = TestDb::new("lives_infer").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    let zone = |who: &'static str| async move {
        let r = c.query_one("SELECT time_zone, time_zone_source FROM dionysus.people WHERE person = $1", &[&who]).await.unwrap();
        (r.get::<_, String>(0), r.get::<_, String>(1))
    };
    at(c, "2026-11-23 00:00+00").await;
    let before = belief(c, "test:owl", "2026-11-27 08:00+00").await;
    for day in 0..4 {
        let base = format!("2026-11-{:02}", 23 + day);
        for (hhmm, who, words) in [("07:30", "berliner", "Guten Morgen, off to work"), ("09:00", "day", "Morning!"),
                                   ("14:00", "owl", "just woke up"), ("16:00", "berliner", "coffee break"),
                                   ("18:00", "day", "done with work"), ("20:30", "berliner", "home now"),
                                   ("21:00", "day", "going to bed soon"), ("22:30", "owl", "peak hours"),
                                   ("23:59", "owl", "still up")] {
            at(c, &format!("{base} {hhmm}+00")).await;
            say(c, who, &format!("{who}{day}{hhmm}"), words).await;
        }
        at(c, &format!("2026-11-{:02} 01:30+00", 24 + day)).await;
        say(c, "owl", &format!("owl{day}late"), "ok now sleep").await;
        if day == 0 {
            say(c, "berliner", "b-zone", "I'm in Berlin, by the way").await;
        }
    }
    assert_eq!(zone("test:berliner").await, ("Europe/Berlin".to_string(), "words".to_string()));
    assert_eq!(zone("test:day").await, ("UTC".to_string(), "default".to_string()), "a day like the prior's moved");
    let (owl_zone, source) = zone("test:owl").await;
    assert_eq!(source, "inferred");
    assert!(["Etc/GMT+4", "Etc/GMT+5"].contains(&owl_zone.as_str()), "the owl's night (04:00–12:00 UTC) is not their quiet hours: {owl_zone}");
    let min: f64 = c.query_one("SELECT value FROM dionysus.proactive_config WHERE key = 'min_availability'", &[]).await.unwrap().get(0);
    let asleep = belief(c, "test:owl", "2026-11-27 08:00+00").await;
    assert!(asleep < min && asleep < before, "the owl is believed available at 08:00 UTC ({asleep:.2}, was {before:.2})");
    assert!(belief(c, "test:owl", "2026-11-27 22:00+00").await >= 0.5, "their busiest hour is not believed free");
    // The status shows it, and their words replace it.
    let status: Value = c.query_one("SELECT dionysus.status_report() -> 'people'", &[]).await.unwrap().get(0);
    assert!(status.as_array().unwrap().iter().any(|p| p["person"] == "test:owl" && p["source"] == "inferred"
        && p["source_said"] == "inferred from when they write" && p["time_zone"] == json!(owl_zone)), "{status}");
    say(c, "owl", "owl-zone", "I live in London actually").await;
    assert_eq!(zone("test:owl").await, ("Europe/London".to_string(), "words".to_string()));
}
