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
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{AsyncMessage, Client, Connection, Row, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;
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

/// A client whose connection runs in the background; see [`open`].
pub async fn connect(url: &str) -> Result<Client, String> {
    let (client, conn) = open(url).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

type TlsStream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

/// Opens a connection (within 10 s) as `sslmode` in the URL asks. Every connection of the driver
/// (its organs, the listener, `doctor`) comes through here.
///
/// - `disable`: plain TCP.
/// - `prefer` (the default): TLS if the server offers it, else plain TCP. The certificate is not
///   verified, as with libpq: this guards against eavesdropping only (an active attacker could
///   refuse TLS anyway), and it keeps working against a local server with a self-signed certificate.
/// - `require`, `verify-ca`, `verify-full`: TLS or no connection, and the certificate must chain
///   to the webpki (Mozilla) roots or to the CA file of `sslrootcert=` (or `database_ca_file`),
///   and name the host connected to. `require` is thus stricter than libpq's, which verifies
///   nothing; an operator with an unverifiable certificate uses `prefer` instead.
pub async fn open(url: &str) -> Result<(Client, Connection<Socket, TlsStream>), String> {
    let settings = TlsSettings::parse(url)?;
    let mut config: tokio_postgres::Config = settings.rest.parse().map_err(|e: tokio_postgres::Error| e.to_string())?;
    config.ssl_mode(settings.mode);
    let tls = tls_connector(settings.verify, settings.root_cert.as_deref())?;
    tokio::time::timeout(Duration::from_secs(10), config.connect(tls))
        .await
        .map_err(|_| "connection timed out after 10 s".to_string())?
        .map_err(|e| describe(&e))
}

/// The error with its causes (a TLS failure says why: "invalid peer certificate: UnknownIssuer").
fn describe(e: &tokio_postgres::Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s = format!("{s}: {inner}");
        source = inner.source();
    }
    s
}

/// The TLS parameters of a connection string, which the driver handles itself (tokio-postgres
/// knows neither `sslrootcert` nor the verify modes), and the string without them.
#[derive(Debug, PartialEq)]
struct TlsSettings {
    rest: String,
    mode: SslMode,
    verify: bool,
    root_cert: Option<String>,
}

impl TlsSettings {
    fn parse(url: &str) -> Result<TlsSettings, String> {
        let mut sslmode = None;
        let mut root_cert = None;
        let mut take = |key: &str, value: String| match key {
            "sslmode" => {
                sslmode = Some(value);
                true
            }
            "sslrootcert" => {
                root_cert = Some(value);
                true
            }
            _ => false,
        };
        let rest = if url.contains("://") {
            match url.split_once('?') {
                Some((base, query)) => {
                    let kept: Vec<&str> =
                        query.split('&').filter(|kv| !kv.split_once('=').is_some_and(|(k, v)| take(k, percent_decode(v)))).collect();
                    if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) }
                }
                None => url.to_string(),
            }
        } else {
            url.split_whitespace()
                .filter(|kv| !kv.split_once('=').is_some_and(|(k, v)| take(k, v.trim_matches('\'').to_string())))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (mode, verify) = match sslmode.as_deref().unwrap_or("prefer") {
            "disable" => (SslMode::Disable, false),
            "prefer" => (SslMode::Prefer, false),
            "require" | "verify-ca" | "verify-full" => (SslMode::Require, true),
            other => return Err(format!("sslmode \"{other}\" is not one of disable, prefer, require, verify-ca, verify-full")),
        };
        Ok(TlsSettings { rest, mode, verify, root_cert })
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn tls_connector(verify: bool, root_cert: Option<&str>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
    let config = if verify {
        let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        if let Some(path) = root_cert {
            use rustls::pki_types::{pem::PemObject, CertificateDer};
            let certs: Vec<CertificateDer> =
                CertificateDer::pem_file_iter(path).and_then(|i| i.collect()).map_err(|e| format!("sslrootcert {path}: {e}"))?;
            if certs.is_empty() {
                return Err(format!("sslrootcert {path}: no certificate in the file"));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| format!("sslrootcert {path}: {e}"))?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(EncryptOnly(provider))).with_no_client_auth()
    };
    Ok(MakeRustlsConnect::new(config))
}

/// `sslmode=prefer`: any certificate is accepted, but the handshake must still be signed by
/// its key, so the session is encrypted to whoever holds it.
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
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
        self.run(sql, params, true).await
    }

    /// As `query`, but a statement whose connection broke while it ran is not sent again: it
    /// may have committed, and it is not idempotent. Only a failure to connect is retried.
    pub async fn query_at_most_once(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        self.run(sql, params, false).await
    }

    async fn run(&self, sql: &str, params: &[&(dyn ToSql + Sync)], replay: bool) -> Result<Vec<Row>, DbError> {
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
                    Err(e) if is_connection_error(&e) && !replay => {
                        self.forget_client().await;
                        return Err(DbError::Down(format!("the connection broke during the call, which may or may not have taken effect: {e}")));
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

    /// The first column of the first row (a jsonb answer of an API function) read into its
    /// documented shape `T`; a shape that does not match is an error naming what was read.
    pub async fn one<T: serde::de::DeserializeOwned>(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<T, DbError> {
        shape(self.json(sql, params).await?, sql)
    }

    /// Every row's first column (jsonb, e.g. `SELECT to_jsonb(f) FROM dionysus.fn(...) f`) read
    /// into `T`.
    pub async fn all<T: serde::de::DeserializeOwned>(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<T>, DbError> {
        let rows = self.query(sql, params).await?;
        rows.iter().map(|r| shape(r.get::<_, Option<Value>>(0).unwrap_or(Value::Null), sql)).collect()
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

/// An API function's answer read into its documented Rust shape. A mismatch means the extension
/// and the driver disagree about the contract (e.g. an extension of another version): an error
/// that names the call, never a silent default.
fn shape<T: serde::de::DeserializeOwned>(v: Value, sql: &str) -> Result<T, DbError> {
    serde_json::from_value(v).map_err(|e| DbError::Sql {
        code: "DNY01".into(),
        message: format!("the answer of `{}` does not have its documented shape: {e}", sql.split_whitespace().collect::<Vec<_>>().join(" ")),
    })
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
    /// Contact pressure crossed its threshold with the gates open: a mind is needed.
    Contact,
    /// A dream-channel item waits to be posted (the mirror's own task takes it).
    Mirror,
}

pub const CHANNELS: [(&str, Wake); 5] = [
    ("dionysus_heartbeat", Wake::Heartbeat),
    ("dionysus_work", Wake::Work),
    ("dionysus_outbox", Wake::Outbox),
    ("dionysus_contact", Wake::Contact),
    ("dionysus_mirror", Wake::Mirror),
];

/// LISTENs on the extension's channels and forwards wake-ups, reconnecting with back-off after
/// a restart. Every (re)connection also sends each wake-up once: what was notified while the
/// driver was away is caught up (the handlers check the database, so a spare wake-up is harmless).
pub async fn listen(url: String, tx: mpsc::Sender<Wake>, shutdown: CancellationToken) {
    let mut delay = Duration::from_millis(200);
    while !shutdown.is_cancelled() {
        let (client, mut connection) = match open(&url).await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, "listener cannot connect; retrying in {:?}", delay);
                tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = shutdown.cancelled() => return }
                delay = (delay * 2).min(Duration::from_secs(5));
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> TlsSettings {
        TlsSettings::parse(url).unwrap()
    }

    #[test]
    fn tls_parameters_are_taken_out_of_the_connection_string() {
        let s = parsed("postgresql://bob@db:5432/x?sslmode=verify-full&application_name=d&sslrootcert=/etc/my%20ca.pem");
        assert_eq!(s, TlsSettings { rest: "postgresql://bob@db:5432/x?application_name=d".into(), mode: SslMode::Require, verify: true, root_cert: Some("/etc/my ca.pem".into()) });
        let s = parsed("host=db user=bob sslmode=require sslrootcert='/ca.pem'");
        assert_eq!(s, TlsSettings { rest: "host=db user=bob".into(), mode: SslMode::Require, verify: true, root_cert: Some("/ca.pem".into()) });
        assert_eq!(parsed("postgresql://db/x?sslmode=disable").rest, "postgresql://db/x");
        assert!(matches!(parsed("postgresql://db/x?sslmode=disable").mode, SslMode::Disable));
        let default = parsed("postgresql://db/x");
        assert!(matches!(default.mode, SslMode::Prefer) && !default.verify);
        assert!(parsed("postgresql://db/x?sslmode=verify-ca").verify);
        assert!(TlsSettings::parse("postgresql://db/x?sslmode=allow-anything").unwrap_err().contains("allow-anything"));
    }

    /// An answer without its documented shape is an error naming the call and what is wrong,
    /// never a silent default.
    #[test]
    fn an_answer_of_another_shape_is_a_clear_error() {
        #[derive(Debug, serde::Deserialize)]
        struct Logged {
            #[allow(dead_code)]
            message_id: uuid::Uuid,
        }
        let sql = "SELECT dionysus.log_message($1,\n   $2)";
        let ok: Logged = shape(serde_json::json!({"message_id": "00000000-0000-0000-0000-000000000001", "extra": 1}), sql).unwrap();
        assert_eq!(ok.message_id, uuid::Uuid::from_u128(1));
        for (answer, wrong) in [
            (serde_json::json!({"duplicate": false}), "missing field `message_id`"),
            (serde_json::json!({"message_id": "not a uuid"}), "UUID parsing failed"),
            (serde_json::Value::Null, "invalid type: null"),
        ] {
            let Err(DbError::Sql { code, message }) = shape::<Logged>(answer, sql) else { panic!("a wrong shape was accepted") };
            assert_eq!(code, "DNY01");
            assert!(message.contains("`SELECT dionysus.log_message($1, $2)` does not have its documented shape") && message.contains(wrong), "{message}");
        }
    }

    #[test]
    fn a_missing_or_empty_ca_file_is_an_error_naming_it() {
        assert!(tls_connector(true, Some("/nonexistent/ca.pem")).err().unwrap().contains("/nonexistent/ca.pem"));
        let empty = std::env::temp_dir().join(format!("dionysus-empty-ca-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate").unwrap();
        assert!(tls_connector(true, empty.to_str()).err().unwrap().contains("no certificate"));
        assert!(tls_connector(false, None).is_ok() && tls_connector(true, None).is_ok());
    }
}
