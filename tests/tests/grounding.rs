//! Grounding (#35): a model that copies its prompt's placeholders or invents what nobody said
//! gets nothing stored, through the real driver with the scripted model; every refusal is
//! recorded with its inputs (model_text_refusals). A heartbeat decision without its keys takes
//! the default decision. Prompt templates carry their answer's JSON Schema; what complete_work
//! decides by action is the work_actions table (#34).
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::{conversation, heartbeat, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::task::JoinSet;

/// What each kind of refusal refused, "kind: value" sorted.
async fn refusals(c: &tokio_postgres::Client) -> Vec<String> {
    let v: Value = one(c, "SELECT coalesce(jsonb_agg(kind || ': ' || value), '[]') FROM dionysus.model_text_refusals").await;
    let mut all: Vec<String> = serde_json::from_value(v).unwrap();
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extraction_of_placeholders_and_inventions_stores_only_what_the_person_said() {
    let db = TestDb::new("grounding_extract").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let llm = FakeLlm::start().await;
    // The shape a small model copies from the prompt, beside one true fact and one invention.
    llm.json("TASK: extract", json!({
        "facts": [{"content": "a self-contained statement", "subject": "who or what it is about"},
                  {"content": "The user works as a pilot in Lisbon", "subject": "user"},
                  {"content": "The user's dog is called Rex", "subject": "user"}],
        "triples": [{"subject": "user", "predicate": "lives_in", "object": "Lisbon"},
                    {"subject": "user", "predicate": "has_dog", "object": "Rex"}],
        "goals": [{"title": "something the user explicitly asked you to do or follow up on", "description": "details"}],
        "people": [{"name": "a person's name", "aliases": ["<another name>"]}],
        "focus": "what the conversation is about right now, in a few words"}));
    llm.on("TASK: chat", Answer::Text("Rex sounds lovely.".into()));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), Arc::new(TestChannel::new(&["ada"]))));
    let turn = Incoming { message_id: "m1".into(), channel_id: "dm:ada".into(), author_id: "ada".into(),
                          content: "My dog is called Rex, and I live in Porto.".into(), private: true, reply_to: None };
    let mut jobs = JoinSet::new();
    conversation::handle(&mind, turn, &mut jobs).await;
    while jobs.join_next().await.is_some() {}

    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'").await, 1);
    let facts: Value = one(c, "SELECT jsonb_agg(m.content) FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id").await;
    assert_eq!(facts, json!(["The user's dog is called Rex"]));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.triples").await, 1, "user lives_in Lisbon was stored");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.triples_about('Rex') WHERE predicate = 'has_dog'").await, 1);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.goals").await, 0);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.known_persons").await, 0);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.working_memories WHERE focus IS NOT NULL").await, 0);
    assert_eq!(refusals(c).await, vec![
        "fact: The user works as a pilot in Lisbon", "fact: a self-contained statement",
        "focus: what the conversation is about right now, in a few words",
        "goal: something the user explicitly asked you to do or follow up on", "person: a person's name", "triple: Lisbon"]);
    // Each refusal says why and keeps what it was checked against, private to the person.
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.model_text_refusals WHERE source = 'My dog is called Rex, and I live in Porto. (said by test:ada)' \
                         AND private_to = ARRAY['test:ada'] AND work_id IS NOT NULL AND reason <> ''").await, 6);
    let why: String = one(c, "SELECT reason FROM dionysus.model_text_refusals WHERE value = 'The user works as a pilot in Lisbon'").await;
    assert!(why.contains("not in the source turn"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_decision_takes_the_default_and_placeholder_identity_beliefs_and_narrative_are_not_stored() {
    let db = TestDb::new("grounding_heartbeat").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    llm.json("TASK: heartbeat", json!({}));
    llm.json("TASK: reflect", json!({"insights": [], "identity": [{"aspect": "I am ...", "confidence": 0.6}],
                                     "worldview": [{"belief": "...", "confidence": 0.6}]}));
    llm.json("TASK: narrative", json!({"narrative": "...", "emotional_valence": 0.0}));
    let mind = Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), Arc::new(TestChannel::new(&["ada"])));
    let r = heartbeat::run_once(&mind).await.expect("heartbeat");
    assert_eq!(r.decided_by, "default", "an empty object is no decision");
    assert!(r.actions.contains(&"reflect".to_string()), "{:?}", r.actions);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.identity_aspects").await, 0);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.worldview_beliefs").await, 0);
    let narrative: String = one(c, "SELECT narrative FROM dionysus.heartbeat_log").await;
    assert!(narrative.starts_with("Heartbeat "), "{narrative}");
    assert_eq!(refusals(c).await, vec!["belief: ...", "identity: I am ...", "narrative: ..."]);
}

#[tokio::test]
async fn templates_carry_their_answers_schema_and_the_action_table_says_what_each_result_may_carry() {
    let db = TestDb::new("grounding_schema").await;
    let c = &db.client;
    let t: Value = one(c, "SELECT dionysus.prompt_template('extract_message')").await;
    assert_eq!(t["result_schema"]["required"], json!(["facts", "triples", "goals"]));
    assert_eq!(t["result_schema"]["properties"]["facts"]["items"]["required"], json!(["content"]));
    let t: Value = one(c, "SELECT dionysus.prompt_template('chat_system')").await;
    assert_eq!(t["result_schema"], Value::Null);
    // A version the person writes keeps the task's schema.
    c.batch_execute("SELECT dionysus.set_prompt_template('narrative', 'TASK: narrative\nSay what happened as JSON.')").await.unwrap();
    let t: Value = one(c, "SELECT dionysus.prompt_template('narrative')").await;
    assert_eq!(t["result_schema"]["required"], json!(["narrative"]));
    // Every JSON task the shipped templates name has a schema.
    let missing: Value = one(c, "SELECT coalesce(jsonb_agg(DISTINCT key), '[]') FROM dionysus.prompt_templates \
                                  WHERE active AND result_schema IS NULL AND template ~ 'JSON' AND key <> 'heartbeat_user'").await;
    assert_eq!(missing, json!([]));
    // A key only another action carries is refused, naming who carries it.
    let (code, msg) = dionysus_tests::expect_error(c,
        "DO $$ DECLARE w uuid; BEGIN \
           INSERT INTO dionysus.work_queue (idempotency_key, action) VALUES ('g1', 'brainstorm_goals') RETURNING id INTO w; \
           PERFORM dionysus.claim_work_item(w, 't'); PERFORM dionysus.complete_work(w, '{\"dream\": {\"proposals\": []}}'); END $$").await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("result.dream") && msg.contains("only dream carry"), "{msg}");
    let web: Value = one(c, "SELECT jsonb_agg(action ORDER BY action) FROM dionysus.work_actions WHERE provenance = 'web'").await;
    assert_eq!(web, json!(["inquire_deep", "inquire_shallow"]));
}
