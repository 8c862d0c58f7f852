//! The proactive mind: pressure builds from state, gates hold it back and say why,
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 22:50+00").await;
    let r = say(c, "a1", "Long day. Going to bed now, good night!").await;
    assert_eq!(r["signal"], json!("asleep"), "{r}");
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "4 hours").await; // 02:50
    let e = evaluate(c).await;
    // At night the built-in night rule's restraint raises the threshold, and the gates are shut.
    assert_ne!(e["outcome"], json!("opportunity"), "{e}");
    assert!(!gate(&e, "their_word") && !gate(&e, "quiet_hours"), "{e}");
    assert!(e["explanation"].as_str().unwrap().contains("restraint"), "{e}");
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
    assert!(e["explanation"].as_str().unwrap().contains("their_word"), "{e}");
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "a1", "Hello there").await;
    // What is tested is the cause, not the timing: every contact at 11:00, and a missed contact
    // lowering its hour (#36) neither closes availability nor makes the evening worth waiting for.
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20; \
                     UPDATE dionysus.proactive_config SET value = 1 WHERE key = 'better_moment_margin'; \
                     UPDATE dionysus.proactive_config SET value = 0 WHERE key = 'miss_weight'").await.unwrap();
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
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
    let (code, _) = expect_error(c, "UPDATE dionysus.proactive_config SET value = 0 WHERE key = 'acquaintance_turns'").await;
    assert_eq!(code, "22023");
}

/// Rules are data: the built-ins move state each tick and every pass is logged; a
/// person's own rule is checked against the vocabulary (no SQL, no code), acts on them alone,
/// and a reminder it asks for goes out at its hour with no cooldown and no pressure, even after
/// "stop checking in". Learned rules decay unused and are forgotten; used ones strengthen.
#[tokio::test]
async fn rules_are_data_and_a_persons_rule_reminds_them() {
    let db = TestDb::new("pro_rules").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    // Any role that may connect can LISTEN: what NOTIFY carries must say nothing of anyone.
    let (listener, mut conn) = tokio_postgres::connect(&format!("{} dbname={}", dionysus_tests::cluster_conninfo(), db.name), tokio_postgres::NoTls)
        .await
        .unwrap();
    let (tx, mut notified) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut stream = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
        while let Some(Ok(msg)) = stream.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = msg {
                let _ = tx.send(n.payload().to_string());
            }
        }
    });
    listener.batch_execute("LISTEN dionysus_contact").await.unwrap();
    at(c, "2026-11-20 09:00+00").await; // a Friday
    say(c, "a1", "Hello! I just moved to Lisbon.").await;
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'Hi there')").await.unwrap();
    tick(c).await;
    assert!(count(c, "SELECT count(*) FROM dionysus.person_rules('test:alice') WHERE origin = 'built_in'").await >= 6);
    advance(c, "6 hours").await;
    tick(c).await;
    let fired: Value = c
        .query_one(
            "SELECT fired FROM dionysus.rule_firings WHERE person = $1 AND trigger = 'tick' ORDER BY id DESC LIMIT 1",
            &[&ALICE],
        )
        .await
        .unwrap()
        .get(0);
    let debt = fired.as_array().unwrap().iter().find(|r| r["name"] == "silence grows social debt").unwrap_or_else(|| panic!("{fired}"));
    let eff = &debt["effects"][0];
    assert!(eff["after"].as_f64().unwrap() > eff["before"].as_f64().unwrap() + 0.1, "{fired}");

    // What the model may propose is checked part by part, with the part named.
    for (rule, part) in [
        (json!({"trigger": "tick", "condition": {"all": [{"var": "pg_sleep(10)", "op": ">", "value": 0}]}, "intents": [{"request_contact": "x"}]}), "condition.all[0].var"),
        (json!({"trigger": "tick", "intents": [{"adjust": "person.social_debt; DROP TABLE dionysus.memories", "by": 0.1}]}), "intents[0].adjust"),
        (json!({"trigger": "tick", "intents": [{"execute": "SELECT 1"}]}), "intents[0]"),
        (json!({"trigger": "tick", "intents": [{"adjust": "person.curiosity", "by": 7}]}), "intents[0].by"),
        (json!({"trigger": "on_boot", "intents": [{"request_contact": "x"}]}), "trigger"),
        (json!({"trigger": "tick", "condition": {"var": "person.mood", "op": "LIKE", "value": 1}, "intents": [{"request_contact": "x"}]}), "condition.op"),
    ] {
        let sql = format!("SELECT dionysus.add_rule('test:alice', 'words', '{}')", rule.to_string().replace('\'', "''"));
        let (code, msg) = expect_error(c, &sql).await;
        assert!(code == "22023" && msg.contains(part), "{rule}: {code} {msg}");
    }
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person IS NOT NULL").await, 0, "a refused rule was stored");

    // Sundays at 10, their time: a reminder they asked for.
    let plants = json!({"name": "water the plants", "trigger": "time.hour",
        "condition": {"all": [{"var": "person.local_dow", "op": "=", "value": 7}, {"var": "person.local_hour", "op": "=", "value": 10}]},
        "intents": [{"request_contact": "water the plants"}]});
    let stored: Value = c
        .query_one("SELECT dionysus.add_rule($1, 'remind me to water the plants on Sundays at 10', $2)", &[&ALICE, &plants])
        .await
        .unwrap()
        .get(0);
    let rule_id = stored["rule_id"].as_i64().unwrap();
    // Bob's rule moves Bob, never Alice; Alice cannot remove it.
    let bobs = json!({"name": "always curious", "trigger": "tick", "intents": [{"adjust": "person.curiosity", "to": 1}]});
    let bob_rule: Value = c.query_one("SELECT dionysus.add_rule('test:bob', 'be curious', $1)", &[&bobs]).await.unwrap().get(0);
    let removed: bool = c.query_one("SELECT dionysus.remove_rule($1, $2)", &[&ALICE, &bob_rule["rule_id"].as_i64().unwrap()]).await.unwrap().get(0);
    assert!(!removed, "a person removed someone else's rule");

    // A contact went out an hour before and is unanswered; she said "stop checking in".
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    at(c, "2026-11-22 09:00+00").await; // Sunday
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    deliver_contact(c, e["evaluation_id"].as_str().unwrap(), "How is Lisbon treating you?").await;
    advance(c, "5 minutes").await;
    say(c, "a2", "Please stop checking in on me for a while.").await;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person = 'test:alice' AND use_count > 0").await, 0);
    advance(c, "56 minutes").await; // 10:01
    let t = tick(c).await;
    assert!(t["rules_fired"].as_i64().unwrap() >= 1, "{t}");
    let e = last(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "the reminder did not go out at its hour: {e}");
    assert!(e["explanation"].as_str().unwrap().contains("water the plants"), "{e}");
    // Both opportunities (the check-in and the reminder), and whatever else was notified.
    let mut payloads = vec![];
    while let Ok(Some(p)) = tokio::time::timeout(std::time::Duration::from_secs(if payloads.len() < 2 { 30 } else { 2 }), notified.recv()).await {
        payloads.push(p);
    }
    assert!(payloads.len() >= 2, "the opportunities were not notified: {payloads:?}");
    for p in &payloads {
        let v: Value = serde_json::from_str(p).unwrap();
        assert!(v.as_object().is_some_and(|o| o.len() == 1 && o.contains_key("evaluation_id")), "a NOTIFY says more than which evaluation: {p}");
    }
    let solicited: bool = c.query_one("SELECT solicited FROM dionysus.contact_evaluations WHERE id = $1::text::uuid", &[&e["evaluation_id"].as_str().unwrap()]).await.unwrap().get(0);
    assert!(solicited);
    deliver_contact(c, e["evaluation_id"].as_str().unwrap(), "Sunday, 10:00: time to water the plants!").await;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.people WHERE person = 'test:alice' AND contact_request IS NULL").await, 1);
    let used: i64 = c.query_one("SELECT use_count FROM dionysus.mind_rules WHERE id = $1", &[&rule_id]).await.unwrap().get(0);
    assert_eq!(used, 1);
    // Only once that hour, and Alice's curiosity is her own.
    advance(c, "20 minutes").await;
    tick(c).await;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.contact_evaluations WHERE solicited").await, 1);
    let (alice_cur, bob_cur): (f64, f64) = {
        let r = c.query_one("SELECT (SELECT curiosity FROM dionysus.people WHERE person = 'test:alice'), (SELECT curiosity FROM dionysus.people WHERE person = 'test:bob')", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert!(bob_cur == 1.0 && alice_cur < 0.5, "alice {alice_cur}, bob {bob_cur}");

    // Learned rules: used ones strengthen, unused ones decay and are forgotten.
    c.execute("UPDATE dionysus.mind_rules SET weight = 0.5 WHERE id = $1", &[&bob_rule["rule_id"].as_i64().unwrap()]).await.unwrap();
    advance(c, "10 minutes").await;
    tick(c).await;
    let w: f64 = c.query_one("SELECT weight FROM dionysus.mind_rules WHERE id = $1", &[&bob_rule["rule_id"].as_i64().unwrap()]).await.unwrap().get(0);
    assert!((w - 0.55).abs() < 1e-9, "a used rule did not strengthen: {w}");
    c.batch_execute("UPDATE dionysus.proactive_config SET value = 0.5 WHERE key = 'rule_decay_per_day'").await.unwrap();
    for _ in 0..6 {
        advance(c, "1 day 1 hour").await;
        tick(c).await;
    }
    let (status, weight): (String, f64) = {
        let r = c.query_one("SELECT status, weight FROM dionysus.mind_rules WHERE id = $1", &[&rule_id]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert!(status == "forgotten" && weight < 0.1, "{status} {weight}");
    assert_eq!(
        count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE origin = 'built_in' AND status <> 'active'").await,
        0,
        "a built-in decayed"
    );
    assert!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE origin = 'built_in'").await >= 7);
}

/// Learning from implicit feedback: a quick warm answer marks the hour and the
/// reason as good ones; silence marks them poor and teaches patience; mixed cues are left to
/// the fast model, once. Every change is logged with its cause, personality moving least.
#[tokio::test]
async fn answers_teach_timing_topics_and_personality() {
    let db = TestDb::new("pro_learn").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 18:00+00").await;
    say(c, "a1", "Hi, I'm Alice.").await;
    let shy0: f64 = c.query_one("SELECT value FROM dionysus.personality WHERE trait = 'shyness'", &[]).await.unwrap().get(0);
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    deliver_contact(c, e["evaluation_id"].as_str().unwrap(), "How was your evening?").await;
    advance(c, "4 minutes").await;
    let r = say(c, "a2", "Thanks for checking in! It was lovely, we cooked together 😊").await;
    assert_eq!(r["answered_contact"], json!(true), "{r}");
    let log: Value = c.query_one("SELECT jsonb_agg(to_jsonb(l)) FROM dionysus.explain_learning('test:alice') l", &[]).await.unwrap().get(0);
    let find = |kind: &str, target: &str| log.as_array().unwrap().iter().find(|l| l["kind"] == kind && l["target"].as_str().unwrap().contains(target)).cloned();
    let topic = find("topic", "social_debt").unwrap_or_else(|| panic!("{log}"));
    assert!(topic["after"].as_f64().unwrap() > topic["before"].as_f64().unwrap() && topic["signal"].as_f64().unwrap() > 0.3, "{topic}");
    assert!(find("timing", "activity at hour").is_some(), "{log}");
    let shy = find("personality", "shyness").unwrap_or_else(|| panic!("{log}"));
    let moved = shy0 - shy["after"].as_f64().unwrap();
    assert!(moved > 0.0 && moved < 0.01, "personality moved {moved}: it must move, and very slowly");
    assert!(topic["cause"].as_str().unwrap().contains("they answered after"), "{topic}");
    let factor: f64 = c.query_one("SELECT factor FROM dionysus.person_contact_weights WHERE person = $1 AND input = 'social_debt'", &[&ALICE]).await.unwrap().get(0);
    let e = {
        c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
        advance(c, "5 hours").await;
        evaluate(c).await
    };
    let debt = e["inputs"].as_array().unwrap().iter().find(|i| i["input"] == "social_debt").unwrap().clone();
    assert_eq!(debt["learned_factor"].as_f64().unwrap(), (factor * 1000.0).round() / 1000.0, "{e}");

    // Silence: the next contact goes unanswered past the window.
    at(c, "2026-11-24 19:00+00").await;
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20").await.unwrap();
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    let ignored_id = e["evaluation_id"].as_str().unwrap().to_string();
    deliver_contact(c, &ignored_id, "Anything fun planned for the week?").await;
    advance(c, "7 hours").await;
    evaluate(c).await;
    let silence: Value = c
        .query_one("SELECT jsonb_agg(to_jsonb(l)) FROM dionysus.learning_log l WHERE contact_id = $1::text::uuid", &[&ignored_id])
        .await
        .unwrap()
        .get(0);
    let arr = silence.as_array().unwrap_or_else(|| panic!("nothing learned from silence"));
    assert!(arr.iter().all(|l| l["signal"].as_f64().unwrap() < 0.0), "{silence}");
    assert!(arr.iter().any(|l| l["target"] == "patience" && l["after"].as_f64() > l["before"].as_f64()), "{silence}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.events WHERE type = 'contact_ignored'").await, 1);

    // Mixed cues: left to the fast model (log_message says which contact), judged once.
    c.batch_execute("UPDATE dionysus.heartbeat_state SET current_energy = 20").await.unwrap();
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    at(c, "2026-11-25 19:00+00").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    let mixed_id = e["evaluation_id"].as_str().unwrap().to_string();
    deliver_contact(c, &mixed_id, "Did the plumber ever come by?").await;
    advance(c, "8 minutes").await; // neither quick nor slow for her, plain words: the cues disagree
    let r = say(c, "a3", "He came on Tuesday in the afternoon, it took a while.").await;
    assert_eq!(r["feedback_unsure"], json!(mixed_id), "{r}");
    let learned: i32 = c.query_one("SELECT dionysus.contact_feedback($1::text::uuid, 'negative', 'a curt answer')", &[&mixed_id]).await.unwrap().get(0);
    assert!(learned >= 2, "{learned}");
    let again: i32 = c.query_one("SELECT dionysus.contact_feedback($1::text::uuid, 'positive')", &[&mixed_id]).await.unwrap().get(0);
    assert_eq!(again, 0, "judged twice");
    let (code, msg) = expect_error(c, &format!("SELECT dionysus.contact_feedback('{mixed_id}', 'meh')")).await;
    assert!(code == "22023" && msg.contains("sentiment"), "{msg}");
    // Cold replies lower the believed mood; an empathetic mind then holds back more.
    say(c, "a4", "Ugh, not now. Terrible day.").await;
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "5 hours").await;
    evaluate(c).await;
    let parts: Value = c
        .query_one("SELECT threshold_parts FROM dionysus.contact_evaluations WHERE person = $1 ORDER BY at DESC, recorded_at DESC LIMIT 1", &[&ALICE])
        .await
        .unwrap()
        .get(0);
    assert!(parts["mood"].as_f64().unwrap() < -0.05, "{parts}");
}

/// "Remind me to …" in plain words: the fast model proposes a rule in the extension's
/// vocabulary, add_rule stores it, the person gets a confirmation instead of a chat reply; at
/// its hour the reminder is composed (no decision call: they asked for it) and arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_in_plain_words_is_confirmed_and_the_reminder_arrives() {
    use dionysus_driver::channel::Incoming;
    use dionysus_driver::conversation::{self, Handled};
    let db = TestDb::new("pro_words").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let channel = Arc::new(TestChannel::new(&["alice"]));
    let mind = Arc::new(Mind::new(config(driver_conninfo(&db.name), &llm), channel.clone()));
    at(c, "2026-11-20 09:00+00").await; // Friday
    llm.json("TASK: rule_from_words", json!({
        "rule": {"name": "call mom", "description": "Sundays at 11, remind them to call their mother", "trigger": "time.hour",
                 "condition": {"all": [{"var": "person.local_dow", "op": "=", "value": 7}, {"var": "person.local_hour", "op": "=", "value": 11}]},
                 "intents": [{"request_contact": "call their mother"}]},
        "confirmation": "Sure, every Sunday at 11 I'll remind you to call your mom."}));
    llm.json("Read the latest message", json!({"facts": [], "triples": [], "goals": []}));
    let mut extractions = tokio::task::JoinSet::new();
    let incoming = |id: &str, words: &str| Incoming {
        message_id: id.into(),
        channel_id: "dm:alice".into(),
        author_id: "alice".into(),
        content: words.into(),
        private: true,
        reply_to: None,
    };
    let h = conversation::handle(&mind, incoming("w1", "Can you remind me to call my mom every Sunday at 11?"), &mut extractions).await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    let said = channel.sent();
    assert!(said.last().unwrap().1.contains("every Sunday at 11") && said.last().unwrap().1.contains("rule"), "{said:?}");
    assert!(llm.requests_with("TASK: chat").is_empty(), "a chat reply was composed as well");
    let prompt = llm.requests_with("TASK: rule_from_words")[0]["messages"].to_string();
    assert!(prompt.contains("person.local_dow") && prompt.contains("request_contact"), "the vocabulary was not given: {prompt}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person = 'test:alice' AND origin = 'person'").await, 1);
    // A model's invalid rule is refused by the extension, and they are told so (not silence).
    llm.clear();
    llm.json("TASK: rule_from_words", json!({"rule": {"trigger": "tick", "intents": [{"adjust": "agent.energy", "by": 1}]}}));
    let h = conversation::handle(&mind, incoming("w2", "Remind me every day to give myself more energy"), &mut extractions).await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    assert!(channel.sent().last().unwrap().1.starts_with("I could not set that up as a reminder"), "{:?}", channel.sent().last());
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person = 'test:alice'").await, 1);

    // Sunday: the base layer ticks on; at 11:00 the hour's rules run.
    at(c, "2026-11-22 10:50+00").await;
    tick(c).await;
    advance(c, "11 minutes").await;
    tick(c).await;
    llm.json("TASK: proactive_compose", json!({"message": "It's Sunday 11:00: time to call your mom."}));
    assert_eq!(contact::decide_open(&mind).await, 1);
    assert_eq!(channel.sent().last().unwrap().1, "It's Sunday 11:00: time to call your mom.");
    assert!(llm.requests_with("TASK: proactive_decision").is_empty(), "a reminder they asked for went through a decision");
    let compose = llm.requests_with("TASK: proactive_compose")[0]["messages"].to_string();
    assert!(compose.contains("call their mother"), "{compose}");
    assert_eq!(contact::decide_open(&mind).await, 0);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.outbox WHERE contact_id IS NOT NULL").await, 1);

    // A rule that holds, confirmed with the prompt's placeholder: stored, and they read our words.
    llm.clear();
    llm.json("TASK: rule_from_words", json!({
        "rule": {"name": "water the plants", "description": "every day at 8, remind them to water the plants", "trigger": "time.hour",
                 "condition": {"var": "person.local_hour", "op": "=", "value": 8}, "intents": [{"request_contact": "water the plants"}]},
        "confirmation": "<a short sentence back to them>"}));
    let h = conversation::handle(&mind, incoming("w3", "Remind me every day at 8 to water the plants"), &mut extractions).await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    let said = channel.sent().last().unwrap().1.clone();
    assert!(said.starts_with("Noted: every day at 8, remind them to water the plants.") && !said.contains('<'), "{said}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person = 'test:alice' AND name = 'water the plants'").await, 1);
}

/// A 👍 on a contact is its answer (no reply, no model) and is learned from; a reaction to a
/// message sent to someone else counts for nothing. Goal changes and heartbeats arrive as events.
#[tokio::test]
async fn reactions_answer_contacts_and_the_organs_send_events() {
    let db = TestDb::new("pro_react").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 18:00+00").await;
    say(c, "a1", "Hi, I'm Alice.").await;
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'Hi there')").await.unwrap();
    c.execute("UPDATE dionysus.people SET social_debt = 0.95 WHERE person = $1", &[&ALICE]).await.unwrap();
    advance(c, "1 hour").await;
    let e = evaluate(c).await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    let id = e["evaluation_id"].as_str().unwrap().to_string();
    deliver_contact(c, &id, "How was the concert?").await;
    let part: String = c
        .query_one("SELECT o.platform_message_id FROM dionysus.outbox o WHERE o.contact_id = $1::text::uuid", &[&id])
        .await
        .unwrap()
        .get(0);
    let bob: Value = c.query_one("SELECT dionysus.note_reaction('test', $1, 'bob', '👎')", &[&part]).await.unwrap().get(0);
    assert_eq!(bob["noted"], json!(false), "Bob's reaction counted on a message to Alice: {bob}");
    let (code, msg) = expect_error(c, "SELECT dionysus.note_reaction('test', 'x', 'alice', '')").await;
    assert!(code == "22023" && msg.contains("emoji"), "{msg}");
    advance(c, "3 minutes").await;
    let r: Value = c.query_one("SELECT dionysus.note_reaction('test', $1, 'alice', '👍')", &[&part]).await.unwrap().get(0);
    assert_eq!(r["answered_contact"], json!(true), "{r}");
    let awaiting: bool = c.query_one("SELECT awaiting_reply FROM dionysus.people WHERE person = $1", &[&ALICE]).await.unwrap().get(0);
    assert!(!awaiting);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.learning_log WHERE cause = 'they reacted 👍' AND signal > 0").await >= 2, true);
    // The same reaction again teaches nothing more.
    let again: Value = c.query_one("SELECT dionysus.note_reaction('test', $1, 'alice', '👍')", &[&part]).await.unwrap().get(0);
    assert_eq!(again["answered_contact"], json!(false), "{again}");

    c.batch_execute("SELECT dionysus.create_goal('Find Alice a good book', source => 'user_request', private_to => ARRAY['test:alice']); \
                     SELECT dionysus.heartbeat_begin()").await.unwrap();
    let hb: uuid::Uuid = c.query_one("SELECT id FROM dionysus.heartbeat_log", &[]).await.unwrap().get(0);
    c.query("SELECT dionysus.heartbeat_commit($1, dionysus.heartbeat_default_decision())", &[&hb]).await.unwrap();
    c.query("SELECT dionysus.heartbeat_finish($1, 'rested')", &[&hb]).await.unwrap();
    tick(c).await;
    for (kind, person) in [("reaction", Some(ALICE)), ("goal_changed", Some(ALICE)), ("heartbeat", None)] {
        let n: i64 = c
            .query_one("SELECT count(*) FROM dionysus.events WHERE type = $1 AND person IS NOT DISTINCT FROM $2 AND status = 'processed'", &[&kind, &person])
            .await
            .unwrap()
            .get(0);
        assert!(n >= 1, "no processed {kind} event");
    }
}

/// Two ticks at once (the scheduler's and anyone's): the one that waited for the other reads the
/// clock when it runs, so it never writes an older time over the newer one. Until 0.20.0 it read
/// the clock before it waited: the next tick counted the hours between again (a day's social
/// debt twice, a pressure crossing nobody earned) and the hour's rules fired a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_that_waited_for_another_reads_the_clock_when_it_runs() {
    let db = TestDb::new("pro_tick_race").await;
    db.hold_worker_off().await;
    let c = &db.client;
    at(c, "2026-11-20 09:00+00").await;
    say(c, "a1", "Morning! Off to work.").await;
    tick(c).await;
    // One tick holds the state; a second starts while the clock still says Friday 09:00.
    let holder = db.connect().await;
    holder.batch_execute("BEGIN; SELECT 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE").await.unwrap();
    let waiting = {
        let w = db.connect().await;
        tokio::spawn(async move { w.query_one("SELECT dionysus.proactive_tick()", &[]).await.map(|r| r.get::<_, Value>(0)) })
    };
    let blocked = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                   AND wait_event_type = 'Lock' AND query LIKE '%proactive_tick%'";
    for _ in 0..600 {
        if count(c, blocked).await == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(count(c, blocked).await, 1, "the second tick never waited on the first");
    // Meanwhile the day moves on and the first tick runs there.
    at(c, "2026-11-22 10:50+00").await;
    holder.batch_execute("SELECT dionysus.proactive_tick(); COMMIT").await.unwrap();
    let late = waiting.await.unwrap().unwrap();
    let ran_now: bool = c.query_one("SELECT ($1::jsonb ->> 'at')::timestamptz = '2026-11-22 10:50+00'", &[&late]).await.unwrap().get(0);
    assert!(ran_now, "the waiting tick ran at an old time: {late}");
    let last_now: bool = c
        .query_one("SELECT last_tick_at = '2026-11-22 10:50+00' FROM dionysus.agent_state WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    assert!(last_now, "the last tick went back in time");
    // So the hours since Friday are counted once: a second tick at the same instant adds none.
    let debt = "SELECT (social_debt * 1e6)::bigint FROM dionysus.people WHERE person = 'test:alice'";
    let before = count(c, debt).await;
    tick(c).await;
    assert_eq!(count(c, debt).await, before, "the same hours counted twice");
}

/// The server down for months (or the clock driven ahead): the first tick after the gap runs,
/// and so do the ones after it. Until 0.18.0 a rule's "toward" step raised an underflow error
/// after about two months without a tick, and every later tick failed the same way.
#[tokio::test]
async fn a_tick_after_months_without_one_still_runs() {
    let db = TestDb::new("pro_long_gap").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-03-02 10:00+00").await;
    say(c, "g1", "Good morning! How are you today?").await;
    tick(c).await;
    for gap in ["70 days", "400 days", "50 years"] {
        advance(c, gap).await;
        let ticked = tick(c).await;
        assert!(ticked.is_object(), "after {gap}: {ticked}");
        let debt = count(c, "SELECT round(100 * social_debt) FROM dionysus.people WHERE person = 'test:alice'").await;
        assert_eq!(debt, 100, "after {gap} of silence social debt has reached 1");
    }
}

/// The built-in rules are the owner's (issue #33 §3): the driver's role adds only a person's own
/// rule (add_rule), cannot insert a rule for everyone nor raise a built-in's rate ("silence grows
/// social debt", 0.0278 an hour, to 10), and cannot switch a built-in off or weaken it; it still
/// counts a built-in's use when a tick fires it, and its own rules are removed as before.
#[tokio::test]
async fn the_drivers_role_writes_only_a_persons_own_rules() {
    let db = TestDb::new("pro_builtins").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    at(c, "2026-11-23 10:00+00").await;
    say(c, "a1", "Hello there").await;
    advance(c, "2 hours").await;
    c.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    for sql in [
        "INSERT INTO dionysus.mind_rules (name, trigger, intents, origin, description, created_at) \
         VALUES ('everyone, always', 'tick', '[{\"request_contact\": \"hi\"}]', 'built_in', 'x', now())",
        "INSERT INTO dionysus.mind_rules (name, person, trigger, intents, origin, description, created_at) \
         VALUES ('not through add_rule', 'test:alice', 'tick', '[{\"request_contact\": \"hi\"}]', 'person', 'x', now())",
        "UPDATE dionysus.mind_rules SET intents = '[{\"adjust\": \"person.social_debt\", \"toward\": 1, \"per_hour\": 10}]' \
         WHERE name = 'silence grows social debt'",
        "UPDATE dionysus.mind_rules SET person = 'test:alice' WHERE name = 'silence grows social debt'",
        "UPDATE dionysus.mind_rules SET status = 'removed', ended_at = now() WHERE name = 'night suppression'",
        "UPDATE dionysus.mind_rules SET weight = 0 WHERE person IS NULL",
    ] {
        let (code, msg) = expect_error(c, sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    let rule = json!({"name": "always curious", "trigger": "tick", "intents": [{"adjust": "person.curiosity", "to": 1}]});
    let stored: Value = c.query_one("SELECT dionysus.add_rule($1, 'be curious', $2)", &[&ALICE, &rule]).await.unwrap().get(0);
    let t = tick(c).await;
    assert!(t["rules_fired"].as_i64().unwrap() >= 1, "{t}");
    let removed: bool = c.query_one("SELECT dionysus.remove_rule($1, $2)", &[&ALICE, &stored["rule_id"].as_i64().unwrap()]).await.unwrap().get(0);
    assert!(removed);
    c.batch_execute("RESET ROLE").await.unwrap();
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person IS NULL").await, 8, "a built-in was added");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person IS NULL AND status = 'active' AND weight = 1").await, 8);
    let debt = c.query_one("SELECT intents::text, use_count FROM dionysus.mind_rules WHERE name = 'silence grows social debt'", &[]).await.unwrap();
    assert!(debt.get::<_, String>(0).contains("0.0278"), "{}", debt.get::<_, String>(0));
    assert!(debt.get::<_, i64>(1) >= 1, "a tick by the driver's role did not count the built-in's use");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.mind_rules WHERE person = 'test:alice' AND status = 'removed' AND origin = 'person'").await, 1);
    // The owner still tunes a built-in.
    c.batch_execute("UPDATE dionysus.mind_rules SET weight = 0.9 WHERE name = 'curiosity fades'").await.unwrap();
}

/// `proactive_setting` reads proactive_config once a transaction (#36: a tick asked it some two
/// hundred times, a query each): a change the transaction makes is read at once, one rolled back
/// to a savepoint is forgotten, another connection's is read from the next transaction, and an
/// unknown key is 42704 naming it.
#[tokio::test]
async fn settings_are_read_once_a_transaction_and_never_stale_after_a_change() {
    let db = TestDb::new("pro_settings").await;
    db.hold_worker_off().await; // no background pass ticks between this test's own steps
    let c = &db.client;
    let read = || async { dionysus_tests::one::<f64>(c, "SELECT dionysus_internal.proactive_setting('min_availability')").await };
    let set = |v: f64| format!("UPDATE dionysus.proactive_config SET value = {v} WHERE key = 'min_availability'");
    c.batch_execute("BEGIN").await.unwrap();
    assert_eq!(read().await, 0.3);
    c.batch_execute(&set(0.4)).await.unwrap();
    assert_eq!(read().await, 0.4, "a change in the same transaction was not read");
    c.batch_execute(&format!("SAVEPOINT s; {}", set(0.5))).await.unwrap();
    assert_eq!(read().await, 0.5);
    c.batch_execute("ROLLBACK TO SAVEPOINT s").await.unwrap();
    assert_eq!(read().await, 0.4, "a change rolled back to its savepoint was still read");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(read().await, 0.3, "a rolled-back transaction's change was still read");
    let other = db.connect().await;
    other.batch_execute(&set(0.45)).await.unwrap();
    assert_eq!(read().await, 0.45, "another connection's committed change was not read by the next transaction");
    let (state, msg) = expect_error(c, "SELECT dionysus_internal.proactive_setting('no_such_setting')").await;
    assert_eq!(state, "42704", "{msg}");
    assert!(msg.contains("no_such_setting"), "{msg}");
}

/// A tick runs everyone's rules one person after another (a rule everyone shares has counted
/// its firing before the next person reads `rule.times_fired`), and writes each rule it used
/// once, however many people it fired for: a tick wrote a built-in's row once a person.
#[tokio::test]
async fn a_tick_runs_each_persons_rules_in_turn_and_writes_each_rule_once() {
    let db = TestDb::new("pro_rules_once").await;
    db.hold_worker_off().await;
    let c = &db.client;
    at(c, "2026-11-23 12:00+00").await;
    for who in ["carol", "alice", "bob"] {
        c.execute("SELECT dionysus.log_message('test', $1, $2, $1, 'hello there')", &[&who, &format!("dm:{who}")]).await.unwrap();
    }
    c.batch_execute(
        "INSERT INTO dionysus.mind_rules (name, trigger, condition, intents, origin, description, created_at)
         VALUES ('first of the tick', 'tick', '{\"op\": \"<\", \"var\": \"rule.times_fired\", \"value\": 1}',
                 '[{\"adjust\": \"person.curiosity\", \"by\": 0.5}]', 'built_in', 'the first person of a tick only', now())",
    )
    .await
    .unwrap();
    advance(c, "10 minutes").await;
    let before = count(c, "SELECT coalesce(max(id), 0) FROM dionysus.rule_firings").await;
    c.batch_execute("BEGIN; SELECT dionysus.proactive_tick()").await.unwrap();
    let written = count(c, "SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'dionysus.mind_rules'::regclass").await;
    c.batch_execute("COMMIT").await.unwrap();
    let firings = format!(
        "SELECT r.person, (f ->> 'rule')::bigint AS rule, f ->> 'name' AS name FROM dionysus.rule_firings r, jsonb_array_elements(r.fired) f \
          WHERE r.id > {before} AND r.trigger = 'tick'"
    );
    let fired = count(c, &format!("SELECT count(*) FROM ({firings}) x")).await;
    let rules = count(c, &format!("SELECT count(DISTINCT rule) FROM ({firings}) x")).await;
    assert!(fired > rules && rules >= 2, "{fired} firings of {rules} rules");
    assert_eq!(written, rules, "rule rows written: {written} for {rules} rules that fired {fired} times");
    let first: Vec<String> =
        c.query(&format!("SELECT person FROM ({firings}) x WHERE name = 'first of the tick'"), &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(first, vec!["test:alice".to_string()], "the shared rule's first firing was not counted before the next person");
    // Every firing counted: a rule that fired for all three has three more uses.
    assert_eq!(count(c, "SELECT use_count FROM dionysus.mind_rules WHERE name = 'first of the tick'").await, 1);
    assert_eq!(
        count(c, &format!("SELECT count(*) FROM ({firings}) x WHERE name = 'curiosity fades'")).await,
        count(c, "SELECT use_count FROM dionysus.mind_rules WHERE name = 'curiosity fades'").await,
    );
}

/// The rules' pass (the library's walk) computes and rounds as PostgreSQL does: an adjustment
/// toward a value by the hour is the float8 the SQL expression gives, the log's before, after
/// and weight are round(x::numeric, 4 or 3) as text (float8 to numeric keeps 15 digits first),
/// and rule.hours_since_fired is rounded to the hundredth before a condition reads it.
#[tokio::test]
async fn the_rules_pass_computes_and_rounds_as_postgres_does() {
    let db = TestDb::new("pro_rules_numbers").await;
    db.hold_worker_off().await;
    let c = &db.client;
    at(c, "2026-11-23 12:00+00").await;
    c.execute("SELECT dionysus.log_message('test', 'ada', 'dm:ada', 'ada', 'hello there')", &[]).await.unwrap();
    c.batch_execute("UPDATE dionysus.people SET curiosity = 0.7123456789012345 WHERE person = 'test:ada'").await.unwrap();
    // Fired 1 h 0 min 18 s ago: 1.005 hours, 1.01 once rounded (a float comparison says 1.005 < 1.01).
    c.batch_execute(
        "INSERT INTO dionysus.mind_rules (name, person, trigger, condition, intents, origin, description, created_at, weight, last_used_at)
         VALUES ('drift', 'test:ada', 'probe', '{\"var\": \"rule.hours_since_fired\", \"op\": \">=\", \"value\": 1.01}',
                 '[{\"adjust\": \"person.curiosity\", \"toward\": 0.2, \"per_hour\": 0.9}, {\"adjust\": \"person.social_debt\", \"to\": 0.33333}]',
                 'learned', 'a probe', now(), 0.123456789, dionysus.clock_now() - interval '1 hour 18 seconds')",
    )
    .await
    .unwrap();
    let fired = count(c, "SELECT dionysus_internal.run_rules_for('probe', ARRAY['test:ada'], 3.7)").await;
    assert_eq!(fired, 1, "the condition on the rounded hours did not hold");
    let row = c
        .query_one(
            "WITH e AS (SELECT f -> 'effects' -> 0 AS e0, f -> 'effects' -> 1 AS e1, f ->> 'weight' AS w
                          FROM dionysus.rule_firings r, jsonb_array_elements(r.fired) f WHERE r.trigger = 'probe'),
                  want AS (SELECT least(1, greatest(0, 0.2 + (0.7123456789012345::float8 - 0.2) * exp(-(0.123456789::float8 * 0.9 * 3.7)))) AS cur)
             SELECT p.curiosity = want.cur, p.curiosity::text || ' against ' || want.cur::text,
                    e.e0 ->> 'before' = round(0.7123456789012345::float8::numeric, 4)::text,
                    e.e0 ->> 'after' = round(want.cur::numeric, 4)::text,
                    e.e1 ->> 'after' = round((0 + 0.123456789::float8 * (0.33333 - 0))::numeric, 4)::text,
                    e.w = round(0.123456789::float8::numeric, 3)::text, e.e0::text || ' ' || e.e1::text || ' ' || e.w
               FROM dionysus.people p, want, e WHERE p.person = 'test:ada'",
            &[],
        )
        .await
        .unwrap();
    let seen: String = row.get(6);
    assert!(row.get::<_, bool>(0), "curiosity {}", row.get::<_, String>(1));
    assert!(row.get::<_, bool>(2) && row.get::<_, bool>(3) && row.get::<_, bool>(4), "{seen}");
    assert!(row.get::<_, bool>(5), "weight {seen}");
    // The learned rule strengthened by rule_strengthen, and counted.
    let strengthened = c
        .query_one(
            "SELECT m.weight = least(1, 0.123456789::float8 + dionysus_internal.proactive_setting('rule_strengthen') * (1 - 0.123456789::float8)), m.use_count
               FROM dionysus.mind_rules m WHERE m.name = 'drift'",
            &[],
        )
        .await
        .unwrap();
    assert!(strengthened.get::<_, bool>(0));
    assert_eq!(strengthened.get::<_, i64>(1), 1);
}

/// A rule the person takes back while a tick is running stays taken back: the pass adds its
/// firings to the rule's row as it then is, and never writes the rule as the pass first read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_taken_back_during_a_tick_stays_taken_back() {
    let db = TestDb::new("pro_rules_race").await;
    db.hold_worker_off().await;
    let c = &db.client;
    at(c, "2026-11-23 12:00+00").await;
    for who in ["alice", "bob"] {
        c.execute("SELECT dionysus.log_message('test', $1, $2, $1, 'hello there')", &[&who, &format!("dm:{who}")]).await.unwrap();
    }
    let nudge: Value = c
        .query_one("SELECT dionysus.add_rule('test:alice', 'nudge me', $1)", &[&json!({"name": "nudge", "trigger": "tick",
            "intents": [{"adjust": "person.curiosity", "by": 0.01}]})])
        .await
        .unwrap()
        .get(0);
    let nudge = nudge["rule_id"].as_i64().unwrap();
    c.execute("SELECT dionysus.add_rule('test:bob', 'plan the trip', $1)", &[&json!({"name": "plan", "trigger": "tick",
        "intents": [{"create_objective": "Plan the trip"}]})])
        .await
        .unwrap();
    advance(c, "10 minutes").await;
    // Bob's rule makes an objective: the pass waits for the goals lock there, after Alice's
    // rule has fired and before the pass writes it.
    let holder = db.connect().await;
    holder.batch_execute("BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0))").await.unwrap();
    let ticker = db.connect().await;
    let tick = tokio::spawn(async move { ticker.query_one("SELECT dionysus.proactive_tick()", &[]).await.map(|r| r.get::<_, Value>(0)) });
    dionysus_tests::until(
        c,
        "EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
        "the tick waiting for the goals lock",
    )
    .await;
    assert!(c.query_one("SELECT dionysus.remove_rule('test:alice', $1)", &[&nudge]).await.unwrap().get::<_, bool>(0));
    holder.batch_execute("COMMIT").await.unwrap();
    tick.await.unwrap().expect("the tick");
    let r = c.query_one("SELECT status, use_count FROM dionysus.mind_rules WHERE id = $1", &[&nudge]).await.unwrap();
    assert_eq!(r.get::<_, i64>(1), 1, "the rule did not fire in that tick");
    assert_eq!(r.get::<_, String>(0), "removed", "the tick wrote back the rule it had read, taken back meanwhile");
}
