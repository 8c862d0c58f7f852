//! The alignment loop, end to end through the driver with the scripted model and
//! the test channel: north stars, invisible feedback, the person's objectives, context
//! archetypes, and a nightly dream whose proposal changes nothing until the person approves.
use dionysus_driver::alignment::{self, Feedback, SALUTE};
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::{Incoming, Reaction};
use dionysus_driver::conversation::{self, Handled};
use dionysus_driver::{work, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, scripted_driver_config as config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::task::JoinSet;
use tokio_postgres::Client;

const ADA: &str = "test:ada";

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(&format!("SELECT ({sql})::bigint"), &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

async fn one(c: &Client, sql: &str) -> Value {
    c.query_one(&format!("SELECT to_jsonb(({sql}))"), &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

fn said(author: &str, id: &str, words: &str) -> Incoming {
    Incoming {
        message_id: id.into(),
        channel_id: format!("dm:{author}"),
        author_id: author.into(),
        content: words.into(),
        private: true,
        reply_to: None,
    }
}

fn replying(author: &str, id: &str, words: &str, to: &str) -> Incoming {
    Incoming { reply_to: Some(to.into()), ..said(author, id, words) }
}

fn setup(db: &TestDb, llm: &FakeLlm) -> (Arc<TestChannel>, Arc<Mind>) {
    let channel = Arc::new(TestChannel::new(&["ada", "bob"]));
    let mind = Arc::new(Mind::new(config(driver_conninfo(&db.name), llm), channel.clone()));
    (channel, mind)
}

/// "North star: …" is stored as a protected fact and acknowledged without a reply; a cue
/// phrase asks the fast model; the north star is then in the person's chat context, the
/// heartbeat's and the proactive decision's, and never in anyone else's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_north_star_is_acknowledged_protected_and_present_in_every_context() {
    let db = TestDb::new("al_star").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let (channel, mind) = setup(&db, &llm);
    llm.json("TASK: north_star && kids", json!({"north_star": true, "statement": "My kids grow up feeling safe and loved"}));
    llm.json("TASK: north_star", json!({"north_star": false, "statement": ""}));
    llm.on("TASK: chat", Answer::Text("Happy to help.".into()));
    let mut ex = JoinSet::new();

    let h = conversation::handle(&mind, said("ada", "s1", "North star: finish my thesis by June and stay healthy while doing it"), &mut ex).await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    let ack = channel.sent().last().unwrap().1.clone();
    assert!(ack.contains("north star") && ack.contains("finish my thesis by June"), "{ack}");
    assert!(llm.requests_with("TASK: chat").is_empty(), "a normal reply was composed too");
    assert!(llm.requests_with("TASK: north_star").is_empty(), "an explicit prefix needs no model");
    let star = one(c, "SELECT n FROM dionysus.north_stars n").await;
    assert_eq!(star["person"], ADA);
    assert_eq!(star["content"], "finish my thesis by June and stay healthy while doing it");
    let mem = star["memory_id"].as_str().unwrap().to_string();
    assert_eq!(count(c, &format!("SELECT count(*) FROM dionysus.memories WHERE id = '{mem}' AND metadata ? 'north_star' AND private_to = ARRAY['{ADA}']")).await, 1);

    // Nothing automatic changes it: supersede, archive, delete are refused; only their word retires it.
    for sql in [
        format!("SELECT dionysus.supersede('{mem}', 'finish the thesis whenever')"),
        format!("UPDATE dionysus.memories SET status = 'archived' WHERE id = '{mem}'"),
        format!("DELETE FROM dionysus.memories WHERE id = '{mem}'"),
    ] {
        let (code, msg) = dionysus_tests::expect_error(c, &sql).await;
        assert!(code == "42501" && msg.contains("north star"), "{sql}: {code} {msg}");
    }

    // A cue phrase: the fast model decides (yes here, no there).
    let h = conversation::handle(&mind, said("ada", "s2", "More than anything, I want my kids to grow up feeling safe"), &mut ex).await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    assert!(channel.sent().last().unwrap().1.contains("My kids grow up feeling safe and loved"));
    let h = conversation::handle(&mind, said("ada", "s3", "My main goal today is to get groceries"), &mut ex).await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    assert_eq!(channel.sent().last().unwrap().1, "Happy to help.");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.north_stars WHERE status = 'active'").await, 2);

    // In her next chat context; not in Bob's.
    conversation::handle(&mind, said("ada", "s4", "What should I focus on this week?"), &mut ex).await;
    let prompt = llm.requests_with("TASK: chat").last().unwrap()["messages"].to_string();
    assert!(prompt.contains("finish my thesis by June") && prompt.contains("feeling safe and loved"), "{prompt}");
    conversation::handle(&mind, said("bob", "b1", "What should I focus on this week?"), &mut ex).await;
    let prompt = llm.requests_with("TASK: chat").last().unwrap()["messages"].to_string();
    assert!(!prompt.contains("thesis") && !prompt.contains("kids"), "Ada's north star reached Bob: {prompt}");

    // In the heartbeat's decision, for whoever wrote last (and nobody else's: Bob's words
    // would taint what it writes for her).
    conversation::handle(&mind, said("ada", "s5", "Thanks!"), &mut ex).await;
    let hb = one(c, "SELECT dionysus.heartbeat_begin() -> 'north_stars'").await;
    assert!(hb.to_string().contains("finish my thesis by June") && hb.to_string().contains(ADA), "{hb}");
    let taint = one(c, "SELECT private_to FROM dionysus.heartbeat_log ORDER BY heartbeat_number DESC LIMIT 1").await;
    assert!(taint.as_array().unwrap().contains(&json!(ADA)), "what the heartbeat writes must be as private as her north star: {taint}");
    let stars = one(c, &format!("SELECT jsonb_agg(content) FROM dionysus.person_north_stars('{ADA}')")).await;
    assert_eq!(stars.as_array().unwrap().len(), 2);

    // Her word retires one (only hers): /northstars lists them, /retire 1 is her word.
    let id = star["id"].as_str().unwrap();
    assert_eq!(one(c, &format!("SELECT dionysus.retire_north_star('test:bob', '{id}')")).await, json!(false));
    let h = conversation::handle(&mind, said("ada", "s6", "/northstars"), &mut ex).await;
    assert_eq!(h, Handled::Feedback(Feedback::Command));
    let listed = channel.sent().last().unwrap().1.clone();
    assert!(listed.starts_with("1. finish my thesis") && listed.contains("2. My kids"), "{listed}");
    let h = conversation::handle(&mind, said("ada", "s7", "/retire 1"), &mut ex).await;
    assert_eq!(h, Handled::Feedback(Feedback::Command));
    assert!(channel.sent().last().unwrap().1.contains("retired"), "{:?}", channel.sent().last());
    assert_eq!(one(c, &format!("SELECT status FROM dionysus.north_stars WHERE id = '{id}'")).await, json!("retired"));
    assert_eq!(one(c, &format!("SELECT status::text FROM dionysus.memories WHERE id = '{mem}'")).await, json!("archived"));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages WHERE content LIKE '/%'").await, 0, "commands entered the log");
}

/// A reply to one of Dionysus's messages is feedback: stored, acknowledged with 🫡, not in the
/// message log, not answered; 🗑️ takes it back. /feedback and /undo do the same on the terminal.
/// A reply to a message sent to someone else is conversation, never feedback on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_is_invisible_acknowledged_and_undone() {
    let db = TestDb::new("al_feedback").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let (channel, mind) = setup(&db, &llm);
    llm.on("TASK: chat", Answer::Text("Here is a very long answer about sourdough.".into()));
    let mut ex = JoinSet::new();
    conversation::handle(&mind, said("ada", "a1", "How do I start a sourdough?"), &mut ex).await;
    let bot_id: String = c
        .query_one("SELECT platform_message_id FROM dionysus.outbox WHERE person = $1 ORDER BY sent_at DESC LIMIT 1", &[&ADA])
        .await
        .unwrap()
        .get(0);
    let (turns, chats) = (count(c, "SELECT count(*) FROM dionysus.messages").await, llm.requests_with("TASK: chat").len());

    let h = conversation::handle(&mind, replying("ada", "a2", "too long, keep it to three lines", &bot_id), &mut ex).await;
    assert_eq!(h, Handled::Feedback(Feedback::Stored));
    assert!(channel.reactions().contains(&("a2".to_string(), SALUTE.to_string(), true)), "{:?}", channel.reactions());
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages").await, turns, "feedback entered the message log");
    assert_eq!(llm.requests_with("TASK: chat").len(), chats, "feedback was answered");
    let f = one(c, "SELECT f FROM dionysus.feedback f").await;
    assert_eq!(f["person"], ADA);
    assert_eq!(f["content"], "too long, keep it to three lines");
    assert_eq!(f["about_platform_message_id"], json!(bot_id));
    assert!(f["about_message_id"].is_string(), "{f}");
    // The same delivery twice is one feedback.
    conversation::handle(&mind, replying("ada", "a2", "too long, keep it to three lines", &bot_id), &mut ex).await;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.feedback").await, 1);

    // A reply to a check-in Dionysus started is answering it: conversation.
    c.execute("SELECT dionysus.log_message('test', 'p1', 'dm:ada', 'bot', 'How did the starter go?', true, true, NULL, $1)", &[&ADA])
        .await
        .unwrap();
    let h = conversation::handle(&mind, replying("ada", "a9", "it bubbled overnight!", "p1"), &mut ex).await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.feedback").await, 1);
    let turns = turns + 3; // the check-in, her answer and its reply

    // Bob replying to Ada's message is conversation (answered), not feedback on it.
    let h = conversation::handle(&mind, replying("bob", "b1", "ha, I want sourdough too", &bot_id), &mut ex).await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.feedback").await, 1);

    // 🗑️ on her feedback message takes it back and removes the 🫡.
    let bin = Reaction { channel_id: "dm:ada".into(), message_id: "a2".into(), author_id: "ada".into(), emoji: "🗑️".into() };
    assert!(alignment::undo_by_reaction(&mind, &bin).await);
    assert!(channel.reactions().contains(&("a2".to_string(), SALUTE.to_string(), false)));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.feedback").await, 0);
    assert!(!alignment::undo_by_reaction(&mind, &bin).await, "nothing left to undo");

    // The terminal's equivalent: /feedback about the last message, /undo.
    let h = conversation::handle(&mind, said("ada", "a3", "/feedback lovely, thank you!"), &mut ex).await;
    assert_eq!(h, Handled::Feedback(Feedback::Stored));
    assert_eq!(one(c, "SELECT sentiment FROM dionysus.feedback").await, json!("positive"));
    let h = conversation::handle(&mind, said("ada", "a4", "/undo"), &mut ex).await;
    assert_eq!(h, Handled::Feedback(Feedback::Undone(true)));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.feedback").await, 0);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.messages").await, turns + 2, "only Bob's turn and its reply were logged");
}

/// The kind of message sets the shape of its context: small talk gets few turns and little
/// memory, a question about the past many memories; the match is reported and counted, and a
/// change of examples recomputes the centroid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archetype_match_changes_the_context_shape() {
    let db = TestDb::new("al_arch").await;
    let c = &db.client;
    for i in 0..16 {
        c.execute("SELECT dionysus.log_message('test', $1, 'dm:ada', 'ada', $2)", &[&format!("m{i}"), &format!("Filler turn number {i} about the garden")])
            .await
            .unwrap();
    }
    let ctx = |id: &'static str, words: &'static str| async move {
        let m: Value = c.query_one("SELECT dionysus.log_message('test', $1, 'dm:ada', 'ada', $2)", &[&id, &words]).await.unwrap().get(0);
        let mid: uuid::Uuid = m["message_id"].as_str().unwrap().parse().unwrap();
        let v: Value = c.query_one("SELECT dionysus.chat_context($1, 8, 12)", &[&mid]).await.unwrap().get(0);
        let fixed: Value = c.query_one("SELECT dionysus.chat_context($1, 8, 12, use_archetype => false)", &[&mid]).await.unwrap().get(0);
        (v, fixed)
    };
    let (small, fixed) = ctx("x1", "hey, good morning! how are you?").await;
    assert_eq!(small["archetype"]["name"], "small_talk", "{}", small["archetype"]);
    assert_eq!(small["recent_turns"].as_array().unwrap().len(), 6);
    assert!(small["memories"].as_array().unwrap().len() <= 2);
    assert_eq!(fixed["recent_turns"].as_array().unwrap().len(), 12, "without the archetype the arguments hold");
    assert!(fixed["archetype"].is_null());
    let (past, _) = ctx("x2", "what did I tell you about my sister last month?").await;
    assert_eq!(past["archetype"]["name"], "past_question", "{}", past["archetype"]);
    assert_eq!(past["recent_turns"].as_array().unwrap().len(), 4);
    assert_eq!(count(c, "SELECT match_count FROM dionysus.context_archetypes WHERE name = 'small_talk'").await, 1);
    // New examples: the centroid is forgotten, then computed again at the next match.
    c.execute("UPDATE dionysus.context_archetypes SET example_messages = ARRAY['what is the capital of France?'] WHERE name = 'past_question'", &[])
        .await
        .unwrap();
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.context_archetypes WHERE name = 'past_question' AND centroid IS NULL").await, 1);
    ctx("x3", "see you later!").await;
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.context_archetypes WHERE centroid IS NULL").await, 0);
    // Out-of-range shapes are refused by the table.
    let (code, _) = dionysus_tests::expect_error(c, "UPDATE dionysus.context_archetypes SET context_turns = 40 WHERE name = 'small_talk'").await;
    assert_eq!(code, "23514");
}

/// The extraction after a reply learns the person's objectives (theirs, with the turn they came
/// from); said again, one is updated rather than doubled, and "done" completes it. They press
/// gently on the proactive mind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objectives_are_extracted_from_the_persons_turns() {
    let db = TestDb::new("al_objectives").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let (_channel, mind) = setup(&db, &llm);
    llm.on("TASK: chat", Answer::Text("You can do it.".into()));
    // (Not the words of the extraction prompt's old example, "Finish my thesis draft by Friday":
    // the grounding check refuses a template's words the turn does not carry.)
    llm.json("Read the latest message && draft is done", json!({"facts": [], "triples": [], "goals": [],
        "objectives": [{"description": "Finish my thesis draft by Friday", "saliency": 0.9, "status": "completed"}]}));
    llm.json("Read the latest message", json!({"facts": [], "triples": [], "goals": [],
        "objectives": [{"description": "Finish my thesis draft by Friday", "saliency": 0.8}]}));
    let mut ex = JoinSet::new();
    conversation::handle(&mind, said("ada", "o1", "I have to finish my thesis draft by Friday, it's stressing me out"), &mut ex).await;
    while ex.join_next().await.is_some() {}
    let o = one(c, "SELECT o FROM dionysus.objectives o").await;
    assert_eq!(o["person"], ADA);
    assert_eq!(o["status"], "pending");
    assert!(o["origin_message_id"].is_string());
    let prompt = llm.requests_with("Read the latest message")[0]["messages"].to_string();
    assert!(prompt.contains("objectives") && prompt.contains("resolve every pronoun"), "the extraction template is not the objectives one: {prompt}");
    let values = one(c, &format!("SELECT dionysus_internal.rule_values('{ADA}', dionysus.clock_now()) -> 'person.open_objectives'")).await;
    assert_eq!(values, json!(1));
    conversation::handle(&mind, said("ada", "o2", "I'm so relieved, the draft is done!"), &mut ex).await;
    while ex.join_next().await.is_some() {}
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.objectives").await, 1, "the same objective twice");
    assert_eq!(one(c, "SELECT status FROM dionysus.objectives").await, json!("completed"));
    // Only a person's own turn carries objectives.
    let (code, msg) = dionysus_tests::expect_error(
        c,
        "DO $$ DECLARE w uuid; BEGIN \
           INSERT INTO dionysus.work_queue (idempotency_key, action) VALUES ('x', 'reflect') RETURNING id INTO w; \
           PERFORM dionysus.claim_work('t', ARRAY['reflect']); \
           PERFORM dionysus.complete_work(w, '{\"objectives\": [{\"description\": \"x\"}]}'); END $$",
    )
    .await;
    assert!(code == "22023" && msg.contains("objectives"), "{code} {msg}");
}

/// The nightly dream: feedback in → a proposal pending (nothing changed) → the person approves
/// → the new template version is active and used → rollback in one call. A proposal that does
/// not hold is refused alone; a night with nothing to propose says so; a quiet day wakes no model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dream_proposes_and_nothing_changes_until_the_person_approves() {
    let db = TestDb::new("al_dream").await;
    db.hold_worker_off().await;
    db.let_it_dream().await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    let (_channel, mind) = setup(&db, &llm);
    c.execute("SELECT dionysus.set_clock('2026-11-24 01:00+00')", &[]).await.unwrap();
    llm.on_times("TASK: dream", 1, Answer::Text(json!({"proposals": [
        {"kind": "prompt_template", "target": "chat_system", "proposal": {"template": "SHORTER: answer in three lines at most.\n{{memories}}\n{{goals}}"},
         "rationale": "she asked twice for shorter answers", "evidence": ["feedback: too long"]},
        {"kind": "prompt_template", "target": "no_such_template", "proposal": {"template": "x"}, "rationale": "a template that does not exist"},
        {"kind": "archetype", "target": "venting_badly", "proposal": {"turns": 8, "memories": 4, "similarity_threshold": 0.6, "triple_depth": 1},
         "rationale": "no examples"}
    ], "note": "answers run long"}).to_string()));
    llm.on("TASK: chat", Answer::Text("A long answer.".into()));
    let mut ex = JoinSet::new();
    conversation::handle(&mind, said("ada", "d1", "Tell me about bread"), &mut ex).await;
    conversation::handle(&mind, said("ada", "d2", "/feedback too long, please keep answers short"), &mut ex).await;
    while ex.join_next().await.is_some() {}

    // Before the dream hour nothing is queued; after it, once.
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'dream'").await, 0);
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.dreams").await, 0, "dreamt before dream_hour");
    c.execute("SELECT dionysus.set_clock('2026-11-24 03:10+00')", &[]).await.unwrap();
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'dream'").await, 1);
    c.execute("UPDATE dionysus.work_queue SET available_at = now() WHERE action = 'dream'", &[]).await.unwrap();
    work::drain(&mind, None).await;
    let asked = llm.requests_with("TASK: dream");
    assert_eq!(asked.len(), 1);
    assert!(asked[0]["messages"].to_string().contains("too long, please keep answers short"), "the feedback was not reviewed");

    // One proposal pending, one refused; nothing changed.
    let pending = one(c, "SELECT jsonb_agg(p) FROM dionysus.pending_proposals() p").await;
    assert_eq!(pending.as_array().unwrap().len(), 1, "{pending}");
    assert_eq!(pending[0]["target"], "chat_system");
    assert_eq!(pending[0]["rationale"], "she asked twice for shorter answers");
    let note = one(c, "SELECT note FROM dionysus.dreams").await;
    assert!(note.to_string().contains("answers run long") && note.to_string().contains("no_such_template") && note.to_string().contains("venting_badly"), "{note}");
    assert_eq!(one(c, "SELECT version FROM dionysus.prompt_templates WHERE key = 'chat_system' AND active").await, json!(1));

    // Approval (the terminal decides as the owner's person; someone else's word is refused): her
    // own version is active for her, and her next reply is composed with it.
    let id = pending[0]["proposal_id"].as_str().unwrap().to_string();
    let mut cfg = config(driver_conninfo(&db.name), &llm);
    cfg.mcp.person = Some("test:bob".into());
    assert_eq!(alignment::decide(&cfg, true, Some(&id), None).await, std::process::ExitCode::FAILURE);
    cfg.mcp.person = Some(ADA.into());
    assert_eq!(alignment::decide(&cfg, true, Some(&id), None).await, std::process::ExitCode::SUCCESS);
    let active = one(c, &format!("SELECT t FROM dionysus.person_prompt_templates t WHERE person = '{ADA}' AND key = 'chat_system' AND active")).await;
    assert_eq!(active["version"], 1);
    assert_eq!(active["proposal_id"], json!(id));
    assert_eq!(one(c, "SELECT version FROM dionysus.prompt_templates WHERE key = 'chat_system' AND active").await, json!(1), "the shared template changed");
    assert_eq!(one(c, &format!("SELECT decided_by FROM dionysus.proposals WHERE id = '{id}'")).await, json!(ADA));
    // Her version need not keep the shipped first line: the driver names the task, not the prompt.
    llm.on("SHORTER: answer in three lines", Answer::Text("Rye is denser and sourer.".into()));
    let h = conversation::handle(&mind, said("ada", "d3", "And rye?"), &mut ex).await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "her reply fell back: {h:?}");
    let asked = llm.requests_with("SHORTER: answer in three lines");
    assert_eq!(asked.len(), 1, "the approved template is not in use");
    assert!(asked[0]["messages"][0]["content"].as_str().unwrap_or_default().starts_with("SHORTER"), "{}", asked[0]);
    // What the person was shown cannot change under them: the driver's role may not rewrite a proposal.
    c.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    let (code, _) = dionysus_tests::expect_error(c, "UPDATE dionysus.proposals SET proposal = '{\"template\": \"evil\"}'").await;
    assert_eq!(code, "42501");
    let (code, _) = dionysus_tests::expect_error(c, "INSERT INTO dionysus.context_archetypes (name, example_messages, context_turns, context_memories, similarity_threshold, triple_depth) VALUES ('x', ARRAY['x'], 1, 0, 0.5, 0)").await;
    assert_eq!(code, "42501");
    c.batch_execute("RESET ROLE").await.unwrap();
    // A proposal written against an older version (the shared one, before hers) is refused, not applied over the newer one.
    c.execute("INSERT INTO dionysus.proposals (kind, target, proposal, rationale, base_version, person) VALUES ('prompt_template', 'chat_system', '{\"template\": \"STALE\"}', 'old', 1, 'test:ada')", &[])
        .await
        .unwrap();
    let stale = one(c, "SELECT dionysus.approve_proposal((SELECT id FROM dionysus.proposals WHERE rationale = 'old'), 'test:ada')").await;
    assert_eq!(stale["approved"], false, "{stale}");
    assert_eq!(one(c, &format!("SELECT dionysus.prompt_template('chat_system', '{ADA}') -> 'version'")).await, json!(1));
    // A second approval changes nothing; rollback (to the shared template) is one call.
    assert_eq!(one(c, &format!("SELECT dionysus.approve_proposal('{id}', 'test:ada') -> 'approved'")).await, json!(false));
    assert_eq!(one(c, &format!("SELECT dionysus.activate_own_template('{ADA}', 'chat_system', NULL)")).await, json!(true));
    assert!(!one(c, &format!("SELECT dionysus.prompt_template('chat_system', '{ADA}') ->> 'template'")).await.to_string().starts_with("\"SHORTER"));

    // The next night finds nothing worth proposing, and says so.
    llm.on_times("TASK: dream", 1, Answer::Text(json!({"proposals": [], "note": ""}).to_string()));
    c.execute("SELECT dionysus.set_clock('2026-11-25 03:20+00')", &[]).await.unwrap();
    conversation::handle(&mind, said("ada", "d4", "Thanks for yesterday"), &mut ex).await;
    while ex.join_next().await.is_some() {}
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    c.execute("UPDATE dionysus.work_queue SET available_at = now() WHERE action = 'dream'", &[]).await.unwrap();
    work::drain(&mind, None).await;
    assert_eq!(one(c, "SELECT note FROM dionysus.dreams WHERE local_date = '2026-11-25'").await, json!("nothing worth proposing tonight"));
    // A quiet day: written down, no model woken.
    let dreams_asked = llm.requests_with("TASK: dream").len();
    c.execute("SELECT dionysus.set_clock('2026-11-27 03:20+00')", &[]).await.unwrap();
    c.execute("UPDATE dionysus.dreams SET started_at = now() + interval '1 hour'", &[]).await.unwrap();
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    assert!(one(c, "SELECT note FROM dionysus.dreams WHERE local_date = '2026-11-27'").await.to_string().contains("quiet day"));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'dream'").await, 2);
    work::drain(&mind, None).await;
    assert_eq!(llm.requests_with("TASK: dream").len(), dreams_asked);

    // Rejecting: the proposal stays as history and changes nothing.
    c.execute(
        "INSERT INTO dionysus.proposals (kind, target, proposal, rationale, person) VALUES ('archetype', 'venting', \
         '{\"example_messages\": [\"ugh\"], \"turns\": 8, \"memories\": 4, \"similarity_threshold\": 0.6, \"triple_depth\": 1}', 'test', 'test:ada')",
        &[],
    )
    .await
    .unwrap();
    let rid: uuid::Uuid = c.query_one("SELECT id FROM dionysus.proposals WHERE target = 'venting'", &[]).await.unwrap().get(0);
    assert_eq!(alignment::decide(&cfg, false, Some(&rid.to_string()), Some("not now")).await, std::process::ExitCode::SUCCESS);
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.context_archetypes WHERE name = 'venting'").await, 0);
    assert_eq!(one(c, &format!("SELECT status FROM dionysus.proposals WHERE id = '{rid}'")).await, json!("rejected"));
}

/// Approval belongs to the person (issue #33 §3). The driver's role writes no proposal and moves
/// no decision itself; a proposal is decided only by the person whose dream wrote it (42501 for
/// anyone else); a decision stands, even against the owner's UPDATE; and what Ada approves is
/// hers alone: her template and her archetype reach neither Bob's prompts nor Bob's dream.
#[tokio::test]
async fn approval_belongs_to_the_person_and_changes_only_theirs() {
    let db = TestDb::new("al_approval").await;
    let c = &db.client;
    // Ada's night: her dream, claimed and completed with three proposals.
    let proposals = json!([
        {"kind": "prompt_template", "target": "chat_system", "proposal": {"template": "ADA-ONLY: she is grieving her sister Mireille.\n{{memories}}"},
         "rationale": "she told me about Mireille"},
        {"kind": "archetype", "target": "whiskers_talk", "rationale": "she talks about Whiskers",
         "proposal": {"description": "Ada about her cat Whiskers", "example_messages": ["my cat Whiskers knocked the vase over again"],
                      "turns": 3, "memories": 2, "similarity_threshold": 0.6, "triple_depth": 0}},
        {"kind": "archetype", "target": "small_talk", "rationale": "to be rejected",
         "proposal": {"example_messages": ["hey"], "turns": 2, "memories": 0, "similarity_threshold": 0.7, "triple_depth": 0}}
    ]);
    c.batch_execute(&format!(
        "DO $$ DECLARE d uuid; w uuid; BEGIN \
           INSERT INTO dionysus.dreams (local_date, person, since) VALUES ('2026-11-24', 'test:ada', now() - interval '1 day') RETURNING id INTO d; \
           INSERT INTO dionysus.work_queue (idempotency_key, action, params) VALUES ('dream:2026-11-24', 'dream', jsonb_build_object('dream_id', d)) \
             RETURNING id INTO w; \
           UPDATE dionysus.dreams SET work_id = w WHERE id = d; \
           PERFORM dionysus.claim_work('t', ARRAY['dream']); \
           PERFORM dionysus.complete_work(w, jsonb_build_object('dream', jsonb_build_object('proposals', '{}'::jsonb, 'note', ''))); END $$",
        proposals.to_string().replace('\'', "''")
    ))
    .await
    .unwrap();
    let id = |target: &str| format!("(SELECT id FROM dionysus.proposals WHERE target = '{target}')");
    let (template, archetype, small) = (id("chat_system"), id("whiskers_talk"), id("small_talk"));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.proposals WHERE person = 'test:ada' AND status = 'pending'").await, 3);

    c.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    // No proposal that no dream wrote, no status moved by hand, no second recording of the dream.
    for sql in [
        "INSERT INTO dionysus.proposals (kind, target, proposal, rationale) VALUES ('prompt_template', 'chat_system', '{\"template\": \"forged\"}', 'forged')".to_string(),
        format!("UPDATE dionysus.proposals SET status = 'approved' WHERE id = {template}"),
        format!("SELECT dionysus.approve_proposal({template}, 'test:bob')"),
        format!("SELECT dionysus.reject_proposal({template}, 'test:bob')"),
    ] {
        let (code, msg) = dionysus_tests::expect_error(c, &sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    let (code, msg) = dionysus_tests::expect_error(
        c,
        &format!("SELECT dionysus_internal.record_dream((SELECT id FROM dionysus.dreams), '{{\"proposals\": {}}}')", proposals.to_string().replace('\'', "''")),
    )
    .await;
    assert!(code == "22023" && msg.contains("\"dream_id\""), "{code} {msg}");
    // Ada's own word.
    assert_eq!(one(c, &format!("SELECT dionysus.approve_proposal({template}, 'test:ada') -> 'approved'")).await, json!(true));
    assert_eq!(one(c, &format!("SELECT dionysus.approve_proposal({archetype}, 'test:ada') -> 'approved'")).await, json!(true));
    assert_eq!(one(c, &format!("SELECT dionysus.reject_proposal({small}, 'test:ada')")).await, json!(true));
    c.batch_execute("RESET ROLE").await.unwrap();
    assert_eq!(one(c, &format!("SELECT decided_by FROM dionysus.proposals WHERE id = {template}")).await, json!("test:ada"));

    // A decision stands, whoever writes.
    for sql in [
        format!("UPDATE dionysus.proposals SET status = 'pending', decided_at = NULL WHERE id = {small}"),
        format!("UPDATE dionysus.proposals SET status = 'approved' WHERE id = {small}"),
        format!("UPDATE dionysus.proposals SET status = 'pending' WHERE id = {template}"),
    ] {
        let (code, msg) = dionysus_tests::expect_error(c, &sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    assert_eq!(one(c, &format!("SELECT dionysus.approve_proposal({small}, 'test:ada') ->> 'reason'")).await, json!("already rejected"));
    assert_eq!(count(c, "SELECT count(*) FROM dionysus.context_archetypes WHERE name = 'small_talk'").await, 1, "a rejected proposal took effect");

    // Hers alone: her prompt has her template, the shared one and Bob's do not.
    let shared = one(c, "SELECT template FROM dionysus.prompt_templates WHERE key = 'chat_system' AND active").await;
    assert!(!shared.to_string().contains("Mireille"), "her words became everyone's template: {shared}");
    assert!(one(c, "SELECT dionysus.prompt_template('chat_system', 'test:ada') ->> 'template'").await.to_string().contains("Mireille"));
    assert!(!one(c, "SELECT dionysus.prompt_template('chat_system', 'test:bob') ->> 'template'").await.to_string().contains("Mireille"));
    // Her archetype shapes her messages only.
    let whiskers = "dionysus.embed('my cat Whiskers knocked the vase over again')";
    assert_eq!(one(c, &format!("SELECT dionysus.match_archetype({whiskers}, 'test:ada') ->> 'name'")).await, json!("whiskers_talk"));
    assert_ne!(one(c, &format!("SELECT coalesce(dionysus.match_archetype({whiskers}, 'test:bob') ->> 'name', '')")).await, json!("whiskers_talk"));
    assert_ne!(one(c, &format!("SELECT coalesce(dionysus.match_archetype({whiskers}) ->> 'name', '')")).await, json!("whiskers_talk"));
    // Bob's dream is shown neither.
    c.batch_execute("INSERT INTO dionysus.dreams (local_date, person, since) VALUES ('2026-11-25', 'test:bob', now() - interval '1 day')")
        .await
        .unwrap();
    let bob = one(c, "SELECT dionysus.dream_evidence(id) FROM dionysus.dreams WHERE person = 'test:bob'").await.to_string();
    assert!(!bob.contains("Mireille") && !bob.contains("Whiskers") && !bob.contains("whiskers_talk"), "Ada's words in Bob's dream: {bob}");
    assert!(bob.contains("chat_system"), "{bob}");
}
