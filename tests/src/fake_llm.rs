//! A scripted OpenAI-compatible chat completions server: a real HTTP server on a local port,
//! the only fake besides Discord. Each request is matched against rules by a substring of its
//! messages (the prompts start with "TASK: <name>"); the first matching rule answers. Every
//! request is recorded so tests can read the prompts the driver built.
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Debug)]
pub enum Answer {
    /// A normal completion with this content.
    Text(String),
    /// An OpenAI refusal.
    Refusal(String),
    /// An HTTP error status.
    Status(u16),
    /// Waits this long before answering "too late".
    Hang(Duration),
    /// A well-formed completion of about this many bytes, streamed without a Content-Length.
    Huge(usize),
    /// A model that never stops: this text over and over, cut at the request's `max_tokens`
    /// (words stand in for tokens) with `finish_reason: "length"`; a request without
    /// `max_tokens` generates for ten minutes.
    Endless(String),
    /// This content, cut: `finish_reason: "length"`.
    Cut(String),
    /// The request's first message (the system prompt) echoed back, then this text.
    Echo(String),
    /// A model that never stops and streams: this text's words over and over, one every 50 ms,
    /// until the reader hangs up (counted: [`FakeLlm::hung_up`]). Without `stream` it answers
    /// after ten minutes.
    Trickle(String),
}

/// A page served at an exact path, for the fetching tests.
#[derive(Clone, Debug)]
pub enum FakePage {
    /// 200 with this content type and body.
    Body { content_type: String, body: String },
    /// 302 to this location.
    Redirect(String),
    /// 200 `text/html` of about this many bytes (starting with "HUGE-PAGE-MARKER"), streamed
    /// without a Content-Length.
    Huge(usize),
}

#[derive(Clone, Debug)]
struct Rule {
    when: String,
    answer: Answer,
    /// How many more times it applies (None: forever).
    times: Option<usize>,
}

#[derive(Clone, Default)]
pub struct FakeLlm {
    rules: Arc<Mutex<Vec<Rule>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    pages: Arc<Mutex<HashMap<String, FakePage>>>,
    page_hits: Arc<Mutex<Vec<String>>>,
    search_results: Arc<Mutex<Option<Value>>>,
    /// `response_format` types answered with a 400 naming them (an endpoint without them).
    refused_formats: Arc<Mutex<Vec<String>>>,
    /// The status those refusals come with (400; llama-cpp-python's server says 500).
    refusal_status: Arc<std::sync::atomic::AtomicU16>,
    /// Streamed answers that stopped because the reader hung up.
    hung_up: Arc<std::sync::atomic::AtomicUsize>,
    /// System messages dropped before the model sees them (a chat template without a system role).
    drops_system: Arc<std::sync::atomic::AtomicBool>,
    /// Requests with a system message refused with a 400 (Gemma 2's own template raises on one).
    refuses_system: Arc<std::sync::atomic::AtomicBool>,
    /// The driver's system-message probes answered (not recorded as requests, never scripted).
    probes: Arc<std::sync::atomic::AtomicUsize>,
    pub base_url: String,
}

impl FakeLlm {
    /// Starts the server on a free local port.
    pub async fn start() -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake LLM");
        let addr = listener.local_addr().unwrap();
        let me = FakeLlm { base_url: format!("http://{addr}/v1"), ..Default::default() };
        let server = me.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let s = server.clone();
                tokio::spawn(async move {
                    let _ = s.serve(sock).await;
                });
            }
        });
        me
    }

    /// Answers requests containing `when` (in any message; "a && b" needs both) with `answer`.
    pub fn on(&self, when: &str, answer: Answer) -> &Self {
        self.rules.lock().unwrap().push(Rule { when: when.into(), answer, times: None });
        self
    }

    /// Like `on`, for the next `n` matching requests only (earlier rules win).
    pub fn on_times(&self, when: &str, n: usize, answer: Answer) -> &Self {
        self.rules.lock().unwrap().insert(0, Rule { when: when.into(), answer, times: Some(n) });
        self
    }

    pub fn json(&self, when: &str, v: Value) -> &Self {
        self.on(when, Answer::Text(v.to_string()))
    }

    /// Answers 400 to requests whose `response_format` is one of `types`, as servers without
    /// them do ("json_schema", "json_object").
    pub fn refuse_formats(&self, types: &[&str]) -> &Self {
        *self.refused_formats.lock().unwrap() = types.iter().map(|t| t.to_string()).collect();
        self
    }

    /// As llama-cpp-python's server does: `json_schema` refused with a 500 that quotes the
    /// validation error; `{"type": "json_object", "schema": …}` taken.
    pub fn refuse_json_schema_as_llama_cpp_python(&self) -> &Self {
        self.refusal_status.store(500, std::sync::atomic::Ordering::SeqCst);
        self.refuse_formats(&["json_schema"])
    }

    /// As llama-cpp-python's `gemma` chat format does: system messages are dropped without a
    /// word, so rules match (and token counts count) only the other messages.
    pub fn drop_system_messages(&self) -> &Self {
        self.drops_system.store(true, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// As a server applying Gemma 2's own chat template does: a request with a system message
    /// is a 400 ("System role not supported").
    pub fn refuse_system_role(&self) -> &Self {
        self.refuses_system.store(true, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// How many system-message probes the driver sent.
    pub fn probes(&self) -> usize {
        self.probes.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn clear(&self) {
        self.rules.lock().unwrap().clear();
    }

    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    /// The search URL this server also answers (SearXNG's JSON format).
    pub fn search_url(&self) -> String {
        format!("{}/search", self.base_url.trim_end_matches("/v1"))
    }

    /// The server's root URL (`http://127.0.0.1:PORT`).
    pub fn root(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_string()
    }

    /// `127.0.0.1:PORT`, as `fetch_allow_private` names it.
    pub fn host_port(&self) -> String {
        self.root().trim_start_matches("http://").to_string()
    }

    /// Serves `page` at exactly `path` (e.g. "/moved").
    pub fn page(&self, path: &str, page: FakePage) -> &Self {
        self.pages.lock().unwrap().insert(path.into(), page);
        self
    }

    /// The paths of the pages served with [`FakeLlm::page`] that were requested, in order.
    pub fn page_hits(&self) -> Vec<String> {
        self.page_hits.lock().unwrap().clone()
    }

    /// Makes the search answer these results (`[{"title", "url", "content"}]`) instead of the default two.
    pub fn search_results(&self, results: Value) -> &Self {
        *self.search_results.lock().unwrap() = Some(results);
        self
    }

    /// How many streamed answers stopped generating because the reader hung up (a server
    /// that stops on disconnect).
    pub fn hung_up(&self) -> usize {
        self.hung_up.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The requests whose messages contain `needle`.
    pub fn requests_with(&self, needle: &str) -> Vec<Value> {
        self.requests().into_iter().filter(|r| r["messages"].to_string().contains(needle)).collect()
    }

    fn answer_for(&self, body: &Value) -> Answer {
        let text = body["messages"].to_string();
        let mut rules = self.rules.lock().unwrap();
        for r in rules.iter_mut() {
            if r.when.split(" && ").all(|needle| text.contains(needle)) && r.times != Some(0) {
                if let Some(t) = r.times.as_mut() {
                    *t -= 1;
                }
                return r.answer.clone();
            }
        }
        Answer::Text("{}".into())
    }

    async fn serve(&self, mut sock: TcpStream) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16384];
        let (head_end, content_length) = loop {
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                    .unwrap_or(0);
                break (i + 4, len);
            }
        };
        while buf.len() < head_end + content_length {
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
        let probe = body["max_tokens"] == json!(1) && body["messages"].to_string().contains("TASK: probe");
        let has_system = body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "system"));
        if has_system && self.refuses_system.load(std::sync::atomic::Ordering::SeqCst) {
            let payload = json!({"error": {"message": "System role not supported", "type": "invalid_request_error"}}).to_string();
            let resp = format!("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}", payload.len());
            sock.write_all(resp.as_bytes()).await?;
            return sock.shutdown().await;
        }
        if self.drops_system.load(std::sync::atomic::Ordering::SeqCst) {
            if let Some(m) = body["messages"].as_array_mut() {
                m.retain(|m| m["role"] != "system");
            }
        }
        // The driver's probe of where instructions are read, answered as any server would.
        if probe {
            self.probes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let payload = completion(&body, json!({"role": "assistant", "content": "Hello"}), "length").to_string();
            let resp = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}", payload.len());
            sock.write_all(resp.as_bytes()).await?;
            return sock.shutdown().await;
        }
        let streamed = body["stream"] == json!(true);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let custom_page = if head.starts_with("GET") { self.pages.lock().unwrap().get(&path).cloned() } else { None };
        if let Some(page) = custom_page {
            self.page_hits.lock().unwrap().push(path);
            return serve_page(sock, page).await;
        }
        if head.starts_with("GET") && path.starts_with("/page/") {
            // A web page for inquire_deep to fetch.
            let html = format!("<html><head><script>var hidden = 1;</script></head><body><h1>{path}</h1><p>Border collies need two hours of exercise a day.</p></body></html>");
            let resp = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}", html.len());
            sock.write_all(resp.as_bytes()).await?;
            return sock.shutdown().await;
        }
        let (status, payload) = if head.starts_with("GET") && path.contains("/models") {
            (200, json!({"object": "list", "data": [{"id": "fast-model"}, {"id": "smart-model"}]}))
        } else if head.starts_with("GET") && path.starts_with("/search") {
            // A SearXNG-style JSON search API.
            self.requests.lock().unwrap().push(json!({"search": path}));
            let base = self.base_url.trim_end_matches("/v1");
            let results = self.search_results.lock().unwrap().clone().unwrap_or_else(|| json!([
                {"title": "Border collie care", "url": format!("{base}/page/collie-care"), "content": "Exercise needs of border collies."},
                {"title": "Herding dogs", "url": format!("{base}/page/herding"), "content": "Herding breeds overview."}
            ]));
            (200, json!({ "results": results }))
        } else {
            self.requests.lock().unwrap().push(body.clone());
            let format = body["response_format"]["type"].as_str().unwrap_or("").to_string();
            let refused = self.refused_formats.lock().unwrap().contains(&format);
            let answer = if refused { Answer::Status(400) } else { self.answer_for(&body) };
            if let (Answer::Trickle(text), true) = (&answer, streamed) {
                if trickle(&mut sock, text).await.is_err() {
                    self.hung_up.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                return Ok(());
            }
            match answer {
                Answer::Status(400) if refused => match self.refusal_status.load(std::sync::atomic::Ordering::SeqCst) {
                    500 => (500, json!({"error": {"message": format!("1 validation error:\n  {{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': '{format}'}}"), "type": "internal_server_error"}})),
                    _ => (400, json!({"error": {"message": format!("response_format type {format} is not supported")}})),
                },
                Answer::Text(t) => (200, completion(&body, json!({"role": "assistant", "content": t}), "stop")),
                Answer::Refusal(r) => (200, completion(&body, json!({"role": "assistant", "content": null, "refusal": r}), "stop")),
                Answer::Status(s) => (s, json!({"error": {"message": "scripted failure"}})),
                Answer::Hang(d) => {
                    tokio::time::sleep(d).await;
                    (200, completion(&body, json!({"role": "assistant", "content": "too late"}), "stop"))
                }
                Answer::Endless(text) => match body["max_tokens"].as_u64() {
                    Some(n) => {
                        let words: Vec<&str> = text.split_whitespace().cycle().take(n as usize).collect();
                        (200, completion(&body, json!({"role": "assistant", "content": words.join(" ")}), "length"))
                    }
                    None => {
                        tokio::time::sleep(Duration::from_secs(600)).await;
                        (200, completion(&body, json!({"role": "assistant", "content": text}), "stop"))
                    }
                },
                Answer::Trickle(text) => {
                    tokio::time::sleep(Duration::from_secs(600)).await;
                    (200, completion(&body, json!({"role": "assistant", "content": text}), "stop"))
                }
                Answer::Cut(t) => (200, completion(&body, json!({"role": "assistant", "content": t}), "length")),
                Answer::Echo(t) => {
                    let prompt = body["messages"][0]["content"].as_str().unwrap_or("").to_string();
                    (200, completion(&body, json!({"role": "assistant", "content": format!("{prompt}\n{t}")}), "stop"))
                }
                Answer::Huge(bytes) => {
                    let prefix = r#"{"id":"chatcmpl-fake","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":""#;
                    return stream(sock, "application/json", prefix, bytes, r#""}}]}"#).await;
                }
            }
        };
        if status == 200 && streamed {
            return events(sock, &payload).await;
        }
        let payload = payload.to_string();
        let reason = if status == 200 { "OK" } else { "Error" };
        let resp = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
            payload.len()
        );
        sock.write_all(resp.as_bytes()).await?;
        sock.shutdown().await
    }
}

async fn serve_page(mut sock: TcpStream, page: FakePage) -> std::io::Result<()> {
    let head = match page {
        FakePage::Huge(bytes) => return stream(sock, "text/html", "<html><body><p>HUGE-PAGE-MARKER ", bytes, "</p></body></html>").await,
        FakePage::Redirect(to) => format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        FakePage::Body { content_type, body } => {
            format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
        }
    };
    sock.write_all(head.as_bytes()).await?;
    sock.shutdown().await
}

/// `prefix`, then 'a' up to about `bytes` in all, then `suffix`, with no Content-Length: only
/// the closing of the connection ends the body. Stops when the reader hangs up.
async fn stream(mut sock: TcpStream, content_type: &str, prefix: &str, bytes: usize, suffix: &str) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nConnection: close\r\n\r\n{prefix}");
    sock.write_all(head.as_bytes()).await?;
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = prefix.len();
    while sent < bytes {
        let n = chunk.len().min(bytes - sent);
        sock.write_all(&chunk[..n]).await?;
        sent += n;
    }
    sock.write_all(suffix.as_bytes()).await?;
    sock.shutdown().await
}

/// A completion sent as a stream of server-sent events, as OpenAI-compatible servers send one
/// asked for `stream`: its content a few words a chunk, then the finish reason and the usage,
/// then `[DONE]`.
async fn events(mut sock: TcpStream, completion: &Value) -> std::io::Result<()> {
    sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n").await?;
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let mut out = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    if let Some(r) = message["refusal"].as_str() {
        out.push(chunk(json!({"refusal": r}), Value::Null));
    }
    let content = message["content"].as_str().unwrap_or("");
    let words: Vec<&str> = content.split_inclusive(' ').collect();
    for piece in words.chunks(3) {
        out.push(chunk(json!({"content": piece.concat()}), Value::Null));
    }
    out.push(chunk(json!({}), choice["finish_reason"].clone()));
    let mut usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": []});
    usage["usage"] = completion["usage"].clone();
    out.push(usage);
    for e in out {
        sock.write_all(format!("data: {e}\n\n").as_bytes()).await?;
    }
    sock.write_all(b"data: [DONE]\n\n").await?;
    sock.shutdown().await
}

/// A stream that never ends: `text`'s words over and over, one every 50 ms, until writing
/// fails (the reader hung up).
async fn trickle(sock: &mut TcpStream, text: &str) -> std::io::Result<()> {
    sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n").await?;
    for word in text.split_whitespace().cycle() {
        let e = json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": format!("{word} ")}, "finish_reason": null}]});
        sock.write_all(format!("data: {e}\n\n").as_bytes()).await?;
        sock.flush().await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn completion(req: &Value, message: Value, finish: &str) -> Value {
    // Words stand in for the answer's tokens, so a test can see the counts travel; the prompt
    // counts a token for every four characters, as English text through a real tokenizer does.
    let words = |v: &Value| v.as_str().map_or(0, |s| s.split_whitespace().count());
    let prompt: usize = req["messages"].as_array().into_iter().flatten().map(|m| m["content"].as_str().map_or(0, |s| s.chars().count().div_ceil(4))).sum();
    let answer = words(&message["content"]);
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
        "model": req["model"], "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer}
    })
}
