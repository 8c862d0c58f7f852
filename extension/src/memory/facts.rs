//! Facts (002's lifecycle: learned → confirmed → superseded → deactivated) and
//! subject–predicate–object triples over entities.
use super::{validate, NewMemory};
use crate::embed::{self, check_text};
use crate::errors;
use crate::spi_util::{cosine_op, vector_arg, with_iterative_scan};
use pgrx::prelude::*;
use pgrx::Uuid;

/// A new fact this similar to an active one confirms it instead of adding a row (002).
pub const CONFIRM_SIMILARITY: f64 = 0.95;

/// The most similar active fact and its cosine similarity.
/// The most similar active fact with exactly the same privacy: one person's fact never
/// confirms (and so never swallows) another's.
fn nearest_fact(embedding: &[f32], private_to: &Option<Vec<String>>) -> Option<(Uuid, f64)> {
    with_iterative_scan(40, || {
        Spi::connect(|c| {
            let t = c
                .select(
                    &format!(
                        "SELECT id, sim FROM ( \
                           SELECT m.id, 1 - (m.embedding {op} $1) AS sim \
                           FROM dionysus.memories m JOIN dionysus.facts f ON f.memory_id = m.id \
                           WHERE m.status = 'active' AND f.state IN ('learned', 'confirmed') \
                             AND m.private_to IS NOT DISTINCT FROM $2 \
                           ORDER BY m.embedding {op} $1 LIMIT 5) s \
                         ORDER BY sim DESC LIMIT 1",
                        op = cosine_op(),
                    ),
                    None,
                    &[vector_arg(embedding), private_to.clone().into()],
                )
                .expect("nearest fact");
            t.into_iter().next().and_then(|r| Some((r.get::<Uuid>(1).ok()??, r.get::<f64>(2).ok()??)))
        })
    })
}

/// Learns a fact. If an active fact is ≥ 0.95 similar, that fact is confirmed (its confidence
/// rises to the higher of the two) and its id returned; otherwise a semantic memory is stored.
#[pg_extern(volatile, parallel_unsafe)]
fn learn(
    content: Option<&str>,
    subject: default!(Option<&str>, "NULL"),
    category: default!(Option<&str>, "NULL"),
    confidence: default!(Option<f64>, 0.8),
    source: default!(Option<&str>, "NULL"),
    importance: default!(Option<f64>, 0.5),
    private_to: default!(Option<Vec<Option<String>>>, "NULL"),
) -> Uuid {
    let content = check_text("content", content).trim().to_string();
    let private_to = validate::private_to("private_to", private_to);
    let subject = validate::optional_text("subject", subject);
    let category = validate::optional_text("category", category);
    let confidence = validate::unit("confidence", confidence);
    let importance = validate::unit("importance", importance);
    let source = validate::optional_text("source", source);
    // Learning is rare and must not race into twin facts: one learner at a time.
    Spi::run("SELECT pg_advisory_xact_lock(hashtextextended('dionysus.learn', 0))").expect("learn lock");
    let embedding = embed::embed_one(&content);
    if let Some((id, sim)) = nearest_fact(&embedding, &private_to) {
        if sim >= CONFIRM_SIMILARITY {
            Spi::run_with_args(
                "WITH f AS (UPDATE dionysus.facts SET state = 'confirmed', confirmations = confirmations + 1, \
                                   last_confirmed = now(), subject = coalesce(subject, $2), category = coalesce(category, $3) \
                            WHERE memory_id = $1 RETURNING memory_id) \
                 UPDATE dionysus.memories m SET confidence = greatest(m.confidence, $4::real), updated_at = now() \
                 FROM f WHERE m.id = f.memory_id",
                &[id.into(), subject.into(), category.into(), confidence.into()],
            )
            .expect("confirm fact");
            return id;
        }
    }
    let m = NewMemory {
        kind: "semantic",
        content,
        summary: None,
        micro: None,
        importance,
        confidence,
        valence: 0.0,
        metadata: serde_json::json!({}),
        source,
        created_at: None,
        private_to,
    };
    let id = super::store(&m, &embedding);
    Spi::run_with_args(
        "INSERT INTO dionysus.facts (memory_id, subject, category) VALUES ($1, $2, $3)",
        &[id.into(), subject.into(), category.into()],
    )
    .expect("insert fact");
    id
}

fn entity(arg: &str, name: &str, kind: Option<String>) -> Uuid {
    Spi::get_one_with_args::<Uuid>(
        "INSERT INTO dionysus.entities (name, kind) VALUES ($1, $2) \
         ON CONFLICT (name_key) DO UPDATE SET kind = coalesce(dionysus.entities.kind, EXCLUDED.kind) \
         RETURNING id",
        &[name.into(), kind.into()],
    )
    .unwrap_or_else(|e| errors::invalid_arg(arg, e))
    .expect("entity id")
}

/// Records subject–predicate–object. The same triple twice updates it (confidence keeps the
/// higher value, provenance the newest). Returns the triple's id.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::too_many_arguments)]
fn add_triple(
    subject: Option<&str>,
    predicate: Option<&str>,
    object: Option<&str>,
    confidence: default!(Option<f64>, 1.0),
    source: default!(Option<&str>, "NULL"),
    memory_id: default!(Option<Uuid>, "NULL"),
    subject_kind: default!(Option<&str>, "NULL"),
    object_kind: default!(Option<&str>, "NULL"),
    private_to: default!(Option<Vec<Option<String>>>, "NULL"),
) -> Uuid {
    let private_to = validate::private_to("private_to", private_to);
    let subject = validate::required_name("subject", subject);
    let predicate = validate::required_name("predicate", predicate).to_lowercase();
    // The triple's identity is a btree key: a predicate of many multi-byte characters would
    // overflow its row limit (2704 bytes), so the bound is in bytes.
    if predicate.len() > 1000 {
        errors::invalid_arg("predicate", format!("is {} bytes long; at most 1000", predicate.len()));
    }
    let object = validate::required_name("object", object);
    let confidence = validate::unit("confidence", confidence);
    let source = validate::optional_text("source", source);
    if memory_id.is_some() {
        super::require_memory("memory_id", memory_id);
    }
    let s = entity("subject", &subject, validate::optional_text("subject_kind", subject_kind));
    let o = entity("object", &object, validate::optional_text("object_kind", object_kind));
    Spi::get_one_with_args::<Uuid>(
        "INSERT INTO dionysus.triples (subject_id, predicate, object_id, confidence, source, memory_id, private_to) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (subject_id, predicate, object_id, (coalesce(private_to, '{}'::text[]))) DO UPDATE SET \
           confidence = greatest(dionysus.triples.confidence, EXCLUDED.confidence), \
           source = coalesce(EXCLUDED.source, dionysus.triples.source), \
           memory_id = coalesce(EXCLUDED.memory_id, dionysus.triples.memory_id), \
           updated_at = now() \
         RETURNING id",
        &[s.into(), predicate.into(), o.into(), confidence.into(), source.into(), memory_id.into(), private_to.into()],
    )
    .unwrap_or_else(|e| errors::invalid_arg("predicate", e))
    .expect("triple id")
}

/// Triples in which an entity (by name, case-insensitive) is subject or object.
#[pg_extern(stable, parallel_safe)]
fn triples_about(
    entity: Option<&str>,
    person: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(triple_id, Uuid),
        name!(subject, String),
        name!(predicate, String),
        name!(object, String),
        name!(confidence, f64),
        name!(source, Option<String>),
        name!(memory_id, Option<Uuid>),
    ),
> {
    let name = validate::required_name("entity", entity);
    let person = validate::optional_text("person", person);
    let rows = Spi::connect(|c| {
        c.select(
            // A person's view by index (triples_seen, 013): every person's facts about themselves
            // are about 'user', and reading them all to keep one person's grew with everyone's.
            "WITH e AS (SELECT array_agg(x.id) AS ids FROM dionysus.entities x \
                         WHERE x.name_key = lower(btrim(regexp_replace($1, '\\s+', ' ', 'g')))), \
                  t AS (SELECT v.* FROM e, dionysus_internal.triples_seen(e.ids, $2::text) v WHERE $2::text IS NOT NULL \
                        UNION ALL \
                        SELECT x.* FROM e, dionysus.triples x \
                         WHERE $2::text IS NULL AND (x.subject_id = ANY (e.ids) OR x.object_id = ANY (e.ids))) \
             SELECT t.id, s.name, t.predicate, o.name, t.confidence::float8, t.source, t.memory_id \
             FROM t JOIN dionysus.entities s ON s.id = t.subject_id JOIN dionysus.entities o ON o.id = t.object_id \
             ORDER BY t.confidence DESC, t.updated_at DESC",
            None,
            &[name.into(), person.into()],
        )
        .expect("triples")
        .map(|t| {
            (
                t.get::<Uuid>(1).unwrap().unwrap(),
                t.get::<String>(2).unwrap().unwrap(),
                t.get::<String>(3).unwrap().unwrap(),
                t.get::<String>(4).unwrap().unwrap(),
                t.get::<f64>(5).unwrap().unwrap(),
                t.get::<String>(6).unwrap(),
                t.get::<Uuid>(7).unwrap(),
            )
        })
        .collect::<Vec<_>>()
    });
    TableIterator::new(rows)
}
