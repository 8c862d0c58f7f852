//! OpenAI-compatible chat completions (Ollama, OpenRouter, OpenAI, vLLM, LM Studio), with the
//! resilience an outside service needs: a timeout per call, two retries with exponential back-off, and a
//! circuit breaker that opens after 3 failures of the endpoint for 30 s. A JSON task's answer
//! is parsed robustly and checked against the expected shape; an unusable answer is an error
//! of that call (retried), never a failure of the endpoint: the model did answer.
use crate::config::LlmRole;
use crate::jsonish;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub const RETRIES: u32 = 2;
pub const BREAKER_FAILURES: u32 = 3;
pub const BREAKER_RESET: Duration = Duration::from_secs(30);
/// Largest response body read from the endpoint.
pub const ANSWER_CAP: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum LlmError {
    /// The breaker is open: the endpoint failed recently; no call was made.
    CircuitOpen,
    Timeout,
    /// Connection refused, DNS, TLS…
    Transport(String),
    Http(u16, String),
    /// The model declined (a `refusal`, or a content filter).
    Refused(String),
    /// The answer was empty, unparseable, or not the expected shape.
    BadAnswer(String),
}

impl LlmError {
    /// The endpoint is down (as opposed to the model answering badly): work waits, no attempt spent.
    pub fn unavailable(&self) -> bool {
        matches!(self, LlmError::CircuitOpen | LlmError::Timeout | LlmError::Transport(_))
            || matches!(self, LlmError::Http(s, _) if *s >= 500 || *s == 429 || *s == 404 || *s == 401 || *s == 403)
    }
    fn retryable(&self) -> bool {
        match self {
            LlmError::Timeout | LlmError::Transport(_) | LlmError::BadAnswer(_) => true,
            LlmError::Http(s, _) => *s >= 500 || *s == 429,
            LlmError::CircuitOpen | LlmError::Refused(_) => false,
        }
    }
}

impl std::fmt::Display for LlmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LlmError::CircuitOpen => write!(f, "circuit open (the endpoint failed {BREAKER_FAILURES} times; waiting {}s)", BREAKER_RESET.as_secs()),
            LlmError::Timeout => write!(f, "timed out"),
            LlmError::Transport(e) => write!(f, "unreachable: {e}"),
            LlmError::Http(s, b) => write!(f, "HTTP {s}: {b}"),
            LlmError::Refused(r) => write!(f, "refused: {r}"),
            LlmError::BadAnswer(e) => write!(f, "unusable answer: {e}"),
        }
    }
}

#[derive(Default)]
struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

pub struct Llm {
    pub role: LlmRole,
    http: reqwest::Client,
    breaker: Mutex<Breaker>,
    backoff_base: Duration,
    /// Whether the endpoint answered its last call (None: not called yet), for a status line.
    reachable: watch::Sender<Option<bool>>,
}

#[derive(Clone, Debug)]
pub struct Msg {
    pub role: &'static str,
    pub content: String,
}

impl Msg {
    pub fn system(c: impl Into<String>) -> Msg {
        Msg { role: "system", content: c.into() }
    }
    pub fn user(c: impl Into<String>) -> Msg {
        Msg { role: "user", content: c.into() }
    }
    pub fn assistant(c: impl Into<String>) -> Msg {
        Msg { role: "assistant", content: c.into() }
    }
}

impl Llm {
    pub fn new(role: LlmRole) -> Llm {
        let http = reqwest::Client::builder()
            .timeout(role.timeout)
            .connect_timeout(Duration::from_secs(10).min(role.timeout))
            .build()
            .expect("HTTP client");
        Llm {
            role,
            http,
            breaker: Mutex::new(Breaker::default()),
            backoff_base: Duration::from_millis(500),
            reachable: watch::Sender::new(None),
        }
    }

    /// Shorter back-off (tests).
    pub fn with_backoff(mut self, base: Duration) -> Llm {
        self.backoff_base = base;
        self
    }

    /// Follows whether the endpoint answers (true) or is unreachable (false).
    pub fn reachability(&self) -> watch::Receiver<Option<bool>> {
        self.reachable.subscribe()
    }

    pub fn is_open(&self) -> bool {
        let b = self.breaker.lock().unwrap();
        b.open_until.is_some_and(|t| Instant::now() < t)
    }

    fn admit(&self) -> Result<(), LlmError> {
        let b = self.breaker.lock().unwrap();
        match b.open_until {
            Some(t) if Instant::now() < t => Err(LlmError::CircuitOpen),
            _ => Ok(()), // closed, or half-open: one trial goes through
        }
    }

    /// The endpoint answered (whatever the model said): the breaker closes.
    fn answered(&self) {
        *self.breaker.lock().unwrap() = Breaker::default();
        self.reachable.send_if_modified(|r| r.replace(true) != Some(true));
    }

    /// The endpoint failed: unreachable, timed out, an HTTP error, a body that is no completion.
    fn failed(&self, e: &LlmError) {
        let mut b = self.breaker.lock().unwrap();
        b.failures += 1;
        if b.failures >= BREAKER_FAILURES {
            b.open_until = Some(Instant::now() + BREAKER_RESET);
            tracing::warn!(role = self.role.name, "LLM circuit open for {}s after {} failures", BREAKER_RESET.as_secs(), b.failures);
        }
        if e.unavailable() {
            self.reachable.send_if_modified(|r| r.replace(false) != Some(false));
        }
    }

    /// A text answer.
    pub async fn chat(&self, messages: &[Msg], temperature: f64) -> Result<String, LlmError> {
        self.chat_with_usage(messages, temperature).await.map(|(text, _)| text)
    }

    /// A text answer, and the token counts the endpoint reported (`usage`, if it did).
    pub async fn chat_with_usage(&self, messages: &[Msg], temperature: f64) -> Result<(String, Option<Usage>), LlmError> {
        self.call_with_usage(messages, temperature, false, |text| {
            let t = text.trim();
            if t.is_empty() {
                Err("empty answer".to_string())
            } else {
                Ok(Value::String(t.to_string()))
            }
        })
        .await
        .map(|(v, usage)| (v.as_str().unwrap_or_default().to_string(), usage))
    }

    /// A JSON object answer, checked by `shape` (which may also normalise it).
    pub async fn json(
        &self,
        messages: &[Msg],
        temperature: f64,
        shape: impl Fn(Value) -> Result<Value, String>,
    ) -> Result<Value, LlmError> {
        self.call(messages, temperature, true, |text| shape(Value::Object(jsonish::object(text)?))).await
    }

    async fn call(
        &self,
        messages: &[Msg],
        temperature: f64,
        json_task: bool,
        accept: impl Fn(&str) -> Result<Value, String>,
    ) -> Result<Value, LlmError> {
        self.call_with_usage(messages, temperature, json_task, accept).await.map(|(v, _)| v)
    }

    async fn call_with_usage(
        &self,
        messages: &[Msg],
        temperature: f64,
        json_task: bool,
        accept: impl Fn(&str) -> Result<Value, String>,
    ) -> Result<(Value, Option<Usage>), LlmError> {
        let mut attempt = 0;
        loop {
            self.admit()?;
            let started = Instant::now();
            let outcome = match self.once(messages, temperature, json_task).await {
                Ok((text, usage)) => {
                    self.answered();
                    accept(&text).map(|v| (v, usage)).map_err(LlmError::BadAnswer)
                }
                // A refusal is the model's answer, not the endpoint failing.
                Err(e @ LlmError::Refused(_)) => {
                    self.answered();
                    Err(e)
                }
                Err(e) => {
                    self.failed(&e);
                    Err(e)
                }
            };
            match outcome {
                Ok(v) => {
                    tracing::debug!(role = self.role.name, ms = started.elapsed().as_millis() as u64, "LLM answered");
                    return Ok(v);
                }
                Err(e) => {
                    tracing::warn!(role = self.role.name, attempt, error = %e, "LLM call failed");
                    if attempt >= RETRIES || !e.retryable() {
                        return Err(e);
                    }
                    tokio::time::sleep(self.backoff_base * 2u32.pow(attempt)).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn once(&self, messages: &[Msg], temperature: f64, json_task: bool) -> Result<(String, Option<Usage>), LlmError> {
        let mut body = json!({
            "model": self.role.model,
            "messages": messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
            "temperature": temperature,
            "stream": false,
        });
        if let (true, Some(body)) = (json_task && self.role.json_mode, body.as_object_mut()) {
            body.insert("response_format".into(), json!({"type": "json_object"}));
        }
        let url = format!("{}/chat/completions", self.role.base_url.trim_end_matches('/'));
        let mut req = self.http.post(&url).json(&body);
        if let Some(key) = &self.role.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(short(&e)) })?;
        let status = resp.status().as_u16();
        let body = read_answer(resp).await?;
        if status != 200 {
            return Err(LlmError::Http(status, String::from_utf8_lossy(&body).chars().take(300).collect()));
        }
        let v: Completion = serde_json::from_slice(&body).map_err(|e| LlmError::BadAnswer(format!("not a chat completion: {e}")))?;
        let choice = v.choices.into_iter().next().unwrap_or_default();
        let msg = choice.message.unwrap_or_default();
        if let Some(r) = msg.refusal.filter(|r| !r.trim().is_empty()) {
            return Err(LlmError::Refused(r.chars().take(200).collect()));
        }
        if choice.finish_reason.as_deref() == Some("content_filter") {
            return Err(LlmError::Refused("content filter".into()));
        }
        msg.content.map(|c| (c, v.usage)).ok_or_else(|| LlmError::BadAnswer("no message content".into()))
    }

    /// For `doctor`: the endpoint's model list, if it serves one.
    pub async fn models(&self) -> Result<Vec<String>, LlmError> {
        let url = format!("{}/models", self.role.base_url.trim_end_matches('/'));
        let mut req = self.http.get(&url).timeout(Duration::from_secs(10));
        if let Some(key) = &self.role.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(short(&e)) })?;
        let status = resp.status().as_u16();
        let body = read_answer(resp).await?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| LlmError::BadAnswer(e.to_string()))?;
        if status != 200 {
            return Err(LlmError::Http(status, v.to_string().chars().take(200).collect()));
        }
        let list: ModelList = serde_json::from_value(v).unwrap_or_default();
        Ok(list.data.into_iter().filter_map(|m| m.id).collect())
    }
}

/// An OpenAI-compatible chat completion, as far as the driver reads it (a field the endpoint
/// leaves out or sends as null is `None`).
#[derive(Debug, Default, Deserialize)]
struct Completion {
    #[serde(default, deserialize_with = "null_as_empty")]
    choices: Vec<Choice>,
    /// Read only when it has its shape: a malformed count never costs the answer.
    #[serde(default, deserialize_with = "if_shaped")]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    message: Option<AnswerMessage>,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct AnswerMessage {
    content: Option<String>,
    refusal: Option<String>,
}

/// The token counts an endpoint reports with an answer.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Usage {
    pub prompt_tokens: Option<serde_json::Number>,
    pub completion_tokens: Option<serde_json::Number>,
    pub total_tokens: Option<serde_json::Number>,
}

/// `GET /models`: `{"data": [{"id"}]}`.
#[derive(Debug, Default, Deserialize)]
struct ModelList {
    #[serde(default, deserialize_with = "null_as_empty")]
    data: Vec<ModelEntry>,
}

#[derive(Debug, Default, Deserialize)]
struct ModelEntry {
    id: Option<String>,
}

fn if_shaped<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(d)?).ok())
}

fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// The response body, refused once it grows past [`ANSWER_CAP`]: a broken or hostile endpoint
/// cannot make the driver hold an unbounded answer in memory.
async fn read_answer(mut resp: reqwest::Response) -> Result<Vec<u8>, LlmError> {
    let too_large = || LlmError::BadAnswer(format!("answer larger than {} MiB", ANSWER_CAP / (1024 * 1024)));
    if resp.content_length().is_some_and(|n| n > ANSWER_CAP as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(short(&e)) })? {
        if body.len() + chunk.len() > ANSWER_CAP {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A reqwest error with its causes (keys travel in headers, never in the URL).
fn short(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s = format!("{s}: {inner}");
        src = inner.source();
    }
    s
}
