//! The censors an unwelcome heartbeat proposes (#13 §1, sql/028_heartbeat_lessons.sql), with the
//! real model for censor matching and the scripted one for the lesson: Alice's negative feedback
//! on a heartbeat's reach-out queues one lesson; the running driver's model sees only the
//! message she got and her words, and its candidates are proposed to her alone, matching
//! nothing until she keeps one. Positive feedback, feedback on a chat reply and feedback taken
//! back propose nothing; the driver's role cannot propose censors by itself.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::conversation;
use dionysus_driver::Mind;
use dionysus_tests::fake_llm::FakeLlm;
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_postgres::Client;
use uuid::Uuid;

const REACH_OUT: &str = "Hey! Did you finish that quarterly report for your boss yet? Saturday is a good day to catch up on work.";

/// A heartbeat that reaches out to Alice with `words`, delivered as platform message `sent_as`:
/// returns the heartbeat's id.
async fn reach_out(c: &Client, words: &str, sent_as: &str) -> Uuid {
    c.batch_execute("SELECT dionysus.update_energy(20 - dionysus.get_current_energy())").await.unwrap();
    let hb: Value = one(c, "SELECT dionysus.heartbeat_begin()").await;
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    let s: Value = c
        .query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &json!({"actions": [{"action": "reach_out_user",
                   "params": {"intent": "check in", "person": "test:alice"}}]})])
        .await
        .unwrap()
        .get(0);
    let work: Uuid = s["work_ids"][0].as_str().unwrap_or_else(|| panic!("queued: {s}")).parse().unwrap();
    let lease: Uuid = one(c, &format!("SELECT lease_token FROM dionysus.claim_work_item('{work}', 'w')")).await;
    c.execute("SELECT dionysus.complete_work($1, $2, $3)", &[&work, &json!({"message": words, "person": "test:alice",
               "summary": "wrote to test:alice"}), &lease])
        .await
        .unwrap();
    c.execute("SELECT dionysus.heartbeat_finish($1, 'a heartbeat', 0)", &[&id]).await.unwrap();
    let outbox: Uuid = one(c, &format!("SELECT id FROM dionysus.outbox WHERE work_id = '{work}'")).await;
    c.batch_execute(&format!(
        "SELECT dionysus.reserve_outbox('w', 'test'); \
         SELECT dionysus.outbox_part_sent('{outbox}', 'w', 0, '{sent_as}'); \
         SELECT dionysus.confirm_outbox('{outbox}', 'w', 'dm:alice', 'bot');"
    ))
    .await
    .unwrap();
    id
}

async fn lessons(c: &Client) -> i64 {
    one(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'heartbeat_censors'").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwelcome_reach_out_proposes_censors_to_its_person_alone() {
    let db = TestDb::new("heartbeat_lessons").await;
    db.hold_worker_off().await;
    let c = &db.client;
    c.batch_execute(
        "SELECT dionysus.pause_heartbeats(true); SELECT dionysus.set_clock('2026-11-21 10:00+00'); \
         SELECT dionysus.log_message('test', 'a1', 'dm:alice', 'alice', 'Hello there');",
    )
    .await
    .unwrap();
    let hb = reach_out(c, REACH_OUT, "r1").await;
    // Bob talks afterwards (before, his private words would have kept the reach-out from Alice).
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'Hi, Bob here')").await.unwrap();
    let outbox: Uuid = one(c, "SELECT id FROM dionysus.outbox WHERE platform_message_id = 'r1'").await;

    // Bob cannot judge what was sent to Alice; Alice's praise is no failure.
    let v: Value = one(c, "SELECT dionysus.give_feedback('test', 'fb0', 'bob', 'awful', about => 'r1', source => 'command')").await;
    assert_eq!(v["stored"], false, "{v}");
    let v: Value = one(c, "SELECT dionysus.give_feedback('test', 'f0', 'alice', 'thanks, that was nice', about => 'r1', sentiment => 'positive', source => 'command')").await;
    assert_eq!(v["stored"], true, "{v}");
    assert_eq!(lessons(c).await, 0, "praise proposed a lesson");
    // Her objection queues one lesson, once however often it is redelivered.
    let objection = "Please never message me about work on a weekend, that was really stressful";
    for _ in 0..2 {
        c.execute("SELECT dionysus.give_feedback('test', 'f1', 'alice', $1, about => 'r1', sentiment => 'negative', source => 'command')", &[&objection])
            .await
            .unwrap();
    }
    assert_eq!(lessons(c).await, 1);
    let params: Value = one(c, "SELECT params FROM dionysus.work_queue WHERE action = 'heartbeat_censors'").await;
    assert_eq!(params["heartbeat_id"], json!(hb.to_string()));
    assert_eq!((&params["outbox_id"], &params["person"]), (&json!(outbox.to_string()), &json!("test:alice")));

    // The running driver does it with the (scripted) fast model.
    let llm = FakeLlm::start().await;
    llm.json("TASK: heartbeat_censors", json!({"censor_candidates": [
        {"trigger": "messaging them about work on weekends", "reason": "weekends are theirs; work talk then stresses them"},
        {"trigger": "", "reason": "an empty trigger the driver drops"},
        {"trigger": "asking about reports", "reason": "the model's second idea"},
        {"trigger": "<the kind of action or message to avoid, in a few words>", "reason": "<why, in their terms>"}]}));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), Arc::new(TestChannel::new(&["alice", "bob"]))));
    let work: Uuid = one(c, "SELECT id FROM dionysus.work_queue WHERE action = 'heartbeat_censors'").await;
    conversation::extract_now(&mind, work).await;
    assert_eq!(one::<String>(c, &format!("SELECT status::text FROM dionysus.work_queue WHERE id = '{work}'")).await, "done");
    // The model was shown the message she got and her words, nothing else of the heartbeat.
    let asked = llm.requests_with("TASK: heartbeat_censors");
    assert_eq!(asked.len(), 1);
    let prompt = asked[0]["messages"].to_string();
    assert!(prompt.contains("quarterly report") && prompt.contains("never message me about work on a weekend"), "{prompt}");

    // Proposed to Alice alone, from the heartbeat, as warnings that wait for her word.
    let rows = c
        .query("SELECT person, trigger, status, severity::text, origin, learned_from_kind, learned_from_id FROM dionysus.censors ORDER BY trigger", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "the empty trigger is dropped, the copied placeholder refused");
    let refused: i64 = one(c, "SELECT count(*) FROM dionysus.model_text_refusals WHERE kind = 'censor' AND value LIKE '<the kind of action%'").await;
    assert_eq!(refused, 1, "the placeholder's refusal is written down");
    for r in &rows {
        assert_eq!((r.get::<_, String>(0), r.get::<_, String>(2), r.get::<_, String>(3), r.get::<_, String>(4), r.get::<_, String>(5)),
                   ("test:alice".into(), "proposed".into(), "warn".into(), "heartbeat".into(), "heartbeat".into()));
        assert_eq!(r.get::<_, Uuid>(6), hb);
    }
    let matches = |person: &'static str| async move {
        one::<i64>(c, &format!("SELECT count(*) FROM dionysus.check_censors('Messaging them about their work this weekend', 'reach_out', '{person}')")).await
    };
    assert_eq!(matches("test:alice").await, 0, "a proposal matched before she kept it");
    let weekends: Uuid = one(c, "SELECT id FROM dionysus.censors WHERE trigger LIKE 'messaging them about work%'").await;
    let (state, _) = expect_error(c, &format!("SELECT dionysus.accept_censor('{weekends}', 'test:bob')")).await;
    assert_eq!(state, "42501", "Bob kept Alice's proposal");
    assert_eq!(one::<bool>(c, &format!("SELECT dionysus.accept_censor('{weekends}', 'test:alice')")).await, true);
    assert_eq!(matches("test:alice").await, 1, "kept, it does not hold");
    assert_eq!(matches("test:bob").await, 0, "hers holds for Bob");
    // The other waits for her word, learned from no episode.
    let waiting: Vec<(String, Option<Uuid>)> = c
        .query("SELECT trigger, episode_id FROM dionysus.proposed_censors('test:alice')", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(waiting, vec![("asking about reports".to_string(), None)]);

    // A second objection to the same heartbeat proposes nothing twice.
    c.execute("SELECT dionysus.give_feedback('test', 'f2', 'alice', 'seriously, no work talk on weekends', about => 'r1', sentiment => 'negative', source => 'command')", &[])
        .await
        .unwrap();
    let again: Uuid = one(c, "SELECT id FROM dionysus.work_queue WHERE action = 'heartbeat_censors' AND status = 'pending'").await;
    conversation::extract_now(&mind, again).await;
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors").await, 2);
    // Feedback taken back before its lesson runs proposes nothing.
    c.batch_execute("SELECT dionysus.give_feedback('test', 'f3', 'alice', 'ugh, stop it', about => 'r1', sentiment => 'negative', source => 'command'); \
                     SELECT dionysus.undo_feedback('test', 'alice', 'f3');")
        .await
        .unwrap();
    let undone: Uuid = one(c, "SELECT id FROM dionysus.work_queue WHERE action = 'heartbeat_censors' AND status = 'pending'").await;
    conversation::extract_now(&mind, undone).await;
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors").await, 2);
    assert_eq!(llm.requests_with("TASK: heartbeat_censors").len(), 2, "the model was asked about feedback taken back");

    // /feedback without naming a message is about Dionysus's last one to her: the reach-out.
    c.batch_execute("SELECT dionysus.give_feedback('test', 'f5', 'alice', 'that was too pushy', sentiment => 'negative', source => 'command')")
        .await
        .unwrap();
    let named: Value = one(c, "SELECT params FROM dionysus.work_queue WHERE idempotency_key = 'heartbeat_censors:' || \
                               (SELECT id FROM dionysus.feedback WHERE platform_message_id = 'f5')").await;
    assert_eq!(named["outbox_id"], json!(outbox.to_string()));

    // Feedback on a chat reply (not a heartbeat's doing) proposes nothing.
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'c1', 'dm:alice', 'bot', 'A reply in the chat', true, false, \
                 (SELECT id FROM dionysus.messages WHERE platform_message_id = 'a1'), 'test:alice'); \
         SELECT dionysus.give_feedback('test', 'f4', 'alice', 'bad answer', about => 'c1', sentiment => 'negative', source => 'command');",
    )
    .await
    .unwrap();
    assert_eq!(lessons(c).await, 4, "a chat reply's feedback queued a heartbeat lesson");
    // Her first objection taken back withdraws what it proposed that still waits; what she kept stays.
    c.batch_execute("SELECT dionysus.undo_feedback('test', 'alice', 'f1')").await.unwrap();
    let statuses: Vec<(String, String)> = c
        .query("SELECT trigger, status FROM dionysus.censors ORDER BY trigger", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(statuses, vec![("asking about reports".to_string(), "retired".to_string()),
                              ("messaging them about work on weekends".to_string(), "active".to_string())]);

    // The driver's role proposes no censor by itself: not directly, not with a forged item.
    let driver = db.connect_as_driver().await;
    let (state, _) = expect_error(
        &driver,
        "SELECT dionysus_internal.propose_censor_candidates('test:bob', '[{\"trigger\": \"x\", \"reason\": \"y\"}]', 'a', 'heartbeat', NULL, '{}')",
    )
    .await;
    assert_eq!(state, "42501");
    let (state, _) = expect_error(
        &driver,
        &format!("SELECT dionysus_internal.propose_heartbeat_censors((SELECT w FROM dionysus.work_queue w WHERE id = '{work}'), \
                  '[{{\"trigger\": \"contacting them at all\", \"reason\": \"forged\"}}]')"),
    )
    .await;
    assert_eq!(state, "22023", "a done item proposed again");
    // A claimed item of its own making, naming a negative feedback about no heartbeat's message.
    let (state, _) = expect_error(
        &driver,
        &format!("DO $$ DECLARE w dionysus.work_queue; f uuid; BEGIN \
                    SELECT id INTO f FROM dionysus.feedback WHERE platform_message_id = 'f4'; \
                    INSERT INTO dionysus.work_queue (idempotency_key, action, params, status) \
                    VALUES ('heartbeat_censors:' || f, 'heartbeat_censors', \
                            jsonb_build_object('feedback_id', f, 'heartbeat_id', '{hb}', 'person', 'test:alice'), 'claimed') RETURNING * INTO w; \
                    PERFORM dionysus_internal.propose_heartbeat_censors(w, '[{{\"trigger\": \"contacting them at all\", \"reason\": \"forged\"}}]'); \
                  END $$"),
    )
    .await;
    assert_eq!(state, "22023", "a forged lesson proposed");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors").await, 2);
}
