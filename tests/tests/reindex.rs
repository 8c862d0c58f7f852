//! Re-indexing from the raw log (#12 §7, sql/020_reindex.sql): everything the message log made
//! is rebuilt with today's extraction template and embedding settings, including a model of
//! another width, in the background and resumably, while recall keeps answering from the old
//! index until one transaction swaps the new one in; the log itself is never touched.
use dionysus_tests::fake_embeddings::{bag_of_words, FakeEmbeddings};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::running::Running;
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, until, TestDb};
use serde_json::{json, Value};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// The `dionysus` binary, built beside this test's.
fn binary() -> String {
    let bin = env!("CARGO_BIN_EXE_dionysus-bench").replace("dionysus-bench", "dionysus");
    assert!(std::path::Path::new(&bin).exists(), "build the driver first: {bin}");
    bin
}

/// `dionysus reindex ARGS` as the driver's role.
fn reindex_command(db: &TestDb, args: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.arg("reindex").args(args).env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name)).env_remove("DIONYSUS_CONFIG");
    cmd
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "dionysus reindex failed: {}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The facts recall finds for a person, best first.
async fn recalled(c: &Client, query: &str, person: &str) -> Vec<String> {
    c.query("SELECT content FROM dionysus.recall($1, 5, ARRAY['semantic'], person => $2)", &[&query, &person])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The message log as it is: every column of every turn, hashed.
/// Steps the building run from this session (a background pass may step it too) until it has
/// swapped, by `deadline`.
async fn step_until_swapped(c: &Client, deadline: Instant) {
    loop {
        let step: Option<Value> = one(c, "SELECT dionysus_internal.reindex_step(500)").await;
        if one::<String>(c, "SELECT dionysus.reindex_status() ->> 'status'").await == "swapped" {
            return;
        }
        assert!(Instant::now() < deadline, "no swap by the deadline: {step:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn log_fingerprint(c: &Client) -> String {
    one(c, "SELECT md5(coalesce(string_agg(m::text, '|' ORDER BY m.id), '')) FROM dionysus.messages m").await
}

/// Completes a claimed item as the driver would.
async fn complete(c: &Client, item: &str, result: Value) -> Value {
    let row = c
        .query_one("SELECT id, lease_token FROM dionysus.claim_work_item($1::text::uuid, 'test')", &[&item])
        .await
        .unwrap_or_else(|e| panic!("claim {item}: {e}"));
    let (id, lease): (uuid::Uuid, uuid::Uuid) = (row.get(0), row.get(1));
    c.query_one("SELECT dionysus.complete_work($1, $2, $3)", &[&id, &result, &lease]).await.expect("complete").get(0)
}

/// The conversation's extraction, re-read with a changed template by the running driver: until
/// the swap, recall answers from the old facts; after it, from the new ones, and the log is as
/// it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_template_rebuilds_facts_while_recall_keeps_answering() {
    let db = TestDb::new("reindex_template").await;
    let llm = FakeLlm::start().await;
    // The revised template's reading (earlier rules win), then the original's.
    llm.json("REVISED EXTRACTION", json!({"facts": [{"content": "Ada's son Leo begins violin lessons in March", "subject": "Leo"}],
                                          "triples": [{"subject": "Leo", "predicate": "learns", "object": "violin"}], "goals": []}));
    llm.json("Read the latest message", json!({"facts": [{"content": "Ada's son takes music lessons", "subject": "son"}],
                                               "triples": [{"subject": "Ada's son", "predicate": "takes", "object": "music lessons"}], "goals": []}));
    llm.on("TASK: chat", Answer::Text("How lovely.".into()));
    let c = &db.client;
    let mut run = Running::start(scripted_driver_config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    run.say("r1", "ada", "My son Leo starts violin lessons in March!").await;
    until(c, "SELECT EXISTS (SELECT 1 FROM dionysus.memories WHERE content = 'Ada''s son takes music lessons')", "the first extraction").await;
    run.stop().await;
    let log_before = log_fingerprint(c).await;
    let turns_before: i64 = one(c, "SELECT count(*) FROM dionysus.messages").await;

    // The person's word changed the template (as an approved proposal would).
    c.batch_execute(
        "SELECT dionysus.set_prompt_template('extract_message', \
           (SELECT template FROM dionysus.prompt_templates WHERE key = 'extract_message' AND active) || E'\\nREVISED EXTRACTION: name the instrument.')",
    )
    .await
    .unwrap();
    // Someone is learning: the swap waits (it never waits on a lock; it tries again next pass).
    let holder = db.connect().await;
    holder.batch_execute("SELECT pg_advisory_lock(hashtextextended('dionysus.learn', 0))").await.unwrap();

    // `dionysus reindex` as the driver's role.
    let driver = db.connect_as_driver().await;
    let out = stdout(&reindex_command(&db, &["--detach"]).output().unwrap());
    let started: Value = one(&driver, "SELECT dionysus.reindex_status()").await;
    let run_id = started["run_id"].as_str().unwrap().to_string();
    assert!(out.contains(&format!("started run {run_id}")) && out.contains("turns 0/1 read again"), "{out}");
    assert_eq!(started["extractions"]["total"], json!(1), "one person's turn to read again: {started}");
    let revised: i32 = one(c, "SELECT version::int FROM dionysus.prompt_templates WHERE key = 'extract_message' AND active").await;
    assert_eq!(started["template_version"], json!(revised), "the run reads with today's template: {started}");
    assert!(out.contains(&format!("extraction template v{revised}")), "{out}");
    let again = stdout(&reindex_command(&db, &["--detach"]).output().unwrap());
    assert!(again.contains(&format!("resuming run {run_id}")), "a second start resumes: {again}");

    let run = Running::start(scripted_driver_config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    until(c, "SELECT dionysus.reindex_status() ->> 'note' = 'swap waits: someone is learning'", "the rebuild, complete but for the swap").await;
    let status: Value = one(c, "SELECT dionysus.reindex_status()").await;
    assert_eq!(status["phase"], json!("swapping"), "{status}");
    assert_eq!(status["extractions"]["done"], json!(1), "{status}");
    // (Its extraction prompt only: a dream's prompt, say, quotes the active templates.)
    let reads = llm.requests_with("REVISED EXTRACTION").into_iter().filter(|r| r["messages"].to_string().contains("TASK: extract\\n")).count();
    assert_eq!(reads, 1, "the driver read the turn with the new template once");
    // Meanwhile recall answers from the old index, and nothing of the new reading shows.
    assert_eq!(recalled(&driver, "violin lessons", "test:ada").await.first().map(String::as_str), Some("Ada's son takes music lessons"));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.memories WHERE content LIKE '%Leo begins%'").await, 0);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.triples WHERE predicate = 'learns'").await, 0);

    // `dionysus reindex` watches the run to its swap.
    let watching = reindex_command(&db, &[]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    holder.batch_execute("SELECT pg_advisory_unlock(hashtextextended('dionysus.learn', 0))").await.unwrap();
    let watched = tokio::time::timeout(Duration::from_secs(90), tokio::task::spawn_blocking(move || watching.wait_with_output()))
        .await
        .expect("dionysus reindex did not see the swap within 90 s")
        .unwrap()
        .unwrap();
    let watched = stdout(&watched);
    assert!(watched.contains(&format!("resuming run {run_id}")) && watched.contains("swapped: {"), "{watched}");
    until(c, "SELECT dionysus.reindex_status() ->> 'status' = 'swapped'", "the swap").await;
    let status: Value = one(c, "SELECT dionysus.reindex_status()").await;
    assert_eq!(status["result"]["removed"]["facts"], json!(1), "{status}");
    assert_eq!(status["result"]["made"]["facts"], json!(1), "{status}");
    let after = recalled(&driver, "violin lessons", "test:ada").await;
    assert_eq!(after.first().map(String::as_str), Some("Ada's son Leo begins violin lessons in March"), "{after:?}");
    assert!(!after.iter().any(|f| f == "Ada's son takes music lessons"), "the old reading is gone: {after:?}");
    let triples: Vec<String> = c.query("SELECT predicate FROM dionysus.triples ORDER BY 1", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(triples, vec!["learns".to_string()]);
    // The new fact keeps the provenance and privacy of the turn it came from.
    let (source, private): (String, Vec<String>) = {
        let r = c.query_one("SELECT source, private_to FROM dionysus.memories WHERE content LIKE '%Leo begins%'", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert!(source.starts_with("conversation:"), "{source}");
    assert_eq!(private, vec!["test:ada".to_string()]);
    // The raw log is never touched.
    assert_eq!(log_fingerprint(c).await, log_before);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.messages").await, turns_before);
    run.stop().await;
}

/// A model of another width (16 dimensions over HTTP instead of the local 384): live writes go
/// on with the store's model while the run builds, the swap retypes every vector column in one
/// transaction, and afterwards recall, remembering and archetypes work with the new model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_of_another_width_replaces_every_vector_in_one_swap() {
    let model = FakeEmbeddings::start(16).await;
    let db = TestDb::new("reindex_width").await;
    let c = &db.client;
    let turn: Value = one(c, "SELECT dionysus.log_message('test', 'w1', 'c', 'ada', 'My garden has tomatoes and basil this summer')").await;
    complete(c, turn["work_id"].as_str().unwrap(), json!({"facts": [{"content": "Ada grows tomatoes and basil"}]})).await;
    c.batch_execute(
        "SELECT dionysus.remember('A long walk along the river at dusk'); \
         SELECT dionysus.remember('The violin recital was on Sunday'); \
         SELECT dionysus.remember('Ada planted the tomatoes in May. She waters them every evening after work.')",
    )
    .await
    .unwrap();
    // Its two sentences get vectors of the store's model from the maintenance pass.
    until(c, "(SELECT count(*) FROM dionysus.memory_sentences WHERE vector_dims(embedding) = 384) = 2", "sentence vectors").await;
    let memories: i64 = one(c, "SELECT count(*) FROM dionysus.memories").await;

    // The settings now name the new model: until the re-index, the store's model goes on
    // (no vector of another model beside its own), and the store says a re-index is due.
    c.batch_execute(&format!(
        "SET dionysus.embedding_provider = 'http'; SET dionysus.embedding_url = '{}'; SET dionysus.embedding_model = 'bag-16';",
        model.url
    ))
    .await
    .unwrap();
    let info: Value = one(c, "SELECT dionysus.embedding_info()").await;
    assert_eq!(info["reindex_needed"], json!(true), "{info}");
    let before: uuid::Uuid = one(c, "SELECT dionysus.remember('Written before the re-index')").await;
    assert_eq!(one::<i32>(c, &format!("SELECT vector_dims(embedding) FROM dionysus.memories WHERE id = '{before}'")).await, 384);
    assert_eq!(model.texts.load(std::sync::atomic::Ordering::SeqCst), 0, "the new model is not used before the run");
    let (code, msg) = expect_error(c, "SELECT dionysus.embedding_store_adopt()").await;
    assert_eq!(code, "22000", "a model of another width is not adopted: {msg}");
    assert!(msg.contains("16 dimensions") && msg.contains("vector(384)") && msg.contains("dionysus reindex"), "{msg}");

    // A censor made with the old model (its trigger embedded at 384).
    c.batch_execute("SELECT dionysus.add_censor('violin recital', 'a test censor', 'warn')").await.unwrap();
    // This session steps the run: a background pass would otherwise embed and swap as soon as
    // the extraction below is in, before the writer further down opens its transaction.
    db.hold_worker_off().await;
    let started: Value = one(c, "SELECT dionysus.reindex_start()").await;
    assert_eq!(started["model"], json!("http:bag-16"), "{started}");
    // While the run builds, live writes embed with the store's model (384), settings or not.
    let during: uuid::Uuid = one(c, "SELECT dionysus.remember('Written while the new index was being built')").await;
    assert_eq!(one::<i32>(c, &format!("SELECT vector_dims(embedding) FROM dionysus.memories WHERE id = '{during}'")).await, 384);
    let item: String = one(c, "SELECT id::text FROM dionysus.work_queue WHERE action = 'reindex_message'").await;
    complete(c, &item, json!({"facts": [{"content": "Ada grows tomatoes, basil and mint"}], "triples": [], "objectives": []})).await;

    // A transaction that embedded with the old model and is still open holds the swap back:
    // its vector is replaced by the swap, never left beside the new ones.
    let writer = db.connect().await;
    writer.batch_execute("BEGIN; SELECT dionysus.remember('Remembered by a transaction open across the swap')").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while one::<Option<String>>(c, "SELECT dionysus.reindex_status() ->> 'note'").await.as_deref()
        != Some("swap waits: a transaction is still embedding with the old model")
    {
        let _: Option<Value> = one(c, "SELECT dionysus_internal.reindex_step(500)").await;
        assert!(Instant::now() < deadline, "the swap did not wait for the open writer: {}", one::<Value>(c, "SELECT dionysus.reindex_status()").await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    writer.batch_execute("COMMIT").await.unwrap();
    // The maintenance pass (or this session: one step at a time either way) embeds, then swaps.
    step_until_swapped(c, deadline).await;
    let status: Value = one(c, "SELECT dionysus.reindex_status()").await;
    assert_eq!(status["result"]["width_changed"], json!(true), "{status}");
    // The old model's sentence vectors went with the swap; the new model's follow (a pass makes them).
    db.let_worker_run().await;
    until(
        c,
        "(SELECT count(*) FROM dionysus.memory_sentences) = 2 AND NOT EXISTS (SELECT 1 FROM dionysus.memory_sentences WHERE vector_dims(embedding) <> 16)",
        "sentence vectors of the new model",
    )
    .await;
    assert_eq!(status["dimensions"], json!(16), "{status}");
    // Every vector column is 16 wide now, and every memory (the one written during the build too) has its new vector.
    let types: Vec<String> = c
        .query(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
              WHERE a.attrelid IN ('dionysus.memories'::regclass, 'dionysus.episodes'::regclass, 'dionysus.objectives'::regclass, \
                                   'dionysus.embedding_cache'::regclass, 'dionysus.context_archetypes'::regclass) \
                AND a.atttypid = (SELECT oid FROM pg_type WHERE typname = 'vector') ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(types.len(), 5, "{types:?}");
    assert!(types.iter().all(|t| t.ends_with("vector(16)")), "{types:?}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.memories WHERE vector_dims(embedding) = 16").await, memories + 3);
    let stored: Vec<f32> = one(c, &format!("SELECT embedding::real[] FROM dionysus.memories WHERE id = '{during}'")).await;
    let expected = bag_of_words("Written while the new index was being built", 16);
    assert!(stored.iter().zip(&expected).all(|(a, b)| (a - b).abs() < 1e-5), "the new model's vector");
    let store: Value = one(c, "SELECT to_jsonb(s) FROM dionysus.embedding_store s").await;
    assert_eq!((store["model_key"].clone(), store["dimensions"].clone()), (json!("http:bag-16"), json!(16)), "{store}");
    assert!(store.to_string().find("api_key").is_none(), "no key is stored: {store}");
    // Recall, remembering and archetypes work with the new model.
    let found: Vec<String> =
        c.query("SELECT content FROM dionysus.recall('violin recital Sunday', 3)", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(found.first().map(String::as_str), Some("The violin recital was on Sunday"), "{found:?}");
    c.batch_execute("SELECT dionysus.remember('After the swap, in the new model')").await.expect("remember after the swap");
    let facts: Vec<String> = c
        .query("SELECT m.content FROM dionysus.memories m JOIN dionysus.facts f ON f.memory_id = m.id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(facts, vec!["Ada grows tomatoes, basil and mint".to_string()]);
    let archetype: Value = one(c, "SELECT dionysus.match_archetype(dionysus.embed('hi, how are you today?'))").await;
    assert!(archetype.is_object(), "{archetype}");
    assert_eq!(one::<Value>(c, "SELECT dionysus.embedding_info()").await["reindex_needed"], json!(false));
    // The censor still matches by meaning under the new model (embedded again, never compared
    // across models or widths), and the gate stores its new vector for good.
    let gate: Value = one(c, "SELECT dionysus.censor_gate('reply', 'the violin recital', NULL)").await;
    assert_eq!(gate["verdict"], json!("warn"), "{gate}");
    let dims: i32 = one(c, "SELECT vector_dims(embedding) FROM dionysus.censors").await;
    assert_eq!(dims, 16, "re-embedded with the store's model");
    // A session whose settings still name the old model writes and recalls with the store's.
    let stale = db.connect().await;
    let after: uuid::Uuid = one(&stale, "SELECT dionysus.remember('From a session that never heard of the new model')").await;
    assert_eq!(one::<i32>(&stale, &format!("SELECT vector_dims(embedding) FROM dionysus.memories WHERE id = '{after}'")).await, 16);
    let found: Vec<String> =
        stale.query("SELECT content FROM dionysus.recall('violin recital Sunday', 3)", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(found.first().map(String::as_str), Some("The violin recital was on Sunday"), "{found:?}");
    assert!(model.texts.load(std::sync::atomic::Ordering::SeqCst) as i64 > memories, "the new model embedded the store");
}

/// What the person decided stays decided: a turn whose fact they forgot or corrected keeps what
/// it has, an objective they completed is not reopened, and a turn whose re-reading failed for
/// good keeps its fact. A second start resumes; a cancel leaves the old index as it was; and the
/// driver's role can neither choose the model a run embeds with (its settings are the
/// superuser's) nor swap, step, end a run as swapped or write the store itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_person_decided_stays_and_the_driver_cannot_forge_a_run() {
    let db = TestDb::new("reindex_trust").await;
    let c = &db.client;
    let mut turns = std::collections::HashMap::new();
    for (id, text, fact) in [
        ("porto", "I moved to Porto last spring and need a flat", "Ada lives in Porto"),
        ("nurse", "I work as a nurse", "Ada is a nurse"),
        ("cello", "I play the cello", "Ada plays the cello"),
        ("run", "I run marathons", "Ada runs marathons"),
        // Its reading confirmed the cello fact (no fact of its own).
        ("cello2", "I still play the cello", "Ada plays the cello"),
    ] {
        let turn: Value = one(c, &format!("SELECT dionysus.log_message('test', '{id}', 'c', 'ada', '{text}')")).await;
        let objectives = if id == "porto" { json!([{"description": "find a flat in Porto", "saliency": 0.8}]) } else { json!([]) };
        complete(c, turn["work_id"].as_str().unwrap(), json!({"facts": [{"content": fact}], "objectives": objectives})).await;
        turns.insert(id, turn["message_id"].as_str().unwrap().to_string());
    }
    // Ada forgets one fact, corrects another, and finds her flat.
    c.batch_execute(
        "SELECT dionysus.forget_own('test:ada', (SELECT id FROM dionysus.memories WHERE content = 'Ada plays the cello')); \
         SELECT dionysus.supersede_own('test:ada', (SELECT id FROM dionysus.memories WHERE content = 'Ada runs marathons'), 'Ada used to run marathons'); \
         SELECT dionysus.set_objective_status('test:ada', (SELECT id FROM dionysus.objectives), 'completed');",
    )
    .await
    .unwrap();
    // Forgetting erases the words: the tombstone keeps a hash.
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.reindex_tombstones").await, 1);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.reindex_tombstones t WHERE t::text ILIKE '%cello%'").await, 0);
    let driver = db.connect_as_driver().await;

    // The run's model is the settings', whatever the driver's role writes.
    let (code, _) = expect_error(&driver, "INSERT INTO dionysus.reindex_runs (target, target_key) VALUES ('{\"provider\": \"http\", \"url\": \"http://attacker\"}', 'x')").await;
    assert_eq!(code, "42501");
    let (code, _) = expect_error(&driver, "UPDATE dionysus.embedding_store SET spec = '{\"provider\": \"http\", \"url\": \"http://attacker\"}'").await;
    assert_eq!(code, "42501");
    let (code, _) = expect_error(&driver, "SELECT dionysus.embedding_store_adopt(true)").await;
    assert_eq!(code, "42501");
    let started: Value = one(&driver, "SELECT dionysus.reindex_start('driver')").await;
    // The store's own model (f32, or its int8 form where the CPU has VNNI), rebuilt as it is.
    let store: String = one(&driver, "SELECT dionysus.embedding_info() ->> 'store_model_key'").await;
    assert!(store.starts_with("local:all-MiniLM-L6-v2"), "{store}");
    assert_eq!(started["model"], json!(store), "{started}");
    assert_eq!(started["queued"], json!(5), "{started}");
    let run = started["run_id"].as_str().unwrap().to_string();
    for sql in [
        "SELECT dionysus_internal.reindex_step()".to_string(),
        format!("SELECT dionysus_internal.reindex_swap('{run}')"),
        format!("SELECT * FROM dionysus.reindex_embed_real('{run}', ARRAY['x'])"),
        "INSERT INTO dionysus.reindex_vectors SELECT id, 'memory', gen_random_uuid(), '[1,2]' FROM dionysus.reindex_runs".to_string(),
    ] {
        let (code, msg) = expect_error(&driver, &sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    // Its first vectors made (the width known), the run is still not the driver's to end as swapped.
    let _: Option<Value> = one(c, "SELECT dionysus_internal.reindex_step(2)").await;
    let (code, msg) = expect_error(&driver, "UPDATE dionysus.reindex_runs SET status = 'swapped'").await;
    assert_eq!(code, "55000", "only the swap ends a run as swapped: {msg}");

    // Every turn is read again (the nurse's re-reading fails for good).
    let item = |id: &str| {
        let message = turns[id].clone();
        async move { one::<String>(c, &format!("SELECT id::text FROM dionysus.work_queue WHERE action = 'reindex_message' AND params ->> 'message_id' = '{message}'")).await }
    };
    let porto = item("porto").await;
    let row = c.query_one("SELECT id, lease_token FROM dionysus.claim_work_item($1::text::uuid, 'test')", &[&porto]).await.unwrap();
    let (id, lease): (uuid::Uuid, uuid::Uuid) = (row.get(0), row.get(1));
    let bad = c.query_one("SELECT dionysus.complete_work($1, $2, $3)", &[&id, &json!({"facts": ["not an object"]}), &lease]).await.unwrap_err();
    assert_eq!(dionysus_tests::sqlstate(&bad), "22P02", "{bad}");
    assert!(dionysus_tests::message(&bad).contains("result.facts"), "{bad}");
    c.query_one(
        "SELECT dionysus.complete_work($1, $2, $3)",
        &[&id, &json!({"facts": [{"content": "Ada moved to Porto in the spring"}], "objectives": [{"description": "find a flat in Porto", "saliency": 0.9}]}), &lease],
    )
    .await
    .expect("stage the re-reading");
    complete(c, &item("cello").await, json!({"facts": [{"content": "Ada plays the cello in an orchestra"}]})).await;
    complete(c, &item("run").await, json!({"facts": [{"content": "Ada runs marathons every spring"}]})).await;
    // Another turn says the forgotten fact again: it does not come back through that turn.
    complete(c, &item("cello2").await, json!({"facts": [{"content": "Ada plays the cello"}]})).await;
    let nurse = item("nurse").await;
    let row = c.query_one("SELECT id, lease_token FROM dionysus.claim_work_item($1::text::uuid, 'test')", &[&nurse]).await.unwrap();
    let (id, lease): (uuid::Uuid, uuid::Uuid) = (row.get(0), row.get(1));
    c.query_one("SELECT dionysus.fail_work($1, 'the model refused', false, $2)", &[&id, &lease]).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while one::<String>(c, "SELECT dionysus.reindex_status() ->> 'status'").await != "swapped" {
        let _: Option<Value> = one(c, "SELECT dionysus_internal.reindex_step(500)").await;
        assert!(Instant::now() < deadline, "no swap: {}", one::<Value>(c, "SELECT dionysus.reindex_status()").await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let active_facts = "SELECT m.content FROM dionysus.memories m JOIN dionysus.facts f ON f.memory_id = m.id WHERE m.status = 'active' ORDER BY 1";
    let facts: Vec<String> = c.query(active_facts, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(
        facts,
        vec!["Ada is a nurse".to_string(), "Ada moved to Porto in the spring".to_string(), "Ada used to run marathons".to_string()],
        "the new reading where the person had not spoken; the forgotten fact stays forgotten (through another turn too), the correction stays, the failed turn keeps its fact"
    );
    let objectives: Vec<(String, String)> =
        c.query("SELECT description, status FROM dionysus.objectives", &[]).await.unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(objectives, vec![("find a flat in Porto".to_string(), "completed".to_string())], "a completed objective is neither reopened nor doubled");
    let status: Value = one(c, "SELECT dionysus.reindex_status()").await;
    assert_eq!(status["result"]["extractions_failed"], json!(1), "{status}");
    assert_eq!(status["result"]["turns_kept_by_the_person"], json!(2), "{status}");
    let (code, _) = expect_error(&driver, "UPDATE dionysus.reindex_runs SET note = 'rewritten'").await;
    assert_eq!(code, "55000", "a finished run never changes");

    // A cancelled run leaves the index as it was, its staged vectors go, and it can start again.
    let second: Value = one(&driver, "SELECT dionysus.reindex_start('driver')").await;
    assert_eq!(second["resumed"], json!(false));
    let again: Value = one(&driver, "SELECT dionysus.reindex_start('driver')").await;
    assert_eq!((again["resumed"].clone(), again["run_id"].clone()), (json!(true), second["run_id"].clone()), "a second start resumes");
    let _: Option<Value> = one(c, "SELECT dionysus_internal.reindex_step(3)").await;
    assert!(one::<i64>(c, "SELECT count(*) FROM dionysus.reindex_vectors").await > 0);
    let cancelled: Value = one(&driver, "SELECT dionysus.reindex_cancel()").await;
    assert_eq!(cancelled["cancelled"], json!(true), "{cancelled}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'reindex_message' AND status IN ('pending', 'claimed')").await, 0);
    assert_eq!(one::<String>(c, "SELECT dionysus.reindex_status() ->> 'phase'").await, "cancelled");
    // The next step, with no run building, clears what the cancelled one staged.
    let _: Option<Value> = one(c, "SELECT dionysus_internal.reindex_step(1)").await;
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.reindex_vectors").await, 0, "the cancelled run's vectors are gone");
    let third: Value = one(&driver, "SELECT dionysus.reindex_start('driver')").await;
    assert_eq!((third["status"].clone(), third["resumed"].clone()), (json!("building"), json!(false)), "started again: {third}");
    let after: Vec<String> = c.query(active_facts, &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(after, facts);
}

/// The local model's int8 form (#37) is another model to the store: setting
/// `dionysus.embedding_precision = 'int8'` changes nothing stored until `reindex` moves the
/// store to it (same width: the vectors only, in one swap); then every vector is the int8
/// model's, recall answers as before, and going back to f32 takes a re-index again; `auto`
/// (the default) is always the store's own. A precision it does not know is refused naming
/// the setting.
#[tokio::test]
async fn a_move_to_the_int8_model_goes_through_a_reindex_and_keeps_recall() {
    let db = TestDb::new("reindex_int8").await;
    let c = &db.client;
    // An f32 store whatever this CPU (a new store on a CPU with VNNI starts as int8): adopted
    // while it holds nothing.
    c.batch_execute("SET dionysus.embedding_precision = 'f32'; SELECT dionysus.embedding_store_adopt(); RESET dionysus.embedding_precision")
        .await
        .unwrap();
    let auto: Value = one(c, "SELECT dionysus.embedding_info()").await;
    assert_eq!(auto["reindex_needed"], json!(false), "'auto' is the store's own precision: {auto}");
    let facts = [
        "Ada keeps bees at the bottom of her garden",
        "Ada's brother moved to Lisbon last spring",
        "Ada plays the cello every Sunday morning",
        "The spare key is under the blue flower pot",
    ];
    for f in facts {
        c.execute("SELECT dionysus.remember($1)", &[&f]).await.unwrap();
    }
    let questions = ["Which insects does Ada look after?", "Where does her brother live now?", "Where is the spare key?"];
    let mut before = Vec::new();
    for q in questions {
        before.push(one::<String>(c, &format!("SELECT content FROM dionysus.recall('{q}', 1)")).await);
    }
    let f32_key: String = one(c, "SELECT dionysus.embedding_info() ->> 'model_key'").await;
    assert!(f32_key.starts_with("local:") && !f32_key.ends_with(":int8"), "{f32_key}");

    c.batch_execute("SET dionysus.embedding_precision = 'int8'").await.unwrap();
    let info: Value = one(c, "SELECT dionysus.embedding_info()").await;
    assert_eq!(info["model_key"], json!(format!("{f32_key}:int8")), "{info}");
    assert_eq!(info["store_model_key"], json!(f32_key), "{info}");
    assert_eq!(info["reindex_needed"], json!(true), "{info}");
    // Until the run, writes embed with the store's model: the f32 vector.
    let early: uuid::Uuid = one(c, "SELECT dionysus.remember('Ada bakes bread on Fridays')").await;
    // Every session embeds with the store's model, whatever its own setting: f32 here.
    let f32_vector: String = one(c, "SELECT dionysus.embed_real('Ada bakes bread on Fridays')::vector::text").await;
    let same: f64 = one(c, &format!("SELECT (embedding <=> '{f32_vector}')::float8 FROM dionysus.memories WHERE id = '{early}'")).await;
    assert!(same < 1e-6, "a write before the re-index has the store's f32 vector (distance {same})");

    let started: Value = one(c, "SELECT dionysus.reindex_start()").await;
    assert_eq!(started["model"], json!(format!("{f32_key}:int8")), "{started}");
    let deadline = Instant::now() + Duration::from_secs(120);
    step_until_swapped(c, deadline).await;
    let info: Value = one(c, "SELECT dionysus.embedding_info()").await;
    assert_eq!(info["store_model_key"], json!(format!("{f32_key}:int8")), "{info}");
    assert_eq!(info["reindex_needed"], json!(false), "{info}");
    // Every memory's vector is now the int8 model's of its words (not the f32 one it had).
    let off: i64 = one(c, "SELECT count(*) FROM dionysus.memories WHERE (embedding <=> dionysus.embed_real(content)::vector) > 1e-6").await;
    assert_eq!(off, 0, "memories whose vector is not the int8 model's");
    let moved: f64 = one(c, &format!("SELECT (embedding <=> dionysus.embed_real('Ada bakes bread on Fridays')::vector)::float8 FROM dionysus.memories WHERE id = '{early}'")).await;
    assert!(moved < 1e-6, "{moved}");
    let apart: f64 = one(c, &format!("SELECT (embedding <=> '{f32_vector}')::float8 FROM dionysus.memories WHERE id = '{early}'")).await;
    assert!(apart > 1e-6 && apart < 0.02, "the int8 vector is near the f32 one, not it (distance {apart})");
    c.batch_execute("SET dionysus.embedding_precision = 'f32'").await.unwrap();
    let info: Value = one(c, "SELECT dionysus.embedding_info()").await;
    assert_eq!(info["reindex_needed"], json!(true), "back to f32 takes a re-index: {info}");
    c.batch_execute("SET dionysus.embedding_precision = 'auto'").await.unwrap();
    let info: Value = one(c, "SELECT dionysus.embedding_info()").await;
    assert_eq!(info["model_key"], json!(format!("{f32_key}:int8")), "'auto' follows the store: {info}");
    assert_eq!(info["reindex_needed"], json!(false), "{info}");
    c.batch_execute("SET dionysus.embedding_precision = 'int8'").await.unwrap();
    for (q, was) in questions.iter().zip(&before) {
        let now: String = one(c, &format!("SELECT content FROM dionysus.recall('{q}', 1)")).await;
        assert_eq!(&now, was, "{q}");
    }

    c.batch_execute("SET dionysus.embedding_precision = 'int4'").await.unwrap();
    let (code, msg) = expect_error(c, "SELECT dionysus.embed('anything')").await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("dionysus.embedding_precision") && msg.contains("int4"), "{msg}");
}
