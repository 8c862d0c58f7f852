//! Episodes that end with what they meant (#13 §7, sql/024_episodes.sql), through the driver's
//! language work with the scripted model: a closed episode gains its participants (its people,
//! not the model's word), outcome, surprise and lessons; a failed one proposes censors to its
//! one person, in force only once they keep one; an episode of several people proposes none.
use dionysus_driver::alignment::Feedback;
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::conversation::{self, Handled};
use dionysus_driver::{work, Mind};
use dionysus_tests::fake_llm::FakeLlm;
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::task::JoinSet;

const ADA: &str = "test:ada";

async fn command(mind: &Arc<Mind>, channel: &TestChannel, id: &str, words: &str) -> String {
    let m = Incoming { message_id: id.into(), channel_id: "dm:ada".into(), author_id: "ada".into(), content: words.into(), private: true, reply_to: None };
    let handled = conversation::handle(mind, m, &mut JoinSet::new()).await;
    assert_eq!(handled, Handled::Feedback(Feedback::Command), "{words}");
    channel.sent().last().unwrap().1.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_episode_proposes_censors_that_hold_only_once_kept() {
    let db = TestDb::new("episodes").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    // Ada's conversation went wrong; so did one in a group she shares with Bob.
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'a1', 'dm:ada', 'ada', 'You made a joke about my job again and it really hurt.'); \
         SELECT dionysus.log_message('test', 'a2', 'dm:ada', 'bot', 'I am sorry, that was careless of me.', true); \
         SELECT dionysus.log_message('test', 'g1', 'group', 'ada', 'Who is bringing the cake on Saturday?'); \
         SELECT dionysus.log_message('test', 'g2', 'group', 'bob', 'Not me, and your reminder came at midnight.'); \
         SELECT dionysus.add_censor('mentioning the weather', 'she finds it dull', 'warn', 'test:ada'); \
         UPDATE dionysus.episodes SET ended_at = now() - interval '10 minutes', last_event_at = now() - interval '10 minutes', \
                started_at = now() - interval '20 minutes'; \
         SELECT dionysus.enqueue_language_work();",
    )
    .await
    .unwrap();
    llm.json("TASK: summarize_episode && joke about my job", json!({
        "summary": "Ada was hurt by another joke about her job; I apologised.", "outcome": "failure", "surprise": 0.7,
        "lessons": ["Do not joke about her work", "Apologise plainly"],
        "censor_candidates": [{"trigger": "joking about her job", "reason": "it hurt her, twice"},
                              {"trigger": "Mentioning the weather", "reason": "already a censor"}]}));
    llm.json("TASK: summarize_episode", json!({
        "summary": "Ada and Bob sorted out the cake; a reminder came at midnight.", "outcome": "failure", "surprise": 0.4,
        "lessons": ["Mind the hour"], "censor_candidates": [{"trigger": "sending reminders at night", "reason": "Bob was woken"}]}));
    llm.json("TASK: extract_concepts", json!({"memories": []}));
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": []}));
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), channel.clone()));
    work::drain(&mind, None).await;
    let prompt = llm.requests_with("TASK: summarize_episode")[0]["messages"].to_string();
    assert!(prompt.contains("censor_candidates") && prompt.contains("outcome"), "the summary template does not ask how it went: {prompt}");

    let dm: Value = one(c, "SELECT to_jsonb(e) FROM dionysus.episodes e WHERE source = 'conversation:test:dm:ada'").await;
    assert_eq!(dm["participants"], json!([ADA]), "its people, not the model's word");
    assert_eq!((&dm["outcome"], &dm["surprise"]), (&json!("failure"), &json!(0.7)));
    assert_eq!(dm["lessons"], json!(["Do not joke about her work", "Apologise plainly"]));
    let group: Value = one(c, "SELECT to_jsonb(e) FROM dionysus.episodes e WHERE source = 'conversation:test:group'").await;
    assert_eq!(group["participants"], json!([ADA, "test:bob"]));
    assert_eq!(group["outcome"], json!("failure"));

    // One proposal for Ada (the censor she has is not proposed twice), none from the group.
    let proposed: Value = one(c, "SELECT jsonb_agg(to_jsonb(p)) FROM dionysus.proposed_censors('test:ada') p").await;
    assert_eq!(proposed.as_array().map(Vec::len), Some(1), "{proposed}");
    assert_eq!(proposed[0]["trigger"], json!("joking about her job"));
    assert_eq!(proposed[0]["episode_id"], dm["id"]);
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors WHERE status = 'proposed'").await, 1, "a group's failure proposed a rule");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.proposed_censors('test:bob')").await, 0);
    // Not in force: it matches nothing until she keeps it.
    let holds = "SELECT count(*) FROM dionysus.check_censors('joking about her job', 'reply', 'test:ada')";
    assert_eq!(one::<i64>(c, holds).await, 0, "a proposal held without her word");

    // Her word, in chat: listed apart; Bob cannot keep it for her; she keeps it.
    let listed = command(&mind, &channel, "c1", "/censors").await;
    assert!(listed.starts_with("1. mentioning the weather [warn]") && listed.contains("Proposed after something went wrong")
            && listed.contains("1. joking about her job — it hurt her, twice"), "{listed}");
    let id = proposed[0]["censor_id"].as_str().unwrap().to_string();
    let (code, _) = expect_error(c, &format!("SELECT dionysus.accept_censor('{id}', 'test:bob')")).await;
    assert_eq!(code, "42501");
    // Not in a shared channel: the reasons are hers.
    let shared = Incoming { message_id: "c1g".into(), channel_id: "home".into(), author_id: "ada".into(), content: "/censors".into(),
                            private: false, reply_to: None };
    assert_eq!(conversation::handle(&mind, shared, &mut JoinSet::new()).await, Handled::Feedback(Feedback::Command));
    let said = channel.sent().last().unwrap().1.clone();
    assert!(said.starts_with("(ask me that in a direct message") && !said.contains("hurt"), "{said}");
    assert!(command(&mind, &channel, "c2", "/censor keep 1").await.starts_with("(kept: \"joking about her job\""));
    assert_eq!(one::<i64>(c, holds).await, 1);
    let kept: Value = one(c, &format!("SELECT to_jsonb(x) FROM dionysus.censors x WHERE id = '{id}'")).await;
    assert_eq!((kept["status"].as_str(), kept["severity"].as_str(), kept["origin"].as_str()), (Some("active"), Some("warn"), Some("episode")));
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.censor_events WHERE censor_id = '{id}' AND event IN ('proposed', 'accepted')")).await, 2);
    assert!(!command(&mind, &channel, "c3", "/censors").await.contains("Proposed"));
}

/// result.episode only from a summarize_episode item, in its shape; a success proposes
/// nothing whatever the model says; /censor drop N drops a proposal.
#[tokio::test]
async fn episode_outcomes_are_checked_and_only_a_failure_proposes() {
    let db = TestDb::new("episodes_input").await;
    let c = &db.client;
    let d = db.connect_as_driver().await;
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'a1', 'dm:ada', 'ada', 'That answer was wrong and I missed my train.'); \
         DELETE FROM dionysus.work_queue;",
    )
    .await
    .unwrap();
    let episode: String = one(c, "SELECT id::text FROM dionysus.episodes").await;
    let complete = |action: &str, result: &str| {
        format!(
            "DO $$ DECLARE w uuid; BEGIN \
               INSERT INTO dionysus.work_queue (idempotency_key, action, params) \
               VALUES (gen_random_uuid()::text, '{action}', '{{\"episode_id\": \"{episode}\"}}') RETURNING id INTO w; \
               PERFORM dionysus.claim_work('t', ARRAY['{action}']); \
               PERFORM dionysus.complete_work(w, '{result}'); END $$"
        )
    };
    for (action, result, needle) in [
        ("reflect", r#"{"episode": {"outcome": "failure"}}"#, "result.episode"),
        ("summarize_episode", r#"{"episode": {"outcome": "great"}}"#, "result.episode.outcome"),
        ("summarize_episode", r#"{"episode": {"outcome": "failure", "surprise": 2}}"#, "result.episode.surprise"),
        ("summarize_episode", r#"{"episode": {"outcome": "failure", "censor_candidates": [{"trigger": "x"}]}}"#, "result.episode.censor_candidates"),
    ] {
        let (code, msg) = expect_error(&d, &complete(action, result)).await;
        assert_eq!(code, "22023", "{result}: {msg}");
        assert!(msg.contains(needle), "{result}: {msg}");
    }
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.episodes WHERE outcome IS NOT NULL").await, 0, "a refused result wrote");
    d.batch_execute(&complete("summarize_episode", r#"{"episode": {"outcome": "success", "censor_candidates": [{"trigger": "giving train times", "reason": "x"}]}}"#))
        .await
        .unwrap();
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors").await, 0, "a success proposed a censor");
    d.batch_execute(&complete("summarize_episode", r#"{"episode": {"outcome": "failure", "censor_candidates": [{"trigger": "giving train times from memory", "reason": "she missed her train"}]}}"#))
        .await
        .unwrap();
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.censors WHERE status = 'proposed' AND person = 'test:ada'").await, 1);
    // The driver's role writes no censor of its own, proposed or not.
    let (code, _) = expect_error(&d, "INSERT INTO dionysus.censors (trigger, embedding, model_key, reason, origin, status) \
                                      SELECT 'x', dionysus.embed('x'), 'm', 'y', 'episode', 'proposed'").await;
    assert_eq!(code, "42501");
    let id: String = one(c, "SELECT id::text FROM dionysus.censors").await;
    assert!(one::<bool>(c, &format!("SELECT dionysus.retire_censor('{id}', 'test:ada')")).await, "dropping a proposal");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.proposed_censors('test:ada')").await, 0);
    // What she dropped is not proposed again by the next failure.
    d.batch_execute(&complete("summarize_episode", r#"{"episode": {"outcome": "failure", "censor_candidates": [{"trigger": "Giving train times from memory", "reason": "again"}]}}"#))
        .await
        .unwrap();
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.proposed_censors('test:ada')").await, 0, "a dropped proposal came back");
    // An imported history's failures were another assistant's: they propose nothing.
    c.batch_execute("UPDATE dionysus.episodes SET source = 'imported:x'").await.unwrap();
    d.batch_execute(&complete("summarize_episode", r#"{"episode": {"outcome": "failure", "censor_candidates": [{"trigger": "quoting prices", "reason": "wrong"}]}}"#))
        .await
        .unwrap();
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.proposed_censors('test:ada')").await, 0, "an imported failure proposed a censor");
}

/// Two people whose MCP clients share a name (or who both write to the default source) never
/// share an episode, so no summary's prompt holds both people's words (issue #33 §3): episodes
/// are kept by person as well as source. One person's memories still make one episode, and a
/// conversation's channel stays its people's shared one.
#[tokio::test]
async fn two_peoples_memories_of_one_source_are_two_episodes() {
    let db = TestDb::new("episodes_person").await;
    let c = &db.client;
    let episode = |words: &str| {
        format!("SELECT em.episode_id FROM dionysus.episode_memories em JOIN dionysus.memories m ON m.id = em.memory_id WHERE m.content = '{words}'")
    };
    for source in ["'mcp:claude'", "NULL"] {
        let tag = if source == "NULL" { "default" } else { "mcp" };
        c.batch_execute(&format!(
            "SELECT dionysus.remember('Ada {tag} one', 'episodic', source => {source}, private_to => ARRAY['test:ada']); \
             SELECT dionysus.remember('Bob {tag} one', 'episodic', source => {source}, private_to => ARRAY['test:bob']); \
             SELECT dionysus.remember('Ada {tag} two', 'episodic', source => {source}, private_to => ARRAY['test:ada']); \
             SELECT dionysus.remember('Bob {tag} two', 'episodic', source => {source}, private_to => ARRAY['test:bob']);"
        ))
        .await
        .unwrap();
        let (ada, ada2): (uuid::Uuid, uuid::Uuid) = (one(c, &episode(&format!("Ada {tag} one"))).await, one(c, &episode(&format!("Ada {tag} two"))).await);
        let (bob, bob2): (uuid::Uuid, uuid::Uuid) = (one(c, &episode(&format!("Bob {tag} one"))).await, one(c, &episode(&format!("Bob {tag} two"))).await);
        assert_ne!(ada, bob, "Ada's and Bob's words in one episode of {source}");
        assert_eq!((ada, bob), (ada2, bob2), "one person's memories of {source} split");
        let transcript: Value = one(c, &format!("SELECT dionysus.episode_transcript('{ada}')")).await;
        assert!(!transcript.to_string().contains("Bob"), "{transcript}");
    }
    // A group's channel: one episode of its people.
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'g1', 'group', 'ada', 'Who brings the cake?'); \
         SELECT dionysus.log_message('test', 'g2', 'group', 'bob', 'I will.');",
    )
    .await
    .unwrap();
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.episodes WHERE source = 'conversation:test:group'").await, 1);
}
