//! Working memory (#13 §3, sql/025_working_memory.sql), through the real driver with the
//! scripted model: a session keeps what its earlier turns brought up and shows it when this
//! turn's recall does not; the extraction names its focus and the threads left open; past its
//! capacity the least relevant item leaves first; the session's end clears it after its record
//! is kept, and a thread left open is carried into the next session until a turn closes it.
//! One person's working memory never holds what another said.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::conversation;
use dionysus_driver::Mind;
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::task::JoinSet;

const THREAD: &str = "The Acme interview on Friday: ask how it went";

/// One turn, handled with its extraction finished.
async fn say(mind: &Arc<Mind>, channel: &str, author: &str, id: &str, words: &str) {
    let turn = Incoming { message_id: id.into(), channel_id: channel.into(), author_id: author.into(), content: words.into(),
                          private: channel.starts_with("dm:"), reply_to: None };
    let mut ex = JoinSet::new();
    conversation::handle(mind, turn, &mut ex).await;
    while ex.join_next().await.is_some() {}
}

/// The last chat prompt the model was sent, as its JSON text.
fn last_chat(llm: &FakeLlm) -> String {
    llm.requests_with("TASK: chat").last().expect("a chat request")["messages"].to_string()
}

/// Ada's working memory in her direct conversation: item → relevance.
async fn items(c: &tokio_postgres::Client) -> HashMap<String, f64> {
    let v: Value = one(c, "SELECT coalesce(jsonb_object_agg(i.ref_id, i.relevance), '{}') FROM dionysus.working_memory_items i \
                           JOIN dionysus.working_memories w ON w.id = i.working_memory_id \
                           JOIN dionysus.episodes e ON e.id = w.episode_id \
                          WHERE w.person = 'test:ada' AND e.source = 'conversation:test:dm:ada'").await;
    v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_what_came_up_lets_the_least_relevant_go_and_ends_with_its_threads_carried() {
    let db = TestDb::new("working_memory").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let extract = "Latest message from the user:\\n"; // as the JSON of the messages spells it
    llm.json(&format!("{extract}Back from the interview"), json!({"facts": [], "triples": [], "goals": [],
        "focus": "how the interview went", "threads": {"opened": [], "closed": [THREAD]}}));
    llm.json(&format!("{extract}I have that job interview"), json!({"facts": [], "triples": [], "goals": [],
        "focus": "the Acme interview", "threads": {"opened": [THREAD]}}));
    llm.json(extract, json!({"facts": [], "triples": [], "goals": []}));
    llm.on("TASK: chat", Answer::Text("I hear you.".into()));
    c.batch_execute(
        "SELECT dionysus.remember('The user''s job interview at Acme Corp is on Friday morning', 'semantic', 0.6, 0, '{}', 'seed', \
                                  private_to => ARRAY['test:ada']); \
         SELECT dionysus.remember('The user sleeps badly when stressed about work', 'semantic', 0.5, 0, '{}', 'seed', \
                                  private_to => ARRAY['test:ada']); \
         SELECT dionysus.remember('The user drinks chamomile tea before bed to fall asleep', 'semantic', 0.5, 0, '{}', 'seed', \
                                  private_to => ARRAY['test:ada']); \
         SELECT dionysus.remember('The user adopted a grey cat named Pixel last spring', 'semantic', 0.5, 0, '{}', 'seed', \
                                  private_to => ARRAY['test:ada']); \
         SELECT dionysus.remember('Bob is planning a surprise party for Ada on Saturday', 'semantic', 0.6, 0, '{}', 'seed', \
                                  private_to => ARRAY['test:bob']); \
         UPDATE dionysus.heartbeat_config SET value = 4 WHERE key = 'working_memory_capacity';",
    )
    .await
    .unwrap();
    let interview: String = one(c, "SELECT id::text FROM dionysus.memories WHERE content LIKE '%Acme Corp%'").await;
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mut config = scripted_driver_config(driver_conninfo(&db.name), &llm);
    config.max_memories = 2; // two recalled a turn: what an earlier turn found is not found again
    let mind = Arc::new(Mind::new(config, channel.clone()));

    // The first turn finds the interview; its extraction names the focus and opens a thread.
    say(&mind, "dm:ada", "ada", "t1", "I have that job interview at Acme on Friday.").await;
    assert!(items(c).await.contains_key(&interview), "the interview did not enter working memory: {:?}", items(c).await);
    let thread: String = one(c, "SELECT id::text FROM dionysus.open_threads WHERE person = 'test:ada' AND status = 'open'").await;

    // The second turn's recall finds sleep, not the interview; the session still holds it, with
    // its focus and the open thread, and the reply's prompt carries all three.
    say(&mind, "dm:ada", "ada", "t2", "Honestly I am so stressed I cannot sleep.").await;
    let t2: String = one(c, "SELECT id::text FROM dionysus.messages WHERE platform_message_id = 't2'").await;
    let ctx: Value = one(c, &format!("SELECT dionysus.chat_context('{t2}', 2, 12)")).await;
    assert!(!ctx["memories"].to_string().contains("Acme Corp"), "the precondition: turn two's recall finds the interview itself: {}", ctx["memories"]);
    let wm = &ctx["working_memory"];
    assert_eq!(wm["turn"], json!(2), "asking the context again for the same turn stepped it: {wm}");
    assert_eq!(wm["focus"], json!("the Acme interview"));
    assert_eq!(wm["threads"][0]["content"], json!(THREAD), "{wm}");
    assert!(wm["items"].as_array().unwrap().iter().any(|i| i["id"] == json!(interview)), "not carried: {wm}");
    let prompt = last_chat(&llm);
    assert!(prompt.contains("The conversation is on: the Acme interview"), "{prompt}");
    assert!(prompt.contains(THREAD) && prompt.contains("Brought up earlier in this conversation") && prompt.contains("Acme Corp is on Friday"),
            "the reply's prompt lacks the session: {prompt}");
    let extraction = llm.requests_with(&format!("{extract}Honestly"))[0]["messages"].to_string();
    assert!(extraction.contains("Threads still open with the user:\\n- The Acme interview"), "the extraction is not shown the open threads: {extraction}");

    // Past its capacity the least relevant leaves first: every item that left was at most as
    // relevant (after this turn's fading) as every item that stayed.
    c.batch_execute("UPDATE dionysus.heartbeat_config SET value = 2 WHERE key = 'working_memory_capacity'").await.unwrap();
    let before = items(c).await;
    let evicted_before: i32 = one(c, "SELECT evicted FROM dionysus.working_memories WHERE person = 'test:ada'").await;
    say(&mind, "dm:ada", "ada", "t3", "Pixel the cat knocked my tea over again.").await;
    let after = items(c).await;
    assert_eq!(after.len(), 2, "{after:?}");
    let gone: Vec<f64> = before.iter().filter(|(k, _)| !after.contains_key(*k)).map(|(_, r)| r * 0.8).collect();
    assert!(!gone.is_empty(), "nothing left: {before:?} → {after:?}");
    let lowest_kept = after.values().cloned().fold(f64::INFINITY, f64::min);
    assert!(gone.iter().all(|r| *r <= lowest_kept + 1e-6), "a more relevant item left first: {before:?} → {after:?}");
    let evicted_after: i32 = one(c, "SELECT evicted FROM dionysus.working_memories WHERE person = 'test:ada'").await;
    assert!(evicted_after >= evicted_before + gone.len() as i32, "evictions not counted: {evicted_before} → {evicted_after}");

    // Bob in a group with Ada: a working memory of his own, with nothing of hers; and her own
    // session there does not bring up what she said in private.
    say(&mind, "group", "ada", "g1", "Morning all, big week for me.").await;
    assert!(!last_chat(&llm).contains(THREAD), "her private thread was brought up in the group: {}", last_chat(&llm));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.working_memories w JOIN dionysus.episodes e ON e.id = w.episode_id \
                               WHERE w.person = 'test:ada' AND e.source = 'conversation:test:group'").await, 1, "no session of hers in the group");
    say(&mind, "group", "bob", "g2", "Any plans for Saturday, the party and all?").await;
    let bobs: Value = one(c, "SELECT dionysus.working_memory('test:bob')").await;
    assert_eq!(bobs.as_array().unwrap().len(), 1, "{bobs}");
    assert!(!bobs.to_string().contains("Acme") && !bobs.to_string().contains("Pixel"), "Ada's session reached Bob: {bobs}");
    assert!(!last_chat(&llm).contains(THREAD) && !last_chat(&llm).contains("Acme"), "Ada's thread reached Bob's reply");
    let hers_in_his: i64 = one(c, "SELECT count(*) FROM dionysus.working_memory_items i JOIN dionysus.working_memories w ON w.id = i.working_memory_id \
                                   JOIN dionysus.memories m ON m.id = i.memory_id \
                                  WHERE w.person = 'test:bob' AND NOT dionysus_internal.visible_to(m.private_to, 'test:bob')").await;
    assert_eq!(hers_in_his, 0);
    let his_in_hers: i64 = one(c, "SELECT count(*) FROM dionysus.working_memory_items i JOIN dionysus.working_memories w ON w.id = i.working_memory_id \
                                   JOIN dionysus.memories m ON m.id = i.memory_id \
                                  WHERE w.person = 'test:ada' AND m.content LIKE '%surprise party%'").await;
    assert_eq!(his_in_hers, 0, "Bob's secret entered Ada's working memory");

    c.batch_execute("UPDATE dionysus.heartbeat_config SET value = 16 WHERE key = 'working_memory_capacity'").await.unwrap();

    // The session ends (the gap): cleared, with its record kept and the thread still open.
    let turns_logged: i64 = one(c, "SELECT count(*) FROM dionysus.messages").await;
    c.batch_execute(
        "UPDATE dionysus.episodes SET last_event_at = now() - interval '2 hours', started_at = least(started_at, now() - interval '3 hours') \
          WHERE source = 'conversation:test:dm:ada'; \
         SELECT dionysus.enqueue_language_work();",
    )
    .await
    .unwrap();
    assert!(items(c).await.is_empty());
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.working_memories w JOIN dionysus.episodes e ON e.id = w.episode_id \
                               WHERE e.source = 'conversation:test:dm:ada'").await, 0, "the ended session's working memory stayed");
    let record: Value = one(c, "SELECT to_jsonb(s) FROM dionysus.working_memory_sessions s WHERE person = 'test:ada'").await;
    assert_eq!((&record["turns"], &record["focus"]), (&json!(3), &json!("the Acme interview")), "{record}");
    assert_eq!(record["open_threads"], json!([thread]), "{record}");
    assert_eq!(record["items"].as_array().map(Vec::len), Some(2), "{record}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.messages").await, turns_logged, "the message log changed");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.working_memories WHERE person = 'test:ada'").await, 1, "the group session is still open");

    // The next session begins with the thread; the turn that settles it closes it.
    say(&mind, "dm:ada", "ada", "t4", "Back from the interview, it went great!").await;
    let prompt = last_chat(&llm);
    assert!(prompt.contains(THREAD), "the open thread was not carried into the next session: {prompt}");
    assert_eq!(one::<String>(c, &format!("SELECT status FROM dionysus.open_threads WHERE id = '{thread}'")).await, "closed");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.person_open_threads('test:ada')").await, 0);
    let now: Value = one(c, "SELECT dionysus.working_memory('test:ada')").await;
    assert!(!now.to_string().contains(THREAD), "a closed thread stayed in working memory: {now}");
    assert!(now.to_string().contains("how the interview went"), "{now}");
}

/// complete_work takes a focus and threads only from the extraction of a person's own turn, in
/// their shape and all or nothing; the settings are checked; a person's threads are theirs.
#[tokio::test]
async fn working_memory_input_is_checked_and_kept_to_its_person() {
    let db = TestDb::new("working_memory_input").await;
    let c = &db.client;
    let d = db.connect_as_driver().await;
    c.batch_execute("SELECT dionysus.log_message('test', 'a1', 'dm:ada', 'ada', 'The move to Porto is next month.'); \
                     SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'Hello there.');").await.unwrap();
    let ada_turn: String = one(c, "SELECT id::text FROM dionysus.messages WHERE platform_message_id = 'a1'").await;
    c.batch_execute("DELETE FROM dionysus.work_queue").await.unwrap(); // the turns' own extractions: not what this claims
    let item = |action: &str, params: String, result: &str| {
        format!(
            "DO $$ DECLARE w uuid; BEGIN \
               INSERT INTO dionysus.work_queue (idempotency_key, action, params) VALUES (gen_random_uuid()::text, '{action}', '{params}') RETURNING id INTO w; \
               PERFORM dionysus.claim_work('t', ARRAY['{action}']); \
               PERFORM dionysus.complete_work(w, '{result}'); END $$"
        )
    };
    let hers = format!(r#"{{"message_id": "{ada_turn}", "person": "test:ada"}}"#);

    // Someone else's turn: refused.
    let (code, msg) = expect_error(&d, &item("extract_message", format!(r#"{{"message_id": "{ada_turn}", "person": "test:bob"}}"#),
                                              r#"{"facts": [{"content": "Bob moves to Porto"}], "threads": {"opened": ["the move"]}}"#)).await;
    assert_eq!(code, "42501", "{msg}");

    // Not an extraction; malformed threads; a focus that is not words.
    let (code, msg) = expect_error(&d, &item("reflect", r#"{"person": "test:ada"}"#.into(), r#"{"focus": "x"}"#)).await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("result.threads"), "{msg}");
    for (bad, names) in [(r#"{"threads": ["the move"]}"#, "result.threads"), (r#"{"threads": {"opened": [1]}}"#, "result.threads"),
                         (r#"{"threads": {"opened": ["a", "b", "c", "d", "e", "f"]}}"#, "result.threads"),
                         (r#"{"threads": {"later": []}}"#, "result.threads"), (r#"{"focus": {"x": 1}}"#, "result.focus")] {
        let (code, msg) = expect_error(&d, &item("extract_message", hers.clone(), bad)).await;
        assert_eq!(code, "22P02", "{bad}: {msg}");
        assert!(msg.contains(names), "{bad}: {msg}");
    }
    // Well formed: stored, and the thread is Ada's alone.
    d.batch_execute(&item("extract_message", hers.clone(), r#"{"focus": "the move", "threads": {"opened": ["The move to Porto next month"]}}"#))
        .await
        .unwrap();
    assert_eq!(one::<Value>(&d, "SELECT dionysus.working_memory('test:ada') -> 0 -> 'focus'").await, json!("the move"));
    let thread: String = one(c, "SELECT id::text FROM dionysus.open_threads").await;
    assert!(!one::<bool>(&d, &format!("SELECT dionysus.close_open_thread('test:bob', '{thread}')")).await, "Bob closed Ada's thread");
    assert_eq!(one::<i64>(&d, "SELECT count(*) FROM dionysus.person_open_threads('test:bob')").await, 0);
    assert_eq!(one::<Value>(&d, "SELECT dionysus.working_memory('test:bob')").await, json!([]));

    // Whose a row is cannot be changed by the driver's role.
    for sql in ["UPDATE dionysus.open_threads SET person = 'test:bob'", "UPDATE dionysus.working_memories SET person = 'test:bob'",
                "UPDATE dionysus.working_memory_sessions SET focus = 'x'"] {
        let (code, msg) = expect_error(&d, sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    // The settings: a capacity is a whole number of items, the fading a share.
    for (key, value) in [("working_memory_capacity", "0"), ("working_memory_capacity", "2.5"), ("working_memory_turn_decay", "1.5"),
                         ("working_memory_min_relevance", "-1")] {
        let (code, msg) = expect_error(c, &format!("UPDATE dionysus.heartbeat_config SET value = {value} WHERE key = '{key}'")).await;
        assert_eq!(code, "22023", "{key} = {value}: {msg}");
        assert!(msg.contains(key), "{msg}");
    }
    let (code, msg) = expect_error(&d, "SELECT dionysus.working_memory('  ')").await;
    assert_eq!((code.as_str(), msg.contains("\"person\"")), ("22023", true), "{msg}");
    // Her word closes it.
    assert!(one::<bool>(&d, &format!("SELECT dionysus.close_open_thread('test:ada', '{thread}')")).await);
    assert_eq!(one::<Value>(&d, "SELECT dionysus.working_memory('test:ada') -> 0 -> 'threads'").await, json!([]));
}
