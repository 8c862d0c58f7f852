//! Memory that fades (#13 §5, sql/021_decay.sql), on the driven clock: a memory compresses to
//! its summary (asked of the model by the running driver), then to its residue, then goes;
//! a memory mentioned again keeps its detail longer; the message log is never touched; every
//! step is explained. Exemptions, the off switch, privacy and the driver's rights beside.
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::running::Running;
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, until, TestDb};
use serde_json::{json, Value};
use tokio_postgres::Client;

/// The clock stands at a known time, and the test drives every pass itself: the maintenance
/// worker's passes wait a century.
async fn driven(c: &Client) {
    c.batch_execute("SELECT dionysus.set_clock('2026-03-02 10:00+00'); SELECT dionysus.decay_pass(); \
                     UPDATE dionysus.decay_config SET pass_interval = '100 years';")
        .await
        .unwrap();
}

async fn stage_of(c: &Client, memory: &str) -> Value {
    one(c, &format!("SELECT dionysus.memory_stage('{memory}'::uuid)")).await
}

/// Waits until the driver is idle but for condensing and every recall is folded into the
/// memories' access counts (which slow fading), so a stage's due time holds still.
async fn settled(c: &Client) {
    until(c, "NOT EXISTS (SELECT 1 FROM dionysus.work_queue WHERE status IN ('pending', 'claimed') AND action <> 'condense_memory')", "the driver idle").await;
    until(c, "NOT EXISTS (SELECT 1 FROM dionysus.memory_access_log)", "the access log folded").await;
}

/// Sets the clock a minute past when the memory's next stage falls due (memory_stage's own
/// answer), and runs passes until one has judged it.
async fn until_next_stage(c: &Client, memory: &str) -> Value {
    let s = stage_of(c, memory).await;
    let at = s["next"]["at"].as_str().unwrap_or_else(|| panic!("no next stage: {s}")).to_string();
    c.execute("SELECT dionysus.set_clock($1::text::timestamptz + interval '1 minute')", &[&at]).await.unwrap();
    pass_judging(c, memory).await
}

/// Runs decay passes until one writes an event of this memory, and returns that pass. A pass
/// skips a memory another transaction holds (the worker folding access counts, say) and
/// yields to a pass already running: the next pass takes it, as the worker's next would.
async fn pass_judging(c: &Client, memory: &str) -> Value {
    let events = format!("SELECT count(*) FROM dionysus.decay_log WHERE memory_id = '{memory}'");
    let before: i64 = one(c, &events).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let pass: Value = one(c, "SELECT dionysus.decay_pass()").await;
        if one::<i64>(c, &events).await > before {
            return pass;
        }
        assert!(std::time::Instant::now() < deadline, "no pass judged {memory} within 60 s; the last: {pass}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

const WALK: &str = "Yesterday my sister Mira and I walked the whole coastal path from Cascais to Guincho in the wind, \
                    stopped at the little fort where the fishermen mend their nets, argued about whether to move to Porto, \
                    and ended up laughing at a seagull that stole half of her sandwich right out of her hand.";
const WALK_SUMMARY: &str = "Walked the coast from Cascais to Guincho with Mira, argued about moving to Porto, laughed at a seagull.";
const WALK_MICRO: &str = "A windy coastal walk with Mira.";
const CONCERT: &str = "Last night I finally saw Radiohead live at the Coliseu, we queued for three hours in the rain, \
                       my friend Joana lost her phone in the crowd during Paranoid Android, we found it under a seat \
                       after the encore and walked home across the river at two in the morning singing the whole way.";

/// The whole life of two turns on the driven clock, with the real driver condensing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_fades_to_its_summary_then_its_residue_then_goes_unless_it_is_mentioned_again() {
    let db = TestDb::new("decay_life").await;
    let c = &db.client;
    // The test drives every pass itself: the maintenance worker's passes wait a century.
    c.batch_execute(
        "SELECT dionysus.set_clock('2026-03-02 10:00+00'); SELECT dionysus.decay_pass(); \
         UPDATE dionysus.decay_config SET pass_interval = '100 years'; SELECT dionysus.pause_heartbeats(true);",
    )
    .await
    .unwrap();
    let llm = FakeLlm::start().await;
    llm.json("Read the latest message", json!({"facts": [], "triples": [], "goals": []}));
    llm.json("TASK: condense_memory && Guincho", json!({"summary": WALK_SUMMARY, "micro": WALK_MICRO}));
    llm.json("TASK: condense_memory && Radiohead", json!({"summary": "Saw Radiohead at the Coliseu with Joana; her phone was lost and found.", "micro": "Radiohead live with Joana."}));
    llm.on("TASK: chat", Answer::Text("That sounds wonderful.".into()));
    let mut run = Running::start(scripted_driver_config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    run.say("w1", "ada", WALK).await;
    run.say("c1", "ada", CONCERT).await;
    let walk: String = one(c, "SELECT memory_id::text FROM dionysus.messages WHERE platform_message_id = 'w1'").await;
    let concert: String = one(c, "SELECT memory_id::text FROM dionysus.messages WHERE platform_message_id = 'c1'").await;
    // Every turn's words and identity (its link to a memory is cleared when the memory goes).
    let log = "SELECT md5(string_agg((m.id, m.platform, m.platform_message_id, m.channel_id, m.author_id, m.is_bot, m.content, \
               m.created_at, m.person)::text, '|' ORDER BY m.id)) FROM dionysus.messages m";

    // Five days on, the concert comes up again: its clock starts over.
    c.batch_execute("SELECT dionysus.advance_clock('5 days')").await.unwrap();
    run.say("c2", "ada", &format!("Still thinking about it: {CONCERT}")).await;
    settled(c).await;
    // Passes until every new memory is compared with the older ones (one the driver is writing
    // the levels of at that moment keeps its mention queued for the next pass).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        one::<Value>(c, "SELECT dionysus.decay_pass()").await;
        if one::<i64>(c, "SELECT count(*) FROM dionysus.decay_mentions").await == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "mentions still queued after 60 s of passes");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let s = stage_of(c, &concert).await;
    assert!(s["history"].as_array().unwrap().iter().any(|h| h["event"] == "mentioned"), "the repeat renewed it: {s}");
    let log_before: String = one(c, log).await;
    let turns: i64 = one(c, "SELECT count(*) FROM dionysus.messages").await;

    settled(c).await;
    // A long fresh turn has its levels made ahead of need (027: the scheduler queues them, the
    // running driver asks the model), so the walk, due to fade first, fades straight to its
    // summary. (A memory still without them when it fades waits for them: the next test.)
    until(c, &format!("SELECT summary IS NOT NULL AND micro IS NOT NULL FROM dionysus.memories WHERE id = '{walk}'"), "the walk's levels").await;
    // The concert's too, or it would wait for them when it falls due while the walk moves on.
    until(c, &format!("SELECT summary IS NOT NULL AND micro IS NOT NULL FROM dionysus.memories WHERE id = '{concert}'"), "the concert's levels").await;
    let pass = until_next_stage(c, &walk).await;
    assert_eq!((pass["condense_asked"].as_i64(), pass["waiting"].as_i64()), (Some(0), Some(0)), "{pass}");
    assert_eq!(stage_of(c, &concert).await["stage"], json!("fresh"), "mentioned five days later, the concert is not due yet");
    let (stage, content): (String, String) = {
        let r = c.query_one(&format!("SELECT stage::text, content FROM dionysus.memories WHERE id = '{walk}'"), &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((stage.as_str(), content.as_str()), ("fading", WALK_SUMMARY), "the specifics are gone, the meaning kept");
    // Recall finds it by what it still says, and says how faded it is.
    let as_driver = db.connect_as_driver().await;
    let found = as_driver
        .query("SELECT memory_id::text, stage FROM dionysus.recall('the seagull on the coastal walk', 5, person => 'test:ada')", &[])
        .await
        .unwrap();
    assert!(found.iter().any(|r| r.get::<_, String>(0) == walk && r.get::<_, String>(1) == "fading"), "recall marks the stage");
    settled(c).await;
    let embedded: bool = one(c, &format!("SELECT embedding = dionysus.embed(content) FROM dionysus.memories WHERE id = '{walk}'")).await;
    assert!(embedded, "a faded memory is embedded from what it still says");

    // Then its residue: the micro line, its feeling and its links.
    until_next_stage(c, &walk).await;
    let r = c.query_one(&format!("SELECT stage::text, content, summary FROM dionysus.memories WHERE id = '{walk}'"), &[]).await.unwrap();
    assert_eq!((r.get::<_, String>(0), r.get::<_, String>(1), r.get::<_, Option<String>>(2)), ("distant".into(), WALK_MICRO.into(), None));

    // Then it goes; the concert, renewed, is still there.
    until_next_stage(c, &walk).await;
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.memories WHERE id = '{walk}'")).await, 0, "forgotten");
    let s = stage_of(c, &walk).await;
    assert_eq!(s["stage"], json!("forgotten"), "{s}");
    let events: Vec<&str> = s["history"].as_array().unwrap().iter().filter_map(|h| h["event"].as_str()).collect();
    assert_eq!(events, ["fading", "distant", "forgotten"], "one stage at a time, compressed before deleted: {s}");
    assert_eq!(one::<i64>(c, &format!("SELECT count(*) FROM dionysus.memories WHERE id = '{concert}'")).await, 1, "the renewed memory survives");
    let concert_stage: Value = stage_of(c, &concert).await;
    // (It moves a stage a pass: distant at most, when the walk is gone.)
    assert!(matches!(concert_stage["stage"].as_str(), Some("fading" | "distant")), "renewed five days later, it is behind: {concert_stage}");
    // Nothing of the words stays in the decay log; the message log is exactly as it was.
    let leaked: i64 = one(c, "SELECT count(*) FROM dionysus.decay_log WHERE inputs::text ~* 'guincho|seagull|coastal'").await;
    assert_eq!(leaked, 0);
    assert_eq!(one::<String>(c, log).await, log_before, "the message log is never touched");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.messages").await, turns);
    let kept: String = one(c, "SELECT content FROM dionysus.messages WHERE platform_message_id = 'w1'").await;
    assert_eq!(kept, WALK, "the turn's words stay in the log (a re-index can read them again)");
    let link: Option<uuid::Uuid> = one(c, "SELECT memory_id FROM dionysus.messages WHERE platform_message_id = 'w1'").await;
    assert_eq!(link, None, "only the link to the forgotten memory is cleared");
    run.stop().await;
}

/// A memory still without its levels when it fades (an imported turn from long ago: levels are
/// made ahead of need for the last 30 days only) waits for its summary, which the running
/// driver asks the model for, and fades to it on the next pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_without_its_summary_waits_for_it_when_it_fades() {
    let db = TestDb::new("decay_wait").await;
    let c = &db.client;
    driven(c).await;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    const LETTER: &str = "In the summer of 2019 my grandfather wrote me a long letter from the farm in Alentejo about the \
                          drought, the cork oaks his own father planted, the well they dug by hand in the forties, and how \
                          he wanted the land to stay in the family even if none of us ever moved back to live there.";
    const LETTER_SUMMARY: &str = "Grandfather's 2019 letter from the Alentejo farm: the drought, the old cork oaks, keeping the land in the family.";
    let letter: String = one(c, &format!("SELECT dionysus.remember('{LETTER}', importance => 0, created_at => '2019-07-01')::text")).await;
    let llm = FakeLlm::start().await;
    llm.json("TASK: condense_memory && Alentejo", json!({"summary": LETTER_SUMMARY, "micro": "Grandfather's letter about the farm."}));
    let run = Running::start(scripted_driver_config(driver_conninfo(&db.name), &llm), &["ada"]).await;

    let pass = until_next_stage(c, &letter).await;
    let s = stage_of(c, &letter).await;
    assert_eq!(pass["condense_asked"].as_i64(), Some(1), "{pass}\nthe letter: {s}");
    assert_eq!((s["stage"].as_str(), s["due"].as_str()), (Some("fresh"), Some("fading")), "it waits, whole: {s}");
    assert_eq!(one::<String>(c, &format!("SELECT content FROM dionysus.memories WHERE id = '{letter}'")).await, LETTER);
    until(c, &format!("SELECT summary IS NOT NULL FROM dionysus.memories WHERE id = '{letter}'"), "the letter's summary").await;
    pass_judging(c, &letter).await;
    let s = stage_of(c, &letter).await;
    let events: Vec<&str> = s["history"].as_array().unwrap().iter().filter_map(|h| h["event"].as_str()).collect();
    assert_eq!(events, ["waiting", "fading"], "{s}");
    assert_eq!(s["history"][1]["inputs"]["by"], json!("level"), "{s}");
    assert_eq!(one::<String>(c, &format!("SELECT content FROM dionysus.memories WHERE id = '{letter}'")).await, LETTER_SUMMARY);
    assert_eq!(llm.requests_with("TASK: condense_memory").len(), 1, "asked once, when it was due");
    run.stop().await;
}

/// What never decays, the off switch, an import's old dates, privacy of reinforcement, bad
/// input and the driver's rights.
#[tokio::test]
async fn exemptions_the_switch_privacy_and_rights() {
    let db = TestDb::new("decay_rules").await;
    let c = &db.client;
    driven(c).await;
    let mem = |sql: &str| sql.to_string();
    let plain: String = one(c, &mem("SELECT dionysus.remember('Bought bread at the corner bakery.', importance => 0)::text")).await;
    let pinned: String = one(c, &mem("SELECT dionysus.remember('Grandmother''s recipe for apple cake.', importance => 0)::text")).await;
    c.execute("SELECT dionysus.pin($1::text::uuid)", &[&pinned]).await.unwrap();
    let skill: String = one(c, "SELECT dionysus.remember('How to reset the router: hold the button ten seconds.', 'procedural', importance => 0)::text").await;
    let confirmed: String = one(c, "SELECT dionysus.learn('Ada is allergic to peanuts', 'Ada')::text").await;
    one::<String>(c, "SELECT dionysus.learn('Ada is allergic to peanuts', 'Ada')::text").await;
    let goal_memory: String = one(c, "SELECT dionysus.remember('Ada wants to run a marathon in the autumn.', importance => 0)::text").await;
    c.execute("SELECT dionysus.create_goal('Train for the marathon with Ada', origin_memory_id => $1::text::uuid)", &[&goal_memory]).await.unwrap();
    let old: String = one(c, "SELECT dionysus.remember('A summer in Lisbon long ago.', importance => 0, created_at => '2019-07-01')::text").await;
    let theirs: String = one(c, "SELECT dionysus.remember('Bo feeds the neighbour''s cat on Sundays.', importance => 0, private_to => ARRAY['test:bo'])::text").await;
    let turn_fact: String = one(c, "SELECT dionysus.learn('Ada likes figs', 'Ada', source => 'conversation:00000000-0000-0000-0000-000000000001', importance => 0)::text").await;

    // The switch: off, nothing moves however old.
    c.batch_execute("UPDATE dionysus.decay_config SET enabled = false; SELECT dionysus.advance_clock('400 days');").await.unwrap();
    assert_eq!(one::<Value>(c, "SELECT dionysus.decay_pass()").await, json!({"enabled": false}));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.memories WHERE stage <> 'fresh'").await, 0);
    let s = stage_of(c, &plain).await;
    assert!(s["why"].as_str().unwrap().contains("decay is off") && s["next"].is_null(), "{s}");

    // Someone else repeating Bo's words does not renew Bo's memory (nor learns it exists).
    c.batch_execute("SELECT dionysus.remember('Bo feeds the neighbour''s cat on Sundays.', importance => 0, private_to => ARRAY['test:ada'])").await.unwrap();
    c.batch_execute("UPDATE dionysus.decay_config SET enabled = true").await.unwrap();
    for _ in 0..3 {
        one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    }
    let gone = |id: &str| format!("SELECT NOT EXISTS (SELECT 1 FROM dionysus.memories WHERE id = '{id}')");
    assert!(one::<bool>(c, &gone(&plain)).await, "400 days unmet: forgotten after three passes");
    assert!(one::<bool>(c, &gone(&theirs)).await, "another person's repeat renewed nothing");
    assert!(one::<bool>(c, &gone(&old)).await, "an old date ages from when it was learned, and this one was learned 400 days ago");
    assert!(one::<bool>(c, &gone(&turn_fact)).await);
    let tombstones: i64 = one(c, "SELECT count(*) FROM dionysus.reindex_tombstones").await;
    assert_eq!(tombstones, 0, "fading is not the person forgetting: a re-index may learn it again");
    for (id, why) in [(&pinned, "pinned"), (&skill, "procedural memories do not decay (decay_config.types)"),
                      (&confirmed, "a fact the person confirmed"), (&goal_memory, "part of an open goal")] {
        let s = stage_of(c, id).await;
        assert_eq!((s["stage"].as_str(), s["exempt"].as_str()), (Some("fresh"), Some(why)), "{s}");
        assert!(s["why"].as_str().unwrap().starts_with("never decays"), "{s}");
    }
    // An import's old date starts its clock at the import, not at the date.
    let imported: String = one(c, "SELECT dionysus.remember('A winter in Oslo long ago.', importance => 0, created_at => '2018-01-01')::text").await;
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    assert_eq!(stage_of(c, &imported).await["stage"], json!("fresh"));

    // Bad input: named arguments and SQLSTATEs.
    let (code, msg) = expect_error(c, "SELECT dionysus.memory_stage(NULL)").await;
    assert_eq!(code, "22023", "{msg}");
    assert!(msg.contains("\"memory_id\""), "{msg}");
    let (code, _) = expect_error(c, "SELECT dionysus.memory_stage(gen_random_uuid())").await;
    assert_eq!(code, "P0002");
    let (code, msg) = expect_error(c, "SELECT dionysus.pin(gen_random_uuid())").await;
    assert_eq!(code, "P0002", "{msg}");
    let (code, msg) = expect_error(c, &format!("SELECT dionysus.pin('{plain}', NULL)")).await;
    assert!(code == "22023" || code == "P0002", "{code} {msg}");
    let (code, msg) = expect_error(c, "UPDATE dionysus.decay_config SET distant_after_days = 3").await;
    assert_eq!(code, "23514", "thresholds must rise: {msg}");

    // The driver's role: may pin and ask why; may not run passes, tune decay or write its log,
    // nor pin another person's memory through pin_own.
    let d = db.connect_as_driver().await;
    let ada: String = one(c, "SELECT dionysus.remember('Ada''s own note.', private_to => ARRAY['test:ada'])::text").await;
    assert!(one::<bool>(&d, &format!("SELECT dionysus.pin_own('test:ada', '{ada}')")).await);
    let (code, _) = expect_error(&d, &format!("SELECT dionysus.pin_own('test:bo', '{ada}')")).await;
    assert_eq!(code, "42501", "Bo may not pin Ada's memory");
    // Its stage and clock too: or the owner's pass would forget any memory the driver aged.
    for sql in ["SELECT dionysus.decay_pass()", "SELECT dionysus_internal.decay_run()",
                "UPDATE dionysus.memories SET stage = 'distant'", "UPDATE dionysus.memories SET reinforced_at = '2000-01-01'",
                "UPDATE dionysus.decay_config SET enabled = false",
                "INSERT INTO dionysus.decay_log (memory_id, event) VALUES (gen_random_uuid(), 'forgotten')"] {
        let (code, msg) = expect_error(&d, sql).await;
        assert_eq!(code, "42501", "{sql}: {msg}");
    }
    assert_eq!(one::<Value>(&d, &format!("SELECT dionysus.memory_stage('{pinned}')")).await["exempt"], json!("pinned"));
}

/// complete_work accepts levels only for a condense_memory item, only as {summary, micro}
/// strings, writes only that item's memory, and never overwrites a level it has.
#[tokio::test]
async fn condensed_levels_are_checked_and_go_only_to_their_memory() {
    let db = TestDb::new("decay_levels").await;
    let c = &db.client;
    driven(c).await;
    let long = "We spent the afternoon repainting the kitchen a pale green, Tom dropped the roller twice, the cat walked \
                through the tray and left green paw prints all over the hall, and we laughed so much we had to stop for tea \
                and cake before we could finish the second coat by the light of the evening sun.";
    let id: String = one(c, &format!("SELECT dionysus.remember('{long}', importance => 0, summary => 'Repainted the kitchen green with Tom.')::text")).await;
    let other: String = one(c, "SELECT dionysus.remember('Another memory entirely.')::text").await;
    c.batch_execute("SELECT dionysus.advance_clock('8 days')").await.unwrap();
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    // It had a summary: it faded without asking the model; its micro line is asked for next.
    let r = c.query_one(&format!("SELECT stage::text, content FROM dionysus.memories WHERE id = '{id}'"), &[]).await.unwrap();
    assert_eq!((r.get::<_, String>(0), r.get::<_, String>(1)), ("fading".into(), "Repainted the kitchen green with Tom.".into()));
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'condense_memory'").await, 0);

    let claim = |action: &str| format!("SELECT id, lease_token FROM dionysus.claim_work_item((SELECT id FROM dionysus.work_queue WHERE action = '{action}' LIMIT 1), 'test')");
    c.batch_execute(&format!("UPDATE dionysus.memories SET content = '{long}', stage = 'fresh', summary = NULL WHERE id = '{id}'")).await.unwrap();
    c.batch_execute("SELECT dionysus.advance_clock('1 day')").await.unwrap();
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    let item = c.query_one(&claim("condense_memory"), &[]).await.unwrap();
    let (wid, lease): (uuid::Uuid, uuid::Uuid) = (item.get(0), item.get(1));
    for (bad, code) in [(json!({"levels": "text"}), "22P02"), (json!({"levels": {"summary": 3}}), "22P02"),
                        (json!({"levels": {"summary": "x", "content": "y"}}), "22P02"),
                        (json!({"levels": {"micro": "x".repeat(401)}}), "22001")] {
        let e = c.query_one("SELECT dionysus.complete_work($1, $2, $3)", &[&wid, &bad, &lease]).await.unwrap_err();
        assert_eq!(e.code().map(|s| s.code()), Some(code), "{bad}: {e}");
    }
    let done: Value = c
        .query_one("SELECT dionysus.complete_work($1, $2, $3)", &[&wid, &json!({"levels": {"summary": "Painted the kitchen.", "micro": "Green kitchen."}}), &lease])
        .await
        .unwrap()
        .get(0);
    assert_eq!(done["levels"], json!(1), "{done}");
    let levels: (Option<String>, Option<String>) = {
        let r = c.query_one(&format!("SELECT summary, micro FROM dionysus.memories WHERE id = '{id}'"), &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(levels, (Some("Painted the kitchen.".into()), Some("Green kitchen.".into())));
    let untouched: (Option<String>, Option<String>) = {
        let r = c.query_one(&format!("SELECT summary, micro FROM dionysus.memories WHERE id = '{other}'"), &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(untouched, (None, None));

    // A model that gives nothing shorter: once its answer is in, the text is clipped at a word.
    let wordy: String = one(c, &format!("SELECT dionysus.remember('{long}', importance => 0)::text")).await;
    c.batch_execute("SELECT dionysus.advance_clock('8 days')").await.unwrap();
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    let item = c
        .query_one(&format!("SELECT id, lease_token FROM dionysus.claim_work_item((SELECT id FROM dionysus.work_queue WHERE params ->> 'memory_id' = '{wordy}'), 'test')"), &[])
        .await
        .unwrap();
    let (wid, lease): (uuid::Uuid, uuid::Uuid) = (item.get(0), item.get(1));
    c.query_one("SELECT dionysus.complete_work($1, $2, $3)", &[&wid, &json!({"levels": {"summary": format!("{long} Indeed."), "micro": "Paint."}}), &lease])
        .await
        .unwrap();
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    let r = c.query_one(&format!("SELECT stage::text, content FROM dionysus.memories WHERE id = '{wordy}'"), &[]).await.unwrap();
    let (stage, content): (String, String) = (r.get(0), r.get(1));
    assert_eq!(stage, "fading");
    assert!(content.ends_with('…') && content.chars().count() <= 280 && long.starts_with(content.trim_end_matches('…')), "clipped: {content}");
    let s: Value = one(c, &format!("SELECT dionysus.memory_stage('{wordy}')")).await;
    assert_eq!(s["history"].as_array().unwrap().last().unwrap()["inputs"]["by"], json!("clipped"), "{s}");

    // Levels on any other item are refused.
    c.batch_execute("INSERT INTO dionysus.work_queue (idempotency_key, action, params) VALUES ('x:1', 'reflect', '{}')").await.unwrap();
    let item = c.query_one(&claim("reflect"), &[]).await.unwrap();
    let (wid, lease): (uuid::Uuid, uuid::Uuid) = (item.get(0), item.get(1));
    let e = c.query_one("SELECT dionysus.complete_work($1, $2, $3)", &[&wid, &json!({"levels": {"summary": "x"}}), &lease]).await.unwrap_err();
    assert_eq!(e.code().map(|s| s.code()), Some("22023"), "{e}");
}

/// A pass asked for (decay_pass) waits for a running one instead of returning without doing
/// anything (the maintenance worker's pass raced a test into a no-op on CI); the worker's own
/// pass never waits for a person tuning decay_config, so the two cannot deadlock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_asked_for_waits_for_the_running_one_and_the_worker_never_waits() {
    let db = TestDb::new("decay_wait").await;
    let c = &db.client;
    driven(c).await;
    let plain: String = one(c, "SELECT dionysus.remember('Bought bread at the corner bakery.', importance => 0)::text").await;
    c.batch_execute("SELECT dionysus.advance_clock('200 days')").await.unwrap();

    // Another session's pass is running: it holds the decay lock until it commits.
    let mut other = db.connect().await;
    let running = other.transaction().await.unwrap();
    running.batch_execute("SELECT pg_advisory_xact_lock(hashtextextended('dionysus.decay', 0))").await.unwrap();
    let asked = {
        let c2 = db.connect().await;
        tokio::spawn(async move { c2.query_one("SELECT dionysus.decay_pass()", &[]).await.map(|r| r.get::<_, Value>(0)) })
    };
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(!asked.is_finished(), "decay_pass waits for the running pass");
    running.commit().await.unwrap();
    let done = asked.await.unwrap().unwrap();
    assert!(done.get("skipped").is_none(), "{done}");
    assert_eq!(done["fading"], json!(1), "{done}");
    assert_eq!(stage_of(c, &plain).await["stage"], json!("fading"));

    // A person tuning decay_config in an open transaction: the worker's pass skips at once,
    // and the person's own pass in that transaction runs.
    let tuning = other.transaction().await.unwrap();
    tuning.batch_execute("UPDATE dionysus.decay_config SET batch = 50").await.unwrap();
    let worker = tokio::time::timeout(std::time::Duration::from_secs(10), one::<Value>(c, "SELECT dionysus_internal.decay_run()"))
        .await
        .expect("the worker's pass does not wait for the tuner");
    assert_eq!(worker["skipped"], json!("decay_config is being changed"), "{worker}");
    let own: Value = tuning.query_one("SELECT dionysus.decay_pass()", &[]).await.unwrap().get(0);
    assert_eq!(own["distant"], json!(1), "{own}");
    tuning.commit().await.unwrap();
    assert_eq!(stage_of(c, &plain).await["stage"], json!("distant"));
}

/// A repeat whose older memory another transaction holds at that moment (the driver writing its
/// levels, say) is not lost: the mention stays queued and the next pass renews it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_of_a_memory_held_by_another_transaction_renews_it_on_the_next_pass() {
    let db = TestDb::new("decay_held").await;
    let c = &db.client;
    driven(c).await;
    let older: String = one(c, "SELECT dionysus.remember('Saw Radiohead live at the Coliseu with Joana in the rain.', importance => 0)::text").await;
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    c.batch_execute("SELECT dionysus.advance_clock('5 days')").await.unwrap();
    one::<String>(c, "SELECT dionysus.remember('Still thinking about it: I saw Radiohead live at the Coliseu with Joana in the rain.', importance => 0)::text").await;
    // Another transaction holds the older memory's row while the repeat is compared.
    let mut other = db.connect().await;
    let holder = other.transaction().await.unwrap();
    holder.execute(&format!("SELECT 1 FROM dionysus.memories WHERE id = '{older}' FOR UPDATE"), &[]).await.unwrap();
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    let mentioned = format!("SELECT count(*) FROM dionysus.decay_log WHERE memory_id = '{older}' AND event = 'mentioned'");
    assert_eq!(one::<i64>(c, &mentioned).await, 0, "a held row is not waited for");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.decay_mentions").await, 1, "the mention stays queued");
    holder.rollback().await.unwrap();
    one::<Value>(c, "SELECT dionysus.decay_pass()").await;
    assert_eq!(one::<i64>(c, &mentioned).await, 1, "the next pass renews it");
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM dionysus.decay_mentions").await, 0);
    let s = stage_of(c, &older).await;
    assert!(s["history"].as_array().unwrap().iter().any(|h| h["event"] == "mentioned"), "{s}");
}
