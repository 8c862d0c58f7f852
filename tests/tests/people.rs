//! The people in a person's life (#13 §6, sql/023_people.sql), through the real driver with the
//! scripted model: the extraction after each turn fills them; two names for one person become
//! one when the conversation says so; "dinner with my boss and my sister" brings in how those
//! two get along; person(name) says what is known and where it came from; and nothing one
//! person said about their people reaches anyone else.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::alignment::Feedback;
use dionysus_driver::conversation::{self, Handled};
use dionysus_driver::Mind;
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::task::JoinSet;

const ADA: &str = "test:ada";

/// One turn of a direct conversation, handled with its extraction finished.
async fn say(mind: &Arc<Mind>, ex: &mut JoinSet<()>, author: &str, id: &str, words: &str) -> Handled {
    let turn = Incoming { message_id: id.into(), channel_id: format!("dm:{author}"), author_id: author.into(), content: words.into(), private: true, reply_to: None };
    let handled = conversation::handle(mind, turn, ex).await;
    while ex.join_next().await.is_some() {}
    handled
}

/// Later turns' rules first: a later extraction prompt holds the earlier turns too.
fn script(llm: &FakeLlm) {
    let extract = "Latest message from the user:\\n"; // as the JSON of the messages spells it
    llm.json(&format!("{extract}Dinner tonight"), json!({"facts": [], "triples": [], "goals": []}));
    llm.json(&format!("{extract}My boss Marco"), json!({"facts": [], "triples": [], "goals": [],
        "people": [{"name": "Marco", "relation": "boss", "feeling": -0.3, "traits": ["demanding"]}, {"name": "Lea", "relation": "sister"}],
        "relations": [{"a": "Marco", "b": "my sister", "kind": "can't stand each other", "sentiment": -0.7, "source": "said"}]}));
    llm.json(&format!("{extract}Oh, Ana is my mother"), json!({"facts": [], "triples": [], "goals": [],
        "people": [{"name": "Ana", "aliases": ["Mom"], "relation": "mother", "feeling": 0.8}]}));
    llm.json(&format!("{extract}Ana sent me"), json!({"facts": [], "triples": [], "goals": [],
        "people": [{"name": "Ana", "topics": ["her garden"]}]}));
    llm.json(&format!("{extract}My mom called"), json!({"facts": [], "triples": [], "goals": [],
        "people": [{"name": "Mom", "relation": "mother", "feeling": 0.4, "traits": ["worrier"]},
                   {"name": "Lea", "relation": "sister", "feeling": 0.9},
                   {"name": "user", "relation": "self"}],
        "relations": [{"a": "Mom", "b": "Lea", "kind": "worries about", "sentiment": -0.2, "source": "said"},
                      {"a": "user", "b": "Lea", "kind": "loves"}]}));
    llm.json(extract, json!({"facts": [], "triples": [], "goals": []}));
    llm.on("TASK: chat", Answer::Text("Good luck tonight.".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_are_extracted_merged_brought_into_context_and_kept_to_their_person() {
    let db = TestDb::new("people").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    script(&llm);
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone()));
    let mut ex = JoinSet::new();
    say(&mind, &mut ex, "ada", "p1", "My mom called again, she keeps worrying about my sister Lea.").await;
    let people: Value = one(c, "SELECT jsonb_agg(name ORDER BY name) FROM dionysus.known_persons").await;
    assert_eq!(people, json!(["Lea", "Mom"]), "the person themselves is nobody in their own life");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.person_relations").await, 1, "a relation to the person is their relation, not an edge");
    let prompt = llm.requests_with("Latest message from the user:\\nMy mom called")[0]["messages"].to_string();
    assert!(prompt.contains("\\\"people\\\"") && prompt.contains("same_as"), "the extraction template does not ask for people: {prompt}");

    // A second name, then the turn that says they are one person: one row, every alias kept.
    say(&mind, &mut ex, "ada", "p2", "Ana sent me her garden photos.").await;
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.known_persons").await, 3, "Ana is someone new until they say otherwise");
    say(&mind, &mut ex, "ada", "p3", "Oh, Ana is my mother by the way, I never said.").await;
    let ana: Value = one(c, &format!("SELECT dionysus.person('my mother', of_person => '{ADA}')")).await;
    assert_eq!(ana.as_array().unwrap().len(), 1, "{ana}");
    let ana = &ana[0];
    assert_eq!((ana["name"].as_str(), ana["relation"].as_str()), (Some("Ana"), Some("mother")), "{ana}");
    assert_eq!(ana["aliases"], json!(["Ana"]), "a relation word is never an alias: 'Mom' is whoever is her mother");
    assert_eq!(ana["mentions"], json!(3));
    assert_eq!((ana["traits"].clone(), ana["topics"].clone()), (json!(["worrier"]), json!(["her garden"])));
    // Recent words weigh more: 0.6 · 0.4 + 0.4 · 0.8.
    assert_eq!(ana["feeling"], json!(0.56));
    assert_eq!(ana["relations"][0]["with"], json!("Lea"));
    let sources = ana["sources"].as_array().unwrap();
    let merged = sources.iter().find(|s| s["what"] == "merged").unwrap_or_else(|| panic!("no merge recorded: {ana}"));
    assert!(merged["said"].as_str().unwrap().starts_with("Oh, Ana is my mother"), "{merged}");
    assert!(sources.iter().any(|s| s["what"] == "trait" && s["value"] == "worrier" && s["said"].as_str().unwrap().starts_with("My mom called")), "{ana}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.known_persons").await, 2);

    // How two of them get along, then a message naming both by their relation.
    say(&mind, &mut ex, "ada", "p4", "My boss Marco and my sister can't stand each other.").await;
    say(&mind, &mut ex, "ada", "p5", "Dinner tonight with my boss and my sister, wish me luck.").await;
    let msg: String = one(c, "SELECT id::text FROM dionysus.messages WHERE content LIKE 'Dinner tonight%'").await;
    let ctx: Value = one(c, &format!("SELECT dionysus.chat_context('{msg}')")).await;
    let named: Vec<&str> = ctx["people"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(named, vec!["Lea", "Marco"], "{}", ctx["people"]);
    let marco = &ctx["people"][1];
    assert_eq!(marco["relations"][0]["kind"], json!("can_t_stand_each_other"));
    assert_eq!(marco["relations"][0]["with"], json!("Lea"));
    assert_eq!(marco["relations"][0]["source"], json!("said"));
    let prompt = llm.requests_with("TASK: chat").last().unwrap()["messages"].to_string();
    assert!(prompt.contains("Marco (their boss)") && prompt.contains("can t stand each other Lea"), "the chat prompt lacks them: {prompt}");

    // Bob's boss and sister are not Ada's: nothing of hers in his context or his lookup.
    say(&mind, &mut ex, "bob", "b1", "Dinner tonight with my boss and my sister.").await;
    let prompt = llm.requests_with("TASK: chat").last().unwrap()["messages"].to_string();
    assert!(!prompt.contains("Marco") && !prompt.contains("Lea") && !prompt.contains("stand each other"), "Ada's people reached Bob: {prompt}");
    let (code, msg) = expect_error(c, "SELECT dionysus.person('Lea', of_person => 'test:bob')").await;
    assert_eq!(code, "P0002", "{msg}");
    assert!(msg.contains("\"name\""), "{msg}");
    let bob_msg: String = one(c, "SELECT id::text FROM dionysus.messages WHERE person = 'test:bob' AND NOT is_bot").await;
    assert_eq!(one::<Value>(c, &format!("SELECT dionysus.chat_context('{bob_msg}') -> 'people'")).await, json!([]));
    assert_eq!(one::<Value>(c, "SELECT dionysus.people_of('test:bob')").await, json!([]));

    // Her own view, never a turn: /people lists them, /who says where it came from, /people
    // forget N forgets (only hers: Bob's forget of her person's id is refused).
    let last = |ch: &TestChannel| ch.sent().last().unwrap().1.clone();
    assert_eq!(say(&mind, &mut ex, "ada", "c1", "/people").await, Handled::Feedback(Feedback::Command));
    assert_eq!(last(&channel), "1. Ana (mother), mentioned 3 times\n2. Lea (sister), mentioned 2 times\n3. Marco (boss), mentioned 1 times");
    say(&mind, &mut ex, "ada", "c2", "/who my mom").await;
    let who = last(&channel);
    assert!(who.starts_with("Ana (mother)") && who.contains("also: Ana\n") && who.contains("from \"Oh, Ana is my mother"), "{who}");
    // Never in a shared channel: Bob would read who is in her life.
    let shared = Incoming { message_id: "c2g".into(), channel_id: "home".into(), author_id: "ada".into(), content: "/who my mom".into(),
                            private: false, reply_to: None };
    assert_eq!(conversation::handle(&mind, shared, &mut ex).await, Handled::Feedback(Feedback::Command));
    assert!(last(&channel).starts_with("(ask me that in a direct message"), "{}", last(&channel));
    say(&mind, &mut ex, "bob", "c3", "/who Ana").await;
    assert_eq!(last(&channel), "(I don't know anyone you call Ana)");
    let marco: String = one(c, "SELECT id::text FROM dionysus.known_persons WHERE name = 'Marco'").await;
    assert!(!one::<bool>(c, &format!("SELECT dionysus.forget_known_person('test:bob', '{marco}')")).await, "Bob forgot Ada's Marco");
    say(&mind, &mut ex, "ada", "c4", "/people forget 3").await;
    assert!(last(&channel).starts_with("(forgotten: Marco"), "{}", last(&channel));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.known_persons").await, 2);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.person_relations").await, 1, "Marco's relations went with him");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.messages WHERE content LIKE '/%'").await, 0, "commands entered the log");
}

/// complete_work takes people and relations only from the extraction of a person's turn, in
/// their shapes, and all or nothing; person() names its argument.
#[tokio::test]
async fn people_input_is_checked_and_half_a_turn_is_never_written() {
    let db = TestDb::new("people_input").await;
    let c = &db.client;
    let d = db.connect_as_driver().await;
    let item = |action: &str, params: &str, result: &str| {
        format!(
            "DO $$ DECLARE w uuid; BEGIN \
               INSERT INTO dionysus.work_queue (idempotency_key, action, params) VALUES (gen_random_uuid()::text, '{action}', '{params}') RETURNING id INTO w; \
               PERFORM dionysus.claim_work('t', ARRAY['{action}']); \
               PERFORM dionysus.complete_work(w, '{result}'); END $$"
        )
    };
    let turn = r#"{"person": "test:ada"}"#;
    for (action, params, result, code, needle) in [
        ("reflect", "{}", r#"{"people": [{"name": "Lea"}]}"#, "22023", "result.people"),
        ("extract_message", turn, r#"{"people": "Lea"}"#, "22P02", "result.people"),
        ("extract_message", turn, r#"{"people": [{"name": "Lea"}, {"name": "Tom", "feeling": 3}]}"#, "22023", "result.people.feeling"),
        ("extract_message", turn, r#"{"people": [{"name": ""}]}"#, "22023", "result.people.name"),
        ("extract_message", turn, r#"{"people": [{"name": "Lea", "traits": [1]}]}"#, "22023", "result.people.traits"),
        ("extract_message", turn, r#"{"people": [{"name": "Lea"}], "relations": [{"a": "Lea", "b": "Tom", "kind": 5}]}"#, "22023", "result.relations.kind"),
        ("extract_message", turn, r#"{"people": [{"name": "Lea", "feeling": 1e400}]}"#, "22023", "result.people.feeling"),
        ("extract_message", turn, r#"{"relations": [{"a": "Lea", "b": "Tom", "kind": "friends", "source": "rumour"}]}"#, "22023", "result.relations.source"),
    ] {
        let (got, msg) = expect_error(&d, &item(action, params, result)).await;
        assert_eq!(got, code, "{result}: {msg}");
        assert!(msg.contains(needle), "{result}: {msg}");
    }
    // One person's turn never writes another's people (the item's person must be the turn's).
    let bo_turn: String = one(c, "SELECT dionysus.log_message('test', 'b1', 'dm:bo', 'bo', 'My sister Lea visited.') ->> 'message_id'").await;
    c.batch_execute("DELETE FROM dionysus.work_queue").await.unwrap(); // its own extraction: not what this claims
    let params = format!(r#"{{"person": "test:ada", "message_id": "{bo_turn}"}}"#);
    let (code, msg) = expect_error(&d, &item("extract_message", &params, r#"{"people": [{"name": "Lea"}]}"#)).await;
    assert_eq!(code, "42501", "{msg}");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.known_persons").await, 0, "a refused turn wrote someone");
    // Whose life a row is in is fixed; everyone's people at once are the owner's view.
    let (code, _) = expect_error(&d, "UPDATE dionysus.known_persons SET of_person = 'test:bo'").await;
    assert_eq!(code, "42501");
    let (code, msg) = expect_error(&d, "SELECT dionysus.person('Lea')").await;
    assert_eq!(code, "42501", "{msg}");
    // A relation that cannot be placed is skipped and said so; the rest of the turn is kept.
    d.batch_execute(&item("extract_message", turn, r#"{"facts": [{"content": "Lea plays the cello", "subject": "Lea"}], "people": [{"name": "Lea"}], "relations": [{"a": "Lea", "b": "🙂", "kind": "!!"}]}"#))
        .await
        .expect("a turn with an unplaceable relation");
    let applied: Value = one(c, "SELECT result -> 'applied' FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'").await;
    assert_eq!((applied["people"].as_array().map(Vec::len), applied["relations_skipped"].as_i64()), (Some(1), Some(1)), "{applied}");
    assert_eq!(applied["facts"].as_array().map(Vec::len), Some(1), "{applied}");
    let (code, msg) = expect_error(c, "SELECT dionysus.person('  ,, ')").await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("\"name\""), "{msg}");
    // The driver's role may not change the words for relations.
    let (code, _) = expect_error(&d, "INSERT INTO dionysus.relation_words VALUES ('bestie', 'friend')").await;
    assert_eq!(code, "42501");
}
