//! The terminal: one person at the keyboard. With `json` each stdin line is
//! `{"id": "...", "author": "...", "text": "..."}` (or plain text) and each message out is a
//! JSON line, for scripts and the driver benchmark.
use super::{Channel, Event, Incoming, SendError};
use async_trait::async_trait;
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub const CHANNEL_ID: &str = "terminal";

pub struct Terminal {
    user: String,
    json: bool,
    /// At the end of stdin, `chat` answers what was said and stops (Ctrl-D ends a conversation);
    /// `run` (a service with no terminal, `docker run` without one) keeps its heartbeats, work
    /// and outbox going until SIGTERM.
    exit_on_eof: bool,
    sent: AtomicU64,
}

impl Terminal {
    pub fn new(user: &str, json: bool, exit_on_eof: bool) -> Terminal {
        Terminal { user: user.to_string(), json, exit_on_eof, sent: AtomicU64::new(0) }
    }

    /// A line about the driver itself, not the companion's words, between the conversation's
    /// lines (text mode: a script reading JSON lines gets none).
    pub fn notice(&self, text: &str) {
        if self.json {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\r({text})\n{}> ", self.user).and_then(|_| out.flush());
    }

    fn prompt(&self) {
        if !self.json {
            print!("{}> ", self.user);
            let _ = std::io::stdout().flush();
        }
    }
}

#[async_trait]
impl Channel for Terminal {
    fn platform(&self) -> &'static str {
        "terminal"
    }
    fn allowed(&self, author_id: &str) -> bool {
        author_id == self.user
    }
    fn bot_id(&self) -> String {
        "dionysus".into()
    }
    async fn home(&self) -> Option<String> {
        Some(CHANNEL_ID.into())
    }
    async fn direct(&self, _author_id: &str) -> Option<String> {
        Some(CHANNEL_ID.into())
    }
    async fn send(&self, channel_id: &str, text: &str, _nonce: &str) -> Result<String, SendError> {
        let id = format!("out-{}-{}", std::process::id(), self.sent.fetch_add(1, Ordering::Relaxed));
        let mut out = std::io::stdout().lock();
        let r = if self.json {
            writeln!(out, "{}", json!({"id": id, "channel": channel_id, "text": text}))
        } else {
            writeln!(out, "\rdionysus> {text}\n").and_then(|_| write!(out, "{}> ", self.user))
        };
        r.and_then(|_| out.flush()).map_err(|e| SendError::Unavailable(e.to_string()))?;
        Ok(id)
    }
    async fn run(&self, events: mpsc::Sender<Event>, shutdown: CancellationToken) {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        let session = format!("{}-{}", std::process::id(), chrono::Utc::now().timestamp_millis());
        let mut n = 0u64;
        let _ = events.send(Event::Ready).await;
        self.prompt();
        loop {
            let line = tokio::select! {
                l = lines.next_line() => l,
                _ = shutdown.cancelled() => return,
            };
            let Ok(Some(line)) = line else {
                if self.exit_on_eof {
                    let _ = events.send(Event::Closed).await;
                } else {
                    tracing::info!("stdin closed: no conversation on the terminal; heartbeats and the queue carry on");
                }
                return;
            };
            let line = line.trim();
            if line.is_empty() {
                self.prompt();
                continue;
            }
            n += 1;
            let msg = match (self.json, serde_json::from_str::<serde_json::Value>(line)) {
                // A line of --json input: {"text", "id", "author", "reply_to"}, each a string or left out.
                (true, Ok(serde_json::Value::Object(v))) => {
                    let field = |key: &str| v.get(key).and_then(serde_json::Value::as_str);
                    Incoming {
                        message_id: field("id").map(str::to_string).unwrap_or_else(|| format!("{session}-{n}")),
                        channel_id: CHANNEL_ID.into(),
                        author_id: field("author").unwrap_or(&self.user).to_string(),
                        content: field("text").unwrap_or_default().to_string(),
                        private: true,
                        reply_to: field("reply_to").map(str::to_string),
                    }
                }
                _ => Incoming {
                    message_id: format!("{session}-{n}"),
                    channel_id: CHANNEL_ID.into(),
                    author_id: self.user.clone(),
                    content: line.to_string(),
                    private: true,
                    reply_to: None,
                },
            };
            if events.send(Event::Message(msg)).await.is_err() {
                return;
            }
        }
    }
}
