//! Censors (#13 §1, sql/022_censors.sql): things not to do, with the real model matching by
//! meaning. A censor warns on a heartbeat action, escalates to a block after three activations,
//! steps down and retires as the person marks false positives; it holds back a reach-out and a
//! contact before the outbox; the person adds one in their words and a chat reply that breaks
//! it is written again (then replaced); and only the person changes their own censors.
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::running::Running;
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use tokio_postgres::Client;
use uuid::Uuid;

const DIETS: &str = "suggesting diets or weight loss";

/// One heartbeat deciding one action: its commit summary.
async fn heartbeat(c: &Client, action: Value) -> Value {
    c.batch_execute("SELECT dionysus.update_energy(20 - dionysus.get_current_energy())").await.unwrap();
    let hb: Value = one(c, "SELECT dionysus.heartbeat_begin()").await;
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    let summary: Value =
        c.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &json!({"actions": [action]})]).await.unwrap().get(0);
    c.execute("SELECT dionysus.heartbeat_finish($1, 'a heartbeat', 0)", &[&id]).await.unwrap();
    summary
}

/// What the driver sent, in order.
fn texts(run: &Running) -> Vec<String> {
    run.channel.sent().into_iter().map(|(_, t)| t).collect()
}

async fn censor(c: &Client, id: &str) -> (String, String, i32, i32) {
    let r = c
        .query_one(&format!("SELECT severity::text, status, activation_count, false_positive_count FROM dionysus.censors WHERE id = '{id}'"), &[])
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

#[tokio::test]
async fn a_censor_warns_escalates_to_a_block_then_steps_down_and_retires() {
    let db = TestDb::new("censor_life").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let id: String = one(c, &format!("SELECT dionysus.add_censor('{DIETS}', 'they asked never to be told what to eat')::text")).await;
    let diet = json!({"action": "inquire_deep", "params": {"question": "which low carb diet makes you lose weight fastest"}});
    let unrelated = json!({"action": "inquire_deep", "params": {"question": "how do bees survive the winter"}});

    // Unrelated words pass untouched; related ones pass with a warning, and count.
    let s = heartbeat(c, unrelated.clone()).await;
    assert_eq!(s["actions_taken"][0].get("censor_warnings"), None, "{s}");
    for n in 1..=2 {
        let s = heartbeat(c, diet.clone()).await;
        assert_eq!(s["actions_taken"][0]["censor_warnings"][0]["censor_id"], json!(id), "warned, still taken: {s}");
        assert_eq!(censor(c, &id).await, ("warn".into(), "active".into(), n, 0));
    }
    // The third activation with no false positive raises it: warn → block.
    heartbeat(c, diet.clone()).await;
    assert_eq!(censor(c, &id).await.0, "block");
    let spent_before: f64 = one(c, "SELECT dionysus.get_current_energy()").await;
    let s = heartbeat(c, diet.clone()).await;
    assert_eq!(s["actions_taken"], json!([]), "blocked: {s}");
    let r = &s["actions_rejected"][0];
    assert!(r["reason"].as_str().unwrap().starts_with("censored: they asked never to be told what to eat"), "{r}");
    assert_eq!(r["censors"][0]["censor_id"], json!(id), "{r}");
    assert_eq!(s["energy_end"].as_f64().unwrap(), spent_before.max(20.0), "a blocked action costs nothing: {s}");

    // Marked a false positive: a step down, then retired.
    let m: Value = one(c, &format!("SELECT dionysus.mark_censor_false_positive('{id}')")).await;
    assert_eq!((m["severity"].as_str(), m["status"].as_str()), (Some("warn"), Some("active")), "{m}");
    let s = heartbeat(c, diet.clone()).await;
    assert!(s["actions_taken"][0]["censor_warnings"].is_array(), "a warn again: {s}");
    let m: Value = one(c, &format!("SELECT dionysus.mark_censor_false_positive('{id}')")).await;
    assert_eq!(m["status"], json!("retired"), "{m}");
    let s = heartbeat(c, diet.clone()).await;
    assert_eq!(s["actions_taken"][0].get("censor_warnings"), None, "retired: {s}");
    let events: Vec<String> = c
        .query(&format!("SELECT event FROM dionysus.censor_events WHERE censor_id = '{id}' ORDER BY id"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        events,
        ["added", "activated", "activated", "activated", "escalated", "activated", "false_positive", "de_escalated", "activated", "false_positive", "retired"]
    );
    // Every activation says what was being done.
    let ctx: Value = one(c, &format!("SELECT context FROM dionysus.censor_events WHERE censor_id = '{id}' AND event = 'activated' ORDER BY id LIMIT 1")).await;
    assert_eq!((ctx["kind"].as_str(), ctx["matched_by"].as_str()), (Some("inquire_deep"), Some("similarity")), "{ctx}");
    assert!(ctx["context"]["heartbeat_id"].is_string() && ctx["similarity"].as_f64().unwrap() >= 0.45, "{ctx}");
    // Escalation stops at block: absolute is only ever someone's word.
    let again: String = one(c, &format!("SELECT dionysus.add_censor('{DIETS}', 'still no diets', 'block')::text")).await;
    for _ in 0..4 {
        heartbeat(c, diet.clone()).await;
    }
    assert_eq!(censor(c, &again).await, ("block".into(), "active".into(), 4, 0));

    // An absolute censor is the person's line: marks count, never lower it; their word lifts it.
    let hard: String = one(c, "SELECT dionysus.add_censor('sharing their address', 'privacy', 'absolute', 'test:ada')::text").await;
    let m: Value = one(c, &format!("SELECT dionysus.mark_censor_false_positive('{hard}', 'test:ada')")).await;
    assert_eq!((m["severity"].as_str(), m["false_positives"].as_i64()), (Some("absolute"), Some(1)), "{m}");
    assert!(one::<bool>(c, &format!("SELECT dionysus.retire_censor('{hard}', 'test:ada')")).await);
}

/// A reach-out of the heartbeat and a contact of the proactive mind are read before the outbox.
#[tokio::test]
async fn reach_outs_and_contacts_are_held_back_before_the_outbox() {
    let db = TestDb::new("censor_outbox").await;
    db.hold_worker_off().await;
    let c = &db.client;
    c.batch_execute(&format!(
        "SELECT dionysus.pause_heartbeats(true); SELECT dionysus.set_clock('2026-11-23 10:00+00'); \
         SELECT dionysus.log_message('test', 'a1', 'dm:alice', 'alice', 'Hello there'); \
         SELECT dionysus.add_censor('{DIETS}', 'they asked never to be told what to eat', 'block', 'test:alice')"
    ))
    .await
    .unwrap();
    // The heartbeat's reach-out: queued, composed, refused at the outbox.
    let s = heartbeat(c, json!({"action": "reach_out_user", "params": {"intent": "say hello", "person": "test:alice"}})).await;
    let work = s["work_ids"][0].as_str().unwrap_or_else(|| panic!("queued: {s}")).to_string();
    let lease: Uuid = one(c, &format!("SELECT lease_token FROM dionysus.claim_work_item('{work}', 'w')")).await;
    let done: Value = c
        .query_one(
            "SELECT dionysus.complete_work($1::text::uuid, $2, $3)",
            &[&work, &json!({"message": "Hello! Have you thought about a diet to lose some weight?", "person": "test:alice",
                             "summary": "wrote to test:alice (say hello)"}), &lease],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(done["refused"][0]["message"], json!("censored"), "{done}");
    // The heartbeat's narrative is told what happened (its work's summary), not that it wrote.
    let told: String = one(c, &format!("SELECT result ->> 'summary' FROM dionysus.work_queue WHERE id = '{work}'")).await;
    assert_eq!(told, "not sent: a censor held it back");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.outbox").await, 0, "nothing reached the outbox");
    // Blocked at the heartbeat itself: the record (and the narrative others may read) names
    // none of the person's own reasons.
    let s = heartbeat(c, json!({"action": "reach_out_user", "params": {"intent": "suggest a diet to lose some weight", "person": "test:alice"}})).await;
    let r = &s["actions_rejected"][0];
    assert_eq!(r["reason"], json!("censored: a censor of the person's own"), "{s}");
    assert!(!s.to_string().contains("told what to eat"), "{s}");

    // The proactive mind's contact: it waits instead, and says why.
    c.batch_execute(
        "UPDATE dionysus.heartbeat_state SET current_energy = 20; UPDATE dionysus.people SET social_debt = 0.95, next_check_at = NULL; \
         SELECT dionysus.advance_clock('1 hour'); SELECT dionysus.proactive_tick();",
    )
    .await
    .unwrap();
    let e: Value = one(c, "SELECT to_jsonb(e) FROM dionysus.explain_contact('test:alice') e").await;
    assert_eq!(e["outcome"], json!("opportunity"), "{e}");
    let d: Value = c
        .query_one(
            "SELECT dionysus.decide_contact($1::text::uuid, 'message', 'Have you thought about a diet to lose some weight?', 'test')",
            &[&e["evaluation_id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(d["decision"], json!("wait"), "{d}");
    assert!(d["censored"].is_array(), "{d}");
    let reason: String = one(c, &format!("SELECT reason FROM dionysus.contact_evaluations WHERE id = '{}'", e["evaluation_id"].as_str().unwrap())).await;
    assert!(reason.starts_with("censored: they asked never to be told what to eat"), "{reason}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.outbox").await, 0);
    // Someone else's censor does not hold back a message to Bo.
    assert!(c.query("SELECT * FROM dionysus.check_censors('Try a diet to lose weight', 'reach_out', 'test:bo')", &[]).await.unwrap().is_empty());
}

/// A censor's hours are judged when a message is sent as well as when it is written: a
/// reach-out written at 21:55 that is still unsent at 22:05 waits through the hours a censor
/// keeps quiet, and goes at 9.
#[tokio::test]
async fn a_reach_out_written_before_a_censors_hours_waits_for_them_to_pass() {
    let db = TestDb::new("censor_hours_delivery").await;
    db.hold_worker_off().await;
    let c = &db.client;
    c.batch_execute(
        "SELECT dionysus.pause_heartbeats(true); SELECT dionysus.set_clock('2026-11-23 21:55+00'); \
         SELECT dionysus.log_message('test', 'a1', 'dm:alice', 'alice', 'Hello there'); \
         SELECT dionysus.add_censor('messaging them', 'they sleep', 'block', 'test:alice', kinds => ARRAY['reach_out'], \
                                    from_hour => 22, to_hour => 9, any_content => true); \
         DELETE FROM dionysus.work_queue;",
    )
    .await
    .unwrap();
    c.batch_execute(
        "DO $$ DECLARE w uuid; BEGIN \
           INSERT INTO dionysus.work_queue (idempotency_key, action, params) VALUES ('r1', 'reach_out_user', '{\"person\": \"test:alice\"}') RETURNING id INTO w; \
           PERFORM dionysus.claim_work('t', ARRAY['reach_out_user']); \
           PERFORM dionysus.complete_work(w, '{\"message\": \"Thinking of you, how did the week end?\", \"person\": \"test:alice\"}'); END $$",
    )
    .await
    .unwrap();
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.outbox WHERE status = 'pending'").await, 1, "written outside the hours");
    c.batch_execute("SELECT dionysus.advance_clock('10 minutes')").await.unwrap();
    assert_eq!(c.query("SELECT * FROM dionysus.reserve_outbox('w', 'test')", &[]).await.unwrap().len(), 0, "sent at 22:05");
    assert_eq!(one::<String>(c, "SELECT last_error FROM dionysus.outbox").await, "waiting: a censor holds at this hour");
    c.batch_execute("SELECT dionysus.set_clock('2026-11-24 09:01+00')").await.unwrap();
    let sent = c.query("SELECT id FROM dionysus.reserve_outbox('w', 'test')", &[]).await.unwrap();
    assert_eq!(sent.len(), 1, "still held after the hours");
    assert!(one::<Option<String>>(c, "SELECT last_error FROM dionysus.outbox").await.is_none());
}

/// "Never message me before 9" in the person's words becomes their censor (the fast model reads
/// it); a reply that breaks "don't mention my ex" is written again, and a second breach sends
/// the censored line instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_adds_a_censor_in_words_and_a_reply_that_breaks_one_is_rewritten() {
    let db = TestDb::new("censor_words").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let llm = FakeLlm::start().await;
    llm.json("Read the latest message", json!({"facts": [], "triples": [], "goals": []}));
    llm.json(
        "TASK: censor_from_words && before 9am",
        json!({"censor": {"trigger": "messaging them", "reason": "they sleep until 9", "severity": "block", "kinds": ["reach_out"],
                          "hours": [0, 9], "any_content": true}, "acknowledgement": "Got it: nothing from me before 9."}),
    );
    llm.json(
        "TASK: censor_from_words && mention Marco again",
        json!({"censor": {"trigger": "mentioning their ex Marco", "reason": "it still hurts", "severity": "block", "kinds": ["reply"],
                          "pattern": "\\mmarco\\M", "any_content": false}, "acknowledgement": "Of course. I won't bring him up."}),
    );
    // The first draft names him; the rewrite (told why) does not; later both do.
    llm.on_times("Your draft reply was stopped", 1, Answer::Text("How about a long walk in Sintra?".into()));
    llm.on("Your draft reply was stopped", Answer::Text("Or call Marco, he knows Sintra.".into()));
    llm.on("TASK: chat", Answer::Text("Maybe call Marco and see a film?".into()));
    let mut run = Running::start(scripted_driver_config(driver_conninfo(&db.name), &llm), &["ada"]).await;

    let h = run.say("n1", "ada", "Please never message me before 9am, I sleep late.").await;
    let sent = texts(&run);
    assert!(sent.iter().any(|t| t.contains("nothing from me before 9")), "acknowledged instead of a reply: {sent:?} {h:?}");
    let stored: Value = one(c, "SELECT to_jsonb(x) FROM dionysus.censors x WHERE person = 'test:ada' AND trigger = 'messaging them'").await;
    assert_eq!((stored["from_hour"].as_i64(), stored["to_hour"].as_i64(), stored["learned_from_kind"].as_str()), (Some(0), Some(9), Some("message")), "{stored}");
    let from: String = one(c, "SELECT platform_message_id FROM dionysus.messages WHERE id = (SELECT learned_from_id FROM dionysus.censors WHERE trigger = 'messaging them')").await;
    assert_eq!(from, "n1", "learned from their message");
    // It holds at 7:30 their time for what Dionysus starts, not at 10, nor for replies.
    let holds = |at: &str, kind: &str| format!("SELECT count(*) FROM dionysus.check_censors('Good morning!', '{kind}', 'test:ada', '{at}')");
    assert_eq!(one::<i64>(c, &holds("2026-11-24 07:30+00", "reach_out")).await, 1);
    assert_eq!(one::<i64>(c, &holds("2026-11-24 10:00+00", "reach_out")).await, 0);
    assert_eq!(one::<i64>(c, &holds("2026-11-24 07:30+00", "reply")).await, 0);
    // Words that only look like a request ("I never liked …") are an ordinary message.
    assert!(!one::<bool>(c, "SELECT dionysus.censor_cue('I never liked broccoli')").await);

    run.say("n2", "ada", "And don't ever mention Marco again.").await;
    run.say("n3", "ada", "What should I do this weekend?").await;
    let sent = texts(&run);
    assert_eq!(sent.last().map(String::as_str), Some("How about a long walk in Sintra?"), "rewritten once: {sent:?}");
    assert!(!sent.iter().any(|t| t.contains("Marco")), "nothing sent named him: {sent:?}");
    run.say("n4", "ada", "Any other idea?").await;
    let sent = texts(&run);
    let fallback: String = one(c, "SELECT template FROM dionysus.prompt_templates WHERE key = 'censored_reply' AND active").await;
    assert_eq!(sent.last(), Some(&fallback), "blocked twice: the censored line: {sent:?}");
    let activations: i32 = one(c, "SELECT activation_count FROM dionysus.censors WHERE trigger = 'mentioning their ex Marco'").await;
    assert_eq!(activations, 3, "the first draft, then the draft and the rewrite");

    // /censors lists what holds for them, numbered; /censor fine N steps one down, /censor lift N lifts it.
    run.say("n5", "ada", "/censors").await;
    let listing = texts(&run).last().cloned().unwrap_or_default();
    let number = |what: &str| -> String {
        listing.lines().find(|l| l.contains(what)).and_then(|l| l.split('.').next()).unwrap_or_else(|| panic!("{what} in {listing}")).to_string()
    };
    let (marco, early) = (number("mentioning their ex Marco"), number("messaging them"));
    run.say("n6", "ada", &format!("/censor fine {early}")).await;
    assert!(texts(&run).last().unwrap().contains("is now warn"), "{:?}", texts(&run));
    run.say("n7", "ada", &format!("/censor lift {marco}")).await;
    let states: Vec<(String, String)> = c
        .query("SELECT trigger, status || ':' || severity FROM dionysus.censors WHERE person = 'test:ada' ORDER BY trigger", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(states, [("mentioning their ex Marco".to_string(), "retired:block".to_string()), ("messaging them".to_string(), "active:warn".to_string())]);
    run.stop().await;
}

/// A model that copies the prompt's shape makes no censor: nothing is stored, the refusal is
/// written down as hers, and she is told, not answered as if it were set. A grounded censor
/// whose acknowledgement is a copied placeholder is stored, and she reads our own words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_censor_the_model_did_not_ground_is_not_stored_and_the_person_is_told() {
    let db = TestDb::new("censor_copied").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let llm = FakeLlm::start().await;
    llm.json("Read the latest message", json!({"facts": [], "triples": [], "goals": []}));
    llm.json(
        "TASK: censor_from_words && after 10pm",
        json!({"censor": {"trigger": "<what not to do, as an action>", "reason": "<why>", "severity": "block", "kinds": null,
                          "hours": null, "any_content": true}, "acknowledgement": "<one short sentence back to them>"}),
    );
    llm.json(
        "TASK: censor_from_words && talk about work",
        json!({"censor": {"trigger": "talking about work", "reason": "they want to rest", "severity": "block", "kinds": null,
                          "hours": null, "any_content": false}, "acknowledgement": "<one short sentence back to them>"}),
    );
    llm.json(
        "TASK: censor_from_words && message me before 9",
        json!({"censor": {"trigger": "texting them early", "reason": "<why>", "severity": "block", "kinds": ["reach_out"],
                          "hours": [0, 9], "any_content": true}, "acknowledgement": "Noted: nothing before 9."}),
    );
    llm.on("TASK: chat", Answer::Text("Sure thing!".into()));
    let mut run = Running::start(scripted_driver_config(driver_conninfo(&db.name), &llm), &["ada"]).await;

    run.say("x1", "ada", "Please never text me after 10pm.").await;
    let sent = texts(&run);
    assert!(sent.last().unwrap().starts_with("If you were asking me not to do something, I could not set that up"), "{sent:?}");
    assert!(!sent.iter().any(|t| t.contains("Sure thing") || t.contains('<')), "answered as if it were set: {sent:?}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors WHERE person = 'test:ada'").await, 0);
    let refused: Value = one(c, "SELECT jsonb_agg(jsonb_build_array(kind, value, private_to)) FROM dionysus.model_text_refusals").await;
    assert_eq!(refused, json!([["censor", "<what not to do, as an action>", ["test:ada"]]]));

    run.say("x2", "ada", "Don't ever talk about work with me.").await;
    assert_eq!(texts(&run).last().map(String::as_str), Some("Understood, I will hold to that (`/censors` lists what I hold to)."));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors WHERE person = 'test:ada' AND trigger = 'talking about work'").await, 1);
    // A trigger in the model's words for what she said ("texting" for "message") is hers.
    run.say("x3", "ada", "Please don't message me before 9.").await;
    assert_eq!(texts(&run).last().map(String::as_str), Some("Noted: nothing before 9."));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors WHERE person = 'test:ada' AND trigger = 'texting them early'").await, 1);
    let reason: String = one(c, "SELECT reason FROM dionysus.censors WHERE trigger = 'texting them early'").await;
    assert_eq!(reason, "Please don't message me before 9.", "the model's placeholder reason is replaced by her words");
    run.stop().await;
}

/// The driver's role: reads and gates, never writes a censor directly; a person changes only
/// their own, with one refusal whether or not the censor exists; bad input names its argument.
#[tokio::test]
async fn only_the_person_changes_their_censors_and_bad_input_is_named() {
    let db = TestDb::new("censor_rights").await;
    let c = &db.client;
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'b1', 'dm:bo', 'bo', 'hi'); \
         SELECT dionysus.add_censor('talking about politics', 'the owner''s rule', 'block')",
    )
    .await
    .unwrap();
    let d = db.connect_as_driver().await;
    let theirs: String = one(&d, "SELECT dionysus.add_own_censor('test:ada', 'mentioning their ex', 'it hurts')::text").await;
    let everyone: String = one(c, "SELECT id::text FROM dionysus.censors WHERE person IS NULL").await;
    let bo_message: String = one(c, "SELECT id::text FROM dionysus.messages WHERE platform_message_id = 'b1'").await;
    for sql in [
        format!("SELECT dionysus.mark_censor_false_positive('{theirs}', 'test:bo')"),
        format!("SELECT dionysus.mark_censor_false_positive('{}', 'test:bo')", Uuid::new_v4()),
        format!("SELECT dionysus.retire_censor('{theirs}', 'test:bo')"),
        format!("SELECT dionysus.mark_censor_false_positive('{everyone}', NULL)"),
        format!("SELECT dionysus.retire_censor('{everyone}')"),
        format!("SELECT dionysus.add_own_censor('test:ada', 'x', 'y', message_id => '{bo_message}')"),
        "SELECT dionysus.add_censor('x', 'y')".to_string(),
        format!("UPDATE dionysus.censors SET severity = 'warn' WHERE id = '{everyone}'"),
        "INSERT INTO dionysus.censor_events (censor_id, event, severity) SELECT id, 'retired', 'warn' FROM dionysus.censors LIMIT 1".to_string(),
    ] {
        let (code, msg) = expect_error(&d, &sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    let (_, a) = expect_error(&d, &format!("SELECT dionysus.retire_censor('{theirs}', 'test:bo')")).await;
    let (_, b) = expect_error(&d, "SELECT dionysus.retire_censor('00000000-0000-0000-0000-000000000000', 'test:bo')").await;
    assert_eq!(a.replace(&theirs, "ID"), b.replace("00000000-0000-0000-0000-000000000000", "ID"), "the same refusal whether or not it exists");
    assert!(one::<bool>(&d, &format!("SELECT dionysus.retire_censor('{theirs}', 'test:ada')")).await, "Ada lifts her own");
    // Bo sees everyone's censors and his own, never Ada's.
    let seen: Vec<String> = d.query("SELECT trigger FROM dionysus.person_censors('test:bo')", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(seen, ["talking about politics"]);
    for (sql, arg) in [
        ("SELECT dionysus.add_censor('', 'y')", "\"trigger\""),
        ("SELECT dionysus.add_censor('x', 'y', 'forbid')", "\"severity\""),
        ("SELECT dionysus.add_censor('x', 'y', pattern => '(')", "\"pattern\""),
        ("SELECT dionysus.add_censor('x', 'y', from_hour => 3, to_hour => 30)", "\"from_hour\""),
        ("SELECT dionysus.add_censor('x', 'y', from_hour => 3)", "\"from_hour\""),
        ("SELECT dionysus.add_censor('x', 'y', kinds => ARRAY['Reply!'])", "\"kinds\""),
        ("SELECT dionysus.add_censor('x', 'y', any_content => true)", "\"any_content\""),
        ("SELECT * FROM dionysus.check_censors('')", "\"content\""),
        ("SELECT dionysus.censor_gate('bad kind', 'words')", "\"kind\""),
    ] {
        let (code, msg) = expect_error(c, sql).await;
        assert_eq!(code, "22023", "{sql}: {msg}");
        assert!(msg.contains(arg), "{sql}: {msg}");
    }
}
