//! The http embedding provider against a real local HTTP server that speaks the OpenAI
//! `/v1/embeddings` wire format with scripted answers.
use dionysus_tests::*;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the fake endpoint answers: (status, body, delay in ms).
type Script = Arc<Mutex<(u16, String, u64)>>;

async fn fake_endpoint() -> (String, Script, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/embeddings", listener.local_addr().unwrap());
    let script: Script = Arc::new(Mutex::new((200, String::new(), 0)));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, log) = (script.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let (s, log) = (s.clone(), log.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut req = Vec::new();
                // Read headers, then the body by Content-Length.
                loop {
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    if n == 0 { break; }
                    req.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&req).to_string();
                    if let Some(h) = text.find("\r\n\r\n") {
                        let len = text[..h].lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))).unwrap_or(0);
                        if req.len() >= h + 4 + len { break; }
                    }
                }
                log.lock().unwrap().push(String::from_utf8_lossy(&req).to_string());
                let (status, body, delay) = s.lock().unwrap().clone();
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                let resp = format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (url, script, seen)
}

fn embeddings_body(n: usize, dims: usize) -> String {
    let data: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let mut v = vec![0.0f32; dims];
            v[i % dims] = 1.0;
            serde_json::json!({"object": "embedding", "index": i, "embedding": v})
        })
        .collect();
    serde_json::json!({"object": "list", "data": data, "model": "fake"}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_provider_embeds_checks_dimensions_and_fails_clearly() {
    let (url, script, seen) = fake_endpoint().await;
    let db = TestDb::new("http").await;
    let c = &db.client;
    c.batch_execute(&format!(
        "SET dionysus.embedding_provider = 'http'; SET dionysus.embedding_url = '{url}'; \
         SET dionysus.embedding_model = 'fake-384'; SET dionysus.embedding_api_key = 'sk-test-secret'; \
         SET dionysus.embedding_timeout_ms = 1000;"
    ))
    .await
    .unwrap();

    // The store's vectors are the local model's until it is told otherwise: a new, empty store
    // adopts the http model (its width checked by a probe).
    *script.lock().unwrap() = (200, embeddings_body(1, 384), 0);
    let adopted: serde_json::Value = c.query_one("SELECT dionysus.embedding_store_adopt()", &[]).await.expect("adopt the http model").get(0);
    assert_eq!(adopted["model_key"], "http:fake-384", "{adopted}");
    // A good answer is used, and remembered memories carry it.
    let id: uuid::Uuid = c.query_one("SELECT dionysus.remember('through the wire')", &[]).await.unwrap().get(0);
    let first: f32 = c.query_one("SELECT (embedding::real[])[1] FROM dionysus.memories WHERE id = $1", &[&id]).await.unwrap().get(0);
    assert_eq!(first, 1.0);
    let request = seen.lock().unwrap().last().cloned().unwrap();
    assert!(request.contains("\"model\":\"fake-384\"") && request.contains("through the wire"), "{request}");
    assert!(request.contains("Bearer sk-test-secret"));
    let key: String = c.query_one("SELECT model FROM dionysus.embedding_cache", &[]).await.unwrap().get(0);
    assert_eq!(key, "http:fake-384");

    // A batch goes in one request.
    *script.lock().unwrap() = (200, embeddings_body(3, 384), 0);
    let before = seen.lock().unwrap().len();
    let n: i64 = c.query_one("SELECT count(*) FROM dionysus.embed_batch(ARRAY['a', 'b', 'c'])", &[]).await.unwrap().get(0);
    assert_eq!(n, 3);
    assert_eq!(seen.lock().unwrap().len(), before + 1);

    // Wrong dimensions: an error, never truncation.
    *script.lock().unwrap() = (200, embeddings_body(1, 768), 0);
    let (state, msg) = expect_error(c, "SELECT dionysus.remember('wrong size')").await;
    assert_eq!(state, "22000", "{msg}");
    assert!(msg.contains("768") && msg.contains("384"), "{msg}");

    // Server error, garbage, timeout: clear errors that never echo the key.
    for (status, body, delay, needle) in [
        (500, "{\"error\": \"boom\"}".to_string(), 0, "HTTP 500"),
        (200, "not json at all".to_string(), 0, "unreadable"),
        (200, embeddings_body(1, 384), 3000, "unreachable"),
    ] {
        *script.lock().unwrap() = (status, body, delay);
        let (state, msg) = expect_error(c, "SELECT dionysus.embed('never cached before: ' || random())").await;
        assert_eq!(state, "38000", "{msg}");
        assert!(msg.contains(needle), "expected '{needle}' in: {msg}");
        assert!(!msg.contains("sk-test-secret"), "the key leaked: {msg}");
    }
    assert_eq!(count(c, "memories").await, 1, "nothing half-written");
}
