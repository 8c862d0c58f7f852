//! `dionysus mcp`: the person's memory for other agents, over the Model Context Protocol.
//!
//! Every tool is one transaction of one call into the extension's SQL functions, made as one
//! configured person (`mcp.person`) on the driver's connection (the `dionysus_driver` role):
//! - what it writes is private to that person (`private_to`) and carries `source = mcp:<client>`;
//! - what it reads is what that person may see (`recall(…, person)`, `triples_about(…, person)`,
//!   goals through `visible_to`), never someone else's private words;
//! - it may forget or supersede only that person's own memories, never shared ones.
//!
//! Transports: stdio (what desktop clients launch) and streamable HTTP (`--http ADDR`), which
//! always requires the bearer token `mcp.token` and binds to loopback unless told otherwise.
use crate::config::Config;
use crate::db::{Db, DbError};
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{
    CallToolResult, Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::types::ToSql;

/// Where `--http` alone listens: loopback only.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8808";
/// Shortest bearer token the HTTP transport accepts.
pub const MIN_TOKEN_LEN: usize = 16;
/// Most results one `recall` returns.
const MAX_K: i32 = 50;
/// Longest texts an agent may send, in characters, refused before any SQL: a memory or a fact
/// (dionysus.max_content_length's default), a query, a name (the extension's entities and
/// people), a goal's title and description (create_goal's), and the short words (a type, a
/// category, a kind, a priority, an action, a time). The extension bounds them again.
const MAX_CONTENT: usize = 100_000;
const MAX_QUERY: usize = 10_000;
const MAX_ENTITY: usize = 1000;
const MAX_PERSON_NAME: usize = 200;
const MAX_TITLE: usize = 200;
const MAX_DESCRIPTION: usize = 4000;
const MAX_WORD: usize = 64;
/// Largest `metadata`, in bytes of JSON.
const MAX_METADATA_BYTES: usize = 16_384;

#[derive(Clone)]
pub struct MemoryServer {
    db: Arc<Db>,
    person: Arc<str>,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// What to remember, in plain words ("The user's son starts violin lessons in March").
    pub content: String,
    /// episodic (an event, the default), semantic (knowledge), procedural (how to) or strategic (a plan or lesson).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// How much it matters, 0–1 (default 0.5).
    pub importance: Option<f64>,
    /// Its emotional tone, -1 (painful) to 1 (joyful); default 0.
    pub valence: Option<f64>,
    /// Any JSON object to keep beside it.
    pub metadata: Option<Value>,
}

#[derive(Deserialize, JsonSchema)]
pub struct RecallArgs {
    /// What to look for, as a question or a few words.
    pub query: String,
    /// How many results (1–50, default 10).
    pub k: Option<i32>,
    /// Only these memory types (episodic, semantic, procedural, strategic).
    pub types: Option<Vec<String>>,
    /// Only memories from this time on (RFC 3339, e.g. 2026-05-01T00:00:00Z).
    pub since: Option<String>,
    /// Only memories up to this time (RFC 3339).
    pub until: Option<String>,
    /// Only memories at least this important (0–1).
    pub min_importance: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct LearnArgs {
    /// The fact, as a sentence ("Ada is allergic to peanuts").
    pub content: String,
    /// Who or what it is about ("Ada").
    pub subject: Option<String>,
    /// A category such as preference, health, work.
    pub category: Option<String>,
    /// How sure it is, 0–1 (default 0.8).
    pub confidence: Option<f64>,
    /// How much it matters, 0–1 (default 0.5).
    pub importance: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// The id of one of this person's memories (from recall or remember).
    pub memory_id: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct SupersedeArgs {
    /// The id of one of this person's memories that is no longer true.
    pub memory_id: String,
    /// What is true now; it replaces the old memory, which stays as its history.
    pub new_content: String,
    /// Importance of the new memory, 0–1 (default: the old one's).
    pub importance: Option<f64>,
    /// Confidence of the new memory, 0–1 (default: the old one's).
    pub confidence: Option<f64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct TripleArgs {
    /// The subject entity ("Ada").
    pub subject: String,
    /// The relation, as a short verb phrase ("works_at", "sister_of").
    pub predicate: String,
    /// The object entity ("Lovelace Labs").
    pub object: String,
    /// How sure it is, 0–1 (default 1).
    pub confidence: Option<f64>,
    /// The subject's kind (person, place, organisation, thing…).
    pub subject_kind: Option<String>,
    /// The object's kind.
    pub object_kind: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct AboutArgs {
    /// The entity whose relations to list ("Ada").
    pub entity: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct PersonArgs {
    /// A name, an alias or a relation word of someone in this person's life ("Lea", "my sister").
    pub name: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct GoalsArgs {
    /// "list" (the default) or "create".
    pub action: Option<String>,
    /// The new goal's title (create).
    pub title: Option<String>,
    /// What it means and why (create).
    pub description: Option<String>,
    /// active, queued (the default) or backburner (create).
    pub priority: Option<String>,
}

/// An MCP error from a database error: the extension's message for bad arguments (with its
/// SQLSTATE), a plain "unreachable" naming the database when it is down.
fn mcp_error(e: DbError) -> ErrorData {
    match e {
        DbError::Down(why) => ErrorData::internal_error(format!("the Dionysus database is unreachable: {why}"), None),
        DbError::Sql { code, message } => {
            let data = Some(json!({ "sqlstate": code }));
            // 22: bad data, 23: constraint, 42: bad reference or privilege, P0: raised by the extension.
            if ["22", "23", "42", "P0"].iter().any(|c| code.starts_with(c)) {
                ErrorData::invalid_params(message, data)
            } else {
                ErrorData::internal_error(message, data)
            }
        }
    }
}

fn bad_arg(arg: &str, why: &str) -> ErrorData {
    ErrorData::invalid_params(format!("invalid argument \"{arg}\": {why}"), None)
}

/// An over-long text argument: refused with its name, length and limit (never its text).
fn bounded(arg: &str, v: Option<&str>, max: usize) -> Result<(), ErrorData> {
    let n = v.map_or(0, |v| v.chars().count());
    if n > max {
        return Err(ErrorData::invalid_params(
            format!("invalid argument \"{arg}\": {n} characters, over the limit of {max}"),
            Some(json!({ "limit": max })),
        ));
    }
    Ok(())
}

fn parse_uuid(arg: &str, v: &str) -> Result<uuid::Uuid, ErrorData> {
    uuid::Uuid::parse_str(v.trim()).map_err(|_| bad_arg(arg, "is not a memory id (a UUID)"))
}

fn parse_time(arg: &str, v: Option<&str>) -> Result<Option<chrono::DateTime<chrono::Utc>>, ErrorData> {
    v.map(|s| {
        chrono::DateTime::parse_from_rfc3339(s.trim())
            .map(|t| t.with_timezone(&chrono::Utc))
            .map_err(|_| bad_arg(arg, "is not an RFC 3339 time such as 2026-05-01T00:00:00Z"))
    })
    .transpose()
}

/// `mcp:<client>`: the client's own name, kept to letters, digits and `._- ` (64 at most).
pub fn provenance(client: Option<&str>) -> String {
    let name: String = client
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._- ".contains(*c))
        .take(64)
        .collect();
    let name = name.trim();
    format!("mcp:{}", if name.is_empty() { "unknown" } else { name })
}

fn structured(v: Value) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::structured(v))
}

/// The goals this person may see, shared by the `goals` tool and the resource.
const GOALS_SQL: &str = "SELECT coalesce(jsonb_agg(to_jsonb(g)), '[]') FROM dionysus.person_goals($1) g";

#[tool_router]
impl MemoryServer {
    pub fn new(db: Db, person: String) -> MemoryServer {
        MemoryServer {
            db: Arc::new(db),
            person: person.into(),
            tool_router: Self::tool_router(),
        }
    }

    /// One statement, so one transaction; retried (within the database's patience) only when the
    /// connection was lost before it ran. The first column of its row, None without a row.
    async fn call(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Value>, ErrorData> {
        let rows = self.db.query(sql, params).await.map_err(mcp_error)?;
        Ok(rows.first().map(|r| r.get::<_, Option<Value>>(0).unwrap_or(Value::Null)))
    }

    /// As `call`, for a statement that always returns a row.
    async fn value(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Value, ErrorData> {
        Ok(self.call(sql, params).await?.unwrap_or(Value::Null))
    }

    /// A write: sent at most once (a broken connection is reported, never replayed).
    async fn write(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Value, ErrorData> {
        let rows = self.db.query_at_most_once(sql, params).await.map_err(mcp_error)?;
        Ok(rows.first().and_then(|r| r.get::<_, Option<Value>>(0)).unwrap_or(Value::Null))
    }

    fn source(ctx: &RequestContext<RoleServer>) -> String {
        provenance(ctx.client_info().as_ref().map(|i| i.name.as_str()))
    }

    #[tool(description = "Store a memory for this person: something that happened, something known, a way of doing, or a plan. \
        It becomes part of the companion's long-term memory, private to this person. Returns its memory_id.")]
    async fn remember(&self, Parameters(a): Parameters<RememberArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        bounded("content", Some(&a.content), MAX_CONTENT)?;
        bounded("type", a.kind.as_deref(), MAX_WORD)?;
        if a.metadata.as_ref().is_some_and(|m| m.to_string().len() > MAX_METADATA_BYTES) {
            return Err(bad_arg("metadata", &format!("is over {MAX_METADATA_BYTES} bytes of JSON")));
        }
        let source = Self::source(&ctx);
        let person = self.person.to_string();
        let kind = a.kind.unwrap_or_else(|| "episodic".into());
        let metadata = a.metadata.unwrap_or_else(|| json!({}));
        let v = self
            .write("SELECT jsonb_build_object('memory_id', dionysus.remember($1, $2, importance => coalesce($3::float8, 0.5), \
                     valence => coalesce($4::float8, 0.0), metadata => $5::jsonb, source => $6, private_to => ARRAY[$7::text]), 'source', $6::text)", &[&a.content, &kind, &a.importance, &a.valence, &metadata, &source, &person]).await?;
        structured(v)
    }

    #[tool(description = "Search this person's long-term memory (hybrid: meaning, words, associations, time, importance, recency). \
        Returns the best memories first, each with its score and the score's components.")]
    async fn recall(&self, Parameters(a): Parameters<RecallArgs>) -> Result<CallToolResult, ErrorData> {
        let k = a.k.unwrap_or(10);
        if !(1..=MAX_K).contains(&k) {
            return Err(bad_arg("k", &format!("must be between 1 and {MAX_K}")));
        }
        bounded("query", Some(&a.query), MAX_QUERY)?;
        if a.types.as_ref().is_some_and(|t| t.len() > 8 || t.iter().any(|t| t.chars().count() > MAX_WORD)) {
            return Err(bad_arg("types", &format!("at most 8 types of at most {MAX_WORD} characters")));
        }
        bounded("since", a.since.as_deref(), MAX_WORD)?;
        bounded("until", a.until.as_deref(), MAX_WORD)?;
        let since = parse_time("since", a.since.as_deref())?;
        let until = parse_time("until", a.until.as_deref())?;
        let person = self.person.to_string();
        let v = self
            .value("SELECT jsonb_build_object('results', coalesce(jsonb_agg(jsonb_build_object(
                        'memory_id', r.memory_id, 'content', r.content, 'type', r.type, 'created_at', r.created_at,
                        'score', r.score, 'found_by', r.found_by, 'stage', r.stage,
                        'components', jsonb_build_object('vector', r.vector_score, 'lexical', r.lexical_score,
                            'association', r.association_score, 'temporal', r.temporal_score,
                            'importance', r.importance_score, 'recency', r.recency_score)) ORDER BY r.score DESC), '[]'))
                       FROM dionysus.recall($1, $2, types => $3::text[], since => $4::timestamptz, until => $5::timestamptz, min_importance => $6::float8, person => $7::text) r", &[&a.query, &k, &a.types, &since, &until, &a.min_importance, &person]).await?;
        structured(v)
    }

    #[tool(description = "Store a fact about this person or their world (a semantic memory with a subject and category). \
        Returns its memory_id.")]
    async fn learn(&self, Parameters(a): Parameters<LearnArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        bounded("content", Some(&a.content), MAX_CONTENT)?;
        bounded("subject", a.subject.as_deref(), MAX_ENTITY)?;
        bounded("category", a.category.as_deref(), MAX_WORD)?;
        let source = Self::source(&ctx);
        let person = self.person.to_string();
        let v = self
            .write("SELECT jsonb_build_object('memory_id', dionysus.learn($1, subject => $2, category => $3, \
                     confidence => coalesce($4::float8, 0.8), source => $5, importance => coalesce($6::float8, 0.5), private_to => ARRAY[$7::text]), 'source', $5::text)", &[&a.content, &a.subject, &a.category, &a.confidence, &source, &a.importance, &person]).await?;
        structured(v)
    }

    #[tool(description = "Delete one of this person's memories for good. Shared memories and other people's are refused.")]
    async fn forget(&self, Parameters(a): Parameters<ForgetArgs>) -> Result<CallToolResult, ErrorData> {
        let id = parse_uuid("memory_id", &a.memory_id)?;
        let person = self.person.to_string();
        let v = self
            .write("SELECT jsonb_build_object('forgotten', dionysus.forget_own($1, $2), 'memory_id', $2)", &[&person, &id])
            .await?;
        structured(v)
    }

    #[tool(description = "Replace one of this person's memories that is no longer true with what is true now. \
        The old one is kept as superseded history and points at the new one. Returns the new memory_id.")]
    async fn supersede(&self, Parameters(a): Parameters<SupersedeArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let id = parse_uuid("memory_id", &a.memory_id)?;
        bounded("new_content", Some(&a.new_content), MAX_CONTENT)?;
        let source = Self::source(&ctx);
        let person = self.person.to_string();
        let v = self
            .write(
                "SELECT jsonb_build_object('memory_id', dionysus.supersede_own($1, $2, $3, importance => $4::float8, \
                 confidence => $5::float8, source => $6), 'superseded', $2)",
                &[&person, &id, &a.new_content, &a.importance, &a.confidence, &source],
            )
            .await?;
        structured(v)
    }

    #[tool(description = "Record a relation between two entities (subject, predicate, object), private to this person. \
        Returns its triple_id.")]
    async fn add_triple(&self, Parameters(a): Parameters<TripleArgs>, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        bounded("subject", Some(&a.subject), MAX_ENTITY)?;
        bounded("predicate", Some(&a.predicate), MAX_ENTITY)?;
        bounded("object", Some(&a.object), MAX_ENTITY)?;
        bounded("subject_kind", a.subject_kind.as_deref(), MAX_WORD)?;
        bounded("object_kind", a.object_kind.as_deref(), MAX_WORD)?;
        let source = Self::source(&ctx);
        let person = self.person.to_string();
        let v = self
            .write("SELECT jsonb_build_object('triple_id', dionysus.add_triple($1, $2, $3, confidence => coalesce($4::float8, 1.0), source => $5, \
                     subject_kind => $6, object_kind => $7, private_to => ARRAY[$8::text]))", &[&a.subject, &a.predicate, &a.object, &a.confidence, &source, &a.subject_kind, &a.object_kind, &person]).await?;
        structured(v)
    }

    #[tool(description = "List what is known about an entity: its relations (subject, predicate, object, confidence, source) \
        that this person may see.")]
    async fn triples_about(&self, Parameters(a): Parameters<AboutArgs>) -> Result<CallToolResult, ErrorData> {
        bounded("entity", Some(&a.entity), MAX_ENTITY)?;
        let person = self.person.to_string();
        let v = self
            .value("SELECT jsonb_build_object('triples', coalesce(jsonb_agg(jsonb_build_object('triple_id', t.triple_id, \
                     'subject', t.subject, 'predicate', t.predicate, 'object', t.object, 'confidence', t.confidence, \
                     'source', t.source)), '[]')) FROM dionysus.triples_about($1, $2) t", &[&a.entity, &person]).await?;
        structured(v)
    }

    #[tool(description = "What is known about someone in this person's life, by name, alias or relation word (\"my sister\"): \
        who they are to the person, how the person feels about them, traits, topics, how they relate to the others, and the turns \
        each thing came from. Only this person's people; an error when nobody by that name is known.")]
    async fn person(&self, Parameters(a): Parameters<PersonArgs>) -> Result<CallToolResult, ErrorData> {
        bounded("name", Some(&a.name), MAX_PERSON_NAME)?;
        let person = self.person.to_string();
        structured(json!({ "people": self.value("SELECT dionysus.person($1, of_person => $2)", &[&a.name, &person]).await? }))
    }

    #[tool(description = "The companion's open goals this person may see (action \"list\", the default), or a new goal for it \
        (action \"create\" with a title, source external, private to this person).")]
    async fn goals(&self, Parameters(a): Parameters<GoalsArgs>) -> Result<CallToolResult, ErrorData> {
        bounded("action", a.action.as_deref(), MAX_WORD)?;
        bounded("title", a.title.as_deref(), MAX_TITLE)?;
        bounded("description", a.description.as_deref(), MAX_DESCRIPTION)?;
        bounded("priority", a.priority.as_deref(), MAX_WORD)?;
        let person = self.person.to_string();
        let action = a.action.as_deref().unwrap_or("list").trim().to_ascii_lowercase();
        let v = match action.as_str() {
            "list" => json!({ "goals": self.value(GOALS_SQL, &[&person]).await? }),
            "create" => {
                let title = a.title.clone().unwrap_or_default();
                self.write("SELECT jsonb_build_object('goal_id', dionysus.create_goal($1, $2, 'external', priority => $3, private_to => ARRAY[$4::text]))", &[&title, &a.description, &a.priority, &person]).await?
            }
            _ => return Err(bad_arg("action", "must be \"list\" or \"create\"")),
        };
        structured(v)
    }

    #[tool(description = "How the companion is doing: energy and heartbeats, how many goals are open, and how many memories \
        and facts this person has, with the newest.")]
    async fn status(&self) -> Result<CallToolResult, ErrorData> {
        let person = self.person.to_string();
        let v = self
            .value("SELECT dionysus.person_status($1)", &[&person]).await?;
        structured(v)
    }
}

const GOALS_URI: &str = "dionysus://goals";
const NORTH_STARS_URI: &str = "dionysus://north-stars";
const NORTH_STARS_SQL: &str = "SELECT coalesce(jsonb_agg(to_jsonb(n)), '[]') FROM dionysus.person_north_stars($1) n";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("dionysus", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The long-term memory of a companion, for the person {}. recall before answering about their life; \
                 remember and learn what they tell you that will matter later; supersede what changed.",
                self.person
            ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(NORTH_STARS_URI, "north-stars")
                .with_title("North stars")
                .with_description("What matters most to this person, in their words: keep every answer in service of these (JSON).")
                .with_mime_type("application/json"),
            Resource::new(GOALS_URI, "goals")
                .with_title("Open goals")
                .with_description("The companion's active, queued and back-burner goals this person may see (JSON).")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let sql = match request.uri.as_str() {
            GOALS_URI => GOALS_SQL,
            NORTH_STARS_URI => NORTH_STARS_SQL,
            other => return Err(ErrorData::resource_not_found(format!("no resource {other}"), None)),
        };
        let person = self.person.to_string();
        let listed = self.value(sql, &[&person]).await?;
        let mut contents = ResourceContents::text(listed.to_string(), request.uri.clone());
        if let ResourceContents::TextResourceContents { mime_type, .. } = &mut contents {
            *mime_type = Some("application/json".into());
        }
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// The MCP server's database: a dead one answers within seconds (an agent is waiting). It warns,
/// in the background, when the role is a superuser.
fn open(config: &Config, person: String) -> MemoryServer {
    let server = MemoryServer::new(Db::new(&config.database_url, "mcp").with_patience(Duration::from_secs(8)), person);
    let db = server.db.clone();
    tokio::spawn(async move {
        match db.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user", &[]).await {
            Ok(rows) if rows.first().is_some_and(|r| r.get::<_, bool>(0)) => tracing::warn!(
                "the MCP server connects as a superuser; connect as dionysus_driver (see the README) so an agent holds no more than it needs"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the database is not reachable yet; calls will say so until it is"),
        }
    });
    server
}

/// `dionysus mcp [--http ADDR]`.
pub async fn run(config: &Config, http: Option<&str>) -> ExitCode {
    let person = config.mcp_person();
    if person.is_empty() || !person.contains(':') {
        eprintln!("dionysus mcp: mcp.person (DIONYSUS_MCP_PERSON) must be a person key such as discord:123 or terminal:ada");
        return ExitCode::from(2);
    }
    match http {
        None => {
            tracing::info!(person = %person, "MCP server on stdio");
            let server = open(config, person);
            match server.serve(rmcp::transport::stdio()).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("dionysus mcp: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(addr) => {
            let Some(token) = config.mcp.token.clone().filter(|t| t.len() >= MIN_TOKEN_LEN) else {
                eprintln!("dionysus mcp --http: set mcp.token (DIONYSUS_MCP_TOKEN), at least {MIN_TOKEN_LEN} characters: every request must carry it");
                return ExitCode::from(2);
            };
            let addr: std::net::SocketAddr = match addr.parse() {
                Ok(a) => a,
                Err(_) => {
                    eprintln!("dionysus mcp --http: \"{addr}\" is not an address such as 127.0.0.1:8808");
                    return ExitCode::from(2);
                }
            };
            let listener = match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("dionysus mcp --http: cannot listen on {addr}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let server = open(config, person.clone());
            tracing::info!(person = %person, address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "MCP server on HTTP");
            http::serve(listener, server, token).await;
            ExitCode::SUCCESS
        }
    }
}

/// The streamable HTTP transport behind a bearer-token check.
pub mod http {
    use super::MemoryServer;
    use http_body_util::{combinators::BoxBody, BodyExt, Full};
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response, StatusCode};
    use rmcp::transport::streamable_http_server::{session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService};
    use std::collections::{BTreeMap, HashMap};
    use std::convert::Infallible;
    use std::net::IpAddr;
    use std::sync::{Arc, Mutex};
    use tokio::sync::oneshot;

    /// Compares in time that depends only on the expected token's length: neither where the
    /// first difference is nor the given token's length shows.
    fn same_secret(given: &[u8], expected: &[u8]) -> bool {
        let mut diff = u8::from(given.len() != expected.len());
        for (i, e) in expected.iter().enumerate() {
            diff |= e ^ given.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }

    /// Whether the request carries `Authorization: Bearer <token>` (the scheme in any case).
    pub fn authorized<B>(req: &Request<B>, token: &str) -> bool {
        req.headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .is_some_and(|(_, given)| same_secret(given.trim().as_bytes(), token.trim().as_bytes()))
    }

    /// Requests with the token served at once (each holds its slot until its answer is sent);
    /// more wait for a slot. Only a request that carries the token takes one.
    const MAX_REQUESTS: usize = 64;
    /// Connections that have not yet shown the token, from one remote address and in all: a
    /// newcomer past either bound pushes out the oldest such connection (of its address, or of
    /// all) rather than being refused, so idle or slow sockets never lock the token holder out,
    /// whose connection shows the token in its first request and is then never pushed out.
    const MAX_UNPROVEN_PER_ADDR: usize = 32;
    const MAX_UNPROVEN: usize = 512;
    /// A client that has not sent its request head by then is dropped (slow-header attacks).
    const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

    fn refusal() -> Response<BoxBody<Bytes, Infallible>> {
        let body = r#"{"error":"a bearer token is required (Authorization: Bearer <mcp.token>)"}"#;
        Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header(hyper::header::WWW_AUTHENTICATE, "Bearer")
            .header(hyper::header::CONTENT_TYPE, "application/json")
            // A connection without the token is not kept alive for another try.
            .header(hyper::header::CONNECTION, "close")
            .body(Full::new(Bytes::from_static(body.as_bytes())).boxed())
            .expect("a static response")
    }

    /// The connections that have not yet shown the token, oldest first, each with its address
    /// and the sender that pushes it out.
    #[derive(Default)]
    struct Unproven {
        next: u64,
        conns: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
        per_addr: HashMap<IpAddr, usize>,
    }

    impl Unproven {
        /// A new connection from `addr`: its id, and what fires when it is pushed out.
        fn admit(&mut self, addr: IpAddr) -> (u64, oneshot::Receiver<()>) {
            if self.per_addr.get(&addr).copied().unwrap_or(0) >= MAX_UNPROVEN_PER_ADDR {
                let oldest = self.conns.iter().find(|(_, (a, _))| *a == addr).map(|(id, _)| *id);
                self.push_out(oldest);
            }
            if self.conns.len() >= MAX_UNPROVEN {
                let oldest = self.conns.keys().next().copied();
                self.push_out(oldest);
            }
            let (tx, rx) = oneshot::channel();
            self.next += 1;
            self.conns.insert(self.next, (addr, tx));
            *self.per_addr.entry(addr).or_default() += 1;
            (self.next, rx)
        }

        fn push_out(&mut self, id: Option<u64>) {
            if let Some(tx) = id.and_then(|id| self.forget(id)) {
                let _ = tx.send(());
            }
        }

        /// The connection leaves the set (it showed the token, or it ended); its sender is
        /// dropped without firing.
        fn forget(&mut self, id: u64) -> Option<oneshot::Sender<()>> {
            let (addr, tx) = self.conns.remove(&id)?;
            if let Some(n) = self.per_addr.get_mut(&addr) {
                *n -= 1;
                if *n == 0 {
                    self.per_addr.remove(&addr);
                }
            }
            Some(tx)
        }
    }

    /// Takes a connection out of the unproven set when it ends, however it ends.
    struct Leaves(Arc<Mutex<Unproven>>, u64);

    impl Drop for Leaves {
        fn drop(&mut self) {
            if let Ok(mut u) = self.0.lock() {
                u.forget(self.1);
            }
        }
    }

    /// Serves until the process ends. Loopback binds keep rmcp's Host check (DNS rebinding);
    /// elsewhere the token is the gate, and any Host is accepted.
    pub async fn serve(listener: tokio::net::TcpListener, server: MemoryServer, token: String) {
        let loopback = listener.local_addr().map(|a| a.ip().to_canonical().is_loopback()).unwrap_or(true);
        let mut config = StreamableHttpServerConfig::default().with_sse_keep_alive(None);
        if !loopback {
            tracing::warn!(
                "MCP over plain HTTP on a non-loopback address: the bearer token crosses the network in clear; put TLS (a reverse proxy) in front"
            );
            config = config.disable_allowed_hosts();
        }
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_REQUESTS));
        let unproven = Arc::new(Mutex::new(Unproven::default()));
        let service = StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
        let token: Arc<str> = token.into();
        loop {
            // Accepting never waits for a slot: a connection is only bounded while unproven.
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "MCP HTTP accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok((id, pushed_out)) = unproven.lock().map(|mut u| u.admit(peer.ip().to_canonical())) else { return };
            let leaves = Leaves(unproven.clone(), id);
            let unproven = unproven.clone();
            let slots = slots.clone();
            let service = service.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let _leaves = leaves;
                let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let service = service.clone();
                    let token = token.clone();
                    let slots = slots.clone();
                    let unproven = unproven.clone();
                    async move {
                        if !authorized(&req, &token) {
                            tracing::debug!(%peer, "MCP request without the bearer token refused");
                            return Ok::<_, Infallible>(refusal());
                        }
                        if let Ok(mut u) = unproven.lock() {
                            u.forget(id);
                        }
                        let Ok(slot) = slots.acquire_owned().await else { return Ok(refusal()) };
                        // The slot is held until the answer's body is sent or dropped.
                        Ok(service.handle(req).await.map(|body| body.map_frame(move |f| { let _held = &slot; f }).boxed()))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(io, handler);
                // Pushed out: the receiver fires; dropped unfired (shown the token): never.
                let pushed_out = async move {
                    if pushed_out.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    served = served => if let Err(e) = served {
                        tracing::debug!(error = %e, "MCP HTTP connection ended");
                    },
                    () = pushed_out => tracing::debug!(%peer, "MCP HTTP connection without the token pushed out by a newer one"),
                }
            });
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn req(auth: Option<&str>) -> Request<()> {
            let mut b = Request::builder().uri("/mcp");
            if let Some(a) = auth {
                b = b.header("authorization", a);
            }
            b.body(()).unwrap()
        }

        #[test]
        fn only_the_exact_bearer_token_passes() {
            let t = "0123456789abcdef";
            assert!(authorized(&req(Some("Bearer 0123456789abcdef")), t));
            assert!(!authorized(&req(None), t));
            assert!(!authorized(&req(Some("Bearer 0123456789abcdeX")), t));
            assert!(!authorized(&req(Some("Bearer 0123456789abcde")), t));
            assert!(!authorized(&req(Some("Basic 0123456789abcdef")), t));
            assert!(!authorized(&req(Some("0123456789abcdef")), t));
            assert!(authorized(&req(Some("bearer 0123456789abcdef")), t));
            assert!(authorized(&req(Some("BEARER  0123456789abcdef ")), &format!(" {t} ")));
            assert!(!authorized(&req(Some("Bearer 0123456789abcdef0")), t));
            assert!(!authorized(&req(Some("Bearer ")), t));
        }

        #[test]
        fn a_newcomer_pushes_out_the_oldest_unproven_connection() {
            let mut u = Unproven::default();
            let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
            let mut first: Vec<_> = (0..MAX_UNPROVEN_PER_ADDR).map(|_| u.admit(a)).collect();
            let (_, mut other) = u.admit(b);
            // One more from a: a's oldest goes, b's stays.
            let (_, _newest) = u.admit(a);
            assert_eq!(first[0].1.try_recv(), Ok(()));
            assert!(first[1].1.try_recv().is_err());
            assert!(other.try_recv().is_err());
            assert_eq!(u.per_addr[&a], MAX_UNPROVEN_PER_ADDR);
            // A connection that showed the token leaves the set and is never pushed out.
            let proven = first[1].0;
            u.forget(proven);
            assert_eq!(first[1].1.try_recv(), Err(oneshot::error::TryRecvError::Closed));
            assert_eq!(u.per_addr[&a], MAX_UNPROVEN_PER_ADDR - 1);
            // In all: past MAX_UNPROVEN the oldest of anyone goes (here b's).
            while u.conns.len() < MAX_UNPROVEN {
                u.admit(format!("10.0.{}.{}", u.next / 200, u.next % 200).parse().unwrap());
            }
            u.admit("10.1.0.1".parse().unwrap());
            assert_eq!(first[2].1.try_recv(), Ok(()));
            assert_eq!(u.conns.len(), MAX_UNPROVEN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::provenance;

    #[test]
    fn provenance_names_the_client_plainly() {
        assert_eq!(provenance(Some("Claude Desktop")), "mcp:Claude Desktop");
        assert_eq!(provenance(Some("evil\n'; DROP TABLE x;--")), "mcp:evil DROP TABLE x--");
        assert_eq!(provenance(None), "mcp:unknown");
        assert_eq!(provenance(Some("\u{202e}\u{202e}")), "mcp:unknown");
        assert_eq!(provenance(Some(&"x".repeat(300))).len(), 4 + 64);
    }
}
