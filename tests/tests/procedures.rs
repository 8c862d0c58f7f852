//! Procedures (#13 §2, sql/026_procedures.sql), through the real driver with the scripted
//! model: a turn whose meaning calls for a procedure activates it into working memory and the
//! reply's prompt, once per episode; the episode's outcome moves its effectiveness (success up,
//! failure down, neutral neither); a procedure asked for by name enters at full relevance;
//! recall_all ranks memories, procedures, censors and episodes in one list. A person's own
//! procedure never serves anyone else.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::conversation;
use dionysus_driver::{work, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::task::JoinSet;

async fn say(mind: &Arc<Mind>, author: &str, id: &str, words: &str) {
    let turn = Incoming { message_id: id.into(), channel_id: format!("dm:{author}"), author_id: author.into(), content: words.into(),
                          private: true, reply_to: None };
    let mut ex = JoinSet::new();
    conversation::handle(mind, turn, &mut ex).await;
    while ex.join_next().await.is_some() {}
}

/// Ends every open conversation (the gap) and runs the language work: the summaries say how
/// each went.
async fn end_episodes(c: &tokio_postgres::Client, mind: &Arc<Mind>) {
    c.batch_execute(
        "UPDATE dionysus.episodes SET started_at = least(started_at, now() - interval '3 hours'), \
                last_event_at = now() - interval '2 hours' WHERE ended_at IS NULL; \
         SELECT dionysus.enqueue_language_work(); \
         UPDATE dionysus.episodes SET ended_at = now() - interval '90 minutes' WHERE ended_at > now() - interval '90 minutes'; \
         UPDATE dionysus.work_queue SET available_at = now() WHERE status = 'pending'; \
         SELECT dionysus.enqueue_language_work();",
    )
    .await
    .unwrap();
    work::drain(mind, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_procedure_serves_the_turns_that_call_for_it_and_learns_from_how_episodes_end() {
    let db = TestDb::new("procedures").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    llm.json("TASK: summarize_episode && chemistry exam", json!({"summary": "Ada was panicking before her chemistry exam; we made a plan.",
                                                               "outcome": "success", "surprise": 0.2, "lessons": ["A plan calms her"]}));
    llm.json("TASK: summarize_episode && physics exam", json!({"summary": "Ada panicked about physics; nothing helped.",
                                                             "outcome": "failure", "surprise": 0.5, "lessons": []}));
    llm.json("TASK: summarize_episode", json!({"summary": "A chat.", "outcome": "neutral"}));
    llm.json("TASK: extract_concepts", json!({"memories": []}));
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": []}));
    llm.on("TASK: chat", Answer::Text("Let's take it one step at a time.".into()));
    c.batch_execute(
        "SELECT dionysus.store_procedure('Exam nerves', ARRAY['help the person feel steady before an exam'], \
                                         ARRAY['name the fear out loud', 'agree on one small next step'], 'study', \
                                         core_concepts => ARRAY['anxiety shrinks with a plan'], implementation_notes => ARRAY['no pep talk']); \
         SELECT dionysus.store_procedure('Grief check-in', ARRAY['be present with someone who lost a loved one'], \
                                         ARRAY['ask about the person they lost', 'listen more than talk'], 'loss'); \
         SELECT dionysus.store_procedure('Sunday dread', ARRAY['ease the dread before the work week'], \
                                         ARRAY['plan one nice thing for Monday evening'], person => 'test:ada'); \
         SELECT dionysus.add_censor('talking about her grades', 'she asked me not to', 'block', 'test:ada');",
    )
    .await
    .unwrap();
    let exam: String = one(c, "SELECT id::text FROM dionysus.procedures WHERE name = 'Exam nerves'").await;
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone()));

    // Her turn calls for it: activated by meaning, in her working memory and the reply's prompt.
    say(&mind, "ada", "a1", "I have my chemistry exam tomorrow and I am panicking.").await;
    let prompt = llm.requests_with("TASK: chat").last().unwrap()["messages"].to_string();
    assert!(prompt.contains("How you handle this kind of moment") && prompt.contains("Exam nerves (study), effectiveness 0.50 over 0 outcomes")
            && prompt.contains("how: name the fear out loud; agree on one small next step") && prompt.contains("notes: no pep talk"),
            "the reply's prompt lacks the procedure: {prompt}");
    assert!(!prompt.contains("Grief check-in"), "a procedure the turn does not call for was served: {prompt}");
    let act: Value = one(c, "SELECT to_jsonb(a) FROM dionysus.procedure_activations a").await;
    assert_eq!((act["how"].as_str(), act["person"].as_str(), act["procedure_id"].as_str()), (Some("matched"), Some("test:ada"), Some(exam.as_str())));
    assert!(act["similarity"].as_f64().unwrap() >= 0.4 && act["episode_id"].is_string() && act["message_id"].is_string(), "{act}");
    // The same episode counts it once.
    say(&mind, "ada", "a2", "Still panicking about the chemistry exam, honestly.").await;
    assert_eq!(one::<i32>(c, &format!("SELECT activation_count FROM dionysus.procedures WHERE id = '{exam}'")).await, 1);

    // Asked for by name: at full relevance, counted for this episode, written down as asked.
    let asked: Value = one(c, "SELECT dionysus.activate_procedure('grief CHECK-in', 'test:ada', \
                                      (SELECT id FROM dionysus.messages WHERE platform_message_id = 'a2'))").await;
    assert_eq!((asked["name"].as_str(), asked["activations"].as_i64(), asked["working_memory"].as_bool()), (Some("Grief check-in"), Some(1), Some(true)));
    let wm: Value = one(c, "SELECT dionysus.working_memory('test:ada') -> 0 -> 'procedures'").await;
    assert_eq!(wm[0]["name"], json!("Grief check-in"), "asked for, it leads: {wm}");
    assert_eq!(wm[0]["relevance"], json!(1.0));

    // Bob: everyone's procedure serves him too, Ada's own never; nor her censor in his recall.
    say(&mind, "bob", "b1", "I dread Sundays, the work week looms. Also my exam tomorrow, I am panicking.").await;
    let bobs = llm.requests_with("TASK: chat").last().unwrap()["messages"].to_string();
    assert!(bobs.contains("Exam nerves") && !bobs.contains("Sunday dread"), "{bobs}");
    // (His words are near hers: only whose it is keeps it from him.)
    let near: f64 = one(c, "SELECT 1 - (m.embedding <=> p.embedding) FROM dionysus.messages x JOIN dionysus.memories m ON m.id = x.memory_id, \
                            dionysus.procedures p WHERE x.platform_message_id = 'b1' AND p.name = 'Sunday dread'").await;
    assert!(near >= 0.4, "the control: Bob's words are not near Ada's procedure ({near})");
    let (code, msg) = expect_error(c, "SELECT dionysus.activate_procedure('Sunday dread', 'test:bob')").await;
    assert_eq!(code, "P0002", "{msg}");
    assert!(msg.contains("\"name\""), "{msg}");
    let his: Value = one(c, "SELECT jsonb_agg(kind || ':' || content) FROM dionysus.recall_all('dreading Sunday and my grades', 20, 'test:bob')").await;
    assert!(!his.to_string().contains("Sunday dread") && !his.to_string().contains("grades"), "Ada's reached Bob: {his}");

    // Unified recall for Ada: one list, ranked, kinds marked; her censor and procedures in it.
    let all: Vec<(String, String, f64)> = c
        .query("SELECT kind, content, score FROM dionysus.recall_all('panicking before an exam, and my grades', 20, 'test:ada')", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let kinds: Vec<&str> = all.iter().map(|(k, _, _)| k.as_str()).collect();
    assert!(kinds.contains(&"procedure") && kinds.contains(&"censor") && kinds.contains(&"memory"), "{all:?}");
    assert!(all.windows(2).all(|w| w[0].2 >= w[1].2), "not ranked by score: {all:?}");
    assert!(all.iter().any(|(k, c, _)| k == "procedure" && c.starts_with("Exam nerves:")), "{all:?}");

    // The episodes end: the chemistry one went well, Bob's was neutral.
    end_episodes(c, &mind).await;
    let p: Value = one(c, &format!("SELECT to_jsonb(p) FROM dionysus.procedures p WHERE id = '{exam}'")).await;
    assert_eq!((p["success_count"].as_i64(), p["failure_count"].as_i64()), (Some(1), Some(0)), "{p}");
    assert!((p["effectiveness"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{p}");
    assert_eq!(p["activation_count"], json!(2), "Ada's episode and Bob's: {p}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.procedure_activations WHERE outcome IS NULL").await, 0, "an activation was not scored");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.procedure_activations WHERE outcome = 'neutral'").await, 1, "Bob's neutral episode");
    let grief: Value = one(c, "SELECT to_jsonb(p) FROM dionysus.procedures p WHERE name = 'Grief check-in'").await;
    assert_eq!((grief["success_count"].as_i64(), grief["activation_count"].as_i64()), (Some(1), Some(1)));

    // A new episode that goes badly: a failure, effectiveness back to one half.
    say(&mind, "ada", "a3", "Now my physics exam is tomorrow and I am panicking again.").await;
    end_episodes(c, &mind).await;
    let p: Value = one(c, &format!("SELECT to_jsonb(p) FROM dionysus.procedures p WHERE id = '{exam}'")).await;
    assert_eq!((p["activation_count"].as_i64(), p["success_count"].as_i64(), p["failure_count"].as_i64()), (Some(3), Some(1), Some(1)), "{p}");
    assert!((p["effectiveness"].as_f64().unwrap() - 0.5).abs() < 1e-9, "{p}");
    let listed: Value = one(c, "SELECT dionysus.person_procedures('test:ada')").await;
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(one::<Value>(c, "SELECT dionysus.person_procedures('test:bob')").await.as_array().unwrap().len(), 2);
}

/// Only the owner writes procedures; every argument is checked and named; a turn that is not
/// the person's is refused; a retired procedure serves no more.
#[tokio::test]
async fn procedures_are_the_owners_to_write_and_their_input_is_checked() {
    let db = TestDb::new("procedures_input").await;
    let c = &db.client;
    let d = db.connect_as_driver().await;
    let (code, msg) = expect_error(&d, "SELECT dionysus.store_procedure('x', ARRAY['a'], ARRAY['b'])").await;
    assert_eq!(code, "42501", "the driver's role wrote a procedure: {msg}");
    let (code, _) = expect_error(&d, "UPDATE dionysus.procedures SET person = 'test:bob'").await;
    assert_eq!(code, "42501");
    for (sql, names) in [
        ("SELECT dionysus.store_procedure('  ', ARRAY['a'], ARRAY['b'])", "\"name\""),
        ("SELECT dionysus.store_procedure('x', NULL, NULL)", "\"core_patterns\""),
        ("SELECT dionysus.store_procedure('x', ARRAY['a', ''], ARRAY['b'])", "\"goals\""),
        ("SELECT dionysus.store_procedure('x', ARRAY['a'], ARRAY['b'], core_tools => ARRAY['a','b','c','d','e','f','g','h','i','j','k'])", "\"core_tools\""),
        ("SELECT dionysus.store_procedure('x', ARRAY['a'], ARRAY['b'], domain => '')", "\"domain\""),
        ("SELECT dionysus.store_procedure('x', ARRAY['a'], ARRAY['b'], person => ' ')", "\"person\""),
        ("SELECT dionysus.activate_procedure('', 'test:ada')", "\"name\""),
        ("SELECT dionysus.recall_all('exam', 0)", "\"k\""),
        ("SELECT dionysus.recall_all(' ')", "\"query\""),
        ("UPDATE dionysus.heartbeat_config SET value = 11 WHERE key = 'procedure_match_max'", "procedure_match_max"),
        ("UPDATE dionysus.heartbeat_config SET value = 1.5 WHERE key = 'procedure_match_similarity'", "procedure_match_similarity"),
    ] {
        let (code, msg) = expect_error(c, sql).await;
        assert_eq!(code, "22023", "{sql}: {msg}");
        assert!(msg.contains(names), "{sql}: {msg}");
    }
    let id: String = one(c, "SELECT dionysus.store_procedure('Exam nerves', ARRAY['steady her'], ARRAY['one small step'])::text").await;
    let again: String = one(c, "SELECT dionysus.store_procedure('exam  NERVES', ARRAY['steady her'], ARRAY['name the fear'])::text").await;
    assert_eq!(again, id, "the same name rewrote another procedure");
    assert_eq!(one::<Value>(c, &format!("SELECT to_jsonb(core_patterns) FROM dionysus.procedures WHERE id = '{id}'")).await, json!(["name the fear"]));
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'Exam tomorrow.')").await.unwrap();
    let (code, msg) = expect_error(&d, "SELECT dionysus.activate_procedure('Exam nerves', 'test:ada', \
                                         (SELECT id FROM dionysus.messages WHERE platform_message_id = 'b1'))").await;
    assert_eq!(code, "42501", "{msg}");
    let (code, _) = expect_error(&d, &format!("SELECT dionysus.retire_procedure('{id}')")).await;
    assert_eq!(code, "42501");
    assert!(one::<bool>(c, &format!("SELECT dionysus.retire_procedure('{id}')")).await);
    let (code, _) = expect_error(&d, "SELECT dionysus.activate_procedure('Exam nerves', 'test:ada')").await;
    assert_eq!(code, "P0002", "a retired procedure was activated");
}
