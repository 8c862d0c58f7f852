//! Context budgets and detail levels (#13 §4, sql/027_context_budget.sql), with the real
//! tokenizer and model: a 3K context stays within 3K by showing long memories at their
//! shorter levels and cutting what does not fit, while a 12K one of the same message includes
//! more, richer; both say what they included at which level and what they cut. The budgets
//! are data (per task, chosen by the archetype), the heartbeat's context keeps to its own, the
//! language queue fills the levels of long memories through the driver, and the driver's role
//! cannot change a budget.
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::conversation;
use dionysus_driver::Mind;
use dionysus_tests::fake_llm::FakeLlm;
use dionysus_tests::{driver_conninfo, expect_error, one, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use uuid::Uuid;

const PLACES: [&str; 12] = [
    "the Dolomites", "the Tatra mountains", "Snowdonia", "the Pyrenees", "the Julian Alps", "the Picos de Europa",
    "the Scottish Highlands", "the Vosges", "the Black Forest", "the High Atlas", "the Rila mountains", "Lapland",
];

/// A long memory of a hike (about 600 tokens): its place, then each day's detail.
fn hike(i: usize, place: &str) -> String {
    let mut s = format!("The user told a long story about hiking in {place} (trip {i}). ");
    for day in 1..=12 {
        s.push_str(&format!(
            "On day {day} of the {place} hike they climbed past pine forest and scree to a ridge, ate bread and cheese \
             at a hut, argued about the map with their sister, watched the weather turn, and walked down tired and happy. "
        ));
    }
    s
}

/// A context's memories: (content, level, tokens).
fn memories(ctx: &Value) -> Vec<(String, String, u64)> {
    ctx["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["content"].as_str().unwrap().to_string(), m["level"].as_str().unwrap().to_string(), m["tokens"].as_u64().unwrap()))
        .collect()
}

/// Each section's offered = included + cut, and the sections' tokens plus the fixed part are
/// what the report says was used.
fn report_adds_up(ctx: &Value) {
    let b = &ctx["context_budget"];
    let mut tokens = b["fixed"].as_u64().unwrap();
    for (name, s) in b["sections"].as_object().unwrap() {
        assert_eq!(s["offered"].as_u64(), Some(s["included"].as_u64().unwrap() + s["cut"].as_u64().unwrap()), "{name}: {s}");
        tokens += s["tokens"].as_u64().unwrap();
    }
    assert_eq!(Some(tokens), b["used"].as_u64(), "{b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3k_context_keeps_to_it_with_shorter_levels_while_a_12k_one_includes_more() {
    let db = TestDb::new("context_budget").await;
    let c = &db.client;
    for (i, place) in PLACES.iter().enumerate() {
        c.execute(
            "SELECT dionysus.remember($1, 'episodic', 0.5, 0, '{}', 'seed', private_to => ARRAY['test:ada'])",
            &[&hike(i, place)],
        )
        .await
        .unwrap();
    }
    // Two of them have their shorter levels already (the language queue's work, below).
    c.batch_execute(
        "UPDATE dionysus.memories SET summary = 'They hiked the Dolomites with their sister for six days: forests, ridges, huts, map arguments, happy and tired.', \
                                     micro = 'A happy, tiring Dolomites hike with their sister.' WHERE content LIKE '%in the Dolomites (trip 0)%'; \
         UPDATE dionysus.memories SET micro = 'Six days in the Tatras with their sister.' WHERE content LIKE '%in the Tatra mountains (trip 1)%';",
    )
    .await
    .unwrap();
    let mid: Uuid = one(
        c,
        "SELECT (dionysus.log_message('test', 'q1', 'dm:ada', 'ada', 'What did I tell you about my hiking trips with my sister?') ->> 'message_id')::uuid",
    )
    .await;
    let ask = |budget: i32| {
        let c = &db.client;
        async move {
            c.query_one("SELECT dionysus.chat_context($1, 12, 12, false, $2)", &[&mid, &budget]).await.unwrap().get::<_, Value>(0)
        }
    };
    let small = ask(3000).await;
    let big = ask(12000).await;
    for (ctx, budget) in [(&small, 3000), (&big, 12000)] {
        let b = &ctx["context_budget"];
        assert_eq!(b["budget"], json!(budget));
        assert_eq!(b["tokenizer"], "wordpiece");
        assert!(b["used"].as_u64().unwrap() <= budget as u64, "over its budget: {b}");
        assert_eq!(b["over"], false);
        report_adds_up(ctx);
        // Every memory's tokens are its words' real count plus its line's label.
        for (content, _, tokens) in memories(ctx) {
            let counted: i32 = one(c, &format!("SELECT dionysus.count_tokens({})", lit(&content))).await;
            assert_eq!(tokens, counted as u64 + 12, "{content}");
        }
    }
    let (s, g) = (memories(&small), memories(&big));
    // 12 hikes of about 600 tokens: 12K shows them all in full; 3K cannot.
    assert_eq!(g.len(), 12, "{}", big["context_budget"]);
    assert!(g.iter().all(|(_, level, _)| level == "full"), "{g:?}");
    let tokens = |l: &[(String, String, u64)]| l.iter().map(|m| m.2).sum::<u64>();
    assert!(tokens(&s) < tokens(&g) / 2, "3K: {} tokens of memories, 12K: {}", tokens(&s), tokens(&g));
    assert!(s.iter().any(|(_, level, _)| level != "full"), "the 3K context shows nothing at a shorter level: {s:?}");
    // The levels used are the memories' own: a summary or micro line where there is one.
    for (content, level, _) in &s {
        match level.as_str() {
            "summary" => assert!(content.starts_with("They hiked the Dolomites"), "{content}"),
            "micro" => assert!(content == "A happy, tiring Dolomites hike with their sister." || content == "Six days in the Tatras with their sister."),
            "clipped" => assert!(content.ends_with(" …") && content.split_whitespace().count() == 17, "{content}"),
            "full" => assert!(content.contains("(trip "), "{content}"),
            other => panic!("unknown level {other}"),
        }
    }
    let levels = &small["context_budget"]["sections"]["memories"]["levels"];
    let counted: u64 = levels.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(counted, s.len() as u64, "{levels}");
    // What the 3K budget left out is named, and the rest is reported as cut.
    let cut = small["context_budget"]["sections"]["memories"]["cut"].as_u64().unwrap();
    assert_eq!(cut as usize + s.len(), 12);

    // The budgets are data: the chat task's budget is the default one, and it can be changed.
    let default = c.query_one("SELECT dionysus.chat_context($1, 12, 12, false)", &[&mid]).await.unwrap().get::<_, Value>(0);
    assert_eq!(default["context_budget"]["task"], "chat");
    assert_eq!(default["context_budget"]["budget"], 3000);
    c.batch_execute("UPDATE dionysus.context_budgets SET tokens = 12000 WHERE task = 'chat'").await.unwrap();
    let default = c.query_one("SELECT dionysus.chat_context($1, 12, 12, false)", &[&mid]).await.unwrap().get::<_, Value>(0);
    assert_eq!(memories(&default).len(), 12);
    // An archetype names its task: a question about the past is a deep conversation's 6K.
    let shaped = c.query_one("SELECT dionysus.chat_context($1, 12, 12, true)", &[&mid]).await.unwrap().get::<_, Value>(0);
    assert_eq!(shaped["archetype"]["name"], "past_question", "{}", shaped["archetype"]);
    assert_eq!((&shaped["context_budget"]["task"], &shaped["context_budget"]["budget"]), (&json!("deep_conversation"), &json!(6000)));
    // The turns are kept unbroken from the newest, in their order: with a long turn between
    // short ones and little room, the short newest stays, the long one and all before it go.
    // (The long one's first words alone are some 200 tokens: even clipped it cannot fit.)
    let long = "Pneumonoultramicroscopicsilicovolcanoconiosis ".repeat(40);
    for (i, words) in ["An early short turn.", long.trim(), "A later short turn."].iter().enumerate() {
        c.execute("SELECT dionysus.log_message('test', $1, 'dm:ada', 'ada', $2)", &[&format!("h{i}"), words]).await.unwrap();
    }
    let last: Uuid = one(c, "SELECT (dionysus.log_message('test', 'h9', 'dm:ada', 'ada', 'And now?') ->> 'message_id')::uuid").await;
    let tight = c.query_one("SELECT dionysus.chat_context($1, 0, 12, false, 100)", &[&last]).await.unwrap().get::<_, Value>(0);
    let turns: Vec<&str> = tight["recent_turns"].as_array().unwrap().iter().map(|t| t["content"].as_str().unwrap()).collect();
    assert_eq!(turns.last(), Some(&"A later short turn."), "{turns:?}");
    assert!(!turns.contains(&"An early short turn."), "a hole in the transcript: {turns:?}");
    let roomy = c.query_one("SELECT dionysus.chat_context($1, 0, 12, false, 12000)", &[&last]).await.unwrap().get::<_, Value>(0);
    let turns: Vec<&str> = roomy["recent_turns"].as_array().unwrap().iter().map(|t| t["content"].as_str().unwrap()).collect();
    let (early, late) = (turns.iter().position(|t| *t == "An early short turn.").unwrap(), turns.iter().position(|t| *t == "A later short turn.").unwrap());
    assert!(early < late && late == turns.len() - 1, "the turns out of order: {turns:?}");

    // The driver's role reads the budgets and cannot change them.
    let driver = db.connect_as_driver().await;
    let (state, _) = expect_error(&driver, "UPDATE dionysus.context_budgets SET tokens = 200000").await;
    assert_eq!(state, "42501");
    let (state, _) = expect_error(&driver, "UPDATE dionysus.context_archetypes SET budget_task = 'reflection'").await;
    assert_eq!(state, "42501");
}

/// A string as an SQL literal.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_to_its_budget_and_the_queue_fills_long_memories_levels() {
    let db = TestDb::new("context_budget_hb").await;
    let c = &db.client;
    for (i, place) in PLACES.iter().take(5).enumerate() {
        c.execute("SELECT dionysus.remember($1, 'episodic', 0.5)", &[&hike(i, place)]).await.unwrap();
    }
    c.execute("SELECT dionysus.remember('Short and sweet: tea at four.', 'episodic', 0.5)", &[]).await.unwrap();
    // The heartbeat's budget, made tight: the four long memories among its five newest cannot
    // all be in full.
    c.batch_execute("UPDATE dionysus.context_budgets SET tokens = 800 WHERE task = 'heartbeat'").await.unwrap();
    let ctx: Value = one(c, "SELECT dionysus.heartbeat_begin()").await;
    let b = &ctx["context_budget"];
    assert_eq!(b["task"], "heartbeat");
    assert!(b["used"].as_u64().unwrap() <= 800, "{b}");
    report_adds_up(&ctx);
    let shown = ctx["recent_memories"].as_array().unwrap();
    let full = shown.iter().filter(|m| m["level"] == "full" && m["content"].as_str().unwrap().contains("(trip ")).count();
    assert_eq!(shown.len(), 5, "{b}");
    assert!(full < 4, "all four long memories in full within 800 tokens: {b}");
    assert!(shown.iter().any(|m| m["content"] == "Short and sweet: tea at four."), "the short one was cut: {b}");
    // What the heartbeat stored as its context is the fitted one.
    let stored: Value = one(c, "SELECT context -> 'context_budget' FROM dionysus.heartbeat_log ORDER BY started_at DESC LIMIT 1").await;
    assert_eq!(&stored, b);

    // The language queue asks for the levels of the long ones only, once.
    c.batch_execute("SELECT dionysus.enqueue_language_work()").await.unwrap();
    let queued: i64 = one(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'condense_memory'").await;
    assert_eq!(queued, 5);
    c.batch_execute("SELECT dionysus.enqueue_language_work()").await.unwrap();
    let again: i64 = one(c, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'condense_memory'").await;
    assert_eq!(again, 5, "queued twice");
    // The driver does the work with the (scripted) model; the levels land on the memory.
    let llm = FakeLlm::start().await;
    llm.json("TASK: condense_memory", json!({"summary": "Five days of ridges and huts with their sister.", "micro": "A mountain hike with their sister."}));
    let mind = Arc::new(Mind::new(scripted_driver_config(driver_conninfo(&db.name), &llm), Arc::new(TestChannel::new(&["ada"]))));
    let items: Vec<Uuid> = c
        .query("SELECT id FROM dionysus.work_queue WHERE action = 'condense_memory'", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for id in items {
        conversation::extract_now(&mind, id).await;
    }
    let filled: i64 = one(c, "SELECT count(*) FROM dionysus.memories WHERE micro = 'A mountain hike with their sister.' \
                                AND summary = 'Five days of ridges and huts with their sister.' AND stage = 'fresh'").await;
    assert_eq!(filled, 5);
    // The next heartbeat (the first one finished: its narrative is the newest memory now)
    // shows the long ones at those levels.
    let hb = Uuid::parse_str(ctx["heartbeat_id"].as_str().unwrap()).unwrap();
    c.execute("SELECT dionysus.heartbeat_commit($1, $2)", &[&hb, &json!({"actions": [{"action": "rest", "params": {}}]})]).await.unwrap();
    c.execute("SELECT dionysus.heartbeat_finish($1, 'rested')", &[&hb]).await.unwrap();
    let ctx: Value = one(c, "SELECT dionysus.heartbeat_begin()").await;
    let shown = ctx["recent_memories"].as_array().unwrap();
    assert_eq!(shown.len(), 5, "{}", ctx["context_budget"]);
    assert!(shown.iter().any(|m| m["level"] == "summary" || m["level"] == "micro"), "{}", ctx["context_budget"]);
    assert!(ctx["context_budget"]["used"].as_u64().unwrap() <= 800);
}
