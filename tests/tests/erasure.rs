//! A person can leave (#33 §2, sql/031_erasure.sql): two people talk through the real driver
//! with the scripted model (their own conversations and a shared one), and one of them leaves.
//! export_person shows what is theirs and nobody else's; forget_person, called by the driver's
//! role, erases it: a scan of every text, jsonb and array column of every table in both schemas
//! (from the catalog, not a list) finds none of their words, while the other person's are all
//! there and the episode they shared is summarised again from what remains. `/forgetme` asks
//! first and erases only the speaking person, after `/forgetme confirm`.
use dionysus_driver::alignment::Feedback;
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::conversation::{self, Handled};
use dionysus_driver::{forgetme, work, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::task::JoinSet;
use tokio_postgres::Client;

const ADA: &str = "test:ada";
const BOB: &str = "test:bob";
/// Words only Ada ever says (each its own English stem, so the lexicon holds it as written).
const HERS: [&str; 2] = ["zorblax", "vexmoor"];
/// Words only Bob says.
const HIS: &str = "quantelope";

async fn say(mind: &Arc<Mind>, channel: &str, author: &str, id: &str, words: &str, private: bool) -> Handled {
    let turn = Incoming { message_id: id.into(), channel_id: channel.into(), author_id: author.into(), content: words.into(), private, reply_to: None };
    let mut ex = JoinSet::new();
    let handled = conversation::handle(mind, turn, &mut ex).await;
    while ex.join_next().await.is_some() {}
    handled
}

/// Every column of every table in dionysus and dionysus_internal whose text holds `needle`
/// (case-insensitive): text, varchar, jsonb, tsvector, arrays of them; found in the catalog.
async fn scan(c: &Client, needle: &str) -> Vec<String> {
    let columns = c
        .query(
            "SELECT format('%I.%I', n.nspname, k.relname), quote_ident(a.attname), format('%s.%s.%s', n.nspname, k.relname, a.attname)
               FROM pg_attribute a JOIN pg_class k ON k.oid = a.attrelid JOIN pg_namespace n ON n.oid = k.relnamespace
               JOIN pg_type t ON t.oid = a.atttypid
              WHERE n.nspname IN ('dionysus', 'dionysus_internal') AND k.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
                AND t.typcategory IN ('S', 'U', 'A') AND t.typname NOT IN ('vector', '_vector')
              ORDER BY 1, 2",
            &[],
        )
        .await
        .unwrap();
    assert!(columns.len() > 100, "the catalog lists only {} columns", columns.len());
    let mut hits = Vec::new();
    for col in columns {
        let (table, column, name): (String, String, String) = (col.get(0), col.get(1), col.get(2));
        let n: i64 = c
            .query_one(&format!("SELECT count(*) FROM {table} WHERE {column}::text ILIKE '%' || $1 || '%'"), &[&needle])
            .await
            .unwrap_or_else(|e| panic!("{table}.{column}: {e}"))
            .get(0);
        if n > 0 {
            hits.push(name);
        }
    }
    hits
}

/// Whether the embedding cache holds the vector of these exact words (it is keyed by their hash).
async fn cached(c: &Client, words: &str) -> bool {
    c.query_one("SELECT EXISTS (SELECT 1 FROM dionysus.embedding_cache WHERE content_hash = sha256(convert_to($1, 'UTF8')))", &[&words])
        .await
        .unwrap()
        .get(0)
}

fn script(llm: &FakeLlm) {
    let extract = "Latest message from the user:\\n";
    llm.json(&format!("{extract}My friend Zorblax"), json!({
        "facts": [{"content": "Ada's friend Zorblax lives in Vexmoor", "subject": "Zorblax", "category": "people", "confidence": 0.9}],
        "triples": [{"subject": "Zorblax", "predicate": "lives_in", "object": "Vexmoor", "confidence": 0.9}],
        "goals": [],
        "people": [{"name": "Zorblax", "relation": "friend", "feeling": 0.8, "traits": ["bakes vexmoor bread"]}],
        "objectives": [{"description": "visit Zorblax in Vexmoor this summer", "saliency": 0.7, "status": "pending"}]}));
    llm.json(&format!("{extract}My dog Quantelope"), json!({
        "facts": [{"content": "Bob's dog is called Quantelope", "subject": "Quantelope", "category": "pets", "confidence": 0.9}],
        "triples": [{"subject": "Quantelope", "predicate": "is_a", "object": "dog", "confidence": 0.9}],
        "goals": []}));
    llm.json(extract, json!({"facts": [], "triples": [], "goals": []}));
    llm.json("TASK: summarize_episode && Zorblax says hello && Quantelope says woof", json!({
        "summary": "Ada passed on Zorblax's hello from Vexmoor; Bob answered for Quantelope.", "outcome": "success", "surprise": 0.2,
        "lessons": ["Zorblax greetings cheer the group"]}));
    llm.json("TASK: summarize_episode && My friend Zorblax", json!({
        "summary": "Ada told me about Zorblax in Vexmoor.", "outcome": "success", "surprise": 0.1, "lessons": ["Ask about Zorblax"]}));
    llm.json("TASK: summarize_episode", json!({
        "summary": "Bob talked about Quantelope.", "outcome": "neutral", "surprise": 0.1, "lessons": []}));
    llm.json("TASK: extract_concepts", json!({"memories": []}));
    llm.on("TASK: chat", Answer::Text("Noted, thank you.".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_who_leaves_leaves_no_word_behind_and_the_others_keep_theirs() {
    let db = TestDb::new("erasure").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    script(&llm);
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone()));

    // Ada: her friend (a fact, a triple, a person in her life, an objective), a north star and
    // feedback; Bob: his dog; then both of them in a shared channel.
    say(&mind, "dm:ada", "ada", "a1", "My friend Zorblax lives in Vexmoor and bakes the best bread.", true).await;
    say(&mind, "dm:ada", "ada", "a2", "North star: keep the Zorblax friendship alive, whatever Vexmoor says", true).await;
    let fb = say(&mind, "dm:ada", "ada", "a3", "/feedback the Zorblax answer was too long", true).await;
    assert_eq!(fb, Handled::Feedback(Feedback::Stored));
    say(&mind, "dm:bob", "bob", "b1", "My dog Quantelope loves the beach.", true).await;
    say(&mind, "home", "ada", "g1", "Zorblax says hello to everyone from Vexmoor!", false).await;
    say(&mind, "home", "bob", "g2", "Quantelope says woof back.", false).await;
    // A censor and a rule of each, in their words; Ada asks her memory something (an MCP
    // client's recall); a heartbeat sees them both.
    c.batch_execute(&format!(
        "SELECT dionysus.add_censor('talking about Zorblax at night', 'Vexmoor sleeps early', 'warn', '{ADA}');
         SELECT dionysus.add_censor('mentioning Quantelope baths', 'he hates them', 'warn', '{BOB}');
         SELECT dionysus.add_rule('{ADA}', 'remind me to call Zorblax on Sundays', jsonb_build_object('name', 'call Zorblax', 'trigger', 'tick',
                'intents', jsonb_build_array(jsonb_build_object('request_contact', 'call Zorblax in Vexmoor'))));
         SELECT count(*) FROM dionysus.recall('where does zorblax live', 5, person => '{ADA}');"
    ))
    .await
    .unwrap();
    // (A transaction of its own: heartbeat_state comes before a person's row in the lock order,
    // and the scheduler's pass, which takes them in that order, deadlocked with the batch above.)
    c.batch_execute("SELECT dionysus.heartbeat_begin()").await.unwrap();
    // A night of hers: the dream's proposal from her feedback, approved as her own template version.
    c.batch_execute(&format!(
        "WITH d AS (INSERT INTO dionysus.dreams (local_date, person, since, finished_at, note)
                    VALUES (current_date, '{ADA}', now() - interval '1 day', now(), 'she found the Zorblax answer long') RETURNING id),
              p AS (INSERT INTO dionysus.proposals (dream_id, kind, target, proposal, rationale, evidence, person)
                    SELECT d.id, 'prompt_template', 'chat_system', jsonb_build_object('template', 'Be brief about Zorblax.'),
                           'Ada said the Zorblax answer was too long', '[]', '{ADA}' FROM d RETURNING id)
         INSERT INTO dionysus.person_prompt_templates (person, key, version, template, temperature, proposal_id)
         SELECT '{ADA}', 'chat_system', 1, 'Be brief about Zorblax in Vexmoor.', 0.7, p.id FROM p;"
    ))
    .await
    .unwrap();
    // The episodes close and are summarised; the maintenance pass and the lexicon catch up.
    c.batch_execute(
        "UPDATE dionysus.episodes SET ended_at = now() - interval '1 hour', last_event_at = now() - interval '1 hour',
                started_at = now() - interval '2 hours';
         SELECT dionysus.enqueue_language_work();",
    )
    .await
    .unwrap();
    work::drain(&mind, None).await;
    c.batch_execute("SELECT dionysus.run_maintenance(); SELECT dionysus.refresh_lexicon();").await.unwrap();
    let group: String = one(c, "SELECT id::text FROM dionysus.episodes WHERE source = 'conversation:test:home'").await;
    let shared: Value = one(c, &format!("SELECT to_jsonb(e) FROM dionysus.episodes e WHERE id = '{group}'")).await;
    assert!(shared["summary"].as_str().unwrap_or("").contains("Zorblax"), "the shared episode was not summarised: {shared}");
    assert_eq!(shared["participants"], json!([ADA, BOB]));
    let bobs_turns: i64 = one(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{BOB}'")).await;

    // A model's placeholder, refused by the grounding check against one of her turns: the
    // refusal is recorded with her words as its source (sql/032_grounding.sql).
    let refused: Option<String> = one(
        c,
        &format!("SELECT dionysus.check_model_text('fact', '<the fact>', 'My friend Zorblax lives in Vexmoor and bakes the best bread.', NULL, ARRAY['{ADA}'])"),
    )
    .await;
    assert!(refused.is_some(), "the placeholder was not refused");

    // The scan is meaningful: her words are in every kind of place before she leaves.
    let before = scan(c, HERS[0]).await;
    for place in ["dionysus.messages.content", "dionysus.memories.content", "dionysus.entities.name", "dionysus.known_persons.name",
                  "dionysus.objectives.description", "dionysus.north_stars.content", "dionysus.feedback.content", "dionysus.censors.trigger",
                  "dionysus.mind_rules.words", "dionysus.episodes.summary", "dionysus.lexicon.lexeme", "dionysus.work_queue.result",
                  "dionysus.proposals.rationale", "dionysus.person_prompt_templates.template", "dionysus.dreams.note",
                  "dionysus.model_text_refusals.source"] {
        assert!(before.contains(&place.to_string()), "{place} does not hold her words before: {before:?}");
    }
    assert!(cached(c, "where does zorblax live").await, "her question is not in the embedding cache");

    // What she may take with her: hers, and nothing of Bob's.
    let export: Value = one(c, &format!("SELECT dionysus.export_person('{ADA}')")).await;
    let text = export.to_string();
    assert!(text.contains("My friend Zorblax lives in Vexmoor") && text.contains("Ada's friend Zorblax lives in Vexmoor"), "{text}");
    for key in ["messages", "memories", "triples", "people_in_their_life", "north_stars", "objectives", "feedback", "censors", "rules", "episodes",
                "refused_model_text"] {
        assert!(export[key].as_array().is_some_and(|a| !a.is_empty()), "export_person has no {key}: {}", export[key]);
    }
    assert!(!text.to_lowercase().contains(HIS), "Bob's words in Ada's export: {text}");
    let theirs = export["episodes"].as_array().unwrap().iter().find(|e| e["id"] == json!(group)).expect("the shared episode is hers too");
    assert_eq!((theirs["others"].clone(), theirs["summary"].clone()), (json!(1), Value::Null), "{theirs}");

    // She leaves, at her request, through the driver's role.
    let driver = db.connect_as_driver().await;
    let gone: Value = driver.query_one("SELECT dionysus.forget_person($1)", &[&ADA]).await.unwrap().get(0);
    assert!(gone["forgotten"]["messages"].as_i64().unwrap() >= 6, "{gone}");
    for needle in HERS {
        let after = scan(c, needle).await;
        assert!(after.is_empty(), "{needle} is still in {after:?}");
    }
    let keyed = scan(c, ADA).await;
    assert!(keyed.is_empty(), "her person key is still in {keyed:?}");
    assert!(!cached(c, "where does zorblax live").await, "her question's vector is still cached");
    assert!(!cached(c, "My friend Zorblax lives in Vexmoor and bakes the best bread.").await);

    // Bob keeps everything of his.
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{BOB}'")).await, bobs_turns);
    let his = scan(c, HIS).await;
    for place in ["dionysus.messages.content", "dionysus.memories.content", "dionysus.entities.name", "dionysus.censors.trigger",
                  "dionysus.episodes.summary"] {
        assert!(his.contains(&place.to_string()), "{place} lost Bob's words: {his:?}");
    }
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.triples WHERE private_to = ARRAY['{BOB}']")).await, 1);
    // The shared episode forgot its summary and is summarised again from his turns.
    let shared: Value = one(c, &format!("SELECT to_jsonb(e) FROM dionysus.episodes e WHERE id = '{group}'")).await;
    assert_eq!((shared["summary"].clone(), shared["participants"].clone()), (Value::Null, json!([BOB])), "{shared}");
    c.batch_execute("SELECT dionysus.enqueue_language_work()").await.unwrap();
    let queued: i64 = one(c, &format!("SELECT count(*) FROM dionysus.work_queue WHERE idempotency_key = 'summarize_episode:{group}' AND status = 'pending'")).await;
    assert_eq!(queued, 1, "the shared episode is not summarised again");
    // Nothing of hers through recall, chat_context or status.
    let found: i64 = one(c, &format!("SELECT count(*) FROM dionysus.recall('Zorblax in Vexmoor', 50, person => '{BOB}')
                                       WHERE content ILIKE '%zorblax%'")).await;
    assert_eq!(found, 0);
    let bob_turn: String = one(c, "SELECT id::text FROM dionysus.messages WHERE platform_message_id = 'g2'").await;
    let ctx: Value = one(c, &format!("SELECT dionysus.chat_context('{bob_turn}')")).await;
    assert!(!ctx.to_string().to_lowercase().contains("zorblax"), "{ctx}");
    assert_eq!(one::<Value>(c, &format!("SELECT dionysus.person_status('{ADA}') -> 'own_memories'")).await, json!(0));

    // Nobody left to forget or export: said so, with the argument named.
    for sql in [format!("SELECT dionysus.forget_person('{ADA}')"), format!("SELECT dionysus.export_person('{ADA}')"),
                "SELECT dionysus.forget_person('test:nobody')".to_string()] {
        let (code, msg) = expect_error(&driver, &sql).await;
        assert!(code == "P0002" && msg.contains("\"person\""), "{sql}: {code} {msg}");
    }
    let (code, msg) = expect_error(&driver, "SELECT dionysus.forget_person('  ')").await;
    assert!(code == "22023" && msg.contains("\"person\""), "{code} {msg}");
    // Not anyone's to call: PUBLIC may not.
    let public: bool = one(c, "SELECT has_function_privilege('public', 'dionysus.forget_person(text)', 'EXECUTE')").await;
    assert!(!public, "PUBLIC may erase people");
}

/// `/forgetme` asks; only `/forgetme confirm` after it erases, and only the speaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetme_asks_first_and_erases_only_the_speaker() {
    let db = TestDb::new("forgetme").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    script(&llm);
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone()));
    let last = |ch: &TestChannel| ch.sent().last().unwrap().1.clone();
    say(&mind, "dm:ada", "ada", "a1", "My friend Zorblax lives in Vexmoor and bakes the best bread.", true).await;
    say(&mind, "dm:bob", "bob", "b1", "My dog Quantelope loves the beach.", true).await;
    let turns = "SELECT count(*) FROM dionysus.messages";
    let before: i64 = one(c, turns).await;

    // A confirmation nobody asked for erases nothing; Bob's ask is not Ada's.
    assert_eq!(say(&mind, "dm:bob", "bob", "f1", "/forgetme", true).await, Handled::Feedback(Feedback::Command));
    assert_eq!(last(&channel), forgetme::ASK);
    assert_eq!(say(&mind, "dm:ada", "ada", "f2", "/forgetme confirm", true).await, Handled::Feedback(Feedback::Command));
    assert_eq!(last(&channel), forgetme::NOT_ASKED);
    assert_eq!(one::<i64>(c, turns).await, before, "a command became a turn, or something was erased");

    // Ada asks, then confirms: everything of hers goes, Bob's stays.
    say(&mind, "dm:ada", "ada", "f3", "/forgetme", false).await;
    assert_eq!(last(&channel), forgetme::ASK);
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{ADA}'")).await, 2, "asking erased already");
    say(&mind, "dm:ada", "ada", "f4", "/forgetme confirm", true).await;
    assert_eq!(last(&channel), forgetme::DONE);
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{ADA}'")).await, 0);
    assert!(scan(c, HERS[0]).await.is_empty());
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{BOB}'")).await, 2);
    // A second confirmation needs a second ask.
    say(&mind, "dm:ada", "ada", "f5", "/forgetme confirm", true).await;
    assert_eq!(last(&channel), forgetme::NOT_ASKED);
}

/// The real binary on the terminal: `/forgetme`, then `/forgetme confirm`, erases the terminal's
/// person; before that, `dionysus export PERSON --out FILE` writes their record, readable by its
/// owner only, and a person of whom nothing is stored is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exports_and_forgets_the_terminals_person() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let db = TestDb::new("forgetme_bin").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Text("Noted, thank you.".into()));
    llm.json("TASK: extract", json!({"facts": [{"content": "Their friend Zorblax lives in Vexmoor", "subject": "Zorblax"}], "triples": [], "goals": []}));
    let bin = env!("CARGO_BIN_EXE_dionysus-bench").replace("dionysus-bench", "dionysus");
    assert!(std::path::Path::new(&bin).exists(), "build the driver first: {bin}");
    let dionysus = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.args(args)
            .env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name))
            .env("DIONYSUS_LLM_BASE_URL", &llm.base_url)
            .env("DIONYSUS_TERMINAL_USER", "ada")
            .env("DIONYSUS_LOG", "info")
            .env_remove("DIONYSUS_DISCORD_TOKEN")
            .env_remove("DISCORD_TOKEN")
            .env_remove("DIONYSUS_CONFIG")
            .kill_on_drop(true);
        cmd
    };
    let mut child = dionysus(&["chat", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn dionysus");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut say = async |id: &str, text: &str| -> String {
        stdin.write_all(format!("{}\n", json!({"id": id, "text": text})).as_bytes()).await.unwrap();
        let line = tokio::time::timeout(Duration::from_secs(60), out.next_line()).await.expect("no answer").unwrap().unwrap();
        serde_json::from_str::<Value>(&line).unwrap()["text"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(say("t1", "My friend Zorblax lives in Vexmoor.").await, "Noted, thank you.");
    let person = "terminal:ada";

    // The export, before: their words, in a file only its owner may read.
    let file = std::env::temp_dir().join(format!("{}.json", db.name));
    let done = dionysus(&["export", person, "--out", file.to_str().unwrap()]).output().await.unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(exported["person"], json!(person));
    assert!(exported["messages"].to_string().contains("My friend Zorblax lives in Vexmoor."), "{exported}");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    std::fs::remove_file(&file).unwrap();
    let stranger = dionysus(&["export", "terminal:nobody"]).output().await.unwrap();
    assert!(!stranger.status.success() && String::from_utf8_lossy(&stranger.stderr).contains("\"person\""),
            "{}", String::from_utf8_lossy(&stranger.stderr));

    // Asked, then confirmed: nothing of theirs is left.
    assert_eq!(say("t2", "/forgetme").await, forgetme::ASK);
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{person}'")).await, 2);
    assert_eq!(say("t3", "/forgetme confirm").await, forgetme::DONE);
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.messages WHERE person = '{person}'")).await, 0);
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    for needle in HERS {
        let left = scan(c, needle).await;
        assert!(left.is_empty(), "{needle} is still in {left:?}");
    }
}
