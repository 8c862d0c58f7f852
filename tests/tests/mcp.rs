//! `dionysus mcp`: the real binary, driven by rmcp's own client over stdio and by plain HTTP
//! requests, against the real extension. It acts as one person under the driver's role.
use dionysus_tests::{driver_conninfo, TestDb};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::time::Duration;

const ADA: &str = "terminal:ada";
const BOB: &str = "discord:4242";
const CLIENT: &str = "test-agent";

fn binary() -> String {
    let bin = env!("CARGO_BIN_EXE_dionysus-bench").replace("dionysus-bench", "dionysus");
    assert!(std::path::Path::new(&bin).exists(), "build the driver first: {bin}");
    bin
}

type Client = RunningService<RoleClient, ClientConfig>;

/// `dionysus mcp` on stdio for Ada, through rmcp's client, named `CLIENT`.
async fn connect(database_url: &str) -> Client {
    let url = database_url.to_string();
    let transport = TokioChildProcess::new(tokio::process::Command::new(binary()).configure(move |cmd| {
        cmd.arg("mcp")
            .env("DIONYSUS_DATABASE_URL", &url)
            .env("DIONYSUS_MCP_PERSON", ADA)
            .env("DIONYSUS_LOG", "warn")
            .env_remove("DIONYSUS_CONFIG");
    }))
    .expect("spawn dionysus mcp");
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new(CLIENT, "1.0"));
    tokio::time::timeout(Duration::from_secs(60), info.serve(transport))
        .await
        .expect("initialize in time")
        .expect("initialize")
}

/// A tool's structured answer; a refusal (an MCP error, or a tool result marked as an error
/// such as arguments the schema rejects) as its message and data.
async fn call(client: &Client, tool: &str, args: Value) -> Result<Value, (String, Value)> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().expect("an object").clone());
    match tokio::time::timeout(Duration::from_secs(60), client.call_tool(params)).await.expect("an answer in time") {
        Ok(result) if result.is_error == Some(true) => Err((format!("{:?}", result.content), Value::Null)),
        Ok(result) => Ok(result.structured_content.expect("structured content")),
        Err(ServiceError::McpError(e)) => Err((e.message.to_string(), e.data.unwrap_or(Value::Null))),
        Err(e) => panic!("{tool}: {e}"),
    }
}

/// The refusal of a call that must fail: its message and data.
async fn refused(client: &Client, tool: &str, args: Value) -> (String, Value) {
    match call(client, tool, args.clone()).await {
        Err(refusal) => refusal,
        Ok(v) => panic!("{tool} {args} was not refused: {v}"),
    }
}

async fn seed(db: &TestDb) -> (uuid::Uuid, uuid::Uuid) {
    for line in [
        "The weather in the mountains was cold last weekend",
        "We talked about the football match on Sunday",
        "A colleague recommended a new coffee place downtown",
        "The train to the city was late again this morning",
    ] {
        db.client.execute("SELECT dionysus.remember($1)", &[&line]).await.unwrap();
    }
    let shared: uuid::Uuid = db
        .client
        .query_one("SELECT dionysus.remember('The companion likes long walks by the river')", &[])
        .await
        .unwrap()
        .get(0);
    let bobs: uuid::Uuid = db
        .client
        .query_one(
            "SELECT dionysus.remember('Bob confided that he is quitting his job at the bakery in secret', private_to => ARRAY[$1])",
            &[&BOB],
        )
        .await
        .unwrap()
        .get(0);
    db.client
        .execute("SELECT dionysus.add_triple('Bob', 'plans_to_leave', 'the bakery', private_to => ARRAY[$1])", &[&BOB])
        .await
        .unwrap();
    db.client
        .execute("SELECT dionysus.create_goal('Help Bob find a new job quietly', source => 'user_request', private_to => ARRAY[$1])", &[&BOB])
        .await
        .unwrap();
    // The people in each one's life: Ada's sister Lea, Bob's colleague Lea.
    db.client
        .batch_execute(&format!(
            "SELECT dionysus_internal.note_person('{ADA}', '{{\"name\": \"Lea\", \"relation\": \"sister\"}}', NULL); \
             SELECT dionysus_internal.note_person('{BOB}', '{{\"name\": \"Lea\", \"relation\": \"colleague\"}}', NULL);"
        ))
        .await
        .unwrap();
    (shared, bobs)
}

/// The whole tool set over stdio: remember then recall (first, with its components), learn,
/// triples, goals, status, supersede and forget of Ada's own memories, provenance, and
/// nothing of Bob's private words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_remembers_and_recalls_as_one_person_over_stdio() {
    let db = TestDb::new("mcp_stdio").await;
    let (shared, bobs) = seed(&db).await;
    let client = connect(&driver_conninfo(&db.name)).await;

    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("dionysus"));
    let mut names: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        ["add_triple", "forget", "goals", "learn", "person", "recall", "remember", "status", "supersede", "triples_about"]
    );
    for tool in client.list_all_tools().await.unwrap() {
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 40), "{} needs a description an agent can act on", tool.name);
    }
    let remember = client.list_all_tools().await.unwrap().into_iter().find(|t| t.name == "remember").unwrap();
    let schema = serde_json::to_value(&remember.input_schema).unwrap();
    assert_eq!(schema["required"], json!(["content"]), "{schema}");
    assert!(schema["properties"]["importance"]["description"].as_str().is_some_and(|d| d.contains("0–1")), "{schema}");

    // remember → recall: first, with the score's components.
    let kept = call(&client, "remember", json!({"content": "Ada's daughter Mira starts violin lessons in March", "importance": 0.7}))
        .await
        .unwrap();
    let id: uuid::Uuid = kept["memory_id"].as_str().unwrap().parse().unwrap();
    let row = db.client.query_one("SELECT source, private_to, type::text FROM dionysus.memories WHERE id = $1", &[&id]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), format!("mcp:{CLIENT}"));
    assert_eq!(row.get::<_, Vec<String>>(1), vec![ADA.to_string()]);
    assert_eq!(row.get::<_, String>(2), "episodic");
    let found = call(&client, "recall", json!({"query": "When does Ada's daughter begin violin?", "k": 5})).await.unwrap();
    let results = found["results"].as_array().unwrap();
    assert_eq!(results[0]["memory_id"], kept["memory_id"], "{found}");
    let components = results[0]["components"].as_object().unwrap();
    for key in ["vector", "lexical", "association", "temporal", "importance", "recency"] {
        assert!(components[key].is_number(), "{key} missing: {found}");
    }
    assert!(components["vector"].as_f64().unwrap() > 0.3, "{found}");
    assert!(results[0]["score"].as_f64().unwrap() > 0.0);

    // Bob's private words never appear: not in recall, triples, goals or status counts.
    let about_bob = call(&client, "recall", json!({"query": "Bob quitting his job at the bakery", "k": 50})).await.unwrap();
    let text = about_bob.to_string();
    assert!(!text.contains("bakery") && !text.contains(&bobs.to_string()), "Bob's secret reached Ada: {text}");
    assert!(!about_bob["results"].as_array().unwrap().is_empty(), "shared memories stay visible: {about_bob}");
    let triples = call(&client, "triples_about", json!({"entity": "Bob"})).await.unwrap();
    assert_eq!(triples["triples"], json!([]), "{triples}");
    // The people in her life, with where each came from; never Bob's.
    let ada_lea = call(&client, "person", json!({"name": "my sister"})).await.unwrap();
    assert_eq!((ada_lea["people"][0]["name"].as_str(), ada_lea["people"][0]["relation"].as_str()), (Some("Lea"), Some("sister")), "{ada_lea}");
    assert!(ada_lea["people"][0]["sources"].is_array(), "{ada_lea}");
    let lea = call(&client, "person", json!({"name": "Lea"})).await.unwrap();
    assert_eq!(lea["people"].as_array().map(Vec::len), Some(1), "Bob's Lea reached Ada: {lea}");
    assert!(!lea.to_string().contains("colleague"), "{lea}");
    let (msg, _) = refused(&client, "person", json!({"name": "my boss"})).await;
    assert!(msg.contains("\"name\""), "{msg}");
    let goals = call(&client, "goals", json!({})).await.unwrap();
    assert!(!goals.to_string().contains("Bob"), "{goals}");
    let status = call(&client, "status", json!({})).await.unwrap();
    assert_eq!(status["person"], ADA);
    assert_eq!(status["own_memories"], 1, "{status}");
    assert_eq!(status["memories"], 6, "five shared and Ada's own, not Bob's: {status}");

    // learn, add_triple, triples_about, goals create and list, the goals resource.
    let fact = call(&client, "learn", json!({"content": "Ada is allergic to peanuts", "subject": "Ada", "category": "health"}))
        .await
        .unwrap();
    let fact_id: uuid::Uuid = fact["memory_id"].as_str().unwrap().parse().unwrap();
    let row = db
        .client
        .query_one("SELECT m.type::text, m.private_to, f.subject FROM dionysus.memories m JOIN dionysus.facts f ON f.memory_id = m.id WHERE m.id = $1", &[&fact_id])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "semantic");
    assert_eq!(row.get::<_, Vec<String>>(1), vec![ADA.to_string()]);
    call(&client, "add_triple", json!({"subject": "Mira", "predicate": "daughter_of", "object": "Ada", "subject_kind": "person"}))
        .await
        .unwrap();
    let triples = call(&client, "triples_about", json!({"entity": "Mira"})).await.unwrap();
    assert_eq!(triples["triples"][0]["predicate"], "daughter_of", "{triples}");
    assert_eq!(triples["triples"][0]["source"], format!("mcp:{CLIENT}"));
    let goal = call(&client, "goals", json!({"action": "create", "title": "Ask Ada how the first violin lesson went", "priority": "queued"}))
        .await
        .unwrap();
    let goal_id: uuid::Uuid = goal["goal_id"].as_str().unwrap().parse().unwrap();
    let row = db.client.query_one("SELECT source::text, private_to FROM dionysus.goals WHERE id = $1", &[&goal_id]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "external");
    assert_eq!(row.get::<_, Vec<String>>(1), vec![ADA.to_string()]);
    let goals = call(&client, "goals", json!({"action": "list"})).await.unwrap();
    assert!(goals.to_string().contains("first violin lesson"), "{goals}");
    let resources = client.list_all_resources().await.unwrap();
    assert!(resources.iter().any(|r| r.uri == "dionysus://goals"), "{resources:?}");
    db.client.execute("SELECT dionysus.set_north_star($1, 'North star: raise Mira with patience')", &[&ADA]).await.unwrap();
    db.client.execute("SELECT dionysus.set_north_star($1, 'North star: keep the bakery secret')", &[&BOB]).await.unwrap();
    let read = client.read_resource(ReadResourceRequestParams::new("dionysus://north-stars")).await.unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else { panic!("text contents") };
    assert!(text.contains("raise Mira with patience") && !text.contains("bakery"), "{text}");
    let read = client.read_resource(ReadResourceRequestParams::new("dionysus://goals")).await.unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else { panic!("text contents") };
    assert!(text.contains("first violin lesson") && !text.contains("Bob"), "{text}");

    // supersede and forget: Ada's own only.
    let newer = call(&client, "supersede", json!({"memory_id": id.to_string(), "new_content": "Ada's daughter Mira starts violin lessons in April"}))
        .await
        .unwrap();
    let newer_id: uuid::Uuid = newer["memory_id"].as_str().unwrap().parse().unwrap();
    let row = db.client.query_one("SELECT status::text FROM dionysus.memories WHERE id = $1", &[&id]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "superseded");
    let row = db.client.query_one("SELECT private_to, source FROM dionysus.memories WHERE id = $1", &[&newer_id]).await.unwrap();
    assert_eq!(row.get::<_, Vec<String>>(0), vec![ADA.to_string()]);
    assert_eq!(row.get::<_, String>(1), format!("mcp:{CLIENT}"));
    for (tool, other) in [("forget", bobs), ("forget", shared), ("supersede", bobs), ("supersede", shared)] {
        let (message, data) = refused(&client, tool, json!({"memory_id": other.to_string(), "new_content": "overwritten"})).await;
        assert!(message.contains("memory_id") && message.contains("own memories"), "{message}");
        assert_eq!(data["sqlstate"], "42501");
    }
    let left: i64 = db.client.query_one("SELECT count(*) FROM dionysus.memories WHERE id IN ($1, $2) AND status = 'active'", &[&bobs, &shared]).await.unwrap().get(0);
    assert_eq!(left, 2, "someone else's and shared memories stay");
    let gone = call(&client, "forget", json!({"memory_id": fact_id.to_string()})).await.unwrap();
    assert_eq!(gone["forgotten"], true);
    assert_eq!(db.client.query_one("SELECT count(*) FROM dionysus.memories WHERE id = $1", &[&fact_id]).await.unwrap().get::<_, i64>(0), 0);

    client.cancel().await.unwrap();
}

/// Bad arguments are MCP errors carrying the extension's message (the argument named), and
/// nothing is written; a dead database is an error naming it, and the server lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_a_dead_database_are_clean_errors() {
    let db = TestDb::new("mcp_errors").await;
    let client = connect(&driver_conninfo(&db.name)).await;
    for (tool, args, named, sqlstate) in [
        ("remember", json!({"content": "x", "importance": 7}), "importance", Some("22023")),
        ("remember", json!({"content": "   "}), "content", Some("22023")),
        ("remember", json!({"content": "x", "type": "dream"}), "type", Some("22023")),
        ("recall", json!({"query": "x", "k": 0}), "k", None),
        ("recall", json!({"query": "x", "since": "yesterday"}), "since", None),
        ("recall", json!({"query": "x", "types": ["gossip"]}), "types", Some("22023")),
        ("learn", json!({"content": "x", "confidence": -1}), "confidence", Some("22023")),
        ("forget", json!({"memory_id": "not-a-uuid"}), "memory_id", None),
        ("add_triple", json!({"subject": "", "predicate": "p", "object": "o"}), "subject", Some("22023")),
        ("goals", json!({"action": "create"}), "title", Some("22023")),
        ("goals", json!({"action": "delete"}), "action", None),
    ] {
        let (message, data) = refused(&client, tool, args.clone()).await;
        assert!(message.contains(&format!("\"{named}\"")), "{tool} {args}: {message}");
        assert!(!message.contains("XX000") && !message.contains("panicked"), "{message}");
        if let Some(code) = sqlstate {
            assert_eq!(data["sqlstate"], code, "{tool} {args}: {data}");
        }
    }
    // A missing required argument is refused by the schema before any SQL.
    let (message, _) = refused(&client, "remember", json!({"importance": 0.5})).await;
    assert!(message.contains("content"), "{message}");
    // Over-long texts are refused before any SQL, by name and limit, never quoted back: a
    // megabyte goal title used to be stored.
    for (tool, args, named, limit) in [
        ("goals", json!({"action": "create", "title": "x".repeat(1_000_000)}), "title", 200),
        ("goals", json!({"action": "create", "title": "t", "description": "x".repeat(4001)}), "description", 4000),
        ("person", json!({"name": "y".repeat(100_000)}), "name", 200),
        ("remember", json!({"content": "x".repeat(100_001)}), "content", 100_000),
        ("add_triple", json!({"subject": "s".repeat(1001), "predicate": "p", "object": "o"}), "subject", 1000),
    ] {
        let (message, data) = refused(&client, tool, args).await;
        assert!(message.contains(&format!("\"{named}\"")) && message.contains(&format!("limit of {limit}")), "{tool}: {message}");
        assert!(message.len() < 120, "{tool}: a message of {} bytes", message.len());
        assert_eq!(data["limit"], limit, "{tool}: {data}");
    }
    assert_eq!(dionysus_tests::count(&db.client, "memories").await, 0, "nothing half-written");
    assert_eq!(dionysus_tests::count(&db.client, "goals").await, 0);
    client.cancel().await.unwrap();

    // forget_own runs with the owner's rights: the driver's role may call it, another role may not.
    let mine: uuid::Uuid =
        db.client.query_one("SELECT dionysus.remember('Ada hums when she cooks', private_to => ARRAY[$1])", &[&ADA]).await.unwrap().get(0);
    db.client
        .batch_execute("DO $$ BEGIN CREATE ROLE dionysus_test_stranger NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$; \
                        GRANT USAGE ON SCHEMA dionysus, dionysus_internal TO dionysus_test_stranger; SET ROLE dionysus_test_stranger")
        .await
        .unwrap();
    let err = db.client.query_one("SELECT dionysus.forget_own($1, $2)", &[&ADA, &mine]).await.unwrap_err();
    assert_eq!(dionysus_tests::sqlstate(&err), "42501", "{err}");
    db.client.batch_execute("RESET ROLE").await.unwrap();
    assert_eq!(dionysus_tests::count(&db.client, "memories").await, 1);

    // No database at all: the call says so (within the server's patience), and the server answers again.
    let dead = driver_conninfo(&db.name).replace(&format!("port={}", port_of(&driver_conninfo(&db.name))), "port=1");
    let client = connect(&dead).await;
    let (message, _) = refused(&client, "status", json!({})).await;
    assert!(message.contains("database") && message.contains("unreachable"), "{message}");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 10, "still serving");
    client.cancel().await.unwrap();
}

fn port_of(conninfo: &str) -> String {
    conninfo.split_whitespace().find_map(|kv| kv.strip_prefix("port=")).expect("a port").to_string()
}

/// The first JSON-RPC message of a streamable HTTP response (plain JSON or one SSE event).
fn rpc_body(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body}"))
}

/// The HTTP transport refuses every request without the exact bearer token (401), serves the
/// same tools with it, and does not start without a token of at least 16 characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_transport_requires_its_bearer_token() {
    let db = TestDb::new("mcp_http").await;
    db.client
        .execute("SELECT dionysus.remember('Bob keeps a diary hidden under the stairs', private_to => ARRAY[$1])", &[&BOB])
        .await
        .unwrap();
    let token = "s3cret-token-for-the-mcp-test";

    // Without a (long enough) token it refuses to start.
    for weak in [None, Some("short")] {
        let mut cmd = std::process::Command::new(binary());
        cmd.args(["mcp", "--http", "127.0.0.1:0"]).env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name)).env_remove("DIONYSUS_CONFIG");
        match weak {
            Some(t) => cmd.env("DIONYSUS_MCP_TOKEN", t),
            None => cmd.env_remove("DIONYSUS_MCP_TOKEN"),
        };
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{weak:?}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("DIONYSUS_MCP_TOKEN"), "{out:?}");
    }

    let port = dionysus_tests::free_port(28100);
    let _server = tokio::process::Command::new(binary())
        .args(["mcp", "--http", &format!("127.0.0.1:{port}")])
        .env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name))
        .env("DIONYSUS_MCP_PERSON", ADA)
        .env("DIONYSUS_MCP_TOKEN", token)
        .env("DIONYSUS_LOG", "warn")
        .env_remove("DIONYSUS_CONFIG")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let http = reqwest::Client::new();
    let post = |body: Value, auth: Option<String>, session: Option<String>| {
        let mut r = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        if let Some(s) = session {
            r = r.header("mcp-session-id", s).header("mcp-protocol-version", "2025-06-18");
        }
        r.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl-agent", "version": "1"}}});
    let mut up = false;
    for _ in 0..100 {
        if post(init.clone(), None, None).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(up, "the HTTP server did not come up");

    for auth in [None, Some("Bearer wrong-token-of-the-same-size!".to_string()), Some(format!("Basic {token}")), Some(token.to_string())] {
        let r = post(init.clone(), auth.clone(), None).await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{auth:?}");
        assert!(r.headers().get("www-authenticate").is_some());
        let body = r.text().await.unwrap();
        assert!(!body.contains("serverInfo"), "{body}");
    }
    // A tool call without the token, even inside a session someone else opened, is refused too.
    let bearer = Some(format!("Bearer {token}"));
    let r = post(init.clone(), bearer.clone(), None).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let session = r.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    let body = rpc_body(&r.text().await.unwrap());
    assert_eq!(body["result"]["serverInfo"]["name"], "dionysus", "{body}");
    let r = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), bearer.clone(), session.clone()).await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let remember = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "Ada waters the basil every evening"}}});
    let r = post(remember.clone(), None, session.clone()).await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(dionysus_tests::count(&db.client, "memories").await, 1, "nothing written without the token");

    let r = post(remember, bearer.clone(), session.clone()).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body = rpc_body(&r.text().await.unwrap());
    assert!(body["result"]["structuredContent"]["memory_id"].is_string(), "{body}");
    let source: String = db.client.query_one("SELECT source FROM dionysus.memories WHERE content LIKE 'Ada waters%'", &[]).await.unwrap().get(0);
    assert_eq!(source, "mcp:curl-agent");
    let recall = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": "diary hidden under the stairs, basil"}}});
    let body = rpc_body(&post(recall, bearer, session).await.unwrap().text().await.unwrap());
    let text = body.to_string();
    assert!(text.contains("basil") && !text.contains("diary"), "{text}");
}

/// `dionysus mcp --http` for Ada with `token` on a free port, once it answers (401 without the
/// token): the child (killed on drop) and the port.
async fn http_server(db: &TestDb, token: &str, base_port: u16) -> (tokio::process::Child, u16) {
    let port = dionysus_tests::free_port(base_port);
    let child = tokio::process::Command::new(binary())
        .args(["mcp", "--http", &format!("127.0.0.1:{port}")])
        .env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name))
        .env("DIONYSUS_MCP_PERSON", ADA)
        .env("DIONYSUS_MCP_TOKEN", token)
        .env("DIONYSUS_LOG", "warn")
        .env_remove("DIONYSUS_CONFIG")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..100 {
        if reqwest::Client::new().post(&url).body("{}").send().await.is_ok_and(|r| r.status().as_u16() == 401) {
            return (child, port);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the HTTP server did not come up");
}

/// A socket to the server from a loopback address of its own (Linux routes all of 127/8 to lo).
async fn socket_from(from: [u8; 4], port: u16) -> tokio::net::TcpStream {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    s.connect(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await.unwrap()
}

/// Which of the sockets the server acted on first (closed it, reset it or wrote to it).
async fn first_touched(sockets: &[tokio::net::TcpStream]) -> usize {
    let waits = sockets.iter().enumerate().map(|(i, s)| Box::pin(async move {
        s.readable().await.unwrap();
        i
    }));
    futures_util::future::select_all(waits).await.0
}

/// Idle sockets and sockets that send their request head slowly, all without the token, do not
/// keep the token holder out: its request is answered while every one of them is still open.
/// (The server used to give each connection one of 64 slots before looking at the token, so the
/// holder waited for hostile sockets to be dropped at their header timeout, 10 s a round.) Past
/// 32 connections without the token from one address, each newcomer pushes out that address's
/// oldest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_without_the_token_do_not_keep_its_holder_out() {
    let db = TestDb::new("mcp_http_flood").await;
    let token = "s3cret-token-for-the-flood-test";
    let (_server, port) = http_server(&db, token, 28400).await;

    // 228 hostile sockets: 25 from each of 127.0.0.2–9 and 28 from the holder's own 127.0.0.1,
    // one in two sending half a request head and then nothing.
    let mut hostile = Vec::new();
    for (from, n) in (2..=9).map(|d| ([127, 0, 0, d], 25)).chain([([127, 0, 0, 1], 28)]) {
        for i in 0..n {
            let mut s = socket_from(from, port).await;
            if i % 2 == 1 {
                use tokio::io::AsyncWriteExt;
                s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl").await.unwrap();
            }
            hostile.push(s);
        }
    }
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "holder", "version": "1"}}});
    let holder = async {
        let r = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {token}"))
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        rpc_body(&r.text().await.unwrap())
    };
    // The answer must come while the server has touched none of them (a hang guard only).
    let answer = tokio::time::timeout(Duration::from_secs(120), async {
        tokio::select! {
            body = holder => body,
            i = first_touched(&hostile) => panic!("hostile socket {i} was closed before the token holder was answered"),
        }
    })
    .await
    .expect("the token holder answered");
    assert_eq!(answer["result"]["serverInfo"]["name"], "dionysus", "{answer}");
    assert_eq!(hostile.len(), 228);

    // Thirty-five more from 127.0.0.10: the three oldest are pushed out by the three past 32.
    let mut crowd = Vec::new();
    for _ in 0..35 {
        crowd.push(socket_from([127, 0, 0, 10], port).await);
    }
    for i in 0..3 {
        let s = &crowd[i];
        let mut buf = [0u8; 64];
        let gone = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                s.readable().await.unwrap();
                match s.try_read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Ok(0) | Err(_) => return true,
                    Ok(_) => return false,
                }
            }
        })
        .await
        .expect("pushed out");
        assert!(gone, "socket {i} was written to, not closed");
    }
    drop(hostile);
}
