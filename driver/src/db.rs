//! PostgreSQL connections that survive a restart: every call reconnects with back-off when the
//! connection is gone, and the listener re-LISTENs. Each organ of the driver has its own
//! connection, so a slow call of one never queues behind another.
//!
//! Retrying a call after a lost connection is safe because every write the driver makes is
//! idempotent in the extension: log_message deduplicates, complete_work repeats nothing,
//! heartbeat_begin returns the heartbeat in flight, a second commit or send is refused.
use futures_util::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Mutex};
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, NoTls, Row};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub enum DbError {
    /// The database could not be reached within the call's patience.
    Down(String),
    /// The statement failed: SQLSTATE and message (the extension names the argument).
    Sql { code: String, message: String },
}

impl DbError {
    pub fn code(&self) -> Option<&str> {
        match self {
            DbError::Sql { code, .. } => Some(code),
            DbError::Down(_) => None,
        }
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Down(e) => write!(f, "database unreachable: {e}"),
            DbError::Sql { code, message } => write!(f, "{message} (SQLSTATE {code})"),
        }
    }
}

/// Errors that mean "the connection is gone", not "the statement is wrong".
fn is_connection_error(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.as_db_error() {
        // 08: connection exceptions; 57P01–03: shutdown, crash, cannot connect now.
        Some(db) => {
            let c = db.code().code();
            c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03")
        }
        None => true, // I/O
    }
}

fn sql_error(e: tokio_postgres::Error) -> DbError {
    match e.as_db_error() {
        Some(db) => DbError::Sql { code: db.code().code().to_string(), message: db.message().to_string() },
        None => DbError::Down(e.to_string()),
    }
}

pub struct Db {
    url: String,
    label: &'static str,
    client: Mutex<Option<Arc<Client>>>,
    /// How long one call keeps trying to reach a database that is down.
    patience: Duration,
}

pub async fn connect(url: &str) -> Result<Client, String> {
    let (client, conn) = tokio::time::timeout(Duration::from_secs(10), tokio_postgres::connect(url, NoTls))
        .await
        .map_err(|_| "connection timed out after 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

impl Db {
    pub fn new(url: &str, label: &'static str) -> Db {
        Db { url: url.to_string(), label, client: Mutex::new(None), patience: Duration::from_secs(120) }
    }

    pub fn with_patience(mut self, patience: Duration) -> Db {
        self.patience = patience;
        self
    }

    async fn client(&self) -> Result<Arc<Client>, String> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        *slot = None;
        let c = Arc::new(connect(&self.url).await?);
        c.batch_execute("SET application_name = 'dionysus driver'").await.map_err(|e| e.to_string())?;
        tracing::debug!(connection = self.label, "connected to PostgreSQL");
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn forget_client(&self) {
        *self.client.lock().await = None;
    }

    /// Runs a statement, reconnecting (with back-off, within the patience) while the database is down.
    pub async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let deadline = Instant::now() + self.patience;
        let mut delay = Duration::from_millis(200);
        let mut warned = false;
        loop {
            let err = match self.client().await {
                Ok(c) => match c.query(sql, params).await {
                    Ok(rows) => {
                        if warned {
                            tracing::info!(connection = self.label, "PostgreSQL is back");
                        }
                        return Ok(rows);
                    }
                    Err(e) if is_connection_error(&e) => {
                        self.forget_client().await;
                        e.to_string()
                    }
                    Err(e) => return Err(sql_error(e)),
                },
                Err(e) => e,
            };
            if Instant::now() + delay > deadline {
                return Err(DbError::Down(err));
            }
            if !warned {
                tracing::warn!(connection = self.label, error = %err, "PostgreSQL unreachable; retrying");
                warned = true;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }

    /// The first column of the first row as JSON (NULL and no row are both `Value::Null`).
    pub async fn json(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Value, DbError> {
        let rows = self.query(sql, params).await?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<Value>>(0)).unwrap_or(Value::Null))
    }

    /// Runs `f` inside one transaction on this connection (for locks held across a send).
    /// Not retried: a lost connection rolls the transaction back, and the caller tries later.
    pub async fn transaction<T>(&self, f: impl AsyncFnOnce(&Client) -> Result<T, DbError>) -> Result<T, DbError> {
        let c = match self.client().await {
            Ok(c) => c,
            Err(e) => return Err(DbError::Down(e)),
        };
        c.batch_execute("BEGIN").await.map_err(sql_error)?;
        match f(&c).await {
            Ok(v) => {
                c.batch_execute("COMMIT").await.map_err(sql_error)?;
                Ok(v)
            }
            Err(e) => {
                let _ = c.batch_execute("ROLLBACK").await;
                if matches!(e, DbError::Down(_)) {
                    self.forget_client().await;
                }
                Err(e)
            }
        }
    }
}

pub fn map_err(e: tokio_postgres::Error) -> DbError {
    if is_connection_error(&e) {
        DbError::Down(e.to_string())
    } else {
        sql_error(e)
    }
}

/// What the extension's NOTIFY channels ask of the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Heartbeat,
    Work,
    Outbox,
}

pub const CHANNELS: [(&str, Wake); 3] =
    [("dionysus_heartbeat", Wake::Heartbeat), ("dionysus_work", Wake::Work), ("dionysus_outbox", Wake::Outbox)];

/// LISTENs on the extension's channels and forwards wake-ups, reconnecting with back-off after
/// a restart. Every (re)connection also sends each wake-up once: what was notified while the
/// driver was away is caught up (the handlers check the database, so a spare wake-up is harmless).
pub async fn listen(url: String, tx: mpsc::Sender<Wake>, shutdown: CancellationToken) {
    let mut delay = Duration::from_millis(200);
    while !shutdown.is_cancelled() {
        let conn = tokio::time::timeout(Duration::from_secs(10), tokio_postgres::connect(&url, NoTls)).await;
        let (client, mut connection) = match conn {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "listener cannot connect; retrying in {:?}", delay);
                tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = shutdown.cancelled() => return }
                delay = (delay * 2).min(Duration::from_secs(5));
                continue;
            }
            Err(_) => continue,
        };
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        let listen_sql: String = CHANNELS.iter().map(|(c, _)| format!("LISTEN {c};")).collect();
        // The LISTEN only completes while the connection is polled.
        let listening = client.batch_execute(&listen_sql);
        tokio::pin!(listening);
        let mut ok = false;
        loop {
            tokio::select! {
                r = &mut listening, if !ok => {
                    if let Err(e) = r { tracing::warn!(error = %e, "LISTEN failed"); break; }
                    ok = true;
                    delay = Duration::from_millis(200);
                    tracing::info!("listening on {}", CHANNELS.map(|(c, _)| c).join(", "));
                    for (_, w) in CHANNELS { let _ = tx.send(w).await; }
                }
                m = messages.next() => match m {
                    Some(Ok(AsyncMessage::Notification(n))) => {
                        if let Some((_, w)) = CHANNELS.iter().find(|(c, _)| *c == n.channel()) {
                            tracing::debug!(channel = n.channel(), payload = n.payload(), "notified");
                            let _ = tx.send(*w).await;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => { tracing::warn!(error = %e, "listener connection lost"); break; }
                    None => { tracing::warn!("listener connection closed"); break; }
                },
                _ = shutdown.cancelled() => return,
            }
        }
        tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = shutdown.cancelled() => return }
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}
