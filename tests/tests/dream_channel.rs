//! The dream channel (#12 §5), end to end through the running driver, the scripted model and
//! the test channel (cards, button presses and forms as events): every autonomous activity is
//! mirrored as a card with its prompt and metrics, only its person sees and decides it, a
//! stranger's press is refused, the conversation never waits on the mirror, and a dream's
//! proposal changes nothing until the person's button approves it.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::{Answer, Card};
use dionysus_driver::config::Config;
use dionysus_driver::conversation::Handled;
use dionysus_driver::mirror::{Action, Press};
use dionysus_driver::{heartbeat, work};
use dionysus_tests::fake_llm::{Answer as Llm, FakeLlm};
use dionysus_tests::running::Running;
use dionysus_tests::{driver_conninfo, expect_error, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// Ada and Bob may talk; the dream channel is Ada's.
async fn start(config: Config) -> Running {
    Running::on(config, Arc::new(TestChannel::new(&["ada", "bob"]).with_dream_channel("dream:ada", "ada"))).await
}

/// The dream channel's side of the running driver.
trait DreamSide {
    async fn card(&self, title: &str) -> (Card, String);
    async fn answer(&self, interaction: &str) -> Answer;
    async fn press(&self, interaction: &str, author: &str, custom_id: &str) -> Answer;
}

impl DreamSide for Running {
    /// Waits for a card whose title starts with `title`.
    async fn card(&self, title: &str) -> (Card, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((_, c, id)) = self.channel.cards().into_iter().find(|(_, c, _)| c.title.starts_with(title)) {
                return (c, id);
            }
            assert!(Instant::now() < deadline, "no \"{title}\" card posted; cards: {:?}", self.channel.cards());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Presses (or submits) and waits for the answer to that interaction.
    async fn answer(&self, interaction: &str) -> Answer {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((_, a)) = self.channel.answers().into_iter().find(|(i, _)| i == interaction) {
                return a;
            }
            assert!(Instant::now() < deadline, "interaction {interaction} not answered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn press(&self, interaction: &str, author: &str, custom_id: &str) -> Answer {
        self.channel.press(interaction, author, custom_id).await;
        self.answer(interaction).await
    }
}

fn config(db: &TestDb, llm: &FakeLlm) -> Config {
    let mut c = scripted_driver_config(driver_conninfo(&db.name), llm);
    c.mirror_gap = Duration::from_millis(20);
    c
}

async fn one(c: &Client, sql: &str) -> Value {
    c.query_one(&format!("SELECT coalesce(to_jsonb(({sql})), 'null')"), &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

fn button(card: &Card, label: &str) -> String {
    card.buttons.iter().find(|b| b.label == label).unwrap_or_else(|| panic!("no {label} button on {card:?}")).custom_id.clone()
}

fn field<'a>(card: &'a Card, name: &str) -> &'a str {
    card.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no {name} field on {card:?}"))
}

fn private_text(a: &Answer) -> String {
    match a {
        Answer::Private { text, file } => format!("{text}{}", file.as_ref().map(|(_, b)| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()),
        other => panic!("expected a private answer, got {other:?}"),
    }
}

fn refused(a: &Answer) -> bool {
    matches!(a, Answer::Private { text, file: None } if text.contains("belong to the person"))
}

/// A reply, its extraction and a heartbeat reach Ada's dream channel as cards with their
/// sections, metrics and context; View prompt shows what the model was given; Feedback stores
/// feedback about the reply (once per press); Bob's words never reach Ada's channel and a
/// stranger's or Bob's press on Ada's cards is refused; while cards cannot be posted the
/// conversation answers at once and the cards follow when the channel is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_activity_is_mirrored_to_its_persons_channel_and_nobody_elses() {
    let db = TestDb::new("dc_mirror").await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap(); // only the test's heartbeat
    llm.on("TASK: chat && concert", Llm::Text("It sounds like the concert was wonderful!".into()));
    llm.on("TASK: chat", Llm::Text("Noted.".into()));
    llm.json("TASK: extract && concert", json!({"facts": [{"content": "Ada went to a jazz concert", "subject": "Ada"}], "triples": [], "goals": [], "objectives": []}));
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": [], "objectives": []}));
    llm.json("TASK: heartbeat", json!({"reasoning": "A quiet moment: resting.", "actions": [{"action": "rest", "params": {}}], "goal_changes": []}));
    llm.json("TASK: narrative", json!({"narrative": "I rested and thought about the concert.", "emotional_valence": 0.2}));
    let mut run = start(config(&db, &llm)).await;

    let h = run.say("m1", "ada", "The jazz concert last night was amazing").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");

    // The reply's card: both sides, and how it was made.
    let (reply, _) = run.card("Reply").await;
    assert_eq!(field(&reply, "Their message"), "The jazz concert last night was amazing");
    assert_eq!(field(&reply, "Response"), "It sounds like the concert was wonderful!");
    let metrics = field(&reply, "Metrics");
    assert!(metrics.contains("latency ms:") && metrics.contains("model: smart-model"), "{metrics}");
    let tokens: u64 = metrics.lines().find_map(|l| l.strip_prefix("prompt tokens: ")).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(tokens > 10, "the endpoint's token counts are not shown: {metrics}");
    assert!(field(&reply, "Context used").contains("turns: "), "{reply:?}");
    // Its extraction, with what it learned.
    let (extraction, _) = run.card("Extraction").await;
    assert!(field(&extraction, "Facts").contains("Ada went to a jazz concert"), "{extraction:?}");
    // A heartbeat that read only Ada's words, with its reasoning and narrative.
    heartbeat::run_once(&run.mind).await.expect("heartbeat");
    let (beat, _) = run.card("Heartbeat #1").await;
    assert_eq!(field(&beat, "Reasoning"), "A quiet moment: resting.");
    assert!(field(&beat, "Narrative").contains("thought about the concert"));

    // Bob talks in his own DM: his reply, his extraction, and a heartbeat that read his words
    // next to Ada's are never recorded for Ada's channel, let alone posted there.
    let h = run.say("b1", "bob", "My secret: I am planning a surprise for Ada").await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    heartbeat::run_once(&run.mind).await.expect("heartbeat");
    let bob_extracted = "SELECT count(*) FROM dionysus.work_queue w JOIN dionysus.messages m ON m.id = (w.params ->> 'message_id')::uuid \
                         WHERE w.action = 'extract_message' AND w.status = 'done' AND m.person = 'test:bob'";
    let deadline = Instant::now() + Duration::from_secs(30);
    while one(c, bob_extracted).await != json!(1) || one(c, "SELECT count(*) FROM dionysus.mirror_items WHERE status = 'pending'").await != json!(0) {
        assert!(Instant::now() < deadline, "Bob's extraction never finished, or Ada's cards never went out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (channel, card, _) in run.channel.cards() {
        assert_eq!(channel, "dream:ada");
        assert!(!format!("{card:?}").contains("surprise"), "Bob's words reached Ada's dream channel: {card:?}");
        assert!(!card.title.starts_with("Heartbeat #2"), "a heartbeat that read Bob's words reached Ada's channel");
    }
    let kept = one(c, "SELECT jsonb_agg(kind ORDER BY created_at) FROM dionysus.mirror_items").await;
    assert_eq!(kept, json!(["reply", "extraction", "heartbeat"]), "only what Ada may see is recorded for her channel");
    assert_eq!(one(c, "SELECT count(*) FROM dionysus.mirror_items WHERE NOT dionysus_internal.visible_to(private_to, 'test:ada')").await, json!(0));

    // View prompt: what the model was given, privately.
    let prompt = private_text(&run.press("i-prompt", "ada", &button(&reply, "View prompt")).await);
    assert!(prompt.contains("The jazz concert last night was amazing") && prompt.contains("[system]"), "{prompt}");
    // A stranger, and Bob (allowed to talk, but this is not his), are refused privately.
    assert!(refused(&run.press("i-stranger", "mallory", &button(&reply, "View prompt")).await));
    assert!(refused(&run.press("i-bob", "bob", &button(&reply, "View prompt")).await));
    assert!(refused(&run.press("i-bob-fb", "bob", &button(&reply, "Feedback")).await));
    // A button that is not ours.
    assert!(private_text(&run.press("i-odd", "ada", "dionysus:launch:00000000000000000000000000000000").await).contains("not one of mine"));

    // Feedback: a form, then stored about the reply (one press, one feedback); nonsense refused.
    match run.press("i-fb", "ada", &button(&reply, "Feedback")).await {
        Answer::Form(f) => assert_eq!(Press::parse(&f.custom_id).map(|p| p.action), Some(Action::FeedbackForm)),
        other => panic!("{other:?}"),
    }
    let form = Press::custom_id(Action::FeedbackForm, Press::parse(&button(&reply, "Feedback")).unwrap().item);
    run.channel.submit("i-fb-bad", "ada", &form, &[("sentiment", "purple"), ("comment", "?")]).await;
    assert!(private_text(&run.answer("i-fb-bad").await).contains("nothing was stored"));
    for _ in 0..2 {
        run.channel.submit("i-fb-send", "ada", &form, &[("sentiment", "negative"), ("comment", "Too gushing; just ask how it was.")]).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while run.channel.answers().iter().filter(|(i, _)| i == "i-fb-send").count() < 2 {
        assert!(Instant::now() < deadline, "the second submission was not answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(run.channel.answers().iter().filter(|(i, _)| i == "i-fb-send").all(|(_, a)| private_text(a).contains("🫡")));
    let fb = one(c, "SELECT jsonb_agg(jsonb_build_object('person', person, 'sentiment', sentiment, 'source', source, 'content', content, \
                       'outbox', about_outbox_id IS NOT NULL, 'item', about_mirror_item_id IS NOT NULL)) FROM dionysus.feedback").await;
    assert_eq!(fb, json!([{"person": "test:ada", "sentiment": "negative", "source": "dream", "content": "Too gushing; just ask how it was.", "outbox": true, "item": true}]));
    assert_eq!(one(c, "SELECT count(*) FROM dionysus.messages WHERE content LIKE 'Too gushing%'").await, json!(0), "feedback entered the log");

    // A platform that hangs on cards: the conversation still answers (the mirror is stuck on
    // its own task); then cards that fail: the item waits; back up, the card follows.
    run.channel.set_cards_stalled(true);
    let h = run.say("m2", "ada", "Also, my sister visits on Friday").await;
    assert!(matches!(h, Handled::Replied { .. }), "{h:?}");
    let h = run.say("m3", "ada", "She is bringing her dog").await;
    assert!(matches!(h, Handled::Replied { .. }), "the conversation waited on the stuck mirror: {h:?}");
    run.channel.set_cards_down(true);
    run.channel.set_cards_stalled(false);
    assert!(run.channel.cards().iter().all(|(_, c, _)| !format!("{c:?}").contains("sister visits")));
    run.channel.set_cards_down(false);
    run.channel.set_down(false).await; // a reconnect (Ready) wakes the mirror
    let deadline = Instant::now() + Duration::from_secs(30);
    while !run.channel.cards().iter().any(|(_, c, _)| format!("{c:?}").contains("sister visits")) {
        assert!(Instant::now() < deadline, "the card never followed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each card once on the channel (a retried post carries the same nonce), in the order of
    // the activities (the turn's reply and extraction race each other; the heartbeat came after).
    let cards = run.channel.cards();
    let mut footers: Vec<&str> = cards.iter().map(|(_, c, _)| c.footer.as_str()).collect();
    footers.sort();
    footers.dedup();
    assert_eq!(footers.len(), cards.len(), "a card was posted twice");
    let mut first: Vec<&str> = cards.iter().map(|(_, c, _)| c.title.as_str()).take(3).collect();
    first.sort();
    assert_eq!(first, ["Extraction", "Heartbeat #1", "Reply"], "the heartbeat's card came before the turn's");
    run.stop().await;
}

/// The full dream through the channel: feedback in → the proposal posted with Approve / Reject /
/// Discuss → nothing changed → Bob's and a stranger's presses refused → Discuss keeps it pending
/// with the note → Ada's Approve makes the new template version active → rollback in one call;
/// a night with nothing to propose says so on the channel too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_on_the_channel_changes_nothing_until_its_person_approves() {
    let db = TestDb::new("dc_dream").await;
    db.hold_worker_off().await;
    db.let_it_dream().await;
    let c = &db.client;
    let llm = FakeLlm::start().await;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true); SELECT dionysus.set_clock('2026-11-24 01:00+00')").await.unwrap();
    llm.on("TASK: chat", Llm::Text("A long answer about bread, with many paragraphs.".into()));
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": [], "objectives": []}));
    llm.on_times("TASK: dream", 1, Llm::Text(json!({"proposals": [
        {"kind": "prompt_template", "target": "chat_system", "proposal": {"template": "SHORTER: three lines at most.\n{{memories}}\n{{goals}}"},
         "rationale": "she asked for shorter answers", "evidence": ["feedback: too long"]}
    ], "note": "answers run long"}).to_string()));
    let mut run = start(config(&db, &llm)).await;
    run.say("d1", "ada", "Tell me about bread").await;
    run.say("d2", "ada", "/feedback too long, please keep answers short").await;

    c.batch_execute("SELECT dionysus.set_clock('2026-11-24 03:10+00'); SELECT dionysus.enqueue_language_work(); \
                     UPDATE dionysus.work_queue SET available_at = now() WHERE action = 'dream'")
        .await
        .unwrap();
    work::drain(&run.mind, None).await;
    let (card, _) = run.card("Proposal").await;
    assert_eq!(card.buttons.iter().map(|b| b.label.as_str()).collect::<Vec<_>>(), ["View prompt", "Feedback", "Approve", "Reject", "Discuss"]);
    assert_eq!(field(&card, "Rationale"), "she asked for shorter answers");
    assert_eq!(field(&card, "Status"), "pending");
    assert_eq!(one(c, "SELECT version FROM dionysus.prompt_templates WHERE key = 'chat_system' AND active").await, json!(1), "changed before approval");
    // View prompt: the proposed text, then what the dream was shown.
    let shown = private_text(&run.press("p-view", "ada", &button(&card, "View prompt")).await);
    assert!(shown.contains("SHORTER: three lines at most.") && shown.contains("too long, please keep answers short"), "{shown}");

    // Not theirs to decide.
    assert!(refused(&run.press("p-bob", "bob", &button(&card, "Approve")).await));
    assert!(refused(&run.press("p-mallory", "mallory", &button(&card, "Approve")).await));
    assert_eq!(one(c, "SELECT status FROM dionysus.proposals").await, json!("pending"));

    // Discuss: a form; the note is kept, the proposal stays open.
    assert!(matches!(run.press("p-discuss", "ada", &button(&card, "Discuss")).await, Answer::Form(_)));
    let item = Press::parse(&button(&card, "Discuss")).unwrap().item;
    run.channel.submit("p-discuss-form", "ada", &Press::custom_id(Action::DiscussForm, item), &[("note", "Shorter yes, but keep warmth")]).await;
    match run.answer("p-discuss-form").await {
        Answer::Update(updated) => assert_eq!(field(&updated, "Status"), "discussing"),
        other => panic!("{other:?}"),
    }
    assert_eq!(one(c, "SELECT status FROM dionysus.proposals").await, json!("discussing"));
    assert_eq!(one(c, "SELECT content FROM dionysus.feedback WHERE about_proposal_id IS NOT NULL").await, json!("Shorter yes, but keep warmth"));

    // Ada approves: the new version is active, the card loses its decision buttons.
    match run.press("p-approve", "ada", &button(&card, "Approve")).await {
        Answer::Update(updated) => {
            assert_eq!(field(&updated, "Status"), "approved");
            assert!(updated.buttons.iter().all(|b| b.label != "Approve"), "{updated:?}");
        }
        other => panic!("{other:?}"),
    }
    // Hers: her own version of the template; the shared one is everyone else's still.
    assert_eq!(one(c, "SELECT dionysus.prompt_template('chat_system', 'test:ada') -> 'person'").await, json!("test:ada"));
    assert_eq!(one(c, "SELECT version FROM dionysus.prompt_templates WHERE key = 'chat_system' AND active").await, json!(1));
    assert_eq!(one(c, "SELECT decided_by FROM dionysus.proposals").await, json!("test:ada"));
    assert!(private_text(&run.press("p-again", "ada", &button(&card, "Approve")).await).contains("already approved"));
    // Rollback is one call.
    assert_eq!(one(c, "SELECT dionysus.activate_own_template('test:ada', 'chat_system', NULL)").await, json!(true));
    assert_eq!(one(c, "SELECT dionysus.prompt_template('chat_system', 'test:ada') -> 'person'").await, Value::Null);

    // The next night proposes nothing, and the channel says so.
    llm.on_times("TASK: dream", 1, Llm::Text(json!({"proposals": [], "note": "all well"}).to_string()));
    c.batch_execute("SELECT dionysus.set_clock('2026-11-25 03:20+00')").await.unwrap();
    run.say("d3", "ada", "Thanks for yesterday").await;
    c.batch_execute("SELECT dionysus.enqueue_language_work(); UPDATE dionysus.work_queue SET available_at = now() WHERE action = 'dream'").await.unwrap();
    work::drain(&run.mind, None).await;
    let (dream, _) = run.card("Dream of 2026-11-25").await;
    assert_eq!(field(&dream, "Nothing proposed"), "all well");
    run.stop().await;
}

/// The mirror's SQL surface refuses what it must: unknown kinds and missing subjects with their
/// SQLSTATE, a view or decision by someone the item is not visible to (42501, the same whether
/// or not it exists), and the driver's role may not rewrite an item's content or privacy.
#[tokio::test]
async fn the_mirror_refuses_bad_input_and_keeps_items_private() {
    let db = TestDb::new("dc_sql").await;
    let c = &db.client;
    let (code, msg) = expect_error(c, "SELECT dionysus.mirror_record('gossip', gen_random_uuid())").await;
    assert_eq!(code, "22023");
    assert!(msg.contains("\"kind\""), "{msg}");
    let (code, msg) = expect_error(c, "SELECT dionysus.mirror_record('reply', gen_random_uuid())").await;
    assert_eq!(code, "P0002");
    assert!(msg.contains("\"subject_id\""), "{msg}");
    let (code, _) = expect_error(c, "SELECT dionysus.mirror_record('reply', NULL)").await;
    assert_eq!(code, "22004");
    let (code, msg) = expect_error(c, "SELECT dionysus.mirror_record('heartbeat', gen_random_uuid(), metrics => '[1]')").await;
    assert_eq!(code, "22023");
    assert!(msg.contains("\"metrics\""), "{msg}");
    let (code, _) = expect_error(c, "SELECT * FROM dionysus.claim_mirror_items('test:ada', 'w', 0)").await;
    assert_eq!(code, "22023");

    // An item of Ada's: Bob may not see it, and an unknown id gets the same answer.
    let m: uuid::Uuid = c
        .query_one("SELECT (dionysus.log_message('test', 'x1', 'dm:ada', 'ada', 'A private thought of mine') ->> 'message_id')::uuid", &[])
        .await
        .unwrap()
        .get(0);
    let item: uuid::Uuid = c.query_one("SELECT dionysus.mirror_record('reply', $1)", &[&m]).await.unwrap().get(0);
    let again: uuid::Uuid = c.query_one("SELECT dionysus.mirror_record('reply', $1)", &[&m]).await.unwrap().get(0);
    assert_eq!(item, again, "the same activity recorded twice is one item");
    let seen = one(c, &format!("SELECT dionysus.mirror_view('{item}', 'test', 'ada') -> 'card' -> 'sections' -> 0 ->> 'value'")).await;
    assert_eq!(seen, json!("A private thought of mine"));
    for sql in [
        format!("SELECT dionysus.mirror_view('{item}', 'test', 'bob')"),
        "SELECT dionysus.mirror_view(gen_random_uuid(), 'test', 'bob')".to_string(),
        format!("SELECT dionysus.mirror_feedback('{item}', 'test', 'bob', 'i1', 'positive', 'nice')"),
        format!("SELECT dionysus.mirror_decide('{item}', 'test', 'ada', 'approve')"), // not a proposal
    ] {
        let (code, msg) = expect_error(c, &sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    assert!(one(c, "SELECT count(*) FROM dionysus.claim_mirror_items('test:bob', 'w')").await == json!(0));
    // With a viewer, what they may not see is not recorded at all.
    let bobs: uuid::Uuid = c
        .query_one("SELECT (dionysus.log_message('test', 'y1', 'dm:bob', 'bob', 'Bob''s own words') ->> 'message_id')::uuid", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(one(c, &format!("SELECT dionysus.mirror_record('reply', '{bobs}', viewer => 'test:ada')")).await, Value::Null);
    assert_eq!(one(c, &format!("SELECT count(*) FROM dionysus.mirror_items WHERE subject_id = '{bobs}'")).await, json!(0));
    // A heartbeat whose context held nothing private but whose work touched Bob's words is as
    // private as its narrative: Bob's, never Ada's.
    let hb: uuid::Uuid = c
        .query_one("INSERT INTO dionysus.heartbeat_log (heartbeat_number, status, energy_start, narrative, decision_reasoning) \
                    VALUES (41, 'finished', 10, 'I looked into what Bob is planning', 'curious') RETURNING id", &[])
        .await
        .unwrap()
        .get(0);
    c.execute("INSERT INTO dionysus.work_queue (idempotency_key, action, heartbeat_id, status, result) \
               VALUES ('hb41', 'recall', $1, 'done', '{\"applied\": {\"private_to\": [\"test:bob\"]}}')", &[&hb])
        .await
        .unwrap();
    assert_eq!(one(c, &format!("SELECT dionysus.mirror_record('heartbeat', '{hb}', viewer => 'test:ada')")).await, Value::Null);
    let beat: uuid::Uuid = c.query_one("SELECT dionysus.mirror_record('heartbeat', $1)", &[&hb]).await.unwrap().get(0);
    assert_eq!(one(c, &format!("SELECT private_to FROM dionysus.mirror_items WHERE id = '{beat}'")).await, json!(["test:bob"]));
    let (code, _) = expect_error(c, &format!("SELECT dionysus.mirror_view('{beat}', 'test', 'ada')")).await;
    assert_eq!(code, "42501");
    // An imported turn's extraction is history, not an activity: not mirrored.
    let imp: String = c
        .query_one(&format!("SELECT dionysus.begin_import('test:ada', 'chat', 'old.json', '{}', 1) ->> 'import_id'", "d".repeat(64)), &[])
        .await
        .unwrap()
        .get(0);
    c.batch_execute(&format!(
        "SELECT dionysus.import_messages('{imp}', 0, '[{{\"platform\": \"test\", \"id\": \"h1\", \"channel\": \"dm:ada\", \"author\": \"ada\", \
          \"role\": \"person\", \"text\": \"I grew up by the sea\", \"at\": \"2020-06-01T10:00:00Z\"}}]'); \
         UPDATE dionysus.work_queue SET status = 'done', result = '{{}}' WHERE action = 'extract_message'"
    ))
    .await
    .unwrap();
    let w: uuid::Uuid = c
        .query_one("SELECT w.id FROM dionysus.work_queue w JOIN dionysus.messages m ON m.id = (w.params ->> 'message_id')::uuid \
                    WHERE w.action = 'extract_message' AND m.import_id IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    let live: uuid::Uuid = c
        .query_one(&format!("SELECT w.id FROM dionysus.work_queue w WHERE w.action = 'extract_message' AND w.params ->> 'message_id' = '{m}'"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(one(c, &format!("SELECT dionysus.mirror_record('extraction', '{live}')")).await.is_string(), "a live turn's extraction is mirrored");
    assert_eq!(one(c, &format!("SELECT dionysus.mirror_record('extraction', '{w}')")).await, Value::Null);
    // The driver's role moves delivery, nothing else.
    c.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    let (code, _) = expect_error(c, &format!("UPDATE dionysus.mirror_items SET private_to = NULL WHERE id = '{item}'")).await;
    assert_eq!(code, "42501");
    let (code, _) = expect_error(c, &format!("UPDATE dionysus.mirror_items SET card = '{{}}' WHERE id = '{item}'")).await;
    assert_eq!(code, "42501");
    // Ada's reply and her live turn's extraction; nothing of Bob's, nothing imported.
    let claimed = one(c, "SELECT jsonb_agg(kind ORDER BY kind) FROM dionysus.claim_mirror_items('test:ada', 'w', 10)").await;
    assert_eq!(claimed, json!(["extraction", "reply"]));
    assert_eq!(one(c, &format!("SELECT dionysus.mirror_settle('{item}', 'other-worker', 'dream', '123')")).await, json!(false), "settled by a worker that does not hold it");
    assert_eq!(one(c, &format!("SELECT dionysus.mirror_settle('{item}', 'w', 'dream', '123')")).await, json!(true));
    c.batch_execute("RESET ROLE").await.unwrap();
    assert_eq!(one(c, &format!("SELECT status FROM dionysus.mirror_items WHERE id = '{item}'")).await, json!("posted"));
}
