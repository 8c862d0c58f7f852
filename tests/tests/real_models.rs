//! Real models, real answers (#35): the scripted server answers as small and chatty models do
//! (endless output, the prompt echoed back, reasoning before the JSON, JSON in fences after prose,
//! arrays for objects, answers cut at the length limit, refusals, endpoints without structured
//! output), and the driver shows the person an honest answer and stores nothing it invented.
use dionysus_driver::config::StructuredOutput;
use dionysus_driver::conversation::Handled;
use dionysus_driver::llm::{Llm, Msg};
use dionysus_driver::work;
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::running::Running;
use dionysus_tests::{driver_conninfo, scripted_driver_config as config, until, TestDb};
use serde_json::{json, Value};

async fn count(db: &tokio_postgres::Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

fn nothing() -> serde_json::Value {
    json!({"facts": [], "triples": [], "goals": []})
}

/// An endless model is cut by `max_tokens` (every request carries its task's bound); its
/// repetitive reply is refused, asked for once more, and the person gets the honest fallback,
/// which is the only bot turn logged. Nothing of the endless text is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_output_is_cut_by_the_bound_and_the_person_still_gets_an_honest_answer() {
    let db = TestDb::new("rm_endless").await;
    let llm = FakeLlm::start().await;
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    llm.on("TASK: chat", Answer::Endless("and so on".into()));
    llm.json("TASK: extract", nothing());
    let mut run = Running::start(config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    let h = run.say("e1", "ada", "Tell me about your day").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    let (_, shown) = run.channel.sent().pop().unwrap();
    assert!(!shown.contains("and so on"), "the endless text was shown: {shown}");
    let chats = llm.requests_with("TASK: chat");
    assert_eq!(chats.len(), 2, "an unusable reply is asked for once more, then the fallback answers");
    assert!(chats.iter().all(|r| r["max_tokens"] == 400), "a reply without its bound: {:?}", chats[0]["max_tokens"]);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE content LIKE '%and so on%'").await, 0);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.memories WHERE content LIKE '%and so on%'").await, 0);
    // The extraction (queued: a fallback turn waits for the model) carries its own bound.
    db.client.batch_execute("UPDATE dionysus.work_queue SET available_at = now()").await.unwrap();
    work::drain(&run.mind, None).await;
    until(&db.client, "SELECT count(*) = 1 FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'", "the extraction").await;
    let extract = llm.requests_with("TASK: extract");
    assert!(!extract.is_empty() && extract.iter().all(|r| r["max_tokens"] == 700), "{extract:?}");
    run.stop().await;
}

/// What a reply looks like from a model that echoes its prompt, thinks aloud, or is cut mid-word:
/// the echo is never shown or stored (the fallback answers), the reasoning is dropped, the cut
/// reply ends at its last full sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoed_thinking_and_cut_replies_are_read_as_a_person_would() {
    let db = TestDb::new("rm_replies").await;
    let llm = FakeLlm::start().await;
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    // Each for its own message's attempts only: later prompts carry the earlier turns.
    llm.on_times("TASK: chat && Do you like bees", 2, Answer::Echo("bees bees 12:00 ## ok".into()));
    llm.on_times("TASK: chat && What is the weather", 1, Answer::Text("<think>They want weather. {\"draft\": 1}</think>I can't see outside, but I hope it's sunny.".into()));
    llm.on_times("TASK: chat && Tell me a story", 1, Answer::Cut("Once there was a fox. It ran to the riv".into()));
    llm.on_times("TASK: chat && Say a template", 2, Answer::Text("Here is what I know: {{memories}}".into()));
    llm.json("TASK: extract", nothing());
    let mut run = Running::start(config(driver_conninfo(&db.name), &llm), &["ada"]).await;

    let h = run.say("r1", "ada", "Do you like bees?").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "an echoed prompt was taken as the reply: {h:?}");
    assert_eq!(llm.requests_with("Do you like bees").iter().filter(|r| r["messages"][0]["content"].as_str().unwrap_or("").starts_with("TASK: chat")).count(), 2);
    let h = run.say("r2", "ada", "What is the weather?").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    let h = run.say("r3", "ada", "Tell me a story").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    let h = run.say("r4", "ada", "Say a template").await;
    assert!(matches!(h, Handled::Replied { fallback: true, .. }), "{h:?}");
    let sent: Vec<String> = run.channel.sent().into_iter().map(|(_, t)| t).collect();
    assert!(!sent[0].contains("TASK: chat") && !sent[0].contains("You are"), "the echo was shown: {}", sent[0]);
    // The fallback says what happened: the model answered, with nothing usable.
    assert!(sent[0].starts_with("My language model gave me an answer I can't use"), "{}", sent[0]);
    assert_eq!(sent[1], "I can't see outside, but I hope it's sunny.");
    assert_eq!(sent[2], "Once there was a fox.");
    assert!(!sent[3].contains("{{"), "{}", sent[3]);
    // The echo is neither a bot turn nor a memory.
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.messages WHERE content LIKE '%TASK: chat%' OR content LIKE '%<think>%'").await, 0);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.memories WHERE content LIKE '%TASK: chat%' OR content LIKE '%bees bees%'").await, 0);
    run.stop().await;
}

/// Extraction answers as small models give them: the draft in `<think>` is not the answer, the
/// fenced JSON after prose is; an array holding the object counts; an echoed prompt, a cut
/// object or several objects in an array store nothing and leave the item to be tried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extraction_reads_the_answer_not_the_draft_or_the_echo() {
    let db = TestDb::new("rm_extract").await;
    let llm = FakeLlm::start().await;
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let fact = |what: &str| json!({"facts": [{"content": what, "subject": "user", "category": "attribute", "confidence": 0.9}], "triples": [], "goals": []});
    let draft = fact("The user lives in Lisbon");
    llm.on(
        "TASK: extract && from the user:\\nI keep bees",
        Answer::Text(format!("<think>Maybe {draft}? No.</think>\nSure! Here it is:\n```json\n{}\n```", fact("The user keeps bees"))),
    );
    llm.on("TASK: extract && from the user:\\nMy sister is Mira", Answer::Text(json!([fact("The user's sister is called Mira")]).to_string()));
    llm.on("TASK: extract && from the user:\\nI play the cello", Answer::Echo(String::new()));
    llm.on("TASK: extract && from the user:\\nI run on Sundays", Answer::Cut("{\"facts\": [{\"content\": \"The user runs on Sund".into()));
    llm.on("TASK: extract && from the user:\\nI like tea", Answer::Text(json!([fact("The user likes tea"), fact("The user likes coffee")]).to_string()));
    llm.on("TASK: chat", Answer::Text("Noted.".into()));
    let mut run = Running::start(config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    for (i, said) in ["I keep bees.", "My sister is Mira.", "I play the cello.", "I run on Sundays.", "I like tea."].iter().enumerate() {
        let h = run.say(&format!("x{i}"), "ada", said).await;
        assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    }
    until(&db.client, "SELECT count(*) = 5 FROM dionysus.work_queue WHERE action = 'extract_message' AND (status = 'done' OR attempts >= 1 AND status <> 'claimed')", "five extractions tried").await;
    let facts = |like: &str| format!("SELECT count(*) FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id WHERE m.content LIKE '{like}'");
    assert_eq!(count(&db.client, &facts("%keeps bees%")).await, 1);
    assert_eq!(count(&db.client, &facts("%Lisbon%")).await, 0, "the draft in <think> was stored");
    assert_eq!(count(&db.client, &facts("%sister is called Mira%")).await, 1);
    assert_eq!(count(&db.client, &facts("%Sund%")).await, 0, "a cut object was stored");
    assert_eq!(count(&db.client, &facts("%likes tea%")).await + count(&db.client, &facts("%coffee%")).await, 0);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.memories WHERE content LIKE '%<one thing the message states%' OR content LIKE '%TASK: extract%'").await, 0);
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'").await, 2);
    assert_eq!(
        count(&db.client, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'pending' AND last_error LIKE 'LLM unusable answer%'").await,
        3
    );
    run.stop().await;
}

/// An endpoint without structured output: the JSON Schema is asked for first, a 400 naming it
/// steps down to json_object, then to nothing, and the endpoint's answer is remembered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_steps_down_where_the_endpoint_refuses_it() {
    let llm = FakeLlm::start().await;
    llm.refuse_formats(&["json_schema", "json_object"]);
    llm.json("TASK: decide", json!({"decision": "wait"}));
    let mut role = dionysus_driver::config::Config::load(None).unwrap().smart;
    role.base_url = llm.base_url.clone();
    role.api_key = None;
    assert_eq!(role.structured_output, StructuredOutput::Auto);
    let model = Llm::new(role);
    let schema = json!({"type": "object", "properties": {"decision": {"type": "string"}}, "required": ["decision"], "additionalProperties": false});
    let msgs = [Msg::system("TASK: decide\nAnswer with JSON."), Msg::user("Now.")];
    for _ in 0..2 {
        let v = model.json_with_schema("decide", &msgs, 0.0, Some(&schema), Ok).await.expect("an answer once the format is one the endpoint takes");
        assert_eq!(v["decision"], "wait");
    }
    let sent: Vec<String> = llm.requests().iter().map(|r| r["response_format"]["type"].as_str().unwrap_or("none").to_string()).collect();
    assert_eq!(sent, ["json_schema", "json_object", "json_object", "none", "none"]);
    let first = &llm.requests()[0];
    assert_eq!(first["response_format"]["json_schema"], json!({"name": "decide", "schema": schema, "strict": true}));
    assert_eq!(llm.requests()[1]["response_format"]["schema"], schema, "json_object with its schema first");
    assert_eq!(llm.requests()[2]["response_format"].get("schema"), None);
    assert_eq!(model.structured_output(), "none");
}

/// llama-cpp-python's server refuses `json_schema` with a 500 (its validation error quoted):
/// the driver reads it as a refusal of the format, not an outage, and sends the schema as
/// `json_object` with a `schema`, the form that server turns into a grammar. Until 0.20.0 the
/// 500 counted as the endpoint down: retried, the breaker opened, and no JSON task got through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_json_schema_with_a_500_gets_its_own_form_of_it() {
    let llm = FakeLlm::start().await;
    llm.refuse_json_schema_as_llama_cpp_python();
    llm.json("TASK: decide", json!({"decision": "wait"}));
    let mut role = dionysus_driver::config::Config::load(None).unwrap().smart;
    role.base_url = llm.base_url.clone();
    role.api_key = None;
    let model = Llm::new(role).with_backoff(std::time::Duration::from_millis(10));
    let schema = json!({"type": "object", "properties": {"decision": {"type": "string"}}, "required": ["decision"]});
    let msgs = [Msg::system("TASK: decide\nAnswer with JSON."), Msg::user("Now.")];
    let v = model.json_with_schema("decide", &msgs, 0.0, Some(&schema), Ok).await.expect("an answer in the server's own form");
    assert_eq!(v["decision"], "wait");
    let formats: Vec<Value> = llm.requests().iter().map(|r| r["response_format"].clone()).collect();
    assert_eq!(formats.len(), 2, "{formats:?}");
    assert_eq!(formats[1], json!({"type": "json_object", "schema": schema}));
    assert_eq!(model.structured_output(), "json_object_schema");
}

/// A chat template without a system role (llama-cpp-python's `gemma` format, found against
/// Gemma 3) drops the system message without a word: the model answered the person's words
/// without ever seeing its task, and no JSON task could succeed. The driver asks each endpoint
/// and model once where instructions are read, then sends them in the first user message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_reach_a_model_whose_chat_template_drops_the_system_message() {
    let db = TestDb::new("rm_nosystem").await;
    let llm = FakeLlm::start().await;
    llm.drop_system_messages();
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    llm.on("TASK: chat", Answer::Text("Bees are wonderful. How many hives do you keep?".into()));
    let fact = json!({"facts": [{"content": "The user keeps bees", "subject": "user", "category": "attribute", "confidence": 0.9}], "triples": [], "goals": []});
    llm.on("TASK: extract && I keep bees", Answer::Text(fact.to_string()));
    llm.on("TASK:", Answer::Text(nothing().to_string()));
    // What a model that never saw its task says.
    llm.on("", Answer::Text("Hello! How can I help you today?".into()));
    let mut run = Running::start(config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    let h = run.say("s1", "ada", "I keep bees.").await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    assert_eq!(run.channel.sent().pop().unwrap().1, "Bees are wonderful. How many hives do you keep?");
    until(&db.client, "SELECT count(*) = 1 FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id WHERE m.content LIKE '%keeps bees%'", "the fact, extracted with its instructions").await;
    // Every request the model saw carried its task, in the first (user) message.
    let seen = llm.requests();
    assert!(!seen.is_empty());
    for r in &seen {
        assert_eq!(r["messages"][0]["role"], "user", "{r}");
        assert!(r["messages"][0]["content"].as_str().unwrap_or("").starts_with("TASK: "), "a request without its task: {r}");
    }
    // Asked once per endpoint and model, not once a call: another turn asks nothing more.
    let probes = llm.probes();
    assert!(probes >= 1);
    run.say("s2", "ada", "I also keep goats.").await;
    until(&db.client, "SELECT count(*) = 2 FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'done'", "the second extraction").await;
    assert_eq!(llm.probes(), probes, "the endpoint was asked again");
    run.stop().await;

    // A template that refuses a system role outright (Gemma 2's own raises "System role not
    // supported", a 400) gets the instructions in the user message too.
    let strict = FakeLlm::start().await;
    strict.refuse_system_role();
    strict.on("TASK: decide", Answer::Text(json!({"decision": "wait"}).to_string()));
    let mut role = dionysus_driver::config::Config::load(None).unwrap().smart;
    role.base_url = strict.base_url.clone();
    role.api_key = None;
    let model = Llm::new(role);
    let v = model.json("decide", &[Msg::system("TASK: decide\nAnswer with JSON."), Msg::user("Now.")], 0.0, Ok).await.expect("an answer");
    assert_eq!(v["decision"], "wait");
    assert_eq!(model.system_messages(), "in_user");
    assert!(strict.requests().iter().all(|r| r["messages"][0]["role"] == "user"), "{:?}", strict.requests());
}

/// One model slot: a background task waits while a person is being answered, and the person's
/// request takes the slot first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_person_goes_first_on_a_one_slot_endpoint() {
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Text("Hello there, nice to meet you.".into()));
    llm.json("TASK: reflect", json!({"insights": []}));
    let mut role = dionysus_driver::config::Config::load(None).unwrap().smart;
    role.base_url = llm.base_url.clone();
    role.api_key = None;
    assert_eq!(role.slots, 1);
    let model = std::sync::Arc::new(Llm::new(role));
    let conversation = model.person_first();
    let background = {
        let model = model.clone();
        tokio::spawn(async move { model.json("reflect", &[Msg::system("TASK: reflect\nThink."), Msg::user("Now.")], 0.0, Ok).await })
    };
    let reply = model.chat("chat_system", &[Msg::system("TASK: chat\nYou are kind."), Msg::user("Hi")], 0.5).await.unwrap();
    assert_eq!(reply, "Hello there, nice to meet you.");
    tokio::task::yield_now().await;
    assert!(llm.requests_with("TASK: reflect").is_empty(), "background work went ahead of the person");
    drop(conversation);
    background.await.unwrap().expect("the background task runs once nobody is waiting");
    assert_eq!(llm.requests_with("TASK: reflect").len(), 1);
}

/// A background job in flight is given up for a person's reply and its connection closed, so a
/// server that stops on disconnect stops generating it: every answer streams. (Against Gemma 3
/// on llama-cpp-python, a dropped extraction was not streamed and was written to its end while
/// the person's reply waited behind it and ran out of time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_given_up_for_a_person_stops_the_model_generating() {
    let llm = FakeLlm::start().await;
    llm.on("TASK: reflect", Answer::Trickle("{\"insights\": [".into()));
    llm.on("TASK: chat", Answer::Text("Hello there, nice to meet you.".into()));
    let mut role = dionysus_driver::config::Config::load(None).unwrap().smart;
    role.base_url = llm.base_url.clone();
    role.api_key = None;
    assert_eq!(role.slots, 1);
    let model = std::sync::Arc::new(Llm::new(role));
    let background = {
        let model = model.clone();
        tokio::spawn(async move { model.json("reflect", &[Msg::system("TASK: reflect\nThink."), Msg::user("Now.")], 0.0, Ok).await })
    };
    for _ in 0..500 {
        if !llm.requests_with("TASK: reflect").is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(llm.requests_with("TASK: reflect").len(), 1, "the background job never started");
    let reply = model.chat("chat_system", &[Msg::system("TASK: chat\nYou are kind."), Msg::user("Hi")], 0.5).await.unwrap();
    assert_eq!(reply, "Hello there, nice to meet you.");
    for _ in 0..500 {
        if llm.hung_up() > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(llm.hung_up() >= 1, "the model went on generating the job given up for the person");
    assert_eq!(llm.requests_with("TASK: reflect")[0]["stream"], json!(true));
    background.abort();
}

/// A background job whose answer is unusable twice is parked: two requests, then its work item
/// waits out the queue's back-off (its error says why) instead of asking again at full rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_unusable_twice_is_parked_not_retried_at_full_rate() {
    let db = TestDb::new("rm_parked").await;
    let llm = FakeLlm::start().await;
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    llm.on("TASK: chat", Answer::Text("Nice to hear from you.".into()));
    llm.on("TASK: extract", Answer::Text("Sure! Here are the facts you asked for, in prose and no JSON.".into()));
    let mut run = Running::start(config(driver_conninfo(&db.name), &llm), &["ada"]).await;
    run.say("p1", "ada", "My sister Mira moved to Porto last spring").await;
    until(
        &db.client,
        "SELECT count(*) = 1 FROM dionysus.work_queue WHERE action = 'extract_message' AND status = 'pending' \
         AND attempts = 1 AND last_error LIKE '%unusable answer%' AND available_at > now()",
        "the extraction parked",
    )
    .await;
    // (The turn's concepts are another job, on the same rule: only the turn's reading counts.)
    assert_eq!(llm.requests_with("TASK: extract\\n").len(), 2, "an unusable answer is asked for once more, then parked");
    assert_eq!(count(&db.client, "SELECT count(*) FROM dionysus.memories WHERE content ILIKE '%here are the facts%'").await, 0);
    run.stop().await;
}

/// A reply streams: given up at its bound, its connection closes mid-answer and a server that
/// stops on disconnect stops generating (the fake counts it), instead of writing on for nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_given_up_at_its_bound_stops_the_model_generating() {
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Trickle("and then and then".into()));
    llm.on("TASK: fine", Answer::Text("All is well, thank you for asking.".into()));
    let mut role = dionysus_driver::config::Config::load(None).unwrap().smart;
    role.base_url = llm.base_url.clone();
    role.api_key = None;
    for (kind, bounds) in role.tasks.iter_mut() {
        if *kind == "reply" {
            bounds.timeout = std::time::Duration::from_secs(2);
        }
    }
    let model = Llm::new(role);
    // (The model never finishes: only the bound ends the call.)
    let answer = model.chat("chat_system", &[Msg::system("TASK: chat\nYou are kind."), Msg::user("Hi")], 0.5).await;
    assert!(matches!(answer, Err(dionysus_driver::llm::LlmError::Timeout)), "{answer:?}");
    assert_eq!(llm.requests_with("TASK: chat")[0]["stream"], json!(true), "a reply is not streamed");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while llm.hung_up() == 0 {
        assert!(std::time::Instant::now() < deadline, "the model still generates after the reply was given up");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A streamed answer is read whole: its words, its finish, its usage.
    let (text, usage) = model.chat_with_usage("chat_system", &[Msg::system("TASK: fine\nYou are kind."), Msg::user("How are you?")], 0.5).await.unwrap();
    assert_eq!(text, "All is well, thank you for asking.");
    assert_eq!(usage.and_then(|u| u.completion_tokens).and_then(|n| n.as_u64()), Some(7));
}
