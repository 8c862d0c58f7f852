//! OpenAI-compatible chat completions (Ollama, OpenRouter, OpenAI, vLLM, LM Studio), with the
//! resilience an outside service needs: a timeout per call, two retries with exponential back-off, and a
//! circuit breaker that opens after 3 failures of the endpoint for 30 s. A JSON task's answer
//! is parsed robustly and checked against the expected shape; an unusable answer is an error
//! of that call (retried), never a failure of the endpoint: the model did answer.
//!
//! Every call is bounded (#35): its task (the key of the template its prompt is rendered from,
//! named by the caller, never read from the prompt, which a person may rewrite) has a kind, and
//! the kind its `max_tokens` and a wall-clock bound for the whole call, retries and the wait for
//! a slot included. The endpoint gets `llm.slots` requests at once; a request on
//! the person's path goes before background work, which waits while anyone is being answered.
use crate::config::{LlmRole, StructuredOutput, SystemMessages, TaskBounds};
use crate::jsonish;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// Retries of an endpoint that failed (unreachable, timed out, 5xx), with back-off.
pub const RETRIES: u32 = 2;
/// An unusable answer is asked for once more, then given up: a reply falls back, a background
/// item is parked (its work item waits out the queue's back-off instead of asking again at once).
pub const BAD_ANSWER_RETRIES: u32 = 1;
/// Tasks a person is waiting on: they take the next free slot before any background task.
pub const PERSON_TASKS: [&str; 4] = ["chat_system", "rule_from_words", "censor_from_words", "north_star_check"];

/// The kind of a task (its bounds: `[llm.tasks.<kind>]`), from its template's key.
pub fn kind_of(task: &str) -> &'static str {
    match task {
        "chat_system" | "proactive_compose" | "reach_out" => "reply",
        "extract_message" | "extract_concepts" | "rule_from_words" | "censor_from_words" | "north_star_check" | "contact_feedback" => "extraction",
        "heartbeat_system" | "heartbeat_censors" | "proactive_decision" | "inquiry_confidence" | "maintain" => "decision",
        "narrative" | "summarize_episode" | "condense_memory" | "reflect" | "synthesize" => "narrative",
        "dream" | "brainstorm_goals" | "inquire" | "inquiry_queries" => "dream",
        _ => "other",
    }
}
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
    /// A background request given up so that a person's reply could have the model.
    Preempted,
}

impl LlmError {
    /// The endpoint is down (as opposed to the model answering badly): work waits, no attempt spent.
    pub fn unavailable(&self) -> bool {
        matches!(self, LlmError::CircuitOpen | LlmError::Timeout | LlmError::Transport(_) | LlmError::Preempted)
            || matches!(self, LlmError::Http(s, _) if *s >= 500 || *s == 429 || *s == 404 || *s == 401 || *s == 403)
    }
    fn retryable(&self) -> bool {
        match self {
            LlmError::Timeout | LlmError::Transport(_) | LlmError::BadAnswer(_) => true,
            LlmError::Http(s, _) => *s >= 500 || *s == 429,
            LlmError::CircuitOpen | LlmError::Refused(_) | LlmError::Preempted => false,
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
            LlmError::Preempted => write!(f, "pre-empted by a person's reply"),
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
    /// The `response_format` JSON tasks send now: [`FORMATS`]' index (an `auto` endpoint that
    /// refused one steps down, and remembers it).
    format: AtomicU8,
    slots: Arc<Slots>,
    /// Whether this endpoint and model get the instructions as a system message: probed once
    /// (`llm.system_messages = auto`), shared by every role that calls them.
    system_kept: Arc<tokio::sync::OnceCell<bool>>,
}

/// What the system-message probe sends: instructions long enough (some 600 characters) that the
/// prompt tokens an answer counts tell whether the model was given them.
const PROBE_SYSTEM: &str = "This request checks that the model is given its instructions. Dionysus sends \
each task's instructions as a system message, and some chat templates have no system role: they \
drop the message without a word, and the model then answers the person's words without knowing \
its task. The answer to this request is not used; only the number of prompt tokens the server \
counts is read. Answer the user's greeting with one word. These sentences are here to make the \
system message long enough to be counted apart from the greeting: a kept system message adds \
well over a hundred tokens to the prompt, a dropped one adds none.";

/// What a JSON task may send as `response_format`, from most to least structured:
/// `json_object_schema` is `{"type": "json_object", "schema": …}`, llama-cpp-python's own form
/// (its server refuses `json_schema` and turns this one into a grammar).
const FORMATS: [&str; 4] = ["json_schema", "json_object_schema", "json_object", "none"];

/// An endpoint's request slots, shared by every role that calls it. A request on the person's
/// path takes a free one first; background requests wait while a person is being answered.
struct Slots {
    free: Mutex<usize>,
    /// Conversations being answered, and person-path requests waiting for a slot.
    people: AtomicUsize,
    changed: Notify,
    /// A person's request found no free slot: background requests in flight give theirs up.
    preempt: Notify,
}

/// A slot held for one request (given back on drop).
struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap() += 1;
        self.0.changed.notify_waiters();
    }
}

/// A person is being answered while this lives: background requests wait.
pub struct PersonFirst(Arc<Slots>);

impl Drop for PersonFirst {
    fn drop(&mut self) {
        self.0.people.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

impl Slots {
    /// The slots of the endpoint at `base_url` (one set per endpoint in this process).
    fn of(base_url: &str, n: usize) -> Arc<Slots> {
        static ALL: OnceLock<Mutex<HashMap<String, Arc<Slots>>>> = OnceLock::new();
        let mut all = ALL.get_or_init(Default::default).lock().unwrap();
        all.entry(format!("{n} {base_url}"))
            .or_insert_with(|| Arc::new(Slots { free: Mutex::new(n), people: AtomicUsize::new(0), changed: Notify::new(), preempt: Notify::new() }))
            .clone()
    }

    async fn take(self: &Arc<Self>, person: bool) -> Slot {
        let _waiting = person.then(|| {
            self.people.fetch_add(1, Ordering::SeqCst);
            PersonFirst(self.clone())
        });
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut free = self.free.lock().unwrap();
                if *free > 0 && (person || self.people.load(Ordering::SeqCst) == 0) {
                    *free -= 1;
                    return Slot(self.clone());
                }
            }
            if person {
                self.preempt.notify_waiters();
            }
            changed.await;
        }
    }
}

/// One call as sent: its task, bounds, and for a JSON task the schema to ask for (None: any object).
struct Request<'a> {
    messages: &'a [Msg],
    temperature: f64,
    task: &'a str,
    bounds: TaskBounds,
    json: Option<Option<&'a Value>>,
}

/// The model's answer: its text, the token counts, and whether it was cut at `max_tokens`.
struct Answered {
    text: String,
    usage: Option<Usage>,
    cut: bool,
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
            http,
            breaker: Mutex::new(Breaker::default()),
            backoff_base: Duration::from_millis(500),
            reachable: watch::Sender::new(None),
            format: AtomicU8::new(match role.structured_output {
                StructuredOutput::Auto | StructuredOutput::JsonSchema => 0,
                StructuredOutput::JsonObjectSchema => 1,
                StructuredOutput::JsonObject => 2,
                StructuredOutput::None => 3,
            }),
            slots: Slots::of(&role.base_url, role.slots),
            system_kept: {
                static ALL: OnceLock<Mutex<HashMap<(String, String), Arc<tokio::sync::OnceCell<bool>>>>> = OnceLock::new();
                let mut all = ALL.get_or_init(Default::default).lock().unwrap();
                all.entry((role.base_url.clone(), role.model.clone())).or_default().clone()
            },
            role,
        }
    }

    /// Holds background requests to this endpoint back while a person is being answered.
    pub fn person_first(&self) -> PersonFirst {
        self.slots.people.fetch_add(1, Ordering::SeqCst);
        PersonFirst(self.slots.clone())
    }

    /// The `response_format` JSON tasks send now ("json_schema", "json_object_schema",
    /// "json_object" or "none").
    pub fn structured_output(&self) -> &'static str {
        FORMATS[self.format.load(Ordering::SeqCst).min(3) as usize]
    }

    /// Where the instructions go: "system" (a system message) or "in_user" (the first user
    /// message), as configured, or as probed for `auto` ("unknown" before the first call).
    pub fn system_messages(&self) -> &'static str {
        match (self.role.system_messages, self.system_kept.get()) {
            (SystemMessages::System, _) | (SystemMessages::Auto, Some(true)) => "system",
            (SystemMessages::InUser, _) | (SystemMessages::Auto, Some(false)) => "in_user",
            (SystemMessages::Auto, None) => "unknown",
        }
    }

    /// Whether this request's instructions go as a system message. For `auto`, the first call to
    /// an endpoint and model asks it once ([`Llm::probe_system`], in the caller's slot and within
    /// its bound) and keeps a clear answer.
    async fn system_kept(&self) -> Result<bool, LlmError> {
        match self.role.system_messages {
            SystemMessages::System => Ok(true),
            SystemMessages::InUser => Ok(false),
            SystemMessages::Auto => self.system_kept.get_or_try_init(|| self.probe_system()).await.copied(),
        }
    }

    /// Asks the endpoint where it reads instructions, now (`doctor` does, before it times a call).
    pub async fn probe(&self) -> Result<&'static str, LlmError> {
        self.system_kept().await?;
        Ok(self.system_messages())
    }

    /// One probe: a one-token answer under [`PROBE_SYSTEM`] (its first line made this process's
    /// own, so no server counts it from a cache), and the prompt tokens it counted. Kept, the
    /// prompt has at least a token for every 6 characters (every tokenizer does better on
    /// English); dropped, only the greeting and the template's few. A template that refuses a
    /// system role (a 400 or 422) is asked again with the instructions in the user message, and
    /// gets them there if it then answers. An answer without token counts keeps the system
    /// message (nothing says otherwise); any other failure is the call's, asked again next time.
    async fn probe_system(&self) -> Result<bool, LlmError> {
        static NONCE: OnceLock<String> = OnceLock::new();
        let nonce = NONCE.get_or_init(|| format!("{:x}", std::process::id() as u128 ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)));
        let system = format!("TASK: probe {nonce}\n{PROBE_SYSTEM}");
        let asked = [Msg::system(system.clone()), Msg::user("Hello!")];
        let kept = match self.probe_once(&asked).await? {
            (200, counted) => match counted {
                Some(n) if n > 0 => n * 6 >= system.chars().count() as u64,
                _ => true,
            },
            (400 | 422, _) => !matches!(self.probe_once(&in_user(&asked)).await?, (200, _)),
            (status, _) => return Err(LlmError::Http(status, "the endpoint refused a one-token request".into())),
        };
        if !kept {
            tracing::warn!(role = self.role.name, model = self.role.model, "the endpoint drops or refuses system messages: the instructions go in the first user message");
        }
        Ok(kept)
    }

    /// POSTs a chat completion request to the endpoint, with its key.
    async fn post_completion(&self, body: &Value) -> Result<reqwest::Response, LlmError> {
        let url = format!("{}/chat/completions", self.role.base_url.trim_end_matches('/'));
        let mut req = self.http.post(&url).json(body);
        if let Some(key) = &self.role.api_key {
            req = req.bearer_auth(key);
        }
        req.send().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(short(&e)) })
    }

    /// A one-token request: its status, and the prompt tokens a 200 counted.
    async fn probe_once(&self, messages: &[Msg]) -> Result<(u16, Option<u64>), LlmError> {
        let body = json!({
            "model": self.role.model,
            "messages": messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
            "temperature": 0.0,
            "max_tokens": 1,
            "stream": false,
        });
        let resp = self.post_completion(&body).await?;
        let status = resp.status().as_u16();
        let bytes = read_answer(resp).await?;
        if status >= 500 {
            return Err(LlmError::Http(status, String::from_utf8_lossy(&bytes).chars().take(300).collect()));
        }
        let counted = (status == 200)
            .then(|| serde_json::from_slice::<Completion>(&bytes).ok())
            .flatten()
            .and_then(|c| c.usage)
            .and_then(|u| u.prompt_tokens)
            .and_then(|n| n.as_u64());
        Ok((status, counted))
    }

    /// An `auto` endpoint that refused the request naming the format steps down to the next
    /// (true): a 400 or 422, or a 5xx whose body names it (llama-cpp-python reports its
    /// validation of `response_format` as a 500; a 5xx that names nothing is an outage).
    /// `sent` is the format the refused request carried: two requests refused at once step
    /// down one rung, not two (the second retries with the rung the first chose).
    fn step_down(&self, status: u16, body: &str, sent: u8) -> bool {
        let named = ["response_format", "json_schema", "json_object"].iter().any(|w| body.contains(w));
        if !matches!(status, 400 | 422 | 500..=599) || !named || self.role.structured_output != StructuredOutput::Auto || sent >= 3 {
            return false;
        }
        match self.format.compare_exchange(sent, sent + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                tracing::warn!(role = self.role.name, from = FORMATS[sent as usize], to = FORMATS[sent as usize + 1], "the endpoint refused the response format; stepping down");
                true
            }
            Err(now) => now > sent,
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
    pub async fn chat(&self, task: &str, messages: &[Msg], temperature: f64) -> Result<String, LlmError> {
        self.chat_with_usage(task, messages, temperature).await.map(|(text, _)| text)
    }

    /// A reply for the person, and the token counts the endpoint reported (`usage`, if it did).
    /// Its reasoning is dropped; cut at the length limit it ends at its last full sentence; one
    /// that echoes the prompt or is not language is never returned (written again once).
    pub async fn chat_with_usage(&self, task: &str, messages: &[Msg], temperature: f64) -> Result<(String, Option<Usage>), LlmError> {
        // The companion's own earlier turns are not the prompt: a reply may begin as one of them did.
        let prompt: Vec<&str> = messages.iter().filter(|m| m.role != "assistant").map(|m| m.content.as_str()).collect();
        let max_tokens = self.bounds(task).max_tokens;
        self.call(self.request(task, messages, temperature, None), |a| {
            let text = jsonish::without_reasoning(&a.text);
            let text = text.trim();
            let text = match a.cut {
                true => jsonish::to_last_sentence(text).ok_or_else(|| format!("cut at max_tokens {max_tokens} before a full sentence"))?,
                false => text.to_string(),
            };
            match jsonish::reply_problem(&text, &prompt) {
                Some(problem) => Err(format!("reply refused: {problem}")),
                None => Ok(Value::String(text)),
            }
        })
        .await
        .map(|(v, usage)| (v.as_str().unwrap_or_default().to_string(), usage))
    }

    /// A JSON object answer, checked by `shape` (which may also normalise it).
    pub async fn json(
        &self,
        task: &str,
        messages: &[Msg],
        temperature: f64,
        shape: impl Fn(Value) -> Result<Value, String>,
    ) -> Result<Value, LlmError> {
        self.json_with_schema(task, messages, temperature, None, shape).await
    }

    /// A JSON object answer in `schema`'s shape (a template's `result_schema`): sent as the
    /// request's `response_format` where the endpoint takes it, and its properties tell the
    /// task's object from any other in the answer. Checked by `shape`.
    pub async fn json_with_schema(
        &self,
        task: &str,
        messages: &[Msg],
        temperature: f64,
        schema: Option<&Value>,
        shape: impl Fn(Value) -> Result<Value, String>,
    ) -> Result<Value, LlmError> {
        let prompt: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        let keys: Vec<&str> = schema.and_then(|s| s.get("properties")).and_then(Value::as_object).map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
        let max_tokens = self.bounds(task).max_tokens;
        let mut request = self.request(task, messages, temperature, None);
        request.json = Some(schema);
        self.call(request, |a| {
            if a.cut {
                return Err(format!("cut at max_tokens {max_tokens}: the object is unfinished"));
            }
            shape(Value::Object(jsonish::task_object(&a.text, &prompt, &keys)?))
        })
        .await
        .map(|(v, _)| v)
    }

    /// The bounds of a task (its template's key).
    pub fn bounds(&self, task: &str) -> TaskBounds {
        self.role.bounds(kind_of(task))
    }

    fn request<'a>(&self, task: &'a str, messages: &'a [Msg], temperature: f64, json: Option<Option<&'a Value>>) -> Request<'a> {
        Request { messages, temperature, task, bounds: self.bounds(task), json }
    }

    async fn call(&self, request: Request<'_>, accept: impl Fn(&Answered) -> Result<Value, String>) -> Result<(Value, Option<Usage>), LlmError> {
        let deadline = tokio::time::Instant::now() + request.bounds.timeout;
        let person = PERSON_TASKS.contains(&request.task);
        let mut attempt = 0;
        loop {
            self.admit()?;
            // Waiting for a slot is no failure of the endpoint, but it counts against the bound.
            let slot = tokio::time::timeout_at(deadline, self.slots.take(person)).await.map_err(|_| LlmError::Timeout)?;
            let started = Instant::now();
            let format = self.format.load(Ordering::SeqCst).min(3);
            let sent = tokio::select! {
                sent = tokio::time::timeout_at(deadline, async { self.once(&request, format, self.system_kept().await?).await }) => sent.unwrap_or(Err(LlmError::Timeout)),
                // Dropping the request closes its connection: servers that stop on disconnect stop generating.
                _ = self.slots.preempt.notified(), if !person => Err(LlmError::Preempted),
            };
            drop(slot);
            let outcome = match sent {
                Ok(answer) => {
                    self.answered();
                    accept(&answer).map(|v| (v, answer.usage)).map_err(LlmError::BadAnswer)
                }
                Err(LlmError::Http(status, body)) if request.json.is_some() && self.step_down(status, &body, format) => continue,
                // Given up for a person: neither the model's answer nor the endpoint failing.
                Err(LlmError::Preempted) => Err(LlmError::Preempted),
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
                    let tokens = v.1.as_ref().and_then(|u| u.completion_tokens.as_ref()).and_then(|n| n.as_u64());
                    tracing::debug!(role = self.role.name, task = request.task, ms = started.elapsed().as_millis() as u64, tokens, "LLM answered");
                    return Ok(v);
                }
                Err(e) => {
                    let ms = started.elapsed().as_millis() as u64;
                    tracing::warn!(role = self.role.name, task = request.task, attempt, ms, unusable = matches!(e, LlmError::BadAnswer(_)), error = %e, "LLM call failed");
                    let retries = if matches!(e, LlmError::BadAnswer(_)) { BAD_ANSWER_RETRIES } else { RETRIES };
                    if attempt >= retries || !e.retryable() || tokio::time::Instant::now() >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + self.backoff_base * 2u32.pow(attempt))).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn once(&self, r: &Request<'_>, format: u8, system_kept: bool) -> Result<Answered, LlmError> {
        let mut body = json!({
            "model": self.role.model,
            "messages": if system_kept { r.messages.to_vec() } else { in_user(r.messages) }
                .iter().map(|m| json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(),
            "temperature": r.temperature,
            "max_tokens": r.bounds.max_tokens,
            // Every answer streams: a request given up (its bound, a person first) closes its
            // connection mid-answer, which stops servers that stop on disconnect (llama.cpp,
            // Ollama, vLLM) instead of letting them generate on for nobody. (Not streamed,
            // llama-cpp-python wrote a dropped extraction to its end while the person's reply
            // waited behind it and ran out of time.)
            "stream": true,
        });
        if let (Some(schema), Some(body)) = (r.json, body.as_object_mut()) {
            match (FORMATS[format as usize], schema) {
                ("json_schema", Some(schema)) => {
                    // Strict only where the schema allows it (OpenAI refuses strict with open objects).
                    let strict = schema.get("additionalProperties") == Some(&Value::Bool(false));
                    let name: String = r.task.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    let name = if name.is_empty() { "answer".to_string() } else { name };
                    body.insert("response_format".into(), json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}));
                }
                ("json_object_schema", Some(schema)) => {
                    body.insert("response_format".into(), json!({"type": "json_object", "schema": schema}));
                }
                ("none", _) => {}
                _ => {
                    body.insert("response_format".into(), json!({"type": "json_object"}));
                }
            }
        }
        let resp = self.post_completion(&body).await?;
        let status = resp.status().as_u16();
        let events = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/event-stream"));
        if status == 200 && events {
            return read_events(resp).await;
        }
        // (A server that ignores `stream` answers with one completion, read the same way.)
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
        let cut = choice.finish_reason.as_deref() == Some("length");
        msg.content.map(|text| Answered { text, usage: v.usage, cut }).ok_or_else(|| LlmError::BadAnswer("no message content".into()))
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

/// The messages with the leading system messages' instructions moved into the first user
/// message (a user message of their own first, if a model turn came before any), as llama.cpp's
/// own Gemma template does for a model without a system role. A system message later in the
/// conversation (a censor's request to write a reply again) is a user turn where it stands,
/// joined to the user turn before it if there is one, so the roles still alternate.
fn in_user(messages: &[Msg]) -> Vec<Msg> {
    let lead = messages.iter().take_while(|m| m.role == "system").count();
    let mut instructions: Vec<&str> = messages[..lead].iter().map(|m| m.content.as_str()).collect();
    let mut out: Vec<Msg> = Vec::with_capacity(messages.len());
    for m in &messages[lead..] {
        if !instructions.is_empty() {
            let joined = instructions.join("\n\n");
            instructions.clear();
            if m.role == "user" {
                out.push(Msg::user(format!("{joined}\n\n{}", m.content)));
                continue;
            }
            out.push(Msg::user(joined));
        }
        match (m.role, out.last_mut()) {
            ("system", Some(last)) if last.role == "user" => last.content = format!("{}\n\n{}", last.content, m.content),
            ("system", _) => out.push(Msg::user(m.content.clone())),
            _ => out.push(m.clone()),
        }
    }
    if !instructions.is_empty() {
        out.push(Msg::user(instructions.join("\n\n")));
    }
    out
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

/// A streamed completion (server-sent events: `data: {chunk}` lines, then `data: [DONE]`): the
/// deltas' content joined, the last finish reason, the usage if a chunk carries it; bounded by
/// [`ANSWER_CAP`] like any answer.
async fn read_events(mut resp: reqwest::Response) -> Result<Answered, LlmError> {
    let mut pending: Vec<u8> = Vec::new();
    let (mut text, mut refusal) = (String::new(), String::new());
    let (mut finish, mut usage, mut read, mut done) = (None::<String>, None, 0usize, false);
    while !done {
        let Some(chunk) = resp.chunk().await.map_err(|e| if e.is_timeout() { LlmError::Timeout } else { LlmError::Transport(short(&e)) })? else {
            break;
        };
        read += chunk.len();
        if read > ANSWER_CAP {
            return Err(LlmError::BadAnswer(format!("answer larger than {} MiB", ANSWER_CAP / (1024 * 1024))));
        }
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim().strip_prefix("data:").map(str::trim) else { continue };
            if data == "[DONE]" {
                done = true;
                break;
            }
            let c: StreamChunk = serde_json::from_str(data).map_err(|e| LlmError::BadAnswer(format!("not a chat completion chunk: {e}")))?;
            if c.usage.is_some() {
                usage = c.usage;
            }
            if let Some(choice) = c.choices.into_iter().next() {
                let delta = choice.delta.unwrap_or_default();
                text.push_str(delta.content.as_deref().unwrap_or(""));
                refusal.push_str(delta.refusal.as_deref().unwrap_or(""));
                finish = choice.finish_reason.or(finish);
            }
        }
    }
    if !refusal.trim().is_empty() {
        return Err(LlmError::Refused(refusal.chars().take(200).collect()));
    }
    match finish.as_deref() {
        Some("content_filter") => Err(LlmError::Refused("content filter".into())),
        None if text.is_empty() => Err(LlmError::BadAnswer("the stream ended without an answer".into())),
        f => Ok(Answered { text, usage, cut: f == Some("length") }),
    }
}

/// One chunk of a streamed completion.
#[derive(Debug, Default, Deserialize)]
struct StreamChunk {
    #[serde(default, deserialize_with = "null_as_empty")]
    choices: Vec<StreamChoice>,
    #[serde(default, deserialize_with = "if_shaped")]
    usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamChoice {
    delta: Option<AnswerMessage>,
    finish_reason: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: &[Msg]) -> Vec<(&'static str, String)> {
        m.iter().map(|m| (m.role, m.content.clone())).collect()
    }

    #[test]
    fn instructions_move_into_the_first_user_message() {
        let m = [Msg::system("TASK: chat\nBe kind."), Msg::user("Hi"), Msg::assistant("Hello!"), Msg::user("How are you?")];
        assert_eq!(
            shape(&in_user(&m)),
            vec![("user", "TASK: chat\nBe kind.\n\nHi".into()), ("assistant", "Hello!".into()), ("user", "How are you?".into())]
        );
        // A model turn first: the instructions are a user turn of their own before it.
        let m = [Msg::system("TASK: x"), Msg::assistant("Earlier."), Msg::user("Now")];
        assert_eq!(shape(&in_user(&m)), vec![("user", "TASK: x".into()), ("assistant", "Earlier.".into()), ("user", "Now".into())]);
        // A later system message (a censor asking for the reply again) is a user turn where it
        // stands, after the draft, not glued to the first turn.
        let m = [Msg::system("TASK: chat"), Msg::user("Hi"), Msg::assistant("Draft."), Msg::system("Write it again without the name.")];
        assert_eq!(
            shape(&in_user(&m)),
            vec![("user", "TASK: chat\n\nHi".into()), ("assistant", "Draft.".into()), ("user", "Write it again without the name.".into())]
        );
        let m = [Msg::system("TASK: chat"), Msg::user("Hi"), Msg::system("Mind the censor.")];
        assert_eq!(shape(&in_user(&m)), vec![("user", "TASK: chat\n\nHi\n\nMind the censor.".into())]);
        // Only instructions: they are the user message.
        assert_eq!(shape(&in_user(&[Msg::system("TASK: y")])), vec![("user", "TASK: y".into())]);
    }
}
