//! Configuration: defaults, then an optional TOML file (`--config FILE` or `DIONYSUS_CONFIG`),
//! then environment variables. Every key, its variable and its default are in the README.
//! Secrets (API keys, the Discord token, a password in the database URL) never reach a log:
//! `Debug` prints them redacted.
use serde::Deserialize;
use std::fmt;
use std::time::Duration;

pub const DEFAULT_DATABASE_URL: &str = "postgresql://postgres@127.0.0.1:5433/dionysus";
/// Ollama's OpenAI-compatible endpoint at its usual address.
pub const DEFAULT_LLM_BASE_URL: &str = "http://127.0.0.1:11434/v1";
pub const DEFAULT_FAST_MODEL: &str = "llama3.2:3b";
pub const DEFAULT_SMART_MODEL: &str = "llama3.1:8b";

/// One model role: fast (classification, extraction) or smart (conversation, decisions).
#[derive(Clone)]
pub struct LlmRole {
    pub name: &'static str,
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// One request's bound (`llm.timeout_seconds`); a task's whole call, retries included, is
    /// bounded by its own [`TaskBounds::timeout`].
    pub timeout: Duration,
    /// How JSON tasks ask for their shape (`llm.structured_output`).
    pub structured_output: StructuredOutput,
    /// Where the instructions go (`llm.system_messages`).
    pub system_messages: SystemMessages,
    /// How many requests the endpoint is given at once (`llm.slots`, default 1: a local model
    /// serves one at a time, and the person's reply goes first).
    pub slots: usize,
    /// Each kind of task's bounds (`[llm.tasks.<kind>]`), one entry per [`TASK_KINDS`] kind.
    pub tasks: Vec<(&'static str, TaskBounds)>,
}

/// The kinds of language work (see `llm::kind_of`) and their default bounds: output tokens, and
/// seconds for the whole call. Sized for a small model on a CPU (a few tokens a second).
pub const TASK_KINDS: [(&str, u32, u64); 6] = [
    ("reply", 400, 120),
    ("extraction", 700, 180),
    ("decision", 600, 180),
    ("narrative", 500, 180),
    ("dream", 900, 300),
    ("other", 600, 180),
];

/// A task's bounds: never an unbounded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskBounds {
    pub max_tokens: u32,
    pub timeout: Duration,
}

impl LlmRole {
    /// The bounds of a kind of task (`other`'s for a kind not listed).
    pub fn bounds(&self, kind: &str) -> TaskBounds {
        let of = |k: &str| self.tasks.iter().find(|(n, _)| *n == k).map(|(_, b)| *b);
        of(kind).or_else(|| of("other")).unwrap_or(TaskBounds { max_tokens: 600, timeout: Duration::from_secs(180) })
    }
}

/// `llm.structured_output`: what a JSON task sends as `response_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StructuredOutput {
    /// The task's JSON Schema where the endpoint takes it, else `json_object` with the schema
    /// (llama-cpp-python's form), else `json_object`, else nothing: learnt from the endpoint's
    /// refusals and remembered.
    Auto,
    JsonSchema,
    JsonObjectSchema,
    JsonObject,
    None,
}

/// `llm.system_messages`: where a task's instructions go. Some chat templates have no system
/// role and drop it without a word (llama-cpp-python's `gemma` format): the model then answers
/// the person's words without ever seeing its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SystemMessages {
    /// A system message, until an answer shows the endpoint dropped it (it counted fewer prompt
    /// tokens than the system message alone has): then in the first user message, remembered.
    Auto,
    System,
    /// Always in the first user message, before the person's words.
    InUser,
}

#[derive(Clone, Default)]
pub struct DiscordConfig {
    pub token: Option<String>,
    pub allowed_user_ids: Vec<u64>,
    pub home_channel_id: Option<u64>,
    /// The dream channel (#12 §5): every autonomous activity mirrored there as a card.
    pub dream_channel_id: Option<u64>,
    /// Whose dream channel it is (an allowed user; default the first): only what they may see
    /// is posted there, and only their presses count.
    pub dream_user_id: Option<u64>,
    /// A Discord-compatible API instead of discord.com (a proxy such as twilight-http-proxy, or
    /// the tests' local server); the gateway is whichever its `/gateway` names.
    pub api_base: Option<String>,
}

/// `dionysus mcp`: whose memory other agents get, and the bearer token of the HTTP transport.
#[derive(Clone, Default)]
pub struct McpConfig {
    /// The person every call acts as (a person key such as `discord:123` or `terminal:ada`).
    pub person: Option<String>,
    /// Required by `--http`; at least 16 characters.
    pub token: Option<String>,
}

#[derive(Clone)]
pub struct Config {
    pub database_url: String,
    pub fast: LlmRole,
    pub smart: LlmRole,
    pub discord: DiscordConfig,
    pub mcp: McpConfig,
    /// A SearXNG-style JSON search endpoint; without it the inquire actions are not offered.
    pub search_url: Option<String>,
    /// Private `host:port` destinations that pages found on the web may still be fetched from
    /// (exact match; every other loopback, private or link-local destination is refused).
    pub fetch_allow_private: Vec<String>,
    /// Recalled memories and recent turns in a reply's context.
    pub max_memories: i32,
    pub max_turns: i32,
    /// The terminal's person (the terminal channel allows only them).
    pub terminal_user: String,
    /// Name this driver claims work under.
    pub worker_name: String,
    /// How long shutdown waits for in-flight work before handing it back.
    pub shutdown_grace: Duration,
    /// At least this long between two dream-channel posts (the mirror is rate-limited).
    pub mirror_gap: Duration,
    pub log_format: LogFormat,
    /// Where the logs go while the conversation is on this terminal (see [`Config::log_path`]).
    pub log_file: Option<String>,
    /// Each person's time zone, as the owner knows it (person key, IANA name): it outranks
    /// what they say and what is guessed (`set_person_time_zone(..., 'config')`).
    pub time_zones: Vec<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    database_url: Option<String>,
    database_ca_file: Option<String>,
    search_url: Option<String>,
    fetch_allow_private: Option<Vec<String>>,
    log_format: Option<String>,
    log_file: Option<String>,
    llm: Option<LlmFile>,
    discord: Option<DiscordFile>,
    chat: Option<ChatFile>,
    mcp: Option<McpFile>,
    /// `[time_zones]` "discord:1234" = "Europe/Berlin"
    time_zones: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct McpFile {
    person: Option<String>,
    token: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LlmFile {
    base_url: Option<String>,
    api_key: Option<String>,
    timeout_seconds: Option<u64>,
    json_mode: Option<bool>,
    structured_output: Option<String>,
    system_messages: Option<String>,
    slots: Option<usize>,
    tasks: Option<std::collections::BTreeMap<String, TaskFile>>,
    fast: Option<RoleFile>,
    smart: Option<RoleFile>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    max_tokens: Option<u32>,
    timeout_seconds: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DiscordFile {
    token: Option<String>,
    allowed_user_ids: Option<Vec<u64>>,
    home_channel_id: Option<u64>,
    dream_channel_id: Option<u64>,
    dream_user_id: Option<u64>,
    api_base: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ChatFile {
    max_memories: Option<i32>,
    max_turns: Option<i32>,
    terminal_user: Option<String>,
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// `host:port` entries of fetch_allow_private, lower-case (a v6 host in brackets: `[::1]:8080`).
fn parse_destinations(key: &str, entries: Vec<String>) -> Result<Vec<String>, String> {
    entries
        .into_iter()
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .map(|e| match e.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(e),
            _ => Err(format!("{key}: \"{e}\" is not host:port")),
        })
        .collect()
}

/// The database URL carrying the CA file as `sslrootcert`, so every connection (see
/// `db::connect`) finds it, unless the URL names one already.
fn with_ca_file(url: String, ca_file: Option<String>) -> String {
    let Some(ca) = ca_file else { return url };
    if url.to_ascii_lowercase().contains("sslrootcert=") {
        return url;
    }
    if url.contains("://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        let encoded: String = ca.bytes().map(|b| if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
        format!("{url}{sep}sslrootcert={encoded}")
    } else {
        format!("{url} sslrootcert={ca}")
    }
}

/// DIONYSUS_TIME_ZONES: `person=Zone` pairs, comma-separated (`discord:1234=Europe/Berlin`).
/// The extension checks each zone's name.
fn parse_time_zones(v: &str) -> Result<Vec<(String, String)>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once('=') {
            Some((p, z)) if !p.trim().is_empty() && !z.trim().is_empty() => Ok((p.trim().to_string(), z.trim().to_string())),
            _ => Err(format!("DIONYSUS_TIME_ZONES: \"{e}\" is not person=Zone (e.g. discord:1234=Europe/Berlin)")),
        })
        .collect()
}

fn parse_ids(key: &str, v: &str) -> Result<Vec<u64>, String> {
    v.split([',', ' ']).filter(|s| !s.is_empty()).map(|s| s.parse::<u64>().map_err(|_| format!("{key}: \"{s}\" is not a Discord id"))).collect()
}

impl Config {
    /// Defaults ← TOML file ← environment. An unreadable file or a bad value is an error naming the key.
    pub fn load(path: Option<&str>) -> Result<Config, String> {
        let path = path.map(str::to_string).or_else(|| env("DIONYSUS_CONFIG"));
        let file: File = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| format!("config file {p}: {e}"))?;
                toml::from_str(&text).map_err(|e| format!("config file {p}: {e}"))?
            }
            None => File::default(),
        };
        let llm = file.llm.unwrap_or_default();
        let timeout_s = match env("DIONYSUS_LLM_TIMEOUT_SECONDS") {
            Some(v) => v.parse::<u64>().map_err(|_| format!("DIONYSUS_LLM_TIMEOUT_SECONDS: \"{v}\" is not a number of seconds"))?,
            None => llm.timeout_seconds.unwrap_or(120),
        };
        if timeout_s == 0 {
            return Err("llm.timeout_seconds must be at least 1".into());
        }
        let base = env("DIONYSUS_LLM_BASE_URL").or(llm.base_url).unwrap_or_else(|| DEFAULT_LLM_BASE_URL.into());
        let key = env("DIONYSUS_LLM_API_KEY").or(llm.api_key).filter(|k| !k.is_empty());
        let json_mode = match env("DIONYSUS_LLM_JSON_MODE") {
            Some(v) => matches!(v.as_str(), "1" | "true" | "yes" | "on"),
            None => llm.json_mode.unwrap_or(true),
        };
        let structured_output = match env("DIONYSUS_LLM_STRUCTURED_OUTPUT").or(llm.structured_output).as_deref() {
            None if !json_mode => StructuredOutput::None,
            None | Some("auto") => StructuredOutput::Auto,
            Some("json_schema") => StructuredOutput::JsonSchema,
            Some("json_object_schema") => StructuredOutput::JsonObjectSchema,
            Some("json_object") => StructuredOutput::JsonObject,
            Some("none") => StructuredOutput::None,
            Some(other) => {
                return Err(format!("llm.structured_output: \"{other}\" is not auto, json_schema, json_object_schema, json_object or none"))
            }
        };
        let system_messages = match env("DIONYSUS_LLM_SYSTEM_MESSAGES").or(llm.system_messages).as_deref() {
            None | Some("auto") => SystemMessages::Auto,
            Some("system") => SystemMessages::System,
            Some("in_user") => SystemMessages::InUser,
            Some(other) => return Err(format!("llm.system_messages: \"{other}\" is not auto, system or in_user")),
        };
        let slots = match env("DIONYSUS_LLM_SLOTS") {
            Some(v) => v.parse::<usize>().map_err(|_| format!("DIONYSUS_LLM_SLOTS: \"{v}\" is not a number"))?,
            None => llm.slots.unwrap_or(1),
        };
        if !(1..=64).contains(&slots) {
            return Err(format!("llm.slots: {slots} is outside [1, 64]"));
        }
        let mut task_files = llm.tasks.unwrap_or_default();
        if let Some(unknown) = task_files.keys().find(|k| !TASK_KINDS.iter().any(|(n, ..)| n == k)) {
            let kinds: Vec<&str> = TASK_KINDS.iter().map(|(n, ..)| *n).collect();
            return Err(format!("llm.tasks.{unknown}: not a kind of task (one of {})", kinds.join(", ")));
        }
        let mut tasks = Vec::new();
        for (kind, max_tokens, seconds) in TASK_KINDS {
            let f = task_files.remove(kind).unwrap_or_default();
            let upper = kind.to_uppercase();
            let number = |key: String, v: Option<u64>, default: u64| -> Result<u64, String> {
                match env(&key) {
                    Some(s) => s.parse::<u64>().map_err(|_| format!("{key}: \"{s}\" is not a number")),
                    None => Ok(v.unwrap_or(default)),
                }
            };
            let max_tokens = number(format!("DIONYSUS_LLM_{upper}_MAX_TOKENS"), f.max_tokens.map(u64::from), u64::from(max_tokens))?;
            let seconds = number(format!("DIONYSUS_LLM_{upper}_TIMEOUT_SECONDS"), f.timeout_seconds, seconds)?;
            if !(16..=32768).contains(&max_tokens) || seconds == 0 {
                return Err(format!("llm.tasks.{kind}: max_tokens must be in [16, 32768] and timeout_seconds at least 1"));
            }
            tasks.push((kind, TaskBounds { max_tokens: max_tokens as u32, timeout: Duration::from_secs(seconds) }));
        }
        let role = |name: &'static str, prefix: &str, file: Option<RoleFile>, default_model: &str| -> LlmRole {
            let f = file.unwrap_or_default();
            LlmRole {
                name,
                base_url: env(&format!("DIONYSUS_{prefix}_BASE_URL")).or(f.base_url).unwrap_or_else(|| base.clone()),
                model: env(&format!("DIONYSUS_{prefix}_MODEL")).or(f.model).unwrap_or_else(|| default_model.into()),
                api_key: env(&format!("DIONYSUS_{prefix}_API_KEY")).or(f.api_key).or_else(|| key.clone()).filter(|k| !k.is_empty()),
                timeout: Duration::from_secs(timeout_s),
                structured_output,
                system_messages,
                slots,
                tasks: tasks.clone(),
            }
        };
        let fast = role("fast", "FAST", llm.fast, DEFAULT_FAST_MODEL);
        let smart = role("smart", "SMART", llm.smart, DEFAULT_SMART_MODEL);
        for r in [&fast, &smart] {
            if !(r.base_url.starts_with("http://") || r.base_url.starts_with("https://")) {
                return Err(format!("llm {} base_url \"{}\" must start with http:// or https://", r.name, r.base_url));
            }
        }
        let d = file.discord.unwrap_or_default();
        let allowed = match env("DIONYSUS_DISCORD_ALLOWED_USERS") {
            Some(v) => parse_ids("DIONYSUS_DISCORD_ALLOWED_USERS", &v)?,
            None => d.allowed_user_ids.unwrap_or_default(),
        };
        let home = match env("DIONYSUS_DISCORD_HOME_CHANNEL") {
            Some(v) => Some(v.parse::<u64>().map_err(|_| format!("DIONYSUS_DISCORD_HOME_CHANNEL: \"{v}\" is not a Discord channel id"))?),
            None => d.home_channel_id,
        };
        let id_env = |key: &str, v: Option<u64>| -> Result<Option<u64>, String> {
            match env(key) {
                Some(s) => s.parse::<u64>().map(Some).map_err(|_| format!("{key}: \"{s}\" is not a Discord id")),
                None => Ok(v),
            }
        };
        let dream_channel = id_env("DIONYSUS_DISCORD_DREAM_CHANNEL", d.dream_channel_id)?;
        let dream_user = id_env("DIONYSUS_DISCORD_DREAM_USER", d.dream_user_id)?.or(allowed.first().copied());
        if let Some(u) = dream_user.filter(|_| dream_channel.is_some()) {
            if !allowed.contains(&u) {
                return Err(format!("discord dream_user_id {u} is not one of the allowed users"));
            }
        }
        let chat = file.chat.unwrap_or_default();
        let num = |key: &str, v: Option<i32>, default: i32, max: i32| -> Result<i32, String> {
            let v = match env(key) {
                Some(s) => s.parse::<i32>().map_err(|_| format!("{key}: \"{s}\" is not a number"))?,
                None => v.unwrap_or(default),
            };
            if !(0..=max).contains(&v) {
                return Err(format!("{key}: {v} is outside [0, {max}]"));
            }
            Ok(v)
        };
        let log_format = match env("DIONYSUS_LOG_FORMAT").or(file.log_format).as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(format!("DIONYSUS_LOG_FORMAT: \"{other}\" is neither text nor json")),
        };
        let fetch_allow_private = match env("DIONYSUS_FETCH_ALLOW_PRIVATE") {
            Some(v) => parse_destinations("DIONYSUS_FETCH_ALLOW_PRIVATE", v.split(',').map(str::to_string).collect())?,
            None => parse_destinations("fetch_allow_private", file.fetch_allow_private.unwrap_or_default())?,
        };
        let mcp = file.mcp.unwrap_or_default();
        let database_url = env("DIONYSUS_DATABASE_URL").or(file.database_url).unwrap_or_else(|| DEFAULT_DATABASE_URL.into());
        Ok(Config {
            database_url: with_ca_file(database_url, env("DIONYSUS_DATABASE_CA_FILE").or(file.database_ca_file)),
            fast,
            smart,
            discord: DiscordConfig {
                token: env("DIONYSUS_DISCORD_TOKEN").or_else(|| env("DISCORD_TOKEN")).or(d.token).filter(|t| !t.is_empty()),
                allowed_user_ids: allowed,
                home_channel_id: home,
                dream_channel_id: dream_channel,
                dream_user_id: dream_user,
                api_base: env("DIONYSUS_DISCORD_API_BASE").or(d.api_base).filter(|b| !b.trim().is_empty()),
            },
            mcp: McpConfig {
                person: env("DIONYSUS_MCP_PERSON").or(mcp.person).filter(|p| !p.trim().is_empty()),
                token: env("DIONYSUS_MCP_TOKEN").or(mcp.token).map(|t| t.trim().to_string()).filter(|t| !t.is_empty()),
            },
            search_url: env("DIONYSUS_SEARCH_URL").or(file.search_url).filter(|s| !s.is_empty()),
            fetch_allow_private,
            max_memories: num("DIONYSUS_CHAT_MAX_MEMORIES", chat.max_memories, 8, 100)?,
            max_turns: num("DIONYSUS_CHAT_MAX_TURNS", chat.max_turns, 12, 200)?,
            terminal_user: env("DIONYSUS_TERMINAL_USER").or(chat.terminal_user).or_else(|| env("USER")).unwrap_or_else(|| "you".into()),
            worker_name: format!("dionysus@{}:{}", hostname(), std::process::id()),
            shutdown_grace: Duration::from_secs(20),
            mirror_gap: Duration::from_millis(1000),
            log_format,
            log_file: env("DIONYSUS_LOG_FILE").or(file.log_file).filter(|f| !f.is_empty()),
            time_zones: match env("DIONYSUS_TIME_ZONES") {
                Some(v) => parse_time_zones(&v)?,
                None => file.time_zones.unwrap_or_default().into_iter().collect(),
            },
        })
    }

    /// The log file used while the conversation is on this terminal, so logs do not interleave
    /// with it: `log_file`, else `$XDG_STATE_HOME/dionysus/dionysus.log`, else
    /// `~/.local/state/dionysus/dionysus.log` (None without a home: logs stay on stderr).
    pub fn log_path(&self) -> Option<std::path::PathBuf> {
        if let Some(f) = &self.log_file {
            return Some(f.into());
        }
        let state = env("XDG_STATE_HOME").map(std::path::PathBuf::from).or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".local/state")))?;
        Some(state.join("dionysus").join("dionysus.log"))
    }

    /// The person `dionysus mcp` acts as: `mcp.person`, else the only allowed Discord user, else
    /// the terminal's person. Lower-case platform, as the extension's `person_key` writes it.
    pub fn mcp_person(&self) -> String {
        if let Some(p) = &self.mcp.person {
            return match p.trim().split_once(':') {
                Some((platform, id)) => format!("{}:{}", platform.trim().to_lowercase(), id.trim()),
                None => p.trim().to_string(),
            };
        }
        match self.discord.allowed_user_ids.as_slice() {
            [only] if self.discord.token.is_some() => format!("discord:{only}"),
            _ => format!("terminal:{}", self.terminal_user.trim()),
        }
    }

    /// The actions this driver can perform (the decision prompt offers only these).
    pub fn available_actions(&self) -> Vec<&'static str> {
        let mut a = vec!["reflect", "maintain", "brainstorm_goals", "synthesize", "reach_out_user"];
        if self.search_url.is_some() {
            a.extend(["inquire_shallow", "inquire_deep"]);
        }
        a
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname").map(|s| s.trim().to_string()).unwrap_or_else(|_| "host".into())
}

fn secret(s: &Option<String>) -> &'static str {
    if s.is_some() {
        "***"
    } else {
        "(none)"
    }
}

impl fmt::Debug for LlmRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} model {} at {} (key {}, timeout {:?}, {:?}, {} slots)", self.name, self.model, self.base_url, secret(&self.api_key), self.timeout, self.structured_output, self.slots)
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact(&self.database_url))
            .field("fast", &self.fast)
            .field("smart", &self.smart)
            .field("discord_token", &secret(&self.discord.token))
            .field("discord_allowed_user_ids", &self.discord.allowed_user_ids)
            .field("discord_home_channel_id", &self.discord.home_channel_id)
            .field("discord_dream_channel_id", &self.discord.dream_channel_id)
            .field("discord_dream_user_id", &self.discord.dream_user_id)
            .field("mcp_person", &self.mcp.person)
            .field("mcp_token", &secret(&self.mcp.token))
            .field("search_url", &self.search_url)
            .field("fetch_allow_private", &self.fetch_allow_private)
            .finish()
    }
}

/// Keys whose values are secrets in a connection string.
fn is_secret_key(key: &str) -> bool {
    matches!(key.to_ascii_lowercase().as_str(), "password" | "sslpassword")
}

/// `key=***` for a secret key, else the pair as it was.
fn mask_pair(pair: &str) -> String {
    match pair.split_once('=') {
        Some((key, _)) if is_secret_key(key.trim()) => format!("{key}=***"),
        _ => pair.to_string(),
    }
}

/// The URL with any password (in the authority, or a `password`/`sslpassword` parameter)
/// replaced, for messages and logs.
pub fn redact(url: &str) -> String {
    // URL form: scheme://user:password@host/db?key=value&…
    if let Some((scheme, rest)) = url.split_once("://") {
        let (auth, after_auth) = match rest.split_once('@') {
            Some((auth, host)) => {
                let user = auth.split(':').next().unwrap_or("");
                (if auth.contains(':') { format!("{user}:***@") } else { format!("{user}@") }, host)
            }
            None => (String::new(), rest),
        };
        let after_auth = match after_auth.split_once('?') {
            Some((path, query)) => format!("{path}?{}", query.split('&').map(mask_pair).collect::<Vec<_>>().join("&")),
            None => after_auth.to_string(),
        };
        return format!("{scheme}://{auth}{after_auth}");
    }
    // key=value form
    url.split_whitespace().map(mask_pair).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("postgresql://bob:s3cret@db:5432/x"), "postgresql://bob:***@db:5432/x");
        assert_eq!(redact("postgresql://bob@db/x"), "postgresql://bob@db/x");
        assert_eq!(redact("host=db user=bob password=s3cret dbname=x"), "host=db user=bob password=*** dbname=x");
        assert!(!redact("host=db PASSWORD=s3cret").contains("s3cret"));
        assert_eq!(redact("host=db sslpassword=s3cret"), "host=db sslpassword=***");
        assert_eq!(
            redact("postgresql://bob@db/x?sslmode=require&password=s3cret"),
            "postgresql://bob@db/x?sslmode=require&password=***"
        );
        assert_eq!(redact("postgres://db/x?PassWord=s3cret&sslmode=verify-full"), "postgres://db/x?PassWord=***&sslmode=verify-full");
        assert_eq!(redact("postgresql://bob:pw@db/x?sslpassword=k3y&passwords=ok"), "postgresql://bob:***@db/x?sslpassword=***&passwords=ok");
        assert_eq!(redact("postgresql://db/x?sslrootcert=/etc/ca.pem"), "postgresql://db/x?sslrootcert=/etc/ca.pem");
    }

    #[test]
    fn private_fetch_destinations_are_exact_host_ports() {
        assert_eq!(parse_destinations("k", vec!["LocalHost:8080 ".into(), "[::1]:9000".into(), "".into()]).unwrap(), ["localhost:8080", "[::1]:9000"]);
        for bad in ["localhost", "localhost:http", ":80", "10.0.0.1:99999"] {
            assert!(parse_destinations("fetch_allow_private", vec![bad.into()]).unwrap_err().contains("fetch_allow_private"), "{bad}");
        }
    }

    #[test]
    fn the_ca_file_travels_in_the_database_url() {
        assert_eq!(with_ca_file("postgresql://db/x".into(), Some("/etc/my ca.pem".into())), "postgresql://db/x?sslrootcert=/etc/my%20ca.pem");
        assert_eq!(with_ca_file("postgresql://db/x?sslmode=require".into(), Some("/ca.pem".into())), "postgresql://db/x?sslmode=require&sslrootcert=/ca.pem");
        assert_eq!(with_ca_file("host=db sslmode=require".into(), Some("/ca.pem".into())), "host=db sslmode=require sslrootcert=/ca.pem");
        assert_eq!(with_ca_file("postgresql://db/x?sslrootcert=/mine.pem".into(), Some("/ca.pem".into())), "postgresql://db/x?sslrootcert=/mine.pem");
        assert_eq!(with_ca_file("postgresql://db/x".into(), None), "postgresql://db/x");
    }

    #[test]
    fn a_file_sets_every_section_and_debug_hides_secrets() {
        let dir = std::env::temp_dir().join(format!("dionysus-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dionysus.toml");
        std::fs::write(
            &path,
            r#"
database_url = "postgresql://me:pw@db/x"
database_ca_file = "/etc/dionysus/ca.pem"
search_url = "http://search/search"
fetch_allow_private = ["Wiki.lan:8080"]
[llm]
base_url = "https://openrouter.ai/api/v1"
api_key = "sk-secret"
timeout_seconds = 30
structured_output = "json_object"
[llm.tasks.reply]
max_tokens = 200
[llm.fast]
model = "small"
[llm.smart]
model = "big"
base_url = "http://gpu:8000/v1"
[discord]
token = "discord-secret"
allowed_user_ids = [1, 2]
home_channel_id = 3
[chat]
max_memories = 5
"#,
        )
        .unwrap();
        let c = Config::load(Some(path.to_str().unwrap())).unwrap();
        assert_eq!(c.fast.model, "small");
        assert_eq!(c.fast.base_url, "https://openrouter.ai/api/v1");
        assert_eq!(c.smart.base_url, "http://gpu:8000/v1");
        assert_eq!(c.smart.api_key.as_deref(), Some("sk-secret"));
        assert_eq!(c.fast.timeout, Duration::from_secs(30));
        assert_eq!(c.fast.structured_output, StructuredOutput::JsonObject);
        assert_eq!(c.smart.bounds("reply"), TaskBounds { max_tokens: 200, timeout: Duration::from_secs(120) });
        assert_eq!(c.smart.bounds("dream").max_tokens, 900);
        assert_eq!(c.smart.slots, 1);
        assert_eq!(c.discord.allowed_user_ids, vec![1, 2]);
        assert_eq!(c.discord.home_channel_id, Some(3));
        assert_eq!(c.max_memories, 5);
        assert_eq!(c.fetch_allow_private, ["wiki.lan:8080"]);
        assert_eq!(c.database_url, "postgresql://me:pw@db/x?sslrootcert=/etc/dionysus/ca.pem");
        assert!(c.available_actions().contains(&"inquire_deep"));
        let shown = format!("{c:?}");
        for s in ["sk-secret", "discord-secret", ":pw@"] {
            assert!(!shown.contains(s), "{s} leaked: {shown}");
        }
        std::fs::write(&path, "[llm.tasks.replies]\nmax_tokens = 10\n").unwrap();
        let err = Config::load(Some(path.to_str().unwrap())).err().unwrap();
        assert!(err.contains("llm.tasks.replies"), "{err}");
        std::fs::write(&path, "[llm]\nmodle = \"typo\"\n").unwrap();
        let err = Config::load(Some(path.to_str().unwrap())).err().unwrap();
        assert!(err.contains("modle"), "{err}");
    }
}
