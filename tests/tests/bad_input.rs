//! Bad input: a clear error with an SQLSTATE that names the argument, and nothing half-written.
use dionysus_tests::*;

/// (statement, expected SQLSTATE, text the message must contain)
const CASES: &[(&str, &str, &str)] = &[
    ("SELECT dionysus.remember('')", "22023", "\"content\""),
    ("SELECT dionysus.remember('   ')", "22023", "\"content\""),
    ("SELECT dionysus.remember(NULL)", "22004", "\"content\""),
    ("SELECT dionysus.remember('x', 'dream')", "22023", "\"type\""),
    ("SELECT dionysus.remember('x', importance => 1.5)", "22023", "\"importance\""),
    ("SELECT dionysus.remember('x', importance => 'NaN')", "22023", "\"importance\""),
    ("SELECT dionysus.remember('x', importance => '-Infinity')", "22023", "\"importance\""),
    ("SELECT dionysus.remember('x', valence => -2)", "22023", "\"valence\""),
    ("SELECT dionysus.remember('x', confidence => -0.1)", "22023", "\"confidence\""),
    ("SELECT dionysus.remember('x', metadata => '[1, 2]')", "22023", "\"metadata\""),
    ("SELECT dionysus.remember(repeat('a', 100001))", "22001", "\"content\""),
    ("SELECT * FROM dionysus.remember_batch('{\"content\": \"x\"}')", "22P02", "\"items\""),
    ("SELECT * FROM dionysus.remember_batch('[\"just text\"]')", "22P02", "element 0"),
    ("SELECT * FROM dionysus.remember_batch('[{\"content\": \"x\", \"typo\": 1}]')", "22P02", "\"typo\""),
    ("SELECT * FROM dionysus.remember_batch('[{\"content\": 5}]')", "22P02", "items[0].content"),
    ("SELECT * FROM dionysus.remember_batch('[{\"content\": \"x\", \"created_at\": \"yesterday-ish\"}]')", "22P02", "items[0].created_at"),
    ("SELECT * FROM dionysus.remember_batch('[{\"content\": \"ok\"}, {\"content\": \"\"}]')", "22023", "items[1].content"),
    ("SELECT dionysus.learn('fact', confidence => 2)", "22023", "\"confidence\""),
    ("SELECT dionysus.connect(gen_random_uuid(), gen_random_uuid())", "P0002", "\"from_id\""),
    ("SELECT dionysus.archive(gen_random_uuid())", "P0002", "\"memory_id\""),
    ("SELECT dionysus.forget(NULL)", "22004", "\"memory_id\""),
    ("SELECT dionysus.supersede(gen_random_uuid(), 'new')", "P0002", "\"old_id\""),
    ("SELECT * FROM dionysus.recall_by_id(gen_random_uuid())", "P0002", "\"memory_id\""),
    ("SELECT dionysus.close_episode(gen_random_uuid())", "P0002", "\"episode_id\""),
    ("SELECT * FROM dionysus.recall('')", "22023", "\"query\""),
    ("SELECT * FROM dionysus.recall('x', 0)", "22023", "\"k\""),
    ("SELECT * FROM dionysus.recall('x', 5, types => ARRAY['nope'])", "22023", "\"types\""),
    ("SELECT * FROM dionysus.recall('x', 5, min_importance => 7)", "22023", "\"min_importance\""),
    ("SELECT * FROM dionysus.recall('x', 5, since => '2024-02-01', until => '2024-01-01')", "22023", "\"since\""),
    ("SELECT dionysus.add_triple('', 'likes', 'tea')", "22023", "\"subject\""),
    ("SELECT dionysus.add_triple('a', 'likes', 'tea', confidence => 9)", "22023", "\"confidence\""),
    ("SELECT dionysus.link_concept(gen_random_uuid(), 'x')", "P0002", "\"memory_id\""),
    ("SELECT dionysus.recompute_neighborhoods(0)", "22023", "\"batch\""),
    ("SELECT dionysus_internal.rhythm_at('{200}', '{1}', '{0}', 5, false)", "22023", "\"hours\""),
    ("SELECT dionysus_internal.rhythm_at('{1}', '{1,2}', '{0}', 5, false)", "22023", "\"activity\""),
    ("SELECT dionysus_internal.rhythm_at('{1}', '{1}', '{0}', 168, false)", "22023", "\"hour_of_week\""),
    ("SELECT dionysus_internal.rhythm_at('{1,NULL}', '{1,2}', '{0,0}', 5, false)", "22004", "\"hours[]\""),
    ("SELECT dionysus_internal.rhythm_at('{3,3}', '{1,2}', '{0,0}', 5, false)", "22023", "\"hours\""),
    ("SELECT dionysus_internal.rule_passes(NULL, '{}', 0, NULL, NULL, NULL)", "22004", "\"on_trigger\""),
    ("SELECT dionysus_internal.rule_passes('tick', NULL, 0, NULL, NULL, NULL)", "22004", "\"persons\""),
    ("SELECT dionysus_internal.rule_passes('tick', '{a,b,a}', 0, NULL, NULL, NULL)", "22023", "\"persons\""),
    ("SELECT dionysus_internal.run_rules_for('tick', '{a,a}', 0)", "22023", "\"persons\""),
    ("SELECT dionysus_internal.run_rules_for(NULL, '{a}', 0)", "22004", "\"on_trigger\""),
    ("SELECT dionysus_internal.run_rules_for('tick', NULL, 0)", "22004", "\"persons\""),
    ("SELECT dionysus.embed(NULL)", "22004", "\"content\""),
    // The conversation organ.
    ("SELECT dionysus.log_message('', 'm', 'c', 'a', 'hi')", "22023", "\"platform\""),
    ("SELECT dionysus.log_message('p', ' ', 'c', 'a', 'hi')", "22023", "\"platform_message_id\""),
    ("SELECT dionysus.log_message('p', 'm', 'c', NULL, 'hi')", "22023", "\"author_id\""),
    ("SELECT dionysus.log_message('p', 'm', 'c', 'a', '')", "22023", "\"content\""),
    ("SELECT dionysus.log_message('p', 'm', 'c', 'a', 'hi', reply_to => gen_random_uuid())", "P0002", "\"reply_to\""),
    ("SELECT dionysus.chat_context(NULL)", "22004", "\"message_id\""),
    ("SELECT dionysus.chat_context(gen_random_uuid())", "P0002", "\"message_id\""),
    ("SELECT dionysus.chat_context(gen_random_uuid(), max_turns => -1)", "22023", "\"max_turns\""),
    ("SELECT dionysus.chat_context(gen_random_uuid(), budget => 50)", "22023", "\"budget\""),
    ("SELECT dionysus.count_tokens(NULL)", "22004", "\"content\""),
    ("SELECT dionysus.fit_to_budget('no_such_task', '{}')", "P0002", "\"task\""),
    ("SELECT dionysus.fit_to_budget('chat', '[1]')", "22023", "\"context\""),
    ("SELECT dionysus_internal.fit_context('{}', 0, NULL, NULL)", "22023", "\"budget\""),
    ("DELETE FROM dionysus.context_budgets WHERE task = 'heartbeat'", "23001", "heartbeat"),
    ("SELECT dionysus.prompt_template('no_such_prompt')", "P0002", "\"key\""),
    ("SELECT dionysus.set_prompt_template('Bad Key', 'x')", "22023", "\"key\""),
    ("SELECT dionysus.set_prompt_template('chat_system', 'x', temperature => 3)", "22023", "\"temperature\""),
    ("SELECT dionysus.release_work(gen_random_uuid(), 'x', -5)", "22023", "\"delay_seconds\""),
    ("SELECT dionysus.release_work(gen_random_uuid())", "P0002", "\"work_id\""),
    ("SELECT dionysus.claim_work_item(NULL, 'w')", "22004", "\"work_id\""),
    ("SELECT * FROM dionysus.queue_reply(gen_random_uuid(), 'w', '  ')", "22023", "\"content\""),
    ("SELECT * FROM dionysus.queue_reply(gen_random_uuid(), 'w', 'hello')", "P0002", "\"message_id\""),
    ("SELECT * FROM dionysus.queue_reply(gen_random_uuid(), ' ', 'hello')", "22023", "\"worker\""),
    ("SELECT * FROM dionysus.reserve_outbox('w', 'test', 0)", "22023", "\"max_items\""),
    ("SELECT * FROM dionysus.reserve_outbox('w', '')", "22023", "\"platform\""),
    ("SELECT dionysus.confirm_outbox(gen_random_uuid(), 'w', 'c', 'bot')", "P0002", "\"outbox_id\""),
    ("SELECT dionysus.confirm_outbox(gen_random_uuid(), 'w', '', 'bot')", "22023", "\"channel_id\""),
    ("SELECT dionysus.outbox_part_sent(gen_random_uuid(), 'w', 0, '')", "22023", "\"platform_message_id\""),
    ("SELECT dionysus.heartbeat_touch(gen_random_uuid())", "P0002", "\"heartbeat_id\""),
    ("SELECT dionysus.prune_history(0)", "22023", "\"batch\""),
    ("SELECT dionysus.log_message('p', 'm', 'c', 'a', 'hi', person => 'p:someone-else')", "22023", "\"person\""),
    ("SELECT dionysus.reach_out_target('test:nobody')", "P0002", "\"person\""),
    // Trust I: times that would poison every later recall are refused.
    ("SELECT dionysus.remember('x', created_at => 'infinity')", "22023", "\"created_at\""),
    ("SELECT dionysus.remember('x', created_at => '-infinity')", "22023", "\"created_at\""),
    ("SELECT dionysus.remember('x', created_at => '1492-10-12')", "22023", "\"created_at\""),
    ("SELECT dionysus.remember('x', created_at => now() + interval '1 year')", "22023", "\"created_at\""),
    ("SELECT * FROM dionysus.remember_batch('[{\"content\": \"x\", \"created_at\": \"infinity\"}]')", "22023", "items[0].created_at"),
    ("SELECT dionysus.open_episode('s', started_at => 'infinity')", "22023", "\"started_at\""),
    ("SELECT dionysus.remember('x', private_to => ARRAY['test:a', ''])", "22023", "\"private_to\""),
    ("SELECT * FROM dionysus.remember_batch('[{\"content\": \"x\", \"private_to\": \"test:a\"}]')", "22P02", "items[0].private_to"),
];

/// A JSON document nested `depth` levels deep.
fn deep_json(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// Trust I: no input produces XX000. A document nested past serde's recursion limit used to
/// panic inside pgrx's argument conversion; now every jsonb argument is parsed by us.
#[tokio::test]
async fn deeply_nested_json_is_a_clean_22p02_naming_the_argument() {
    let db = TestDb::new("deepjson").await;
    let deep = deep_json(3000);
    let hb: uuid::Uuid = {
        let ctx: serde_json::Value = db.client.query_one("SELECT dionysus.heartbeat_begin()", &[]).await.unwrap().get(0);
        uuid::Uuid::parse_str(ctx["heartbeat_id"].as_str().unwrap()).unwrap()
    };
    let a: uuid::Uuid = db.client.query_one("SELECT dionysus.remember('a')", &[]).await.unwrap().get(0);
    let b: uuid::Uuid = db.client.query_one("SELECT dionysus.remember('b')", &[]).await.unwrap().get(0);
    let decision = format!("{{\"actions\": {deep}}}");
    let cases: Vec<(String, &str)> = vec![
        (format!("SELECT dionysus.heartbeat_commit('{hb}', '{decision}')"), "\"decision\""),
        (format!("SELECT dionysus.remember('x', metadata => '{{\"a\": {deep}}}')"), "\"metadata\""),
        (format!("SELECT * FROM dionysus.remember_batch('{deep}')"), "\"items\""),
        (format!("SELECT dionysus.connect('{a}', '{b}', properties => '{{\"p\": {deep}}}')"), "\"properties\""),
        (format!("SELECT dionysus.fit_to_budget('chat', '{{\"memories\": {deep}}}')"), "\"context\""),
    ];
    for (sql, arg) in cases {
        let (code, msg) = expect_error(&db.client, &sql).await;
        assert_eq!(code, "22P02", "{arg}: {msg}");
        assert!(msg.contains(arg) && msg.contains("nested deeper"), "{arg}: {msg}");
    }
    // Deep but within the limit is fine, and the heartbeat is still open for a real decision.
    let ok = deep_json(40);
    db.client.batch_execute(&format!("SELECT dionysus.remember('x', metadata => '{{\"a\": {ok}}}')")).await.unwrap();
    let status: String = db.client.query_one("SELECT status::text FROM dionysus.heartbeat_log WHERE id = $1", &[&hb]).await.unwrap().get(0);
    assert_eq!(status, "in_flight");
}

#[tokio::test]
async fn every_bad_input_is_a_clear_error_and_writes_nothing() {
    let db = TestDb::new("bad").await;
    let c = &db.client;
    let a: uuid::Uuid = c.query_one("SELECT dionysus.remember('anchor a')", &[]).await.unwrap().get(0);
    let b: uuid::Uuid = c.query_one("SELECT dionysus.remember('anchor b')", &[]).await.unwrap().get(0);
    let tables = ["memories", "episodes", "facts", "memory_edges", "triples", "entities", "concepts", "memory_concepts", "episode_memories",
                  "messages", "outbox", "prompt_templates"];
    let mut before = Vec::new();
    for t in tables {
        before.push(count(c, t).await);
    }
    let mut extra: Vec<(String, &str, &str)> = CASES.iter().map(|(s, st, m)| (s.to_string(), *st, *m)).collect();
    extra.push((format!("SELECT dionysus.connect('{a}', '{b}', 'LOVES')"), "22023", "\"relation\""));
    extra.push((format!("SELECT dionysus.connect('{a}', '{a}')"), "22023", "\"to_id\""));
    extra.push((format!("SELECT dionysus.connect('{a}', '{b}', weight => 1.01)"), "22023", "\"weight\""));
    extra.push((format!("SELECT dionysus.link_concept('{a}', 'x', strength => -1)"), "22023", "\"strength\""));
    extra.push((format!("SELECT dionysus.link_concept('{a}', 'x', parent_concept => 'X')"), "22023", "\"parent_concept\""));
    for (sql, state, needle) in &extra {
        let (got, msg) = expect_error(c, sql).await;
        assert_eq!(&got, state, "{sql}: {msg}");
        assert!(msg.contains(needle), "{sql}: message '{msg}' does not name {needle}");
    }
    for (t, n) in tables.iter().zip(before) {
        assert_eq!(count(c, t).await, n, "{t} changed after failed statements");
    }
}

#[tokio::test]
async fn the_content_limit_is_a_setting() {
    let db = TestDb::new("limit").await;
    let c = &db.client;
    c.batch_execute("SET dionysus.max_content_length = 10").await.unwrap();
    let (state, msg) = expect_error(c, "SELECT dionysus.remember('eleven chars')").await;
    assert_eq!(state, "22001");
    assert!(msg.contains("limit of 10"));
    c.batch_execute("SELECT dionysus.remember('ten chars!')").await.unwrap();
}

#[tokio::test]
async fn a_missing_model_names_the_path_and_the_fix() {
    let db = TestDb::new("nomodel").await;
    let c = &db.client;
    // The store's model (all-MiniLM-L6-v2) looked for where it is not.
    c.batch_execute("SET dionysus.model_path = '/nonexistent/all-MiniLM-L6-v2'").await.unwrap();
    let (state, msg) = expect_error(c, "SELECT dionysus.embed('hello')").await;
    assert_eq!(state, "58P01");
    assert!(msg.contains("/nonexistent/all-MiniLM-L6-v2"), "{msg}");
    assert!(msg.contains("fetch-model.sh"), "{msg}");
    let (state, _) = expect_error(c, "SET dionysus.embedding_provider = 'carrier-pigeon'; SELECT dionysus.embed('x')").await;
    assert_eq!(state, "22023");
}

/// Trust III: a text argument from outside is bounded (22001 naming it and its limit) before
/// anything is written, and an error quotes bad input by its first 40 characters only: a
/// megabyte goal title used to be stored, and a 100 kB name came back whole in person()'s error.
#[tokio::test]
async fn long_text_is_refused_and_never_echoed_whole() {
    let db = TestDb::new("longtext").await;
    let c = &db.client;
    for (sql, arg, limit) in [
        ("SELECT dionysus.create_goal(repeat('x', 1000000))", "title", 200),
        ("SELECT dionysus.create_goal('Learn the violin', repeat('x', 4001))", "description", 4000),
        ("SELECT dionysus.person(repeat('y', 100000), of_person => 'test:ada')", "name", 200),
        ("SELECT dionysus.person('Lea', of_person => repeat('t', 100000))", "of_person", 200),
    ] {
        let (code, msg) = expect_error(c, sql).await;
        assert_eq!(code, "22001", "{sql}: {msg}");
        assert!(msg.contains(&format!("\"{arg}\"")) && msg.contains(&format!("limit of {limit}")), "{sql}: {msg}");
        assert!(msg.len() < 120, "{sql}: a message of {} bytes", msg.len());
    }
    assert_eq!(count(c, "goals").await, 0, "nothing stored");
    c.batch_execute("SELECT dionysus.create_goal(repeat('x', 200), repeat('x', 4000))").await.unwrap();

    // Refused values are quoted by a prefix, with their length; control characters as ?.
    let long = "repeat('z', 100000)";
    for (sql, arg) in [
        ("SELECT dionysus.person(repeat('y', 200), of_person => 'test:ada')".to_string(), "name"),
        (format!("SELECT dionysus.create_goal('t', source => {long})"), "source"),
        (format!("SELECT dionysus.create_goal('t', priority => {long})"), "priority"),
        (format!("SELECT dionysus.push_event('internal', {long})"), "type"),
        (format!("SELECT dionysus.push_event({long}, 'x')"), "source"),
        (format!("SELECT dionysus.set_person_time_zone('test:ada', {long})"), "time_zone"),
        (format!("SELECT dionysus.reach_out_target({long})"), "person"),
        (format!("SELECT dionysus.add_censor('t', 'r', severity => {long})"), "severity"),
        ("SELECT dionysus_internal.check_rule_condition(jsonb_build_object('var', repeat('z', 3000), 'op', '<', 'value', 1))".to_string(), "var"),
    ] {
        let (_, msg) = expect_error(c, &sql).await;
        assert!(msg.contains(arg), "{sql}: {msg}");
        assert!(msg.len() < 250, "{sql}: a message of {} bytes: {}…", msg.len(), msg.chars().take(200).collect::<String>());
        assert!(msg.contains(" characters)"), "{sql}: {msg}");
    }
    let (_, msg) = expect_error(c, "SELECT dionysus.create_goal('t', priority => E'urgent\\n\\u202eFAKE')").await;
    assert!(msg.contains("'urgent??FAKE'") && !msg.contains('\n'), "{msg}");
}
