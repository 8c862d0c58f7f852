//! `dionysus doctor`: one line per part of the stack, each failure with its fix.
use crate::config::{redact, Config};
use crate::llm::Llm;
use std::process::ExitCode;
use std::time::Duration;
use crate::db::connect;
use tokio_postgres::Client;

pub const MIN_SERVER: u32 = 15;
pub const MIN_PGVECTOR: (u32, u32, u32) = (0, 8, 0);

#[derive(Debug, PartialEq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

pub struct Check {
    pub status: Status,
    pub name: &'static str,
    pub detail: String,
    pub fix: Option<String>,
}

impl Check {
    fn ok(name: &'static str, detail: impl Into<String>) -> Check {
        Check { status: Status::Ok, name, detail: detail.into(), fix: None }
    }
    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { status: Status::Fail, name, detail: detail.into(), fix: Some(fix.into()) }
    }
    fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { status: Status::Warn, name, detail: detail.into(), fix: Some(fix.into()) }
    }
    pub fn render(&self) -> String {
        let tag = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        let mut s = format!("{tag}  {:<10} {}", self.name, self.detail);
        if let Some(fix) = &self.fix {
            s.push_str(&format!("\n      {:<10} fix: {fix}", ""));
        }
        s
    }
}

/// "0.8.0" → (0, 8, 0), "15.18 (Debian ...)" → (15, 18, 0); missing parts are 0.
pub fn parse_version(v: &str) -> (u32, u32, u32) {
    let head = v.split_whitespace().next().unwrap_or("");
    let mut parts = head.split(['.', '-']).map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

pub async fn run(config: &Config) -> ExitCode {
    println!("dionysus doctor — {}", redact(&config.database_url));
    let checks = checks(config).await;
    for c in &checks {
        println!("{}", c.render());
    }
    if checks.iter().any(|c| c.status == Status::Fail) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

pub async fn checks(config: &Config) -> Vec<Check> {
    let mut out = Vec::new();
    let client = match connect(&config.database_url).await {
        Ok(c) => {
            out.push(Check::ok("postgres", "connected"));
            c
        }
        Err(e) => {
            out.push(Check::fail(
                "postgres",
                format!("cannot connect: {e}"),
                "start the cluster (scripts/run.sh does), or set DIONYSUS_DATABASE_URL",
            ));
            return out;
        }
    };
    out.push(server_version(&client).await);
    out.push(role(&client).await);
    out.push(pgvector(&client).await);
    let installed = extension(&client).await;
    let ext_ok = installed.status == Status::Ok;
    out.push(installed);
    out.push(preload(&client).await);
    if ext_ok {
        out.push(worker(&client).await);
        out.push(model(&client).await);
    }
    out.extend(services(config).await);
    out
}

/// The LLM roles and the Discord token. An unreachable LLM is a warning: the driver still
/// runs (honest fallback replies, default decisions) and catches up when it is back.
pub async fn services(config: &Config) -> Vec<Check> {
    let mut out = Vec::new();
    for role in [&config.fast, &config.smart] {
        let name = if role.name == "fast" { "llm fast" } else { "llm smart" };
        let llm = Llm::new(role.clone());
        out.push(match llm.models().await {
            Ok(models) if models.is_empty() || models.iter().any(|m| m == &role.model) => speed(&llm, name).await,
            Ok(models) => Check::warn(
                name,
                format!("{} is not among the {} models at {}", role.model, models.len(), role.base_url),
                format!("pull it (ollama pull {}) or set DIONYSUS_{}_MODEL", role.model, role.name.to_uppercase()),
            ),
            Err(e) => Check::warn(
                name,
                format!("{} unreachable: {e}", role.base_url),
                "start the LLM server (ollama serve) or set DIONYSUS_LLM_BASE_URL / DIONYSUS_LLM_API_KEY",
            ),
        });
    }
    out.push(match &config.discord.token {
        None => Check::ok("discord", "no token: the terminal is the channel"),
        Some(token) => match discord_identity(token).await {
            Ok(name) if config.discord.allowed_user_ids.is_empty() => Check::warn(
                "discord",
                format!("token valid (bot {name}) but no allowed user ids: every message will be ignored"),
                "set DIONYSUS_DISCORD_ALLOWED_USERS to your Discord user id",
            ),
            Ok(name) => Check::ok("discord", format!("bot {name}, {} allowed user(s)", config.discord.allowed_user_ids.len())),
            Err(e) => Check::fail("discord", e, "check DIONYSUS_DISCORD_TOKEN (Developer Portal → Bot → Reset Token)"),
        },
    });
    out
}

/// The endpoint's writing speed, from one short answer, and the kinds of task whose
/// `max_tokens` it would not write within their bound (#35).
async fn speed(llm: &Llm, name: &'static str) -> Check {
    let role = &llm.role;
    let here = format!("{} at {}", role.model, role.base_url);
    let msgs = [crate::llm::Msg::system("TASK: speed\nCount from one to twenty in words, separated by spaces."), crate::llm::Msg::user("Go.")];
    // Where it reads instructions, asked first so the timing below is one answer's.
    if let Err(e) = llm.probe().await {
        return Check::warn(name, format!("{here}: no answer to a one-token request: {e}"), "check the model serves chat completions");
    }
    let started = std::time::Instant::now();
    let tokens = match llm.chat_with_usage("speed", &msgs, 0.0).await {
        Ok((text, usage)) => usage.and_then(|u| u.completion_tokens).and_then(|n| n.as_u64()).unwrap_or(text.split_whitespace().count() as u64),
        Err(e) => return Check::warn(name, format!("{here}: no answer to a short request: {e}"), "check the model serves chat completions"),
    };
    let per_second = tokens.max(1) as f64 / started.elapsed().as_secs_f64().max(0.001);
    // Known after the first call: where the endpoint lets the instructions be read.
    let here = match llm.system_messages() {
        "in_user" => format!("{here} (drops system messages: instructions go in the first user message)"),
        _ => here,
    };
    let slow: Vec<String> = role
        .tasks
        .iter()
        .filter(|(_, b)| b.max_tokens as f64 / per_second > b.timeout.as_secs_f64())
        .map(|(kind, b)| format!("{kind} ({} tokens ≈ {:.0} s > {} s)", b.max_tokens, b.max_tokens as f64 / per_second, b.timeout.as_secs()))
        .collect();
    if slow.is_empty() {
        Check::ok(name, format!("{here}, about {per_second:.0} tokens/s"))
    } else {
        Check::warn(
            name,
            format!("{here}, about {per_second:.1} tokens/s: too slow to write a full answer in time for {}", slow.join(", ")),
            "lower [llm.tasks.<kind>] max_tokens or raise timeout_seconds, or use a faster model",
        )
    }
}

async fn discord_identity(token: &str) -> Result<String, String> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().map_err(|e| e.to_string())?;
    let resp = http
        .get("https://discord.com/api/v10/users/@me")
        .header("Authorization", format!("Bot {token}"))
        .send()
        .await
        .map_err(|e| format!("cannot reach Discord: {e}"))?;
    match resp.status().as_u16() {
        200 => Ok(resp.json::<DiscordUser>().await.ok().and_then(|u| u.username).unwrap_or_default()),
        401 => Err("Discord refused the token (401)".into()),
        s => Err(format!("Discord answered HTTP {s}")),
    }
}

async fn one(client: &Client, sql: &str) -> Result<Option<String>, String> {
    client.query_opt(sql, &[]).await.map(|r| r.and_then(|r| r.get::<_, Option<String>>(0))).map_err(|e| e.to_string())
}

/// The driver should not hold more than it needs: a superuser connection works, but is a warning.
async fn role(c: &Client) -> Check {
    match c.query_one("SELECT current_user::text, rolsuper FROM pg_roles WHERE rolname = current_user", &[]).await {
        Ok(r) if r.get::<_, bool>(1) => Check::warn(
            "role",
            format!("connected as {}, a superuser", r.get::<_, String>(0)),
            "connect as dionysus_driver (ALTER ROLE dionysus_driver LOGIN PASSWORD '…'; see the README)",
        ),
        Ok(r) => Check::ok("role", format!("connected as {}", r.get::<_, String>(0))),
        Err(e) => Check::warn("role", format!("cannot read the role: {e}"), "check the connection's permissions"),
    }
}

async fn server_version(c: &Client) -> Check {
    match one(c, "SELECT current_setting('server_version')").await {
        Ok(Some(v)) if parse_version(&v).0 >= MIN_SERVER => Check::ok("server", format!("PostgreSQL {v}")),
        Ok(Some(v)) => Check::fail("server", format!("PostgreSQL {v} is too old"), format!("use PostgreSQL {MIN_SERVER} or newer")),
        Ok(None) | Err(_) => Check::fail("server", "cannot read server_version", "check the connection's permissions"),
    }
}

async fn pgvector(c: &Client) -> Check {
    let installed = one(c, "SELECT extversion FROM pg_extension WHERE extname = 'vector'").await.ok().flatten();
    let available = one(c, "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").await.ok().flatten();
    match (installed, available) {
        (Some(v), _) if parse_version(&v) >= MIN_PGVECTOR => Check::ok("pgvector", format!("{v} installed")),
        (Some(v), _) => Check::fail(
            "pgvector",
            format!("{v} installed, 0.8.0 or newer needed (iterative index scans)"),
            "install pgvector 0.8 (scripts/setup.sh builds it), then ALTER EXTENSION vector UPDATE",
        ),
        (None, Some(v)) => Check::warn("pgvector", format!("{v} available, not yet installed"), "CREATE EXTENSION dionysus CASCADE installs it"),
        (None, None) => Check::fail("pgvector", "not available on this server", "scripts/setup.sh builds and installs pgvector 0.8.0"),
    }
}

async fn extension(c: &Client) -> Check {
    let installed = one(c, "SELECT extversion FROM pg_extension WHERE extname = 'dionysus'").await.ok().flatten();
    let available = one(c, "SELECT default_version FROM pg_available_extensions WHERE name = 'dionysus'").await.ok().flatten();
    match (installed, available) {
        (Some(v), Some(a)) if v == a => Check::ok("extension", format!("dionysus {v} installed")),
        (Some(v), Some(a)) => Check::warn("extension", format!("dionysus {v} installed, {a} available"), "ALTER EXTENSION dionysus UPDATE"),
        (Some(v), None) => Check::ok("extension", format!("dionysus {v} installed")),
        (None, Some(a)) => Check::fail("extension", format!("dionysus {a} available but not created in this database"), "CREATE EXTENSION dionysus CASCADE;"),
        (None, None) => Check::fail(
            "extension",
            "dionysus is not installed on this server",
            "build and install it: cd extension && cargo pgrx install --release (scripts/run.sh does)",
        ),
    }
}

async fn preload(c: &Client) -> Check {
    match one(c, "SELECT current_setting('shared_preload_libraries')").await {
        Ok(Some(v)) if v.split(',').any(|l| l.trim().trim_matches('"') == "dionysus") => {
            Check::ok("preload", format!("shared_preload_libraries = '{v}'"))
        }
        Ok(v) => Check::fail(
            "preload",
            format!("dionysus is not in shared_preload_libraries ('{}'): no maintenance worker", v.unwrap_or_default()),
            "ALTER SYSTEM SET shared_preload_libraries = 'dionysus'; then restart PostgreSQL",
        ),
        // dionysus_driver may not read the setting: the workers' own record shows it instead.
        Err(_) => match one(c, "SELECT (last_scheduler_tick IS NOT NULL)::text FROM dionysus.heartbeat_health").await {
            Ok(Some(t)) if t == "true" => Check::ok("preload", "the background workers run in this database"),
            _ => Check::warn(
                "preload",
                "the workers have not run here yet, and this role cannot read shared_preload_libraries",
                "check as a superuser: SHOW shared_preload_libraries (it must list dionysus)",
            ),
        },
    }
}

async fn worker(c: &Client) -> Check {
    let row = c
        .query_one(
            "SELECT extract(epoch FROM now() - last_worker_run)::float8, last_worker_error, stale_neighborhoods \
             FROM dionysus.memory_health",
            &[],
        )
        .await;
    match row {
        Ok(r) => {
            let age: Option<f64> = r.get(0);
            let error: Option<String> = r.get(1);
            let stale: i64 = r.get(2);
            match (age, error) {
                (None, _) => Check::warn(
                    "worker",
                    format!("no maintenance pass has run in this database yet ({stale} stale neighborhoods)"),
                    "preload dionysus and wait dionysus.worker_interval seconds; SELECT dionysus.run_maintenance() works meanwhile",
                ),
                (Some(a), Some(e)) => Check::warn("worker", format!("last pass {a:.0} s ago reported: {e}"), "see the server log and SELECT * FROM dionysus.memory_health"),
                (Some(a), None) => Check::ok("worker", format!("last pass {a:.0} s ago, {stale} stale neighborhoods")),
            }
        }
        Err(e) => Check::fail("worker", e.to_string(), "ALTER EXTENSION dionysus UPDATE"),
    }
}

/// The Discord user a bot token belongs to (`GET /users/@me`).
#[derive(serde::Deserialize)]
struct DiscordUser {
    username: Option<String>,
}

/// `embedding_info()`: the embedding model in use (see its COMMENT).
#[derive(Debug, serde::Deserialize)]
struct EmbeddingInfo {
    provider: Option<String>,
    model_key: Option<String>,
    store_model_key: Option<String>,
    reindex_needed: bool,
    /// The local model's only.
    model_path: Option<String>,
    loadable: Option<bool>,
    error: Option<String>,
    /// The HTTP provider's only.
    url: Option<String>,
}

async fn model(c: &Client) -> Check {
    let info = c
        .query_one("SELECT dionysus.embedding_info()", &[])
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| serde_json::from_value::<EmbeddingInfo>(r.get(0)).map_err(|e| format!("embedding_info's answer does not have its documented shape: {e}")));
    let info = match info {
        Ok(i) => i,
        Err(e) => return Check::fail("model", e, "see the server log"),
    };
    let provider = info.provider.clone().unwrap_or_else(|| "?".into());
    if provider == "local" && info.loadable != Some(true) {
        return Check::fail(
            "model",
            format!("{} — {}", info.model_path.as_deref().unwrap_or("?"), info.error.as_deref().unwrap_or("not loadable")),
            format!("scripts/fetch-model.sh {}", info.model_path.as_deref().unwrap_or("")),
        );
    }
    match c.query_one("SELECT vector_dims(dionysus.embed('dionysus doctor'))", &[]).await {
        Ok(r) => {
            let dims: i32 = r.get(0);
            let where_ = info.model_path.as_deref().or(info.url.as_deref()).unwrap_or("").to_string();
            if info.reindex_needed {
                // Vectors of two models side by side compare as noise (named as JSON shows them, quoted).
                return Check::warn(
                    "model",
                    format!("the settings name {} but the stored vectors were made by {}", serde_json::json!(info.model_key), serde_json::json!(info.store_model_key)),
                    "dionysus reindex",
                );
            }
            Check::ok("model", format!("{provider} embedding works ({dims} dimensions) — {where_}"))
        }
        Err(e) => {
            let msg = e.as_db_error().map(|d| format!("{} {}", d.message(), d.hint().unwrap_or(""))).unwrap_or(e.to_string());
            Check::fail("model", msg, "see dionysus.embedding_provider, dionysus.model_path / dionysus.embedding_url")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(parse_version("0.8.0"), (0, 8, 0));
        assert_eq!(parse_version("15.18 (Debian 15.18-0+deb12u1)"), (15, 18, 0));
        assert!(parse_version("0.10.1") > MIN_PGVECTOR);
        assert!(parse_version("0.7.4") < MIN_PGVECTOR);
    }

    #[test]
    fn failures_carry_their_fix() {
        let c = Check::fail("preload", "missing", "ALTER SYSTEM ...");
        let text = c.render();
        assert!(text.starts_with("FAIL  preload"));
        assert!(text.contains("fix: ALTER SYSTEM ..."));
        assert!(!Check::ok("server", "PostgreSQL 15").render().contains("fix"));
    }
}
