//! The proactive mind (seed 003): pressure builds from state, gates hold it back and say why,
//! the cadence backs off, events are merged, dropped, filtered and hoisted, and the thinking
//! layer is asked only at a crossing. Time comes from the extension's clock, driven here, so
//! days pass in milliseconds against the real extension.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::{contact, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, expect_error, scripted_driver_config as config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_postgres::Client;

const ALICE: &str = "test:alice";

/// The single number a query returns.
async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(&format!("SELECT ({sql})::bigint"), &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

async fn at(c: &Client, t: &str) {
    c.execute("SELECT dionysus.set_clock($1::text::timestamptz)", &[&t]).await.unwrap();
}

async fn advance(c: &Client, by: &str) {
    c.execute("SELECT dionysus.advance_clock($1::text::interval)", &[&by]).await.unwrap();
}

async fn say(c: &Client, id: &str, words: &str) -> Value {
    c.query_one("SELECT dionysus.log_message('test', $1, 'dm:alice', 'alice', $2)", &[&id, &words]).await.unwrap().get(0)
}

async fn tick(c: &Client) -> Value {
    c.query_one("SELECT dionysus.proactive_tick()", &[]).await.unwrap().get(0)
}

/// The latest evaluation of Alice, as explain_contact gives it.
async fn last(c: &Client) -> Value {
    c.query_one("SELECT to_jsonb(e) FROM dionysus.explain_contact($1) e", &[&ALICE]).await.unwrap().get(0)
}

async fn evaluate(c: &Client) -> Value {
    c.execute("UPDATE dionysus.people SET next_check_at = NULL WHERE person = $1", &[&ALICE]).await.unwrap();
    tick(c).await;
    last(c).await
}

fn gate(e: &Value, name: &str) -> bool {
    e["gates"].as_array().unwrap().iter().find(|g| g["gate"] == name).unwrap_or_else(|| panic!("no gate {name} in {e}"))["passed"]
        == Value::Bool(true)
}

/// A contact decided and delivered, as the driver does it (decide → reserve → send → confirm).
async fn deliver_contact(c: &Client, evaluation: &str, words: &str) {
    let d: Value = c
        .query_one("SELECT dionysus.decide_contact($1::text::uuid, 'message', $2, 'test')", &[&evaluation, &words])
        .await
        .unwrap()
        .get(0);
    let id = d["outbox_id"].as_str().unwrap().to_string();
    c.batch_execute(&format!(
        "SELECT dionysus.reserve_outbox('w', 'test'); \
         SELECT dionysus.outbox_part_sent('{id}', 'w', 0, 'p-{id}'); \
         SELECT dionysus.confirm_outbox('{id}', 'w', 'dm:alice', 'bot')"
    ))
    .await
    .unwrap();
}

/// Days of silence after a first conversation: social debt grows, contact is weighed at most
/// every 15 minutes, never at night, and the crossing is written down with every input.
#[tokio::test]
async fn pressure_builds_in_silence_and_every_crossing_is_explained() {
    let db = TestDb::new("pro_silence").await;
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await; // a Monday
    say(c, "a1", "Hi! I just moved to a new flat and I am still unpacking.").await;
    let mut first_crossing = None;
    for step in 0..(3 * 24 * 4) {
        advance(c, "15 minutes").await;
        tick(c).await;
        let n = count(c, "SELECT count(*) FROM dionysus.contact_evaluations WHERE outcome = 'opportunity'").await;
        if n > 0 && first_crossing.is_none() {
            first_crossing = Some(step);
            break;
        }
    }
    assert!(first_crossing.is_some(), "no crossing in three days of silence");
    let e: Value = c
        .query_one("SELECT to_jsonb(e) FROM dionysus.contact_evaluations e WHERE outcome = 'opportunity' ORDER BY at LIMIT 1", &[])
        .await
        .unwrap()
        .get(0);
    let hour: f64 = c.query_one("SELECT extract(hour FROM ($1::text)::timestamptz AT TIME ZONE 'UTC')::float8", &[&e["at"].as_str().unwrap()]).await.unwrap().get(0);
    assert!((8.0..22.0).contains(&hour), "a crossing at {hour}:00, inside quiet hours: {e}");
    // Every input with its weight and contribution; the sum is the pressure.
    let inputs = e["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 4, "{e}");
    let sum: f64 = inputs.iter().map(|i| i["contribution"].as_f64().unwrap()).sum();
    assert!((sum - e["pressure"].as_f64().unwrap()).abs() < 0.01, "{e}");
    let debt = inputs.iter().find(|i| i["input"] == "social_debt").unwrap();
    assert_eq!(debt["weight"], json!(0.4));
    assert!(debt["value"].as_f64().unwrap() > 0.1, "{e}");
    assert!(e["pressure"].as_f64().unwrap() >= e["threshold"].as_f64().unwrap(), "{e}");
    assert!(e["explanation"].as_str().unwrap().contains("likely available"), "{e}");
    // Night evaluations were held back by the quiet hours, and said so.
    let night: i64 = count(
        c,
        "SELECT count(*) FROM dionysus.contact_evaluations WHERE outcome = 'gated' AND explanation LIKE '%quiet_hours%' \
            AND extract(hour FROM at AT TIME ZONE 'UTC') NOT BETWEEN 8 AND 21",
    )
    .await;
    let opportunities_at_night: i64 = count(
        c,
        "SELECT count(*) FROM dionysus.contact_evaluations WHERE outcome = 'opportunity' \
            AND extract(hour FROM at AT TIME ZONE 'UTC') NOT BETWEEN 8 AND 21",
    )
    .await;
    assert_eq!(opportunities_at_night, 0);
    let evaluations = count(c, "SELECT count(*) FROM dionysus.contact_evaluations").await;
    assert!(evaluations > 0 && (night > 0 || hour >= 8.0), "{evaluations} evaluations, {night} at night");
    // Never more often than the cadence: no two evaluations of one person within 15 minutes.
    let too_close = count(
        c,
        "SELECT count(*) FROM (SELECT at - lag(at) OVER (ORDER BY at) AS gap FROM dionysus.contact_evaluations) g WHERE gap < interval '15 minutes'",
    )
    .await;
    assert_eq!(too_close, 0);
}

/// Their own word, the cooldown and the energy budget each hold a crossing back, and say so.
#[tokio::test]
async fn the_gates_hold_back_and_say_why() {
    let db = TestDb::new("pro_gates").await;
    let c = &db.client;
    at(c, "2026-11-23 22:50+00").await;
    let r = say(c, "a1", "Long day. Going to bed now, good night!").await;
    assert_eq!(r["signal"], json!("asleep"), "{r}");
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "4 hours").await; // 02:50
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("gated"), "{e}");
    assert!(!gate(&e, "their_word") && !gate(&e, "quiet_hours"), "{e}");
    assert!(e["explanation"].as_str().unwrap().contains("their_word"), "{e}");
    advance(c, "7 hours").await; // 09:50: the night is over and their word expired
    let e = evaluate(c).await;
    assert!(gate(&e, "their_word") && gate(&e, "quiet_hours"), "{e}");
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");

    // "Stop checking in" holds until they write again, whatever the hour.
    say(c, "a2", "Please stop checking in on me this week.").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "2 days").await;
    let e = evaluate(c).await;
    assert!(!gate(&e, "their_word"), "{e}");
    assert!(e["gates"].to_string().contains("until they write again"), "{e}");
    say(c, "a3", "I am back, what's new?").await;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.person_signals WHERE ended_at IS NULL").await, 0);

    // A delivered contact closes the cooldown for 4 hours.
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    deliver_contact(c, e["evaluation_id"].as_str().unwrap(), "How is the unpacking going?").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "2 hours").await;
    let e = evaluate(c).await;
    assert!(!gate(&e, "cooldown"), "{e}");
    advance(c, "3 hours").await;
    // Energy: a contact costs reach_out_user's 5 from the heartbeat's pool.
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 2").await.unwrap();
    let e = evaluate(c).await;
    assert!(gate(&e, "cooldown") && !gate(&e, "energy"), "{e}");
    assert_eq!(e["outcome"], json!("gated"));
}

/// After three contacts in a row went unanswered, time alone adds no pressure: only a new cause
/// (something they asked for) does; their reply restores it.
#[tokio::test]
async fn ignored_contacts_need_a_new_cause() {
    let db = TestDb::new("pro_ignored").await;
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "a1", "Hello there").await;
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20").await.unwrap();
    for i in 0..3 {
        c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
        advance(c, if i == 0 { "1 hour" } else { "24 hours" }).await;
        let e = evaluate(c).await;
        assert_eq!(e["outcome"], json!("opportunity"), "contact {i}: {e}");
        deliver_contact(c, e["evaluation_id"].as_str().unwrap(), &format!("Checking in, take {i}")).await;
        c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20").await.unwrap();
    }
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "24 hours").await;
    let e = evaluate(c).await;
    let ignored: i32 = c.query_one("SELECT ignored_in_row FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(ignored, 3, "{e}");
    assert!(!gate(&e, "ignored"), "{e}");
    assert_eq!(e["outcome"], json!("gated"), "{e}");
    assert!(e["gates"].to_string().contains("only a new cause counts"), "{e}");
    // A new cause: something she asked for is still open.
    c.execute("SELECT dionysus.create_goal('Send Alice the moving checklist', source => 'user_request', private_to => ARRAY[$1])", &[&ALICE])
        .await
        .unwrap();
    let e = evaluate(c).await;
    assert!(gate(&e, "ignored"), "a new cause did not count: {e}");
    // Her reply resets the count.
    say(c, "a2", "Sorry, busy week! All good here.").await;
    let ignored: i32 = c.query_one("SELECT ignored_in_row FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(ignored, 0);
}

/// After "wait" the cadence doubles (longer for a patient personality); a message resets it.
/// A decision is taken once, and bad input is refused with its argument named.
#[tokio::test]
async fn the_cadence_backs_off_and_decisions_are_taken_once() {
    let db = TestDb::new("pro_cadence").await;
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "a1", "Hi").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    let id = e["evaluation_id"].as_str().unwrap().to_string();
    let w: Value = c.query_one("SELECT dionysus.decide_contact($1::text::uuid, 'wait', reason => 'nothing to say')", &[&id]).await.unwrap().get(0);
    assert_eq!(w["decision"], json!("wait"));
    let minutes: f64 = c.query_one("SELECT check_interval_minutes FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(minutes, 30.0, "15 × (1.5 + patience 0.5)");
    // Decided once: a redelivered wake-up changes nothing.
    let again: Value = c.query_one("SELECT dionysus.decide_contact($1::text::uuid, 'message', 'hi')", &[&id]).await.unwrap().get(0);
    assert_eq!(again["duplicate"], json!(true));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.outbox").await, 0);
    advance(c, "31 minutes").await;
    let e = evaluate(c).await;
    let id = e["evaluation_id"].as_str().unwrap().to_string();
    c.execute("SELECT dionysus.decide_contact($1::text::uuid, 'wait')", &[&id]).await.unwrap();
    let minutes: f64 = c.query_one("SELECT check_interval_minutes FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(minutes, 60.0);
    say(c, "a2", "What are you up to?").await;
    let minutes: f64 = c.query_one("SELECT check_interval_minutes FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(minutes, 15.0, "a message resets the cadence");

    let (code, msg) = expect_error(c, &format!("SELECT dionysus.decide_contact('{id}', 'shout')")).await;
    assert_eq!((code.as_str(), msg.contains("\"decision\"")), ("22023", true), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.decide_contact(gen_random_uuid(), 'wait')").await;
    assert_eq!((code.as_str(), msg.contains("\"evaluation_id\"")), ("P0002", true), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.push_event('gossip', 'x', 2)").await;
    assert_eq!((code.as_str(), msg.contains("\"source\"")), ("22023", true), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.push_event('internal', 'x', 9)").await;
    assert_eq!((code.as_str(), msg.contains("\"priority\"")), ("22023", true), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.push_event('internal', 'x', 2, jsonb_build_object('a', repeat('x', 9000)))").await;
    assert_eq!((code.as_str(), msg.contains("\"payload\"")), ("22023", true), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.advance_clock('-1 hour')").await;
    assert_eq!((code.as_str(), msg.contains("\"by_interval\"")), ("22023", true), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.set_person_time_zone('test:alice', 'Mars/Olympus')").await;
    assert_eq!((code.as_str(), msg.contains("\"time_zone\"")), ("22023", true), "{msg}");
    // The driver's role cannot move the clock or retune the mind.
    c.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    let (code, _) = expect_error(c, "SELECT dionysus.advance_clock('1 day')").await;
    assert_eq!(code, "42501");
    let (code, _) = expect_error(c, "UPDATE dionysus.contact_weights SET weight = 1").await;
    assert_eq!(code, "42501");
    c.batch_execute("RESET ROLE").await.unwrap();
}

/// Overload: the same event within 5 s is merged, old LOW events dropped, the queue kept under
/// its limit lowest-priority first (CRITICAL never), ten reactions become one HIGH event, and
/// while asleep filtered events add disturbance until it wakes.
#[tokio::test]
async fn events_are_merged_dropped_hoisted_and_disturb_sleep() {
    let db = TestDb::new("pro_events").await;
    let c = &db.client;
    at(c, "2026-11-23 12:00+00").await;
    let a: i64 = c.query_one("SELECT dionysus.push_event('time', 'hour_boundary', 2)", &[]).await.unwrap().get(0);
    advance(c, "2 seconds").await;
    let b: i64 = c.query_one("SELECT dionysus.push_event('time', 'hour_boundary', 2)", &[]).await.unwrap().get(0);
    assert_eq!(a, b, "the same event within 5 s was not merged");
    assert_eq!(count(c, "SELECT merged FROM dionysus.events WHERE id = (SELECT min(id) FROM dionysus.events)").await, 2);

    c.batch_execute("SELECT dionysus.push_event('internal', 'cleanup', 3)").await.unwrap();
    advance(c, "61 seconds").await;
    let t = tick(c).await;
    assert!(t["events_dropped"].as_i64().unwrap() >= 1, "{t}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.events WHERE type = 'cleanup' AND status = 'dropped'").await, 1);

    c.batch_execute("UPDATE dionysus.proactive_config SET value = 3 WHERE key = 'event_queue_limit'; \
                     UPDATE dionysus.agent_state SET mode = 'normal'").await.unwrap();
    for (i, p) in [(0, 4), (1, 3), (2, 2), (3, 0), (4, 4), (5, 1)] {
        c.execute("SELECT dionysus.push_event('internal', $1, $2)", &[&format!("load_{i}"), &p]).await.unwrap();
    }
    let t = tick(c).await;
    assert!(t["events_dropped"].as_i64().unwrap() >= 3, "{t}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.events WHERE type = 'load_3' AND status = 'processed'").await, 1, "CRITICAL was dropped");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.events WHERE type IN ('load_0', 'load_4') AND status = 'dropped'").await, 2);
    assert!(count(c, "SELECT coalesce(sum(count), 0)::bigint FROM dionysus.event_counters WHERE reason = 'dropped_overload'").await >= 3);

    for _ in 0..10 {
        c.execute("SELECT dionysus.push_event('communication', 'reaction', 3, person => $1)", &[&ALICE]).await.unwrap();
        advance(c, "6 seconds").await;
    }
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.events WHERE type = 'reaction_storm' AND priority = 1").await, 1);

    // Asleep: NORMAL events are filtered and disturb; enough of them wake the agent.
    c.batch_execute("UPDATE dionysus.proactive_config SET value = 1000 WHERE key = 'event_queue_limit'; \
                     UPDATE dionysus.agent_state SET mode = 'asleep', disturbance = 0, vitality = 1").await.unwrap();
    let mut woke = false;
    for i in 0..12 {
        c.execute("SELECT dionysus.push_event('communication', $1, 2)", &[&format!("ping_{i}")]).await.unwrap();
        c.execute("SELECT dionysus.push_event('communication', $1, 2)", &[&format!("pong_{i}")]).await.unwrap();
        let t = tick(c).await;
        if t["woke"] == json!(true) {
            woke = true;
            assert_eq!(t["mode"], json!("alert"), "{t}");
            break;
        }
        assert!(t["events_filtered"].as_i64().unwrap() >= 2, "{t}");
        c.batch_execute("UPDATE dionysus.agent_state SET mode = 'asleep'").await.unwrap();
    }
    assert!(woke, "accumulated disturbance never woke the agent");
}

/// "ok" after Dionysus spoke needs no reply and no model: log_message says so and queues no
/// extraction. A person's first contact pulls the next tick forward.
#[tokio::test]
async fn acknowledgements_need_no_reply() {
    let db = TestDb::new("pro_ack").await;
    let c = &db.client;
    at(c, "2026-11-23 12:00+00").await;
    say(c, "a1", "Can you remind me what I planted last spring?").await;
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:alice', 'bot', 'Tomatoes and basil.', true, false, NULL, 'test:alice')")
        .await
        .unwrap();
    let r = say(c, "a2", "ok 👍").await;
    assert_eq!(r["acknowledgement"], json!(true), "{r}");
    assert!(r["work_id"].is_null(), "an extraction was queued for \"ok\": {r}");
    let r = say(c, "a3", "ok, and what about the roses?").await;
    assert_eq!(r["acknowledgement"], json!(false), "{r}");

    // New information anyone may hear of makes curious; someone's private words do not.
    tick(c).await;
    c.batch_execute("SELECT dionysus.learn('Bob said his sister is moving to Lisbon', 'Bob', private_to => ARRAY['test:bob'])").await.unwrap();
    advance(c, "15 minutes").await;
    tick(c).await;
    let curiosity: f64 = c.query_one("SELECT curiosity FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(curiosity, 0.0, "someone's private words made Alice's contact curious");
    c.batch_execute("SELECT dionysus.learn('The botanical garden opens a rose exhibition in June', 'garden')").await.unwrap();
    advance(c, "15 minutes").await;
    tick(c).await;
    let curiosity: f64 = c.query_one("SELECT curiosity FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert!(curiosity > 0.0, "new information did not make curious");
}

/// The thinking layer end to end: a crossing wakes the driver's contact module; the fast model
/// says "message", the smart model writes it, it reaches the person's DM once. A "wait" backs
/// off; an unreachable model is written down as skipped; no crossing, no model call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crossing_asks_the_models_once_and_the_message_arrives_once() {
    let db = TestDb::new("pro_driver").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let channel = Arc::new(TestChannel::new(&["alice"]));
    let mind = Mind::new(config(driver_conninfo(&db.name), &llm), channel.clone());
    at(c, "2026-11-23 10:00+00").await;
    // Bob confides too (and is not weighed in this test: only Alice's contact is under study).
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'Between us: I am planning to propose to Dana'); \
                     UPDATE dionysus.people SET next_check_at = 'infinity' WHERE person = 'test:bob'").await.unwrap();
    say(c, "a1", "I am starting a new job on Monday, a bit nervous!").await;
    // No crossing: nothing for a mind to do, and no model is called.
    assert_eq!(contact::decide_open(&mind).await, 0);
    assert!(llm.requests_with("TASK: proactive").is_empty());

    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    llm.json("TASK: proactive_decision", json!({"decision": "message", "reason": "her first week at the new job", "intent": "wish her luck"}));
    llm.json("TASK: proactive_compose", json!({"message": "Good luck with the new job on Monday!"}));
    assert_eq!(contact::decide_open(&mind).await, 1);
    assert_eq!(channel.sent(), vec![("dm:alice".to_string(), "Good luck with the new job on Monday!".to_string())]);
    let prompt = llm.requests_with("TASK: proactive_decision")[0]["messages"].to_string();
    assert!(prompt.contains("new job") && prompt.contains("social_debt"), "the decision lacked its context: {prompt}");
    let compose = llm.requests_with("TASK: proactive_compose")[0]["messages"].to_string();
    assert!(!prompt.contains("propose") && !compose.contains("propose"), "Bob's words reached a contact with Alice");
    assert_eq!(llm.requests_with("TASK: proactive_compose").len(), 1);
    // Delivered once; the evaluation and the message log record it.
    assert_eq!(contact::decide_open(&mind).await, 0);
    assert_eq!(channel.sent().len(), 1);
    let e = last(c).await;
    assert_eq!((e["decision"].clone(), e["reason"].clone()), (json!("message"), json!("her first week at the new job")));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages WHERE is_bot AND is_proactive AND person = 'test:alice'").await, 1);
    let awaiting: bool = c.query_one("SELECT awaiting_reply FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert!(awaiting);

    // Her answer; later a crossing the fast model declines: no message, the cadence backs off.
    say(c, "a2", "Thank you, that is kind!").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "5 hours").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    llm.clear();
    llm.json("TASK: proactive_decision", json!({"decision": "wait", "reason": "she answered recently"}));
    assert_eq!(contact::decide_open(&mind).await, 1);
    assert_eq!(channel.sent().len(), 1);
    assert_eq!(llm.requests_with("TASK: proactive_compose").len(), 1, "a message was composed after \"wait\"");
    assert_eq!(last(c).await["decision"], json!("wait"));

    // The model unreachable: the crossing is closed as skipped, not retried every minute.
    c.execute("UPDATE dionysus.people SET social_debt = 0.95, check_interval_minutes = 15 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "2 hours").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    llm.clear();
    llm.on("TASK: proactive_decision", Answer::Status(500));
    contact::decide_open(&mind).await;
    let e = last(c).await;
    assert_eq!(e["decision"], json!("wait"), "{e}");
    assert!(e["reason"].as_str().unwrap().contains("model unreachable"), "{e}");
    let skipped = count(c, "SELECT count(*) FROM dionysus.contact_evaluations WHERE decided_by = 'skipped'").await;
    assert_eq!(skipped, 1);
    assert_eq!(channel.sent().len(), 1);
}

/// A person who writes every evening is believed free in the evening: a crossing in the morning
/// waits for a clearly better hour, says which, and goes through when it comes.
#[tokio::test]
async fn a_learned_rhythm_waits_for_a_better_moment() {
    let db = TestDb::new("pro_rhythm").await;
    let c = &db.client;
    at(c, "2026-11-23 10:30+00").await;
    for day in 0..12 {
        say(c, &format!("m{day}"), "Quick hello from the office.").await;
        advance(c, "8 hours 30 minutes").await; // 19:00
        say(c, &format!("e{day}a"), "Evening! How was your day?").await;
        advance(c, "30 minutes").await;
        say(c, &format!("e{day}b"), "Mine was long, glad to be home.").await;
        advance(c, "15 hours").await; // 10:30 the next day
    }
    // A morning, pressure high: they are reachable now, but far more so in the evening.
    advance(c, "23 hours 30 minutes").await; // 10:00
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    let e = evaluate(c).await;
    assert!(!gate(&e, "better_moment"), "a morning contact did not wait for the evening: {e}");
    assert!(e["gates"].to_string().contains("more available around"), "{e}");
    advance(c, "9 hours").await; // 19:00
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
}

/// One contact at a time: while a crossing is being decided or a contact waits for its answer,
/// no second one opens, even past the cooldown; a message from the person withdraws an undecided
/// crossing. A CRITICAL event is never merged into a lesser one, and the rates cannot be set to
/// values that would stop every tick.
#[tokio::test]
async fn one_contact_at_a_time() {
    let db = TestDb::new("pro_one").await;
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "a1", "Hi there").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let first = evaluate(c).await;
    assert_eq!(first["outcome"], json!("opportunity"), "{first}");
    advance(c, "15 minutes").await;
    let e = evaluate(c).await;
    assert!(!gate(&e, "in_flight"), "a second crossing opened while the first was undecided: {e}");
    // She writes: the undecided crossing is withdrawn.
    say(c, "a2", "Actually, quick question about my plants").await;
    let withdrawn: Value = c
        .query_one("SELECT to_jsonb(c) FROM dionysus.contact_evaluations c WHERE id = $1::text::uuid", &[&first["evaluation_id"].as_str().unwrap()])
        .await
        .unwrap()
        .get(0);
    assert_eq!((withdrawn["decision"].clone(), withdrawn["reason"].clone()), (json!("wait"), json!("they wrote first")));
    // A delivered contact, then past the 4 h cooldown but inside the 6 h answer window: no second.
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    deliver_contact(c, e["evaluation_id"].as_str().unwrap(), "How are the plants?").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "5 hours").await;
    let e = evaluate(c).await;
    assert!(gate(&e, "cooldown") && !gate(&e, "waiting_on_them"), "{e}");
    advance(c, "2 hours").await;
    let e = evaluate(c).await;
    assert!(gate(&e, "waiting_on_them"), "{e}");
    let ignored: i32 = c.query_one("SELECT ignored_in_row FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert_eq!(ignored, 1);

    let low: i64 = c.query_one("SELECT dionysus.push_event('time', 'alarm', 4)", &[]).await.unwrap().get(0);
    advance(c, "2 seconds").await;
    let critical: i64 = c.query_one("SELECT dionysus.push_event('time', 'alarm', 0)", &[]).await.unwrap().get(0);
    assert_ne!(low, critical, "a CRITICAL event was merged into an IDLE one");
    let (code, msg) = expect_error(c, "UPDATE dionysus.proactive_config SET value = 2 WHERE key = 'debt_relief_on_message'").await;
    assert_eq!((code.as_str(), msg.contains("debt_relief_on_message")), ("22023", true), "{msg}");
    let (code, _) = expect_error(c, "UPDATE dionysus.proactive_config SET value = 0 WHERE key = 'social_debt_hours'").await;
    assert_eq!(code, "22023");
}
