//! `dionysus-bench model [URL MODEL [API_KEY]]`: how well a model serves Dionysus (#35). A fixed
//! conversation set — three people, facts with gold answers, a reminder, a correction, questions
//! about earlier turns, a heartbeat — goes through the real driver (replies, extraction, rules,
//! the heartbeat's decision) against an OpenAI-compatible endpoint, and what was stored is
//! compared with what was said. Without a URL it runs against the scripted endpoint twice: a
//! model that follows instructions, and one that misbehaves as small base models do (echoed
//! prompts, placeholders, arrays, prose, `<think>` drafts, cut JSON).
//!
//! Prints per run: extraction precision and recall against the gold facts, facts stored that
//! nobody said, replies that answered the question, fallbacks, the reminder, the heartbeat's
//! decision, and per task the calls, p50/p95 latency, unusable answers and tokens per call
//! (from the driver's own record of each call).
use dionysus_driver::channel::test::TestChannel;
use dionysus_driver::channel::Incoming;
use dionysus_driver::conversation::{self, Handled};
use dionysus_driver::{heartbeat, work, Mind};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, p50_p95, scripted_driver_config, TestDb};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One person's turn: their words and the facts it carries (each fact: words a stored fact must
/// all contain to be that fact).
struct Turn {
    who: &'static str,
    words: &'static str,
    facts: &'static [&'static [&'static str]],
    /// A question about an earlier turn: a word its reply must contain.
    answer: Option<&'static str>,
}

const SET: [Turn; 12] = [
    Turn { who: "ada", words: "My sister Mira lives in Porto and works as a nurse.", facts: &[&["mira", "porto"], &["mira", "nurse"]], answer: None },
    Turn { who: "bo", words: "I'm training for the Berlin marathon in September.", facts: &[&["marathon", "berlin"]], answer: None },
    Turn { who: "ada", words: "We have a border collie called Rex who is four years old.", facts: &[&["rex", "collie"]], answer: None },
    Turn { who: "cy", words: "hello there", facts: &[], answer: None },
    Turn { who: "bo", words: "My partner Sam is a chef at a ramen place downtown.", facts: &[&["sam", "chef"]], answer: None },
    Turn { who: "ada", words: "Remind me to call Mia on Sunday.", facts: &[], answer: None },
    Turn { who: "cy", words: "I just moved to Oslo for a research job at the university.", facts: &[&["oslo"]], answer: None },
    Turn { who: "ada", words: "Actually, Mira moved to Lisbon last month.", facts: &[&["mira", "lisbon"]], answer: None },
    Turn { who: "bo", words: "What race am I training for?", facts: &[], answer: Some("marathon") },
    Turn { who: "ada", words: "Which city does my sister live in now?", facts: &[], answer: Some("lisbon") },
    Turn { who: "cy", words: "Which city did I move to?", facts: &[], answer: Some("oslo") },
    Turn { who: "ada", words: "What is my dog called?", facts: &[], answer: Some("rex") },
];

/// One model call as the driver recorded it.
#[derive(Clone, Debug)]
struct Call {
    task: String,
    ms: f64,
    tokens: Option<u64>,
    unusable: bool,
    ok: bool,
}

static CALLS: Mutex<Vec<Call>> = Mutex::new(Vec::new());

/// Reads the driver's "LLM answered" and "LLM call failed" events.
struct Calls;

#[derive(Default)]
struct Fields {
    message: String,
    task: String,
    ms: u64,
    tokens: Option<u64>,
    unusable: bool,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "task" {
            self.task = value.to_string();
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "ms" => self.ms = value,
            "tokens" => self.tokens = Some(value),
            _ => {}
        }
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "unusable" {
            self.unusable = value;
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Calls {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "dionysus_driver::llm" {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        let ok = match f.message.as_str() {
            "LLM answered" => true,
            "LLM call failed" => false,
            _ => return,
        };
        CALLS.lock().unwrap().push(Call { task: f.task, ms: f.ms as f64, tokens: f.tokens, unusable: f.unusable, ok });
    }
}

/// A rule's needle for the extraction of the turn saying `words` (its prompt also carries the
/// conversation so far, where earlier turns would match too).
fn latest(words: &str) -> String {
    format!("TASK: extract && Latest message from the user:\\n{words}")
}

/// The scripted endpoint as a model that follows instructions: grounded facts, answers to the
/// questions, a rule for the reminder, a valid decision.
fn follows_instructions(llm: &FakeLlm) {
    let facts = [
        ("My sister Mira", json!([{"content": "Ada's sister Mira lives in Porto", "subject": "Mira"}, {"content": "Mira works as a nurse", "subject": "Mira"}])),
        ("I'm training for the Berlin", json!([{"content": "Bo is training for the Berlin marathon in September", "subject": "Bo"}])),
        ("We have a border collie", json!([{"content": "Ada has a border collie called Rex", "subject": "Rex"}])),
        ("My partner Sam", json!([{"content": "Bo's partner Sam is a chef at a ramen place", "subject": "Sam"}])),
        ("I just moved to Oslo", json!([{"content": "Cy moved to Oslo for a research job at the university", "subject": "Cy"}])),
        ("Actually, Mira moved", json!([{"content": "Mira moved to Lisbon last month", "subject": "Mira"}])),
    ];
    for (said, f) in facts {
        llm.json(&latest(said), json!({"facts": f, "triples": [], "goals": [], "objectives": []}));
    }
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": [], "objectives": []}));
    // The last question first: a later prompt carries the earlier turns of its conversation.
    for (asked, reply) in [("What is my dog called", "Your dog is Rex, the border collie."), ("Which city did I move", "You moved to Oslo."),
                           ("Which city does my sister", "Mira lives in Lisbon now."), ("What race am I training", "The Berlin marathon, in September.")] {
        llm.on(&format!("TASK: chat && {asked}"), Answer::Text(reply.into()));
    }
    llm.on("TASK: chat", Answer::Text("Thanks for telling me.".into()));
    llm.json("TASK: rule_from_words", json!({
        "rule": {"name": "call Mia", "description": "On Sunday at 10, remind them to call Mia", "trigger": "time.hour", "once": true,
                 "condition": {"all": [{"var": "person.local_dow", "op": "=", "value": 7}, {"var": "person.local_hour", "op": "=", "value": 10}]},
                 "intents": [{"request_contact": "call Mia"}]},
        "confirmation": "I'll remind you on Sunday to call Mia."}));
    llm.json("TASK: heartbeat", json!({"reasoning": "A quiet hour: resting.", "actions": [{"action": "rest", "params": {}}], "goal_changes": []}));
    llm.json("TASK: narrative", json!({"narrative": "I rested and thought about what Ada told me.", "emotional_valence": 0.1}));
}

/// The scripted endpoint as a small base model: what Gemma 3 270M and its kind were seen to
/// answer (issue #35), every task.
fn misbehaves(llm: &FakeLlm) {
    llm.on(&latest("My sister Mira"), Answer::Text(r#"{"facts": [{"content": "a self-contained statement", "subject": "who or what it is about"}], "triples": [{"subject": "user", "predicate": "lives_in", "object": "Lisbon"}]}"#.into()));
    llm.on(&latest("I'm training for the Berlin"), Answer::Text(r#"[{"facts": [{"content": "The user enjoys hiking in the Alps", "subject": "user"}]}]"#.into()));
    llm.on(&latest("We have a border collie"), Answer::Text("<think>{\"facts\": [{\"content\": \"Ada has a cat\"}]}</think> Sure! Here are the facts.".into()));
    llm.on(&latest("My partner Sam"), Answer::Cut(r#"{"facts": [{"content": "Sam is a chef at"#.into()));
    llm.on(&latest("I just moved to Oslo"), Answer::Echo("{\"facts\": []}".into()));
    llm.on("TASK: extract", Answer::Text("I'm sorry, I can't do that.".into()));
    llm.on("TASK: chat && What is my dog", Answer::Endless("woof".into()));
    llm.on("TASK: chat && Which city", Answer::Echo("12:00 ## ok ok ok".into()));
    llm.on("TASK: chat", Answer::Text("Here is what I know: {{memories}}".into()));
    llm.on("TASK: rule_from_words", Answer::Text(r#"{"rule": {"name": "<a few words>", "trigger": "time.hour", "intents": []}, "confirmation": "<what you tell them>"}"#.into()));
    llm.on("TASK: heartbeat", Answer::Text("{}".into()));
    llm.on("TASK: narrative", Answer::Text(r#"{"narrative": "...", "emotional_valence": 0}"#.into()));
}

pub async fn model(endpoint: Option<(String, String, Option<String>)>) {
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Calls));
    match endpoint {
        Some((url, name, key)) => run(&format!("{name} at {url}"), Some((url, name, key)), None).await,
        None => {
            run("scripted: follows instructions", None, Some(follows_instructions as fn(&FakeLlm))).await;
            run("scripted: a small base model's answers", None, Some(misbehaves as fn(&FakeLlm))).await;
        }
    }
}

async fn run(label: &str, endpoint: Option<(String, String, Option<String>)>, script: Option<fn(&FakeLlm)>) {
    CALLS.lock().unwrap().clear();
    let db = TestDb::new("bench_model").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true); SELECT dionysus.set_clock('2026-11-25 10:00+00')").await.unwrap();
    let llm = FakeLlm::start().await;
    if let Some(script) = script {
        script(&llm);
    }
    let mut config = scripted_driver_config(driver_conninfo(&db.name), &llm);
    if let Some((url, name, key)) = &endpoint {
        for role in [&mut config.fast, &mut config.smart] {
            role.base_url = url.clone();
            role.model = name.clone();
            role.api_key = key.clone();
            role.slots = 1;
            role.timeout = std::time::Duration::from_secs(300);
        }
    }
    let people = ["ada", "bo", "cy"];
    let channel = Arc::new(TestChannel::new(&people));
    let mind = Arc::new(Mind::new(config, channel.clone()));
    let started = Instant::now();
    let (mut answered, mut asked, mut fallbacks, mut reply_ms) = (0, 0, 0, vec![]);
    for (i, t) in SET.iter().enumerate() {
        let incoming = Incoming {
            message_id: format!("m{i}"),
            channel_id: format!("dm:{}", t.who),
            author_id: t.who.into(),
            content: t.words.into(),
            private: true,
            reply_to: None,
        };
        let mut jobs = tokio::task::JoinSet::new();
        let at = Instant::now();
        let h = conversation::handle(&mind, incoming, &mut jobs).await;
        reply_ms.push(at.elapsed().as_secs_f64() * 1000.0);
        while jobs.join_next().await.is_some() {}
        // What this turn queued is done now; an item parked after unusable answers waits its back-off.
        c.batch_execute("UPDATE dionysus.work_queue SET available_at = now() WHERE status = 'pending' AND attempts = 0").await.unwrap();
        work::drain(&mind, None).await;
        if matches!(h, Handled::Replied { fallback: true, .. }) {
            fallbacks += 1;
        }
        if let Some(word) = t.answer {
            asked += 1;
            let reply = channel.sent().last().map(|(_, r)| r.to_lowercase()).unwrap_or_default();
            if reply.contains(word) && !matches!(h, Handled::Replied { fallback: true, .. }) {
                answered += 1;
            }
        }
        c.batch_execute("SELECT dionysus.advance_clock('10 minutes')").await.unwrap();
    }
    let hb = heartbeat::run_once(&mind).await.map(|r| r.decided_by).unwrap_or("failed");

    // What was stored against what was said.
    let (mut stored, mut matched, mut invented) = (0, 0, vec![]);
    let mut found = vec![false; SET.iter().map(|t| t.facts.len()).sum()];
    for who in people {
        let rows = c
            .query(
                "SELECT content FROM dionysus.memories WHERE type = 'semantic' AND status = 'active' AND private_to = ARRAY[$1::text]",
                &[&format!("test:{who}")],
            )
            .await
            .unwrap();
        for r in rows {
            let content: String = r.get(0);
            let lower = content.to_lowercase();
            stored += 1;
            let mut k = 0;
            let mut any = false;
            for t in &SET {
                for fact in t.facts {
                    if t.who == who && fact.iter().all(|w| lower.contains(w)) {
                        found[k] = true;
                        any = true;
                    }
                    k += 1;
                }
            }
            if any {
                matched += 1;
            } else {
                invented.push(content);
            }
        }
    }
    let gold = found.len();
    let recalled = found.iter().filter(|f| **f).count();
    let rules: i64 = c.query_one("SELECT count(*) FROM dionysus.mind_rules WHERE person = 'test:ada' AND origin <> 'built_in'", &[]).await.map(|r| r.get(0)).unwrap_or(0);
    let told = channel.sent().iter().any(|(_, r)| r.to_lowercase().contains("could not") && r.to_lowercase().contains("remind"));
    let refused: i64 = c.query_one("SELECT count(*) FROM dionysus.model_text_refusals", &[]).await.map(|r| r.get(0)).unwrap_or(0);

    println!("\n## {label}  ({:.1} s)", started.elapsed().as_secs_f64());
    println!(
        "extraction: precision {}  recall {}/{} ({:.0} %)  facts stored nobody said: {}  (model texts refused by the grounding check: {refused})",
        if stored == 0 { "— (nothing stored)".to_string() } else { format!("{:.2} ({matched}/{stored})", matched as f64 / stored as f64) },
        recalled,
        gold,
        100.0 * recalled as f64 / gold as f64,
        invented.len()
    );
    for i in &invented {
        println!("  invented: {i}");
    }
    let (p50, p95) = p50_p95(&mut reply_ms);
    println!(
        "replies: {answered}/{asked} questions answered from earlier turns, {fallbacks}/{} honest fallbacks; time to reply p50 {p50:.0} ms p95 {p95:.0} ms",
        SET.len()
    );
    println!(
        "reminder: {}   heartbeat decided by: {hb}",
        if rules > 0 { "a rule stored" } else if told { "no rule; the person was told" } else { "no rule, and the person was not told" }
    );
    let calls = CALLS.lock().unwrap().clone();
    let mut by_task: BTreeMap<String, Vec<Call>> = BTreeMap::new();
    for call in calls {
        by_task.entry(call.task.clone()).or_default().push(call);
    }
    println!("| task | calls | p50 ms | p95 ms | unusable answers | tokens per answer |");
    println!("|---|---|---|---|---|---|");
    for (task, calls) in by_task {
        let mut ms: Vec<f64> = calls.iter().map(|c| c.ms).collect();
        let (p50, p95) = p50_p95(&mut ms);
        let unusable = calls.iter().filter(|c| c.unusable).count();
        let tokens: Vec<u64> = calls.iter().filter(|c| c.ok).filter_map(|c| c.tokens).collect();
        let per = if tokens.is_empty() { "—".to_string() } else { format!("{:.0}", tokens.iter().sum::<u64>() as f64 / tokens.len() as f64) };
        println!("| {task} | {} | {p50:.0} | {p95:.0} | {unusable} ({:.0} %) | {per} |", calls.len(), 100.0 * unusable as f64 / calls.len() as f64);
    }
    drop(mind);
}
