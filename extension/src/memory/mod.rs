//! The memory store: remember, archive, forget, supersede, and reading memories back.
//!
//! Every SQL function here is one statement in the caller's transaction: an error anywhere
//! rolls back everything it wrote, so nothing is ever half-written.
pub mod episodes;
pub mod facts;
pub mod graph;
pub mod validate;

use crate::embed::{self, check_text};
use crate::errors;
use crate::json_arg::JsonArg;
use crate::neighborhoods;
use crate::spi_util::{vector_type, write_prepared};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::{JsonB, Uuid};

/// A memory about to be stored, already validated.
pub struct NewMemory {
    pub kind: &'static str,
    pub content: String,
    pub summary: Option<String>,
    pub micro: Option<String>,
    pub importance: f64,
    pub confidence: f64,
    pub valence: f64,
    pub metadata: serde_json::Value,
    pub source: Option<String>,
    pub created_at: Option<TimestampWithTimeZone>,
    /// The people whose private words this memory carries; None: nobody's.
    pub private_to: Option<Vec<String>>,
}

impl NewMemory {
    /// The text that is embedded: the full content.
    pub fn embedding_text(&self) -> &str {
        &self.content
    }
}

/// Inserts a validated memory with its embedding, assigns episodic ones to their episode and
/// queues the neighborhoods it changes. Returns the new id.
pub fn store(m: &NewMemory, embedding: &[f32]) -> Uuid {
    // Its sentences, counted from the text (their vectors come from the maintenance pass).
    let sentences = crate::sentences::count(&m.content);
    let (id, created_at) = write_prepared(
        &format!(
            "INSERT INTO dionysus.memories \
               (type, content, summary, micro, embedding, importance, confidence, valence, metadata, source, created_at, \
                private_to, sentence_count) \
             VALUES ($1::dionysus.memory_type, $2, $3, $4, $5::real[]::{vt}, $6, $7, $8, $9, $10, coalesce($11, now()), $12, $13) \
             RETURNING id, created_at",
            vt = vector_type(),
        ),
        &[
            m.kind.into(),
            m.content.clone().into(),
            m.summary.clone().into(),
            m.micro.clone().into(),
            embedding.to_vec().into(),
            m.importance.into(),
            m.confidence.into(),
            m.valence.into(),
            JsonB(m.metadata.clone()).into(),
            m.source.clone().into(),
            m.created_at.into(),
            m.private_to.clone().into(),
            sentences.into(),
        ],
        |t| Some((t.get::<Uuid>(1).ok()??, t.get::<TimestampWithTimeZone>(2).ok()??)),
    )
    .pop()
    .expect("INSERT ... RETURNING id, created_at");
    if sentences >= 2 {
        crate::sentences::enqueue(id);
    }
    let episode_neighbors = if m.kind == "episodic" {
        episodes::assign(id, m.source.as_deref(), m.private_to.as_deref(), created_at)
    } else {
        Vec::new()
    };
    neighborhoods::on_new_memory(id, embedding, &episode_neighbors);
    id
}

#[allow(clippy::too_many_arguments)]
pub fn new_memory(
    content: Option<&str>,
    kind: Option<&str>,
    importance: Option<f64>,
    valence: Option<f64>,
    metadata: Option<serde_json::Value>,
    source: Option<&str>,
    created_at: Option<TimestampWithTimeZone>,
    summary: Option<&str>,
    micro: Option<&str>,
    confidence: Option<f64>,
    private_to: Option<Vec<Option<String>>>,
) -> NewMemory {
    NewMemory {
        content: check_text("content", content).trim().to_string(),
        kind: validate::memory_type("type", kind),
        importance: validate::unit("importance", importance),
        valence: validate::signed_unit("valence", valence),
        confidence: validate::unit("confidence", confidence),
        metadata: validate::object("metadata", metadata),
        source: validate::optional_text("source", source),
        summary: validate::optional_text("summary", summary),
        micro: validate::optional_text("micro", micro),
        created_at: validate::timestamp("created_at", created_at),
        private_to: validate::private_to("private_to", private_to),
    }
}

/// Stores one memory, embedding its content inside the database. Returns its id.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::too_many_arguments)]
fn remember(
    content: Option<&str>,
    r#type: default!(Option<&str>, "'episodic'"),
    importance: default!(Option<f64>, 0.5),
    valence: default!(Option<f64>, 0.0),
    metadata: default!(Option<JsonArg>, "'{}'"),
    source: default!(Option<&str>, "NULL"),
    created_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    summary: default!(Option<&str>, "NULL"),
    micro: default!(Option<&str>, "NULL"),
    confidence: default!(Option<f64>, 1.0),
    private_to: default!(Option<Vec<Option<String>>>, "NULL"),
) -> Uuid {
    let metadata = metadata.map(|j| j.parse("metadata"));
    let m = new_memory(content, r#type, importance, valence, metadata, source, created_at, summary, micro, confidence, private_to);
    let embedding = embed::embed_one(m.embedding_text());
    store(&m, &embedding)
}

const BATCH_KEYS: [&str; 11] = [
    "content", "type", "importance", "valence", "metadata", "source", "created_at", "summary", "micro", "confidence",
    "private_to",
];

/// Parses one element of a remember_batch document, naming the element in every error.
fn batch_item(i: usize, item: &serde_json::Value) -> NewMemory {
    let at = |key: &str| format!("items[{i}].{key}");
    let Some(obj) = item.as_object() else {
        errors::bad_json("items", format!("element {i} must be an object, not {}", validate::json_kind(item)))
    };
    if let Some(k) = obj.keys().find(|k| !BATCH_KEYS.contains(&k.as_str())) {
        errors::bad_json("items", format!("element {i} has unknown key \"{k}\" (known: {})", BATCH_KEYS.join(", ")));
    }
    let text = |key: &str| -> Option<String> {
        match obj.get(key) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(other) => errors::bad_json(&at(key), format!("must be a string, not {}", validate::json_kind(other))),
        }
    };
    let number = |key: &str, default: f64| -> Option<f64> {
        match obj.get(key) {
            None | Some(serde_json::Value::Null) => Some(default),
            Some(serde_json::Value::Number(n)) => n.as_f64(),
            Some(other) => errors::bad_json(&at(key), format!("must be a number, not {}", validate::json_kind(other))),
        }
    };
    let created_at = text("created_at").map(|s| {
        let text = s.clone();
        crate::spi_util::in_subtransaction(move || {
            Spi::get_one_with_args::<TimestampWithTimeZone>("SELECT $1::timestamptz", &[text.into()])
        })
        .ok()
        .and_then(|r| r.ok().flatten())
        .unwrap_or_else(|| errors::bad_json(&at("created_at"), format!("'{s}' is not a timestamp")))
    });
    let metadata = obj.get("metadata").filter(|v| !v.is_null()).cloned();
    let content = text("content");
    let kind = text("type").unwrap_or_else(|| "episodic".into());
    let source = text("source");
    let summary = text("summary");
    let micro = text("micro");
    let private_to = match obj.get("private_to") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Array(a)) => Some(
            a.iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => Some(s.clone()),
                    other => errors::bad_json(&at("private_to"), format!("must hold strings, not {}", validate::json_kind(other))),
                })
                .collect(),
        ),
        Some(other) => errors::bad_json(&at("private_to"), format!("must be an array, not {}", validate::json_kind(other))),
    };
    NewMemory {
        content: check_text(&at("content"), content.as_deref()).trim().to_string(),
        kind: validate::memory_type(&at("type"), Some(&kind)),
        importance: validate::unit(&at("importance"), number("importance", 0.5)),
        valence: validate::signed_unit(&at("valence"), number("valence", 0.0)),
        confidence: validate::unit(&at("confidence"), number("confidence", 1.0)),
        metadata: validate::object(&at("metadata"), metadata),
        source: validate::optional_text(&at("source"), source.as_deref()),
        summary: validate::optional_text(&at("summary"), summary.as_deref()),
        micro: validate::optional_text(&at("micro"), micro.as_deref()),
        created_at: validate::timestamp(&at("created_at"), created_at),
        private_to: validate::private_to(&at("private_to"), private_to),
    }
}

/// Stores many memories in one statement: all are validated first, embedded in batches,
/// then inserted in order. Returns their ids in input order. Any bad element rejects all.
#[pg_extern(volatile, parallel_unsafe)]
fn remember_batch(items: Option<JsonArg>) -> TableIterator<'static, (name!(ord, i32), name!(memory_id, Uuid))> {
    let Some(doc) = items.map(|j| j.parse("items")) else { errors::null_arg("items") };
    let serde_json::Value::Array(list) = doc else {
        errors::bad_json("items", format!("must be a JSON array of objects, not {}", validate::json_kind(&doc)))
    };
    let parsed: Vec<NewMemory> = list.iter().enumerate().map(|(i, v)| batch_item(i, v)).collect();
    // Every episode lock the batch needs, taken first and in one order: two batches whose items
    // interleave sources would otherwise each hold one and wait for the other's (40P01).
    let mut sources: Vec<&str> = parsed.iter().map(|m| m.source.as_deref().unwrap_or(episodes::DEFAULT_SOURCE)).collect();
    sources.sort_unstable();
    sources.dedup();
    for source in sources {
        episodes::lock_source(source);
    }
    let texts: Vec<&str> = parsed.iter().map(|m| m.embedding_text()).collect();
    let vectors = embed::embed_texts(&texts);
    let ids: Vec<(i32, Uuid)> =
        parsed.iter().zip(vectors.iter()).enumerate().map(|(i, (m, v))| ((i + 1) as i32, store(m, v))).collect();
    TableIterator::new(ids)
}

/// Fails with P0002 unless the memory exists.
pub fn require_memory(arg: &str, id: Option<Uuid>) -> Uuid {
    let Some(id) = id else { errors::null_arg(arg) };
    let exists = crate::spi_util::first_or_none::<bool>(
        "SELECT EXISTS (SELECT 1 FROM dionysus.memories WHERE id = $1)",
        &[id.into()],
    )
    .unwrap_or(false);
    if !exists {
        errors::not_found(arg, "memory", id);
    }
    id
}

/// Archives a memory: it stays, but recall no longer returns it. A fact becomes deactivated.
#[pg_extern(volatile, parallel_unsafe)]
fn archive(memory_id: Option<Uuid>) -> bool {
    let id = require_memory("memory_id", memory_id);
    Spi::run_with_args(
        "UPDATE dionysus.memories SET status = 'archived', updated_at = now() WHERE id = $1",
        &[id.into()],
    )
    .expect("archive memory");
    Spi::run_with_args(
        "UPDATE dionysus.facts SET state = 'deactivated' WHERE memory_id = $1",
        &[id.into()],
    )
    .expect("deactivate fact");
    neighborhoods::mark_neighbors_of(id);
    true
}

/// Deletes a memory and everything hanging off it (edges, links, episode membership).
#[pg_extern(volatile, parallel_unsafe)]
fn forget(memory_id: Option<Uuid>) -> bool {
    let id = require_memory("memory_id", memory_id);
    neighborhoods::mark_neighbors_of(id);
    Spi::run_with_args(
        "WITH gone AS (DELETE FROM dionysus.episode_memories WHERE memory_id = $1 RETURNING episode_id) \
         UPDATE dionysus.episodes e SET memory_count = memory_count - 1 FROM gone WHERE e.id = gone.episode_id",
        &[id.into()],
    )
    .expect("leave episode");
    Spi::run_with_args("DELETE FROM dionysus.memories WHERE id = $1", &[id.into()]).expect("delete memory");
    // Its recalls not yet folded (the log has no foreign key, so that recall locks nothing; a
    // recall still open when this commits leaves a row the next fold drops).
    Spi::run_with_args("DELETE FROM dionysus.memory_access_log WHERE memory_id = $1", &[id.into()]).expect("forget recalls");
    true
}

/// Replaces a memory by a new one with new content: the old one is marked superseded (a fact
/// moves to the superseded state) and points at its successor. Returns the new id.
#[pg_extern(volatile, parallel_unsafe)]
fn supersede(
    old_id: Option<Uuid>,
    new_content: Option<&str>,
    importance: default!(Option<f64>, "NULL"),
    confidence: default!(Option<f64>, "NULL"),
    source: default!(Option<&str>, "NULL"),
) -> Uuid {
    let old = require_memory("old_id", old_id);
    let content = check_text("new_content", new_content).trim().to_string();
    let (kind, old_importance, old_confidence, old_source, old_private_to) = {
        let row = Spi::connect(|c| {
            let t = c
                .select(
                    "SELECT type::text, importance::float8, confidence::float8, source, status::text, private_to \
                     FROM dionysus.memories WHERE id = $1",
                    None,
                    &[old.into()],
                )
                .expect("read memory")
                .first();
            (
                t.get::<String>(1).ok().flatten().unwrap_or_default(),
                t.get::<f64>(2).ok().flatten().unwrap_or(0.5),
                t.get::<f64>(3).ok().flatten().unwrap_or(1.0),
                t.get::<String>(4).ok().flatten(),
                t.get::<String>(5).ok().flatten().unwrap_or_default(),
                t.get::<Vec<String>>(6).ok().flatten(),
            )
        });
        if row.4 == "superseded" {
            errors::invalid_arg("old_id", format!("memory {old} is already superseded"));
        }
        (row.0, row.1, row.2, row.3, row.5)
    };
    let m = NewMemory {
        kind: validate::memory_type("type", Some(&kind)),
        content,
        summary: None,
        micro: None,
        importance: importance.map(|v| validate::unit("importance", Some(v))).unwrap_or(old_importance),
        confidence: confidence.map(|v| validate::unit("confidence", Some(v))).unwrap_or(old_confidence),
        valence: 0.0,
        metadata: serde_json::json!({ "supersedes": old.to_string() }),
        source: validate::optional_text("source", source).or(old_source),
        created_at: None,
        // What replaces a private memory stays as private.
        private_to: old_private_to,
    };
    let embedding = embed::embed_one(&m.content);
    let new_id = store(&m, &embedding);
    Spi::run_with_args(
        "UPDATE dionysus.memories SET status = 'superseded', superseded_by = $2, updated_at = now() WHERE id = $1",
        &[old.into(), new_id.into()],
    )
    .expect("mark superseded");
    // A superseded fact hands its subject and category to its successor.
    Spi::run_with_args(
        "WITH old AS (UPDATE dionysus.facts SET state = 'superseded' WHERE memory_id = $1 \
                      RETURNING subject, category, source_episode) \
         INSERT INTO dionysus.facts (memory_id, subject, category, source_episode) \
         SELECT $2, subject, category, source_episode FROM old",
        &[old.into(), new_id.into()],
    )
    .expect("supersede fact");
    neighborhoods::mark_neighbors_of(old);
    new_id
}

/// One memory with every field, or P0002 if it does not exist.
#[pg_extern(stable, parallel_safe)]
fn recall_by_id(
    memory_id: Option<Uuid>,
) -> TableIterator<
    'static,
    (
        name!(id, Uuid),
        name!(type, String),
        name!(content, String),
        name!(summary, Option<String>),
        name!(micro, Option<String>),
        name!(importance, f64),
        name!(confidence, f64),
        name!(valence, f64),
        name!(status, String),
        name!(source, Option<String>),
        name!(metadata, JsonB),
        name!(access_count, i32),
        name!(last_accessed, Option<TimestampWithTimeZone>),
        name!(created_at, TimestampWithTimeZone),
        name!(episode_id, Option<Uuid>),
        name!(sequence_order, Option<i32>),
    ),
> {
    let id = require_memory("memory_id", memory_id);
    // As folded (memory_access) and with the recalls not yet folded in, from the access log;
    // not on a hot standby, which cannot read the (unlogged) log: there, the counts as last folded.
    let (count, last) = (
        "coalesce((SELECT a.access_count FROM dionysus.memory_access a WHERE a.memory_id = m.id), 0)",
        "(SELECT a.last_accessed FROM dionysus.memory_access a WHERE a.memory_id = m.id)",
    );
    let accessed = if unsafe { pg_sys::RecoveryInProgress() } {
        format!("{count}, {last}")
    } else {
        format!(
            "{count} + (SELECT count(*)::int FROM dionysus.memory_access_log l WHERE l.memory_id = m.id), \
             greatest({last}, (SELECT max(accessed_at) FROM dionysus.memory_access_log l WHERE l.memory_id = m.id))"
        )
    };
    let row = Spi::connect(|c| {
        let t = c
            .select(
                &format!(
                    "SELECT m.id, m.type::text, m.content, m.summary, m.micro, m.importance::float8, \
                            m.confidence::float8, m.valence::float8, m.status::text, m.source, m.metadata, \
                            {accessed}, m.created_at, em.episode_id, em.sequence_order \
                     FROM dionysus.memories m LEFT JOIN dionysus.episode_memories em ON em.memory_id = m.id \
                     WHERE m.id = $1"
                ),
                None,
                &[id.into()],
            )
            .expect("read memory")
            .first();
        (
            t.get::<Uuid>(1).unwrap().unwrap(),
            t.get::<String>(2).unwrap().unwrap(),
            t.get::<String>(3).unwrap().unwrap(),
            t.get::<String>(4).unwrap(),
            t.get::<String>(5).unwrap(),
            t.get::<f64>(6).unwrap().unwrap(),
            t.get::<f64>(7).unwrap().unwrap(),
            t.get::<f64>(8).unwrap().unwrap(),
            t.get::<String>(9).unwrap().unwrap(),
            t.get::<String>(10).unwrap(),
            t.get::<JsonB>(11).unwrap().unwrap(),
            t.get::<i32>(12).unwrap().unwrap_or(0),
            t.get::<TimestampWithTimeZone>(13).unwrap(),
            t.get::<TimestampWithTimeZone>(14).unwrap().unwrap(),
            t.get::<Uuid>(15).unwrap(),
            t.get::<i32>(16).unwrap(),
        )
    });
    TableIterator::once(row)
}

/// The most recent memories, newest first, optionally of some types or one source.
#[pg_extern(stable, parallel_safe)]
fn recall_recent(
    k: default!(Option<i32>, 10),
    types: default!(Option<Vec<Option<String>>>, "NULL"),
    source: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(memory_id, Uuid),
        name!(content, String),
        name!(type, String),
        name!(created_at, TimestampWithTimeZone),
        name!(importance, f64),
        name!(source, Option<String>),
    ),
> {
    let k = validate::positive("k", k, 10_000);
    let types = crate::recall::type_filter(types);
    let rows = Spi::connect(|c| {
        c.select(
            "SELECT id, content, type::text, created_at, importance::float8, source FROM dionysus.memories \
             WHERE status = 'active' AND ($2::text[] IS NULL OR type::text = ANY($2)) \
               AND ($3::text IS NULL OR source = $3) \
             ORDER BY created_at DESC, id LIMIT $1",
            None,
            &[k.into(), types.into(), source.map(|s| s.to_string()).into()],
        )
        .expect("recent memories")
        .map(|t| {
            (
                t.get::<Uuid>(1).unwrap().unwrap(),
                t.get::<String>(2).unwrap().unwrap(),
                t.get::<String>(3).unwrap().unwrap(),
                t.get::<TimestampWithTimeZone>(4).unwrap().unwrap(),
                t.get::<f64>(5).unwrap().unwrap(),
                t.get::<String>(6).unwrap(),
            )
        })
        .collect::<Vec<_>>()
    });
    TableIterator::new(rows)
}
