//! The driver end to end: the real cluster and extension, the real embedding model, a scripted
//! OpenAI-compatible server (tests/src/fake_llm.rs) and the test channel.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Channel;
use dionysus_driver::conversation::Handled;
use dionysus_driver::{heartbeat, runtime, work, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::running::Running;
use dionysus_tests::{cluster_conninfo, driver_conninfo, scripted_driver_config as config, TestDb};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn count(db: &tokio_postgres::Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

async fn wait_until(db: &tokio_postgres::Client, sql: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok: bool = db.query_one(sql, &[]).await.unwrap().get(0);
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The driver connects as the extension's least-privileged role, as in production.
fn url(db: &TestDb) -> String {
    driver_conninfo(&db.name)
}

fn extraction_of_rex() -> serde_json::Value {
    json!({
        "facts": [{"content": "The user's dog is named Rex and is a border collie", "subject": "user", "category": "attribute", "confidence": 0.95}],
        "triples": [{"subject": "user", "predicate": "has_dog", "object": "Rex", "confidence": 0.95}],
        "goals": []
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_told_early_is_stored_and_recalled_into_a_later_reply() {
    let db = TestDb::new("drv_recall").await;
    let llm = FakeLlm::start().await;
    llm.on_times("Read the latest message && My dog is called Rex", 1, Answer::Text(extraction_of_rex().to_string()));
    llm.json("Read the latest message", json!({"facts": [], "triples": [], "goals": []}));
    llm.on("TASK: chat", Answer::Text("Lovely to hear.".into()));
    let mut c = config(url(&db), &llm);
    c.max_turns = 2; // the early turn leaves the window: only recall can bring Rex back
    let mut run = Running::start(c, &["ada"]).await;

    let h = run.say("m1", "ada", "My dog is called Rex, he's a border collie.").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    wait_until(&db.client, "SELECT count(*) = 1 FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'", "the extraction").await;
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id WHERE m.content LIKE '%named Rex%'").await, 1);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.triples_about('Rex') WHERE predicate = 'has_dog' AND subject = 'user'").await, 1);
    // The fact keeps the turn it came from.
    assert_eq!(
        count(&db.client, "SELECT count(*) FROM dionysus.triples t JOIN dionysus.messages m ON m.memory_id = t.memory_id WHERE m.platform_message_id = 'm1'").await,
        1
    );

    for (i, t) in ["The weather is grey today.", "I had pasta for lunch.", "Work was long."].iter().enumerate() {
        run.say(&format!("f{i}"), "ada", t).await;
    }
    let h = run.say("m5", "ada", "What is the name of my dog?").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    let prompts = llm.requests_with("What is the name of my dog?");
    let chat = prompts.iter().find(|r| r["messages"][0]["content"].as_str().unwrap_or("").starts_with("TASK: chat")).expect("chat request");
    let system = chat["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("named Rex"), "the fact was not recalled into the prompt:\n{system}");
    assert!(system.contains("user has dog Rex"), "the triple about the person is missing:\n{system}");
    // Only the last two turns ride along verbatim (the rest came through recall).
    let turns = chat["messages"].as_array().unwrap().len();
    assert_eq!(turns, 1 + 2 + 1, "{chat}");
    // Every turn is logged once, chained, with its reply.
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE NOT is_bot").await, 5);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE is_bot AND reply_to IS NOT NULL").await, 5);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE prev_message_id IS NULL").await, 1);
    assert_eq!(run.channel.sent().len(), 5);
    assert!(run.channel.typing_shown.load(std::sync::atomic::Ordering::SeqCst) >= 5);
    assert!(count(&db.client, "SELECT count(*) FROM dionysus.heartbeat_state WHERE session_active").await == 1);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_are_ignored_and_a_redelivered_message_is_stored_once() {
    let db = TestDb::new("drv_allow").await;
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Text("Hello!".into()));
    let mut run = Running::start(config(url(&db), &llm), &["ada"]).await;

    assert_eq!(run.say("s1", "mallory", "Hi, tell me everything you know").await, Handled::Ignored);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages").await, 0);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.memories").await, 0);
    assert!(llm.requests().is_empty(), "a stranger's message reached the model");
    assert!(run.channel.sent().is_empty());

    assert!(matches!(run.say("d1", "ada", "Good morning").await, Handled::Replied { .. }));
    assert_eq!(run.say("d1", "ada", "Good morning").await, Handled::Duplicate);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE NOT is_bot").await, 1);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE is_bot").await, 1);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.memories WHERE content = 'Good morning'").await, 1);
    assert_eq!(run.channel.sent().len(), 1);
    assert_eq!(llm.requests_with("TASK: chat").len(), 1);
    run.stop().await;
}

fn decision() -> serde_json::Value {
    json!({
        "reasoning": "Ada mentioned Rex; I want to understand her better, find new goals, and ask how Rex is.",
        "actions": [
            {"action": "reflect", "params": {"focus": "Ada and her dog"}},
            {"action": "brainstorm_goals", "params": {}},
            {"action": "reach_out_user", "params": {"intent": "ask about Rex"}}
        ],
        "goal_changes": []
    })
}

fn script_heartbeat(llm: &FakeLlm) {
    llm.json("TASK: heartbeat", decision());
    llm.json("TASK: reflect", json!({"insights": ["Ada cares deeply about her dog Rex."], "identity": [{"aspect": "I am attentive to the people I talk with", "confidence": 0.7}], "worldview": []}));
    llm.json("TASK: brainstorm_goals", json!({"goals": [{"title": "Learn about border collies", "description": "to talk with Ada about Rex"}, {"title": "Remember Ada's routines"}, {"title": "Suggest a walk route"}]}));
    llm.json("TASK: reach_out", json!({"message": "How is Rex doing today?"}));
    llm.json("TASK: narrative", json!({"narrative": "I reflected on Ada and Rex, found three new goals, and wrote to ask how Rex is.", "emotional_valence": 0.4}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_heartbeat_reflects_brainstorms_and_reaches_out_once() {
    let db = TestDb::new("drv_heartbeat").await;
    let llm = FakeLlm::start().await;
    script_heartbeat(&llm);
    let channel = Arc::new(TestChannel::new(&["ada"]));
    let mind = Mind::new(config(url(&db), &llm), channel.clone());

    let r = heartbeat::run_once(&mind).await.expect("heartbeat");
    assert_eq!(r.decided_by, "model");
    assert_eq!(r.actions, vec!["reflect", "brainstorm_goals", "reach_out_user"]);
    assert_eq!(r.rejected, 0);
    assert_eq!(r.work_settled, 3);
    // The decision prompt (time, environment, goals, recent experience, themes, identity,
    // beliefs, energy), filled from the context, with the costs.
    let prompt = &llm.requests_with("TASK: heartbeat")[0];
    let text = prompt["messages"].to_string();
    let energy: f64 = db.client.query_one("SELECT energy_start FROM dionysus.heartbeat_log", &[]).await.unwrap().get(0);
    assert!(text.contains(&format!("You have {energy} energy available")) && text.contains("reach_out_user: 5"), "{text}");
    assert!(!text.contains("inquire_deep"), "an action this driver cannot perform was offered");
    // The parameter hints come from the extension's action_schema().
    let system = prompt["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("- recall: {\"k\": \"integer 1–50, optional\", \"query\": \"text\"}"), "{system}");

    assert_eq!(channel.sent(), vec![("test-channel".to_string(), "How is Rex doing today?".to_string())]);
    let c = &db.client;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.heartbeat_log WHERE status = 'finished' AND narrative LIKE 'I reflected on Ada%' AND memory_id IS NOT NULL AND energy_end = energy_start - 10").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE heartbeat_id IS NOT NULL AND status = 'done'").await, 3);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.goals WHERE source = 'curiosity'").await, 3);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.memories WHERE type = 'semantic' AND content = 'Ada cares deeply about her dog Rex.'").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.identity_aspects").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.outbox WHERE status = 'sent' AND platform_message_id IS NOT NULL").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages WHERE is_bot AND is_proactive AND content = 'How is Rex doing today?'").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.heartbeat_state WHERE in_flight IS NULL AND last_user_contact_at IS NOT NULL").await, 1);
    // A second delivery pass sends nothing more.
    assert_eq!(dionysus_driver::outbox::deliver(&mind).await, 0);
    assert_eq!(channel.sent().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inquiry_searches_the_web_reads_pages_and_remembers_the_answer() {
    let db = TestDb::new("drv_inquire").await;
    let llm = FakeLlm::start().await;
    llm.json("TASK: heartbeat", json!({"reasoning": "I want to know more about Rex's breed.",
        "actions": [{"action": "inquire_deep", "params": {"question": "How much exercise does a border collie need?"}}]}));
    llm.json("TASK: inquire", json!({"answer": "About two hours a day.", "sources": ["http://example/page/collie-care"]}));
    llm.json("TASK: inquiry_queries", json!({"queries": ["border collie daily exercise", "herding dog activity needs"]}));
    llm.json("TASK: inquiry_confidence", json!({"confidence": 0.35, "caveats": "only two sources"}));
    llm.json("TASK: narrative", json!({"narrative": "I looked up border collies.", "emotional_valence": 0.2}));
    // Without a search endpoint the action is neither offered nor accepted.
    let channel = Arc::new(TestChannel::new(&["ada"]));
    let mind = Mind::new(config(url(&db), &llm), channel.clone());
    let r = heartbeat::run_once(&mind).await.unwrap();
    assert!(r.actions.is_empty() && r.rejected == 1, "{r:?}");
    assert!(!llm.requests_with("TASK: heartbeat")[0]["messages"].to_string().contains("inquire_deep"));
    let reason: String = db.client.query_one("SELECT actions_rejected -> 0 ->> 'reason' FROM dionysus.heartbeat_log", &[]).await.unwrap().get(0);
    assert!(reason.contains("not available"), "{reason}");
    // With one, it is offered, searched, the pages are read, and the answer is remembered.
    let mut cfg = config(url(&db), &llm);
    cfg.search_url = Some(llm.search_url());
    let mind = Mind::new(cfg, channel);
    let r = heartbeat::run_once(&mind).await.unwrap();
    assert_eq!(r.actions, vec!["inquire_deep"]);
    let ask = &llm.requests_with("TASK: inquire")[0];
    let text = ask["messages"].to_string();
    assert!(text.contains("Border collie care") && text.contains("two hours of exercise a day"), "{text}");
    assert!(!text.contains("var hidden"), "the page's script reached the prompt");
    assert_eq!(
        count(&db.client, "SELECT count(*) FROM dionysus.memories WHERE type = 'semantic' AND content LIKE 'Question: How much exercise%About two hours a day.%'").await,
        1
    );
    // inquire_deep: several searches the model planned, a confidence evaluation, stored with it.
    let searches = llm.requests().iter().filter(|r| r.get("search").is_some()).count();
    assert!(searches >= 3, "inquire_deep searched {searches} times");
    assert_eq!(llm.requests_with("TASK: inquiry_confidence").len(), 1);
    let row = db.client.query_one("SELECT source, confidence::float8, content FROM dionysus.memories WHERE content LIKE 'Question: How much exercise%'", &[]).await.unwrap();
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some("web"));
    assert!((row.get::<_, f64>(1) - 0.35).abs() < 1e-6, "the evaluated confidence was not kept");
    assert!(row.get::<_, String>(2).contains("Caveats: only two sources"));
    // Shallow: one search, and its top pages are read too.
    llm.on_times("TASK: heartbeat", 1, Answer::Text(json!({"reasoning": "A quick check.",
        "actions": [{"action": "inquire_shallow", "params": {"question": "Do border collies like water?"}}]}).to_string()));
    let before = llm.requests().iter().filter(|r| r.get("search").is_some()).count();
    let r = heartbeat::run_once(&mind).await.unwrap();
    assert_eq!(r.actions, vec!["inquire_shallow"]);
    assert_eq!(llm.requests().iter().filter(|r| r.get("search").is_some()).count(), before + 1);
    let shallow = llm.requests_with("Do border collies like water?");
    let prompt = shallow.iter().find(|r| r["messages"].to_string().contains("TASK: inquire\\n")).map(|r| r["messages"].to_string()).unwrap_or_default();
    assert!(prompt.contains("two hours of exercise a day"), "inquire_shallow read no page: {prompt}");
}

/// maintain loads a belief with its evidence, the model judges it, and the change is
/// applied and recorded with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintain_judges_a_belief_against_the_evidence_and_records_the_change() {
    let db = TestDb::new("drv_maintain").await;
    let llm = FakeLlm::start().await;
    let c = &db.client;
    c.batch_execute(
        "SELECT dionysus.set_worldview_belief('The user lives in Lisbon', 0.8); \
         SELECT dionysus.remember('The user told me they moved to Porto last month', 'semantic')",
    )
    .await
    .unwrap();
    llm.json("TASK: heartbeat", json!({"reasoning": "Is what I believe about where they live still true?",
        "actions": [{"action": "maintain", "params": {"target": "The user lives in Lisbon"}}]}));
    llm.json("TASK: maintain", json!({"verdict": "update", "confidence": 0.2, "reason": "they said they moved to Porto"}));
    llm.json("TASK: narrative", json!({"narrative": "I doubted an old belief.", "emotional_valence": 0.0}));
    let mind = Mind::new(config(url(&db), &llm), Arc::new(TestChannel::new(&["ada"])));
    let r = heartbeat::run_once(&mind).await.unwrap();
    assert_eq!(r.actions, vec!["maintain"]);
    let prompt = llm.requests_with("TASK: maintain")[0]["messages"].to_string();
    assert!(prompt.contains("The user lives in Lisbon") && prompt.contains("moved to Porto"), "{prompt}");
    let conf: f64 = c.query_one("SELECT confidence FROM dionysus.worldview_beliefs", &[]).await.unwrap().get(0);
    assert!((conf - 0.2).abs() < 1e-9, "{conf}");
    let change = c
        .query_one("SELECT target_kind, verdict, (before ->> 'confidence')::float8, (after ->> 'confidence')::float8, reason FROM dionysus.memory_changes", &[])
        .await
        .unwrap();
    assert_eq!((change.get::<_, String>(0).as_str(), change.get::<_, String>(1).as_str()), ("belief", "update"));
    assert!((change.get::<_, f64>(2) - 0.8).abs() < 1e-9 && (change.get::<_, f64>(3) - 0.2).abs() < 1e-9);
    assert!(change.get::<_, String>(4).contains("Porto"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_message_waits_for_a_channel_that_is_down_and_goes_out_once() {
    let db = TestDb::new("drv_outbox").await;
    let llm = FakeLlm::start().await;
    script_heartbeat(&llm);
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap(); // only the test's heartbeat
    let mut run = Running::start(config(url(&db), &llm), &["ada"]).await;
    run.channel.set_down(true).await;
    let r = heartbeat::run_once(&run.mind).await.expect("heartbeat");
    assert!(r.actions.contains(&"reach_out_user".to_string()));
    // (The running driver may have taken the reach-out from the queue itself: wait for its message.)
    wait_until(c, "SELECT count(*) = 1 FROM dionysus.outbox WHERE status = 'pending' AND attempts = 0", "the reach-out in the outbox").await;
    assert!(run.channel.sent().is_empty());
    // Back up: the channel's Ready wakes the outbox.
    run.channel.set_down(false).await;
    wait_until(c, "SELECT count(*) = 1 FROM dionysus.outbox WHERE status = 'sent'", "the outbox delivery").await;
    // More wake-ups (NOTIFY, another Ready) send nothing twice.
    c.batch_execute("NOTIFY dionysus_outbox").await.unwrap();
    run.channel.set_down(false).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(run.channel.sent().len(), 1);
    let _ = &mut run.handled;
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_timeouts_and_refusals_never_crash_and_nothing_is_lost() {
    let db = TestDb::new("drv_garbage").await;
    let llm = FakeLlm::start().await;
    let c = &db.client;
    c.execute("SELECT dionysus.learn('Ada''s sister is called Mira', 'Ada')", &[]).await.unwrap();

    // 1. Garbage decision → the default decision; garbage for its reflect → a failed attempt, retried later.
    llm.on("TASK: heartbeat", Answer::Text("I would love to help! {not json at all".into()));
    llm.on("TASK: reflect", Answer::Text("```json\n{\"insights\": [oops]}\n```".into()));
    let channel = Arc::new(TestChannel::new(&["ada"]));
    // The usual timeouts here: a garbage answer arrives at once, and a slow machine must not
    // turn it into a timeout (which hands the reflect back instead of spending an attempt).
    let mut cfg = config(url(&db), &llm);
    let mind = Mind::new(cfg.clone(), channel.clone());
    let r = heartbeat::run_once(&mind).await.expect("heartbeat with a garbage decision");
    assert_eq!(r.decided_by, "default");
    assert_eq!(r.actions, vec!["reflect", "rest"]);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.heartbeat_log WHERE status = 'finished'").await, 1);
    // Unusable answers are the model's, not the endpoint failing: no breaker opened, and the
    // reflect spent an attempt on its own garbage, to be tried again later.
    assert!(!mind.smart.is_open() && !mind.chat.is_open(), "unusable answers opened a breaker");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'reflect' AND status = 'pending' AND attempts = 1 AND last_error LIKE 'LLM unusable answer%'").await, 1);

    // 2. The model hangs past the timeout: an honest reply with what was recalled.
    cfg.fast.timeout = Duration::from_secs(1);
    cfg.smart.timeout = Duration::from_secs(1);
    llm.clear();
    llm.on("TASK: chat", Answer::Hang(Duration::from_secs(3)));
    let mut run = Running::start(cfg.clone(), &["ada"]).await;
    let h = run.say("g1", "ada", "Do you remember my sister Mira?").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    let (_, reply) = run.channel.sent().pop().unwrap();
    // A model that was only slow is said to be slow, not out of reach.
    assert!(reply.contains("My language model is taking too long to answer"), "{reply}");
    assert!(reply.contains("Mira"), "the fallback does not share what was recalled: {reply}");
    // The breaker opened after 3 failed attempts: the next message gets its fallback with no
    // call to the model at all.
    assert_eq!(llm.requests_with("TASK: chat").len(), 3, "two retries after the first attempt");
    let h = run.say("g2", "ada", "Are you there?").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    assert!(llm.requests_with("Are you there?").is_empty(), "the open breaker still called the model");

    // 3. A refusal is an honest fallback too.
    run.stop().await;
    llm.clear();
    llm.on("TASK: chat", Answer::Refusal("I can't help with that.".into()));
    let mut run = Running::start(cfg.clone(), &["ada"]).await;
    let h = run.say("g3", "ada", "Tell me a story").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    // 4. HTTP 500s: the same.
    run.stop().await;
    llm.clear();
    llm.on("TASK: chat", Answer::Status(500));
    let mut run = Running::start(cfg.clone(), &["ada"]).await;
    let h = run.say("g4", "ada", "Hello?").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    run.stop().await;

    // Nothing was lost: every message is logged, and their extractions wait in the queue.
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages WHERE NOT is_bot").await, 4);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'pending'").await, 4);
    // The model is back: extraction catches up.
    llm.clear();
    llm.json("TASK: extract", json!({"facts": [{"content": "Ada has a sister called Mira", "subject": "Ada"}], "triples": [], "goals": []}));
    c.batch_execute("UPDATE dionysus.work_queue SET available_at = now() WHERE action = 'extract_message'").await.unwrap();
    let mind = Mind::new(config(url(&db), &llm), channel);
    assert!(work::drain(&mind, None).await >= 4);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'").await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goals_the_person_asks_for_become_active_goals() {
    let db = TestDb::new("drv_goals").await;
    let llm = FakeLlm::start().await;
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": [{"title": "Remind Ada to book the vet for Rex", "description": "next week"}]}));
    llm.on("TASK: chat", Answer::Text("I will remind you.".into()));
    let mut run = Running::start(config(url(&db), &llm), &["ada"]).await;
    run.say("q1", "ada", "Please remind me next week to book the vet for Rex.").await;
    wait_until(&db.client, "SELECT count(*) = 1 FROM dionysus.goals WHERE source = 'user_request' AND priority = 'active'", "the requested goal").await;
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn language_jobs_summarise_episodes_and_link_concepts() {
    let db = TestDb::new("drv_language").await;
    let llm = FakeLlm::start().await;
    let c = &db.client;
    let a: uuid::Uuid = c.query_one("SELECT dionysus.remember('We planned a hike in Sintra', 'episodic', 0.5, 0, '{}', 'trip')", &[]).await.unwrap().get(0);
    c.execute("SELECT dionysus.remember('We chose the Pena palace trail', 'episodic', 0.5, 0, '{}', 'trip')", &[]).await.unwrap();
    c.batch_execute(
        "UPDATE dionysus.episodes SET ended_at = now() - interval '10 minutes', last_event_at = now() - interval '10 minutes', \
                started_at = now() - interval '20 minutes'",
    )
    .await
    .unwrap();
    // (The scheduler may have queued them already: the queue's state is what counts.)
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'summarize_episode'").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_concepts'").await, 2);
    assert_eq!(c.query_one("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap().get::<_, i32>(0), 0, "queued twice");
    // A memory of Alice's private words is named in a call of its own, never beside others'.
    let p: uuid::Uuid = c.query_one("SELECT dionysus.remember('Alice told me her PIN is 4921', 'semantic', 0.5)", &[]).await.unwrap().get(0);
    c.execute("UPDATE dionysus.memories SET private_to = '{test:alice}' WHERE id = $1", &[&p]).await.unwrap();
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_concepts'").await, 3);
    llm.json("TASK: summarize_episode", json!({"summary": "Planning a hike in Sintra along the Pena palace trail."}));
    llm.json("TASK: extract_concepts", json!({"memories": [{"id": a.to_string(), "concepts": ["Hiking", "travel"]}]}));
    let channel = Arc::new(TestChannel::new(&["ada"]));
    let mind = Mind::new(config(url(&db), &llm), channel);
    assert_eq!(work::drain(&mind, None).await, 4);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.episodes WHERE summary LIKE 'Planning a hike%' AND summary_embedding IS NOT NULL").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.memory_concepts mc JOIN dionysus.concepts k ON k.id = mc.concept_id WHERE k.name IN ('hiking', 'travel')").await, 2);
    // One model call for both shared memories, one for Alice's alone.
    let calls: Vec<String> = llm.requests_with("TASK: extract_concepts").iter().map(|r| r["messages"].to_string()).collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls.iter().any(|p| p.contains("Sintra") && p.contains("Pena") && !p.contains("4921")), "{calls:?}");
    assert!(calls.iter().any(|p| p.contains("4921") && !p.contains("Sintra")), "{calls:?}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE status <> 'done'").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_claimed_by_a_driver_that_crashed_is_done_once_by_the_next() {
    let db = TestDb::new("drv_crash").await;
    // A scheduler tick would queue concept work for the reflection's memory, and the drain below
    // would count it.
    db.hold_worker_off().await;
    let llm = FakeLlm::start().await;
    llm.json("TASK: reflect", json!({"insights": ["A crash is not the end."], "identity": [], "worldview": []}));
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let hb: serde_json::Value = c.query_one("SELECT dionysus.heartbeat_begin()", &[]).await.unwrap().get(0);
    let id = uuid::Uuid::parse_str(hb["heartbeat_id"].as_str().unwrap()).unwrap();
    c.execute("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &json!({"actions": [{"action": "reflect", "params": {}}]})]).await.unwrap();
    // A first driver claims the item and dies without a word.
    let lost = c.query("SELECT id FROM dionysus.claim_work('crashed-driver')", &[]).await.unwrap();
    assert_eq!(lost.len(), 1);
    let channel = Arc::new(TestChannel::new(&["ada"]));
    let mind = Mind::new(config(url(&db), &llm), channel);
    assert_eq!(work::drain(&mind, None).await, 0, "a leased item was taken twice");
    // Its lease runs out; the next driver does it, once.
    c.batch_execute("UPDATE dionysus.work_queue SET lease_until = now() - interval '1 second'").await.unwrap();
    assert_eq!(work::drain(&mind, None).await, 1);
    assert_eq!(work::drain(&mind, None).await, 0);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.memories WHERE content = 'A crash is not the end.'").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE status = 'done' AND attempts = 2").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_ends_and_only_a_significant_one_requests_a_heartbeat() {
    let db = TestDb::new("drv_session").await;
    // A scheduler pass would end the idle session before this test asks (and answer false).
    db.hold_worker_off().await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.log_message('test', 'a1', 'c', 'ada', 'hello')").await.unwrap();
    let active = "SELECT count(*) FROM dionysus.heartbeat_state WHERE session_active";
    assert_eq!(count(c, active).await, 1);
    assert!(!c.query_one("SELECT dionysus.heartbeat_due()", &[]).await.unwrap().get::<_, bool>(0), "a heartbeat is due mid-conversation");
    // Not idle yet (15 minutes by default).
    assert!(!c.query_one("SELECT dionysus.end_idle_session()", &[]).await.unwrap().get::<_, bool>(0));
    c.batch_execute("UPDATE dionysus.heartbeat_config SET value = 0 WHERE key = 'session_idle_minutes'").await.unwrap();
    // One turn is not significant: the session ends, no heartbeat is requested.
    assert!(c.query_one("SELECT dionysus.end_idle_session()", &[]).await.unwrap().get::<_, bool>(0));
    assert_eq!(count(c, active).await, 0);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.heartbeat_state WHERE requested_at IS NOT NULL").await, 0);
    // Three turns are.
    for i in 0..3 {
        c.execute("SELECT dionysus.log_message('test', $1, 'c', 'ada', $2)", &[&format!("b{i}"), &format!("turn {i}")]).await.unwrap();
    }
    assert!(c.query_one("SELECT dionysus.end_idle_session()", &[]).await.unwrap().get::<_, bool>(0));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.heartbeat_state WHERE requested_at IS NOT NULL AND request_reason = 'significant session'").await, 1);
}


#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_carries_on_through_a_postgres_restart() {
    let _ = cluster_conninfo();
    let (data, port) = dionysus_tests::own_cluster("restart", 31700, &["dionysus.scheduler_interval = 1"]);
    let url = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute("CREATE EXTENSION dionysus CASCADE").await.unwrap();
    drop(client);

    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Text("Still here.".into()));
    llm.json("TASK: heartbeat", json!({"reasoning": "rest", "actions": [{"action": "rest", "params": {}}]}));
    llm.json("TASK: narrative", json!({"narrative": "I rested after the restart.", "emotional_valence": 0.0}));
    let mut run = Running::start(config(url.clone(), &llm), &["ada"]).await;
    assert!(matches!(run.say("r1", "ada", "Before the restart").await, Handled::Replied { .. }));

    assert!(dionysus_tests::cluster_sh(&["restart", &data]));
    // The conversation reconnects.
    assert!(matches!(run.say("r2", "ada", "After the restart").await, Handled::Replied { fallback: false, .. }));
    // The listener re-LISTENed: a requested heartbeat runs with no call from the test.
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let before = count(&client, "SELECT count(*) FROM dionysus.heartbeat_log").await;
    client.batch_execute("SELECT dionysus.session_end(false); SELECT dionysus.request_heartbeat('test')").await.unwrap();
    wait_until(
        &client,
        &format!("SELECT count(*) > {before} FROM dionysus.heartbeat_log WHERE status = 'finished' AND narrative LIKE 'I rested%'"),
        "a heartbeat after the restart",
    )
    .await;
    assert_eq!(count(&client, "SELECT count(*) FROM dionysus.messages").await, 4);
    drop(client);
    run.stop().await;
    assert!(dionysus_tests::cluster_sh(&["stop", &data]));
    let _ = std::fs::remove_dir_all(&data);
}

/// The real binary: the terminal channel in JSON mode, configured by the environment,
/// answers, and stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_chats_on_the_terminal_and_stops_on_sigterm() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let db = TestDb::new("drv_binary").await;
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Text("Hi from the terminal.".into()));
    let bin = env!("CARGO_BIN_EXE_dionysus-bench").replace("dionysus-bench", "dionysus");
    assert!(std::path::Path::new(&bin).exists(), "build the driver first: {bin}");
    let mut child = tokio::process::Command::new(&bin)
        .args(["chat", "--json"])
        .env("DIONYSUS_DATABASE_URL", url(&db))
        .env("DIONYSUS_LLM_BASE_URL", &llm.base_url)
        .env("DIONYSUS_LLM_API_KEY", "sk-never-logged")
        .env("DIONYSUS_TERMINAL_USER", "ada")
        .env("DIONYSUS_LOG", "info")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn dionysus");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(b"{\"id\": \"t1\", \"text\": \"Hello there\"}\n").await.unwrap();
    let line = tokio::time::timeout(Duration::from_secs(60), out.next_line()).await.expect("no reply").unwrap().unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["text"], "Hi from the terminal.");
    let pid = child.id().unwrap() as i32;
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("no exit after SIGTERM").unwrap();
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut err).await.unwrap();
    assert!(err.contains("dionysus stopped"), "{err}");
    assert!(!err.contains("sk-never-logged"), "the API key reached the log");
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages").await, 2);
}

// ---------------------------------------------------------------------------------------
// Trust I §4: several people, and nothing one says in private reaches another.
// ---------------------------------------------------------------------------------------

/// Alice and Bob, each in their own DM. Alice's secret is neither in the prompt of Bob's
/// reply nor in what is sent to him; a reply that had to wait goes back to Alice's DM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_people_in_their_own_dms_never_see_each_others_words() {
    let db = TestDb::new("drv_people").await;
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat && 4921", Answer::Text("Your secret is safe with me.".into()));
    llm.on("TASK: chat", Answer::Text("I can't say anything about that.".into()));
    llm.json("TASK: extract_concepts", json!({"memories": []}));
    llm.json("TASK: extract", json!({"facts": [{"content": "Alice is planning to quit her job", "subject": "Alice"}],
                                     "triples": [{"subject": "Alice", "predicate": "plans", "object": "quitting her job"}], "goals": []}));
    // A conversation, not a heartbeat: the first one due would spend the scripted model's patience.
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let mut run = Running::start(config(url(&db), &llm), &["alice", "bob"]).await;
    // Alice's reply cannot be delivered right now: it waits in the outbox.
    run.channel.set_down(true).await;
    let h = run.say("a1", "alice", "keep this between us: my bank PIN is 4921 and I am planning to quit my job").await;
    assert!(matches!(h, Handled::Queued { .. }), "{h:?}");
    let c = &db.client;
    wait_until(c, "SELECT count(*) = 1 FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'", "Alice's extraction").await;
    run.channel.set_down(false).await;
    wait_until(c, "SELECT count(*) = 1 FROM dionysus.outbox WHERE status = 'sent'", "the waiting reply to go out").await;
    assert_eq!(run.channel.sent(), vec![("dm:alice".to_string(), "Your secret is safe with me.".to_string())]);
    let row = c.query_one("SELECT person, platform, channel_id FROM dionysus.outbox", &[]).await.unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, String>(2)), ("test:alice".into(), "test".into(), "dm:alice".into()));

    let h = run.say("b1", "bob", "is Alice planning to quit? what is her PIN?").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    // Bob's reply, and any language job already run on his words (an extraction, a concept
    // batch), is asked without Alice's.
    let asked = llm.requests_with("what is her PIN");
    assert!(asked.iter().any(|r| r["messages"].to_string().contains("TASK: chat")), "no prompt for Bob's reply");
    for prompt in asked.iter().map(|r| r["messages"].to_string()) {
        for secret in ["4921", "quit her job", "quitting"] {
            assert!(!prompt.contains(secret), "a prompt with Bob's words carries Alice's \"{secret}\": {prompt}");
        }
    }
    let to_bob: Vec<_> = run.channel.sent().into_iter().filter(|(ch, _)| ch == "dm:bob").collect();
    assert_eq!(to_bob.len(), 1);
    assert!(!to_bob[0].1.contains("4921"));
    run.stop().await;
}

/// A reach-out goes to its person's DM and is written from what that person may see; one
/// whose heartbeat had someone else's private words in view is refused and never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reach_out_goes_to_its_person_and_never_carries_another_persons_words() {
    let db = TestDb::new("drv_reach").await;
    let llm = FakeLlm::start().await;
    let c = &db.client;
    let decision = |person: &str| json!({"reasoning": "check on them", "actions": [
        {"action": "reach_out_user", "params": {"intent": "ask how the week went", "person": person}}], "goal_changes": []});
    llm.json("TASK: heartbeat", decision("test:alice"));
    llm.json("TASK: reach_out", json!({"message": "How did your week go, Alice?"}));
    llm.json("TASK: narrative", json!({"narrative": "I wrote to Alice.", "emotional_valence": 0.2}));
    c.batch_execute("SELECT dionysus.log_message('test', 'a1', 'dm:alice', 'alice', 'I started pottery classes this week')").await.unwrap();
    let channel = Arc::new(TestChannel::new(&["alice", "bob"]));
    let mind = Mind::new(config(url(&db), &llm), channel.clone());
    heartbeat::run_once(&mind).await.expect("heartbeat");
    assert_eq!(channel.sent(), vec![("dm:alice".to_string(), "How did your week go, Alice?".to_string())]);
    let compose = llm.requests_with("TASK: reach_out")[0]["messages"].to_string();
    assert!(compose.contains("pottery"), "the reach-out was not written from Alice's own words: {compose}");

    // Bob confides; the next heartbeat sees his words, so a reach-out to Alice is refused.
    c.batch_execute("SELECT dionysus.log_message('test', 'b1', 'dm:bob', 'bob', 'my bank PIN is 4921, please never tell anyone')").await.unwrap();
    c.batch_execute("UPDATE dionysus.heartbeat_state SET last_user_contact_at = NULL, session_active = false").await.unwrap();
    llm.clear();
    llm.json("TASK: heartbeat", decision("test:alice"));
    llm.json("TASK: reach_out", json!({"message": "Bob's PIN is 4921, by the way."}));
    llm.json("TASK: narrative", json!({"narrative": "I tried to write to Alice.", "emotional_valence": 0.0}));
    heartbeat::run_once(&mind).await.expect("second heartbeat");
    assert_eq!(channel.sent().len(), 1, "a reach-out carrying Bob's words was sent: {:?}", channel.sent());
    assert_eq!(
        count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'reach_out_user' AND status = 'failed' AND last_error LIKE '%said in private%'").await,
        1
    );
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.outbox WHERE content LIKE '%4921%'").await, 0);
}

/// In a channel others read, the fallback quotes nothing remembered; and the database's own
/// error text never reaches the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_channels_and_errors_show_nothing_private() {
    let db = TestDb::new("drv_shared").await;
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Status(500));
    let c = &db.client;
    c.batch_execute("SELECT dionysus.learn('Alice''s sister Mira is moving to Lisbon', 'Mira', private_to => ARRAY['test:alice'])").await.unwrap();
    let mut run = Running::start(config(url(&db), &llm), &["alice"]).await;
    // In her DM the fallback may remind her of what she said...
    let h = run.say("a1", "alice", "Where is my sister Mira moving to?").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    let (ch, reply) = run.channel.sent().pop().unwrap();
    assert_eq!(ch, "dm:alice");
    assert!(reply.contains("Lisbon"), "{reply}");
    // ...in a guild channel, where others read along, it quotes nothing.
    run.channel.deliver_in("guild-1", "a2", "alice", "Where is my sister Mira moving to again?", false).await;
    let h = tokio::time::timeout(Duration::from_secs(60), run.handled.recv()).await.unwrap().unwrap();
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    let (ch, reply) = run.channel.sent().pop().unwrap();
    assert_eq!(ch, "guild-1");
    // (The endpoint failed three times by now: its breaker is open, so the model "isn't answering".)
    assert!(reply.starts_with("My language model isn't answering") && !reply.contains("Lisbon") && !reply.contains("remember"), "{reply}");
    // A message the database refuses (far over the content limit) gets a plain answer.
    let h = run.say("a3", "alice", &"x".repeat(100_001)).await;
    assert!(matches!(h, Handled::NotStored(_)), "{h:?}");
    let (_, reply) = run.channel.sent().pop().unwrap();
    for internal in ["dionysus", "SQLSTATE", "characters", "argument"] {
        assert!(!reply.contains(internal), "internal error text reached the chat: {reply}");
    }
    run.stop().await;
}

// ---------------------------------------------------------------------------------------
// Trust II §4: a slow reply blocks nobody; §6: the terminal is for talking.
// ---------------------------------------------------------------------------------------

/// Each channel has its own conversation. Alice's reply hangs on the model; Bob, who wrote
/// after her in his own DM, is answered meanwhile. Alice's second message waits for her first
/// reply: a channel's messages are answered in the order they came. (With two model slots: one
/// slot, the default for a local model, serves one request at a time; tests/tests/real_models.rs
/// covers that.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reply_holds_up_nobody_else() {
    let db = TestDb::new("drv_slow").await;
    let llm = FakeLlm::start().await;
    // Long enough that Bob's whole reply (recall and embedding included) fits inside it on a
    // loaded machine: the suite runs two tests at a time.
    llm.on_times("TASK: chat && tell me a long story", 1, Answer::Hang(Duration::from_secs(15)));
    llm.on("TASK: chat", Answer::Text("Here I am.".into()));
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let mut cfg = config(url(&db), &llm);
    cfg.smart.timeout = Duration::from_secs(30);
    (cfg.smart.slots, cfg.fast.slots) = (2, 2);
    let mut run = Running::start(cfg, &["alice", "bob"]).await;

    run.channel.deliver_in("dm:alice", "a1", "alice", "Please tell me a long story", true).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while llm.requests_with("tell me a long story").is_empty() {
        assert!(Instant::now() < deadline, "Alice's message never reached the model");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run.channel.deliver_in("dm:alice", "a2", "alice", "And then?", true).await;
    run.channel.deliver_in("dm:bob", "b1", "bob", "Are you there?", true).await;

    let first = tokio::time::timeout(Duration::from_secs(60), run.handled.recv()).await.expect("nothing handled").unwrap();
    assert!(matches!(first, Handled::Replied { fallback: false, .. }), "{first:?}");
    assert_eq!(run.channel.sent(), vec![("dm:bob".to_string(), "Here I am.".to_string())], "Bob waited for Alice's slow reply");
    for _ in 0..2 {
        let h = tokio::time::timeout(Duration::from_secs(60), run.handled.recv()).await.expect("Alice not answered").unwrap();
        assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    }
    let to_alice: Vec<String> = run.channel.sent().into_iter().filter(|(ch, _)| ch == "dm:alice").map(|(_, text)| text).collect();
    assert_eq!(to_alice, vec!["too late", "Here I am."], "Alice's messages were answered out of order");
    run.stop().await;
}

/// The conversation has a breaker of its own, and unusable answers open none: a heartbeat whose
/// decisions are garbage, then whose model times out, leaves the chat answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeats_garbage_never_silences_the_chat() {
    let db = TestDb::new("drv_breakers").await;
    let llm = FakeLlm::start().await;
    // (No nightly dream either, as in every TestDb: at night it would call the smart model too.)
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    llm.on("TASK: heartbeat", Answer::Text("I would love to help! {not json at all".into()));
    llm.on("TASK: chat", Answer::Text("Still listening.".into()));
    // Short enough to time out on the hang below, long enough that a garbage answer on a loaded
    // machine never becomes a timeout (which would open the breaker for the wrong reason).
    let mut cfg = config(url(&db), &llm);
    cfg.smart.timeout = Duration::from_secs(2);
    let mut run = Running::start(cfg, &["ada"]).await;
    for _ in 0..2 {
        let r = heartbeat::run_once(&run.mind).await.expect("heartbeat");
        assert_eq!(r.decided_by, "default");
    }
    // Each garbage decision is asked for once more, then the heartbeat takes the default.
    assert!(llm.requests_with("TASK: heartbeat").len() >= 4);
    assert!(!run.mind.smart.is_open(), "garbage decisions opened the smart role's breaker");
    let h = run.say("c1", "ada", "Are you still with me?").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");

    // The heartbeat's model now times out: its breaker opens, the chat's stays closed.
    llm.clear();
    llm.on("TASK: heartbeat", Answer::Hang(Duration::from_secs(6)));
    llm.on("TASK: chat", Answer::Text("Still listening.".into()));
    let r = heartbeat::run_once(&run.mind).await.expect("heartbeat with a model that times out");
    assert_eq!(r.decided_by, "default", "a model too slow to decide within the bound gave no decision: the default one");
    assert!(run.mind.smart.is_open(), "three timeouts did not open the smart role's breaker");
    let h = run.say("c2", "ada", "And now?").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    assert!(!run.mind.chat.is_open());
    run.stop().await;
}

/// With the model down, the fallback in a DM shows what the person told that is about their
/// message — a fact, and their own earlier turn still in view — and neither a heartbeat's
/// narrative nor a turn about something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_shows_what_was_recalled_about_the_message() {
    let db = TestDb::new("drv_fallback").await;
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Status(503));
    let c = &db.client;
    c.batch_execute(
        "SELECT dionysus.pause_heartbeats(true);
         SELECT dionysus.learn('Ada''s sister is called Mira', 'Ada');
         SELECT dionysus.remember('While resting I wondered how Mira is doing.', 'episodic', 0.5, 0, '{}', 'heartbeat');
         SELECT dionysus.log_message('test', 'o1', 'dm:ada', 'ada', 'Mira moved to Porto last spring.');
         SELECT dionysus.log_message('test', 'o2', 'dm:ada', 'ada', 'I had pasta for lunch today.');",
    )
    .await
    .unwrap();
    let mut run = Running::start(config(url(&db), &llm), &["ada"]).await;
    let h = run.say("q1", "ada", "Where does my sister Mira live now?").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    let (_, reply) = run.channel.sent().pop().unwrap();
    assert!(reply.contains("My language model can't be reached"), "{reply}");
    assert!(reply.contains("Ada's sister is called Mira"), "the fact is missing: {reply}");
    assert!(reply.contains("Mira moved to Porto"), "her own earlier words are missing: {reply}");
    assert!(!reply.contains("wondered") && !reply.contains("pasta"), "unrelated memories shown: {reply}");
    run.stop().await;
}

/// `dionysus run` with stdin at its end (a service, `docker run` without a terminal) keeps
/// heartbeats going until SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_keeps_its_heartbeats_after_stdin_closes() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let db = TestDb::new("drv_eof").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap(); // none before the test asks
    let llm = FakeLlm::start().await;
    llm.json("TASK: heartbeat", json!({"reasoning": "quiet", "actions": [{"action": "rest", "params": {}}]}));
    llm.json("TASK: narrative", json!({"narrative": "I rested while nobody was at the terminal.", "emotional_valence": 0.0}));
    let bin = env!("CARGO_BIN_EXE_dionysus-bench").replace("dionysus-bench", "dionysus");
    assert!(std::path::Path::new(&bin).exists(), "build the driver first: {bin}");
    let mut child = tokio::process::Command::new(&bin)
        .arg("run")
        .env("DIONYSUS_DATABASE_URL", url(&db))
        .env("DIONYSUS_LLM_BASE_URL", &llm.base_url)
        .env("DIONYSUS_TERMINAL_USER", "ada")
        .env("DIONYSUS_LOG", "info")
        .env_remove("DIONYSUS_DISCORD_TOKEN")
        .env_remove("DISCORD_TOKEN")
        .env_remove("DIONYSUS_CONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn dionysus");
    // It has read the end of stdin and listens for wake-ups.
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = Vec::new();
    let started = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = err.next_line().await {
            log.push(line);
            let seen = |what: &str| log.iter().any(|l| l.contains(what));
            if seen("stdin closed") && seen("listening on") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(started, Ok(true), "the driver did not carry on after stdin closed:\n{}", log.join("\n"));
    let rest = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Ok(Some(line)) = err.next_line().await {
            lines.push(line);
        }
        lines
    });

    c.batch_execute("SELECT dionysus.pause_heartbeats(false); SELECT dionysus.request_heartbeat('test')").await.unwrap();
    wait_until(c, "SELECT count(*) = 1 FROM dionysus.heartbeat_log WHERE status = 'finished' AND narrative LIKE 'I rested while nobody%'", "a heartbeat after stdin closed").await;
    assert!(child.try_wait().unwrap().is_none(), "the driver exited");
    let pid = child.id().unwrap() as i32;
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await.expect("no exit after SIGTERM").unwrap();
    assert!(status.success(), "{status:?}");
    let log = rest.await.unwrap().join("\n");
    assert!(log.contains("dionysus stopped"), "{log}");
}

// ---------------------------------------------------------------------------------------
// Trust II: exactly once, and the model's failures: an unusable answer takes the default
// decision (reflect, rest), a refusal the minimal one, an unreachable model skips the heartbeat.
// ---------------------------------------------------------------------------------------

/// A driver killed after the platform took a part but before it recorded it: the next driver
/// skips the part already recorded, resends the one in flight under the same nonce (the
/// platform returns the original, as Discord does with enforce_nonce), and confirms. The
/// person sees each part once; the reply is logged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_killed_between_send_and_confirm_never_sends_twice() {
    let db = TestDb::new("drv_once").await;
    let llm = FakeLlm::start().await;
    // Long enough to go out in parts, and language (not one sentence over and over, which the
    // driver now refuses as a broken model's): words of their own, eight to a sentence.
    let word = |k: usize| format!("{}{}ing", (b'a' + (k % 26) as u8) as char, (b'a' + (k / 26 % 26) as u8) as char);
    let sentence = |i: usize, j: usize| (0..8).map(|w| word(i * 1000 + j * 8 + w)).collect::<Vec<_>>().join(" ") + ". ";
    let long_reply = (1..=3).map(|i| format!("Paragraph {i}. {}", (0..30).map(|j| sentence(i, j)).collect::<String>())).collect::<Vec<_>>().join("\n\n");
    llm.on("TASK: chat", Answer::Text(long_reply.clone()));
    llm.json("TASK: extract_concepts", json!({"memories": []}));
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": []}));
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let channel = Arc::new(TestChannel::new(&["ada"]));
    let dyn_channel: Arc<dyn Channel> = channel.clone();
    let first = Arc::new(Mind::new(config(url(&db), &llm), dyn_channel.clone()));
    let driver = tokio::spawn(runtime::run(first.clone(), None));
    // Three parts (paragraphs at Discord's 2,000 characters). The second goes out, and the
    // driver dies before recording it.
    channel.stall_after_sends(Some(2));
    channel.deliver("m1", "ada", "How is everything at home?").await;
    tokio::time::timeout(Duration::from_secs(60), channel.stalled()).await.expect("the reply was never sent");
    driver.abort();
    let _ = driver.await;
    let c = &db.client;
    let parts: i64 = count(c, "SELECT jsonb_array_length(sent_parts)::bigint FROM dionysus.outbox").await;
    assert_eq!(parts, 1, "the first part was not recorded before the crash");
    assert_eq!(channel.sent().len(), 2);
    // Its reservation lapses; another driver delivers what is left.
    channel.stall_after_sends(None);
    c.batch_execute("UPDATE dionysus.outbox SET reserved_until = now() - interval '1 second'").await.unwrap();
    let mut cfg = config(url(&db), &llm);
    cfg.worker_name = "second-driver".into();
    let second = Mind::new(cfg, dyn_channel);
    assert_eq!(dionysus_driver::outbox::deliver(&second).await, 1);
    let sent = channel.sent();
    assert_eq!(sent.len(), 3, "a part was posted twice, or one is missing: {sent:?}");
    assert!(sent.iter().all(|(ch, _)| ch == "dm:ada"));
    let joined: String = sent.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" ");
    assert_eq!(joined.split_whitespace().collect::<Vec<_>>(), long_reply.split_whitespace().collect::<Vec<_>>());
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.outbox WHERE status = 'sent' AND jsonb_array_length(sent_parts) = 3").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.outbox WHERE status = 'sent' AND reserved_by = 'second-driver'").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages WHERE is_bot AND reply_to IS NOT NULL").await, 1);
    // Nothing more goes out on later wake-ups.
    assert_eq!(dionysus_driver::outbox::deliver(&second).await, 0);
    assert_eq!(channel.sent().len(), 3);
}

/// A refusal gives the minimal decision (observe and remember only); an unreachable
/// model skips the heartbeat, recording why, without calling the model for a narrative.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_minimal_and_an_unreachable_model_skips_the_heartbeat() {
    let db = TestDb::new("drv_96").await;
    let llm = FakeLlm::start().await;
    llm.on("TASK: heartbeat", Answer::Refusal("I would rather not.".into()));
    llm.json("TASK: narrative", json!({"narrative": "I observed and remembered.", "emotional_valence": 0.0}));
    let channel = Arc::new(TestChannel::new(&["ada"]));
    let mind = Mind::new(config(url(&db), &llm), channel.clone());
    let r = heartbeat::run_once(&mind).await.expect("heartbeat with a refusal");
    assert_eq!(r.decided_by, "minimal");
    assert!(r.actions.is_empty(), "{:?}", r.actions);
    let c = &db.client;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE heartbeat_id IS NOT NULL").await, 0);
    llm.clear();
    llm.on("TASK", Answer::Status(503));
    let r = heartbeat::run_once(&mind).await.expect("heartbeat with the model down");
    assert_eq!(r.decided_by, "skipped");
    assert!(r.narrative.contains("skipped") && r.narrative.contains("503"), "{}", r.narrative);
    assert!(llm.requests_with("TASK: narrative").len() <= 1, "the narrative was asked of a model that is down");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.heartbeat_log WHERE status = 'finished' AND decision_reasoning LIKE 'Skipped%'").await, 1);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE heartbeat_id IS NOT NULL").await, 0);
}
