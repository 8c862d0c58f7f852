//! Hybrid recall: the heart of Dionysus.
//!
//! 1. Seeds: the nearest memories by HNSW (pgvector iterative scan, so filters never starve
//!    it) and the best BM25 matches of the query's words (GIN), fused linearly.
//! 2. Expansion of the strongest seeds: their precomputed neighborhoods, their graph edges,
//!    and the turns around them in their episode (temporal context).
//! 3. Every candidate is scored on the same components — vector, lexical, association,
//!    temporal, importance, recency — weighted by `dionysus.recall_config`.
//!
//! Recall appends to `memory_access_log` rather than updating memories, so concurrent
//! readers never take row locks; importance is never touched by reading.
pub mod lexical;

use crate::embed::{self, check_text};
use crate::errors;
use crate::memory::validate;
use crate::spi_util::{cosine_op, select_prepared, vector_type, with_iterative_scan, write_prepared};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::Uuid;
use std::collections::HashMap;

/// All of recall's knobs, read from `dionysus.recall_config`.
#[derive(Clone, Debug)]
pub struct Config {
    pub weight_vector: f64,
    pub weight_lexical: f64,
    pub weight_association: f64,
    pub weight_temporal: f64,
    pub weight_importance: f64,
    pub weight_recency: f64,
    pub recency_half_life_days: f64,
    pub seed_multiplier: f64,
    pub min_seeds: f64,
    pub expand_seeds: f64,
    pub temporal_window: f64,
    pub temporal_decay: f64,
    pub bm25_k1: f64,
    pub bm25_b: f64,
    pub lexical_max_df: f64,
    pub lexical_candidates: f64,
}

impl Config {
    pub fn load() -> Config {
        let map: HashMap<String, f64> =
            select_prepared("SELECT key, value FROM dionysus.recall_config", &[], |t| {
                Some((t.get::<String>(1).ok()??, t.get::<f64>(2).ok()??))
            })
            .into_iter()
            .collect();
        let get = |k: &str, d: f64| map.get(k).copied().unwrap_or(d);
        Config {
            weight_vector: get("weight_vector", 1.0),
            weight_lexical: get("weight_lexical", 0.35),
            weight_association: get("weight_association", 0.3),
            weight_temporal: get("weight_temporal", 0.35),
            weight_importance: get("weight_importance", 0.1),
            weight_recency: get("weight_recency", 0.05),
            recency_half_life_days: get("recency_half_life_days", 30.0).max(1e-6),
            seed_multiplier: get("seed_multiplier", 4.0),
            min_seeds: get("min_seeds", 40.0),
            expand_seeds: get("expand_seeds", 10.0),
            temporal_window: get("temporal_window", 2.0),
            temporal_decay: get("temporal_decay", 0.5),
            bm25_k1: get("bm25_k1", 1.2),
            bm25_b: get("bm25_b", 0.75),
            lexical_max_df: get("lexical_max_df", 0.25),
            lexical_candidates: get("lexical_candidates", 1000.0),
        }
    }
}

/// The filters of one recall, applied to seeds and expansions alike.
pub struct Filters {
    pub types: Option<Vec<String>>,
    pub since: Option<TimestampWithTimeZone>,
    pub until: Option<TimestampWithTimeZone>,
    pub min_importance: Option<f64>,
    pub episode: Option<Uuid>,
    /// Only what this person may see (as `dionysus_internal.visible_to` in sql/013_privacy.sql); None: everything.
    pub person: Option<String>,
}

/// SQL condition over `m` using parameters $2..$7 (types, since, until, min importance,
/// episode, person). A memory private to someone else is never a candidate.
pub const FILTER_SQL: &str = "m.status = 'active' \
    AND ($2::text[] IS NULL OR m.type::text = ANY($2)) \
    AND ($3::timestamptz IS NULL OR m.created_at >= $3) \
    AND ($4::timestamptz IS NULL OR m.created_at <= $4) \
    AND ($5::float8 IS NULL OR m.importance >= $5) \
    AND ($6::uuid IS NULL OR EXISTS (SELECT 1 FROM dionysus.episode_memories fe \
                                    WHERE fe.memory_id = m.id AND fe.episode_id = $6)) \
    AND ($7::text IS NULL OR m.private_to IS NULL OR m.private_to <@ ARRAY[$7::text])";

impl Filters {
    pub fn args(&self) -> Vec<pgrx::datum::DatumWithOid<'static>> {
        vec![
            self.types.clone().into(),
            self.since.into(),
            self.until.into(),
            self.min_importance.into(),
            self.episode.into(),
            self.person.clone().into(),
        ]
    }
}

/// Validates a types filter: NULL or empty means all types.
pub fn type_filter(types: Option<Vec<Option<String>>>) -> Option<Vec<String>> {
    let types = types?;
    if types.is_empty() {
        return None;
    }
    Some(types.iter().map(|t| validate::memory_type("types", t.as_deref()).to_string()).collect())
}

/// One scored result.
#[derive(Clone, Debug, Default)]
pub struct Hit {
    pub id: Option<Uuid>,
    pub content: String,
    pub kind: String,
    pub created_at: Option<TimestampWithTimeZone>,
    pub vector: f64,
    pub lexical: f64,
    pub association: f64,
    pub temporal: f64,
    pub importance: f64,
    pub recency: f64,
    pub score: f64,
    pub found_by: String,
    /// Where the memory is in its life (sql/021_decay.sql): fresh, fading or distant.
    pub stage: String,
}

#[derive(Default, Clone)]
struct Candidate {
    vector_seed: bool,
    lexical: f64,
    association: f64,
    temporal: f64,
}

/// Recall proper, callable from Rust (the heartbeat and benchmarks use it too).
pub fn run(query: &str, k: usize, filters: &Filters, cfg: &Config) -> Vec<Hit> {
    let qv = embed::embed_one(query);
    let n_seeds = ((k as f64 * cfg.seed_multiplier).max(cfg.min_seeds)).round() as i64;
    // $1 the query vector, $2..$6 the filters.
    let base_args = || {
        let mut a: Vec<pgrx::datum::DatumWithOid<'static>> = vec![qv.clone().into()];
        a.extend(filters.args());
        a
    };

    // 1a. Vector seeds.
    let vector_seeds: Vec<(Uuid, f64)> = with_iterative_scan((n_seeds as i32).max(40), || {
        let mut args = base_args();
        args.push(n_seeds.into());
        select_prepared(
            &format!(
                "SELECT id, sim FROM (SELECT m.id, 1 - (m.embedding {op} $1::real[]::{vt}) AS sim \
                   FROM dionysus.memories m WHERE {FILTER_SQL} \
                   ORDER BY m.embedding {op} $1::real[]::{vt} LIMIT $8) s ORDER BY sim DESC",
                op = cosine_op(),
                vt = vector_type()
            ),
            &args,
            |t| Some((t.get::<Uuid>(1).ok()??, t.get::<f64>(2).ok()??)),
        )
    });
    // 1b. Lexical seeds (BM25, normalised to the best match of this query).
    let lexical_seeds = lexical::search(query, &qv, n_seeds, filters, cfg);

    let mut cands: HashMap<Uuid, Candidate> = HashMap::new();
    for (id, _) in &vector_seeds {
        cands.entry(*id).or_default().vector_seed = true;
    }
    for m in &lexical_seeds {
        cands.entry(m.id).or_default().lexical = m.score;
    }
    if cands.is_empty() {
        return Vec::new();
    }
    let vector_of: HashMap<Uuid, f64> = vector_seeds.iter().copied().collect();

    // 2. Seed strength: the fused vector + lexical relevance, normalised to the best seed.
    let mut sims = vector_of;
    sims.extend(lexical_seeds.iter().map(|m| (m.id, m.similarity)));
    let relevance = |id: &Uuid, c: &Candidate| {
        cfg.weight_vector * sims.get(id).copied().unwrap_or(0.0) + cfg.weight_lexical * c.lexical
    };
    let mut seeds: Vec<(Uuid, f64)> = cands.iter().map(|(id, c)| (*id, relevance(id, c))).collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    seeds.truncate(cfg.expand_seeds.max(0.0) as usize);
    let best = seeds.first().map(|s| s.1).unwrap_or(0.0).max(1e-9);
    let strength: HashMap<Uuid, f64> = seeds.iter().map(|(id, r)| (*id, (r / best).clamp(0.0, 1.0))).collect();
    let seed_ids: Vec<Uuid> = seeds.iter().map(|s| s.0).collect();

    // 3. Expansion: neighborhoods, graph edges, episode-adjacent turns.
    let window = cfg.temporal_window.max(0.0) as i32;
    for e in expansions(&seed_ids, window) {
        let c = cands.entry(e.neighbour).or_default();
        match e.kind {
            Expansion::Association(w) => c.association = c.association.max(strength[&e.seed] * (w / 1.5).clamp(0.0, 1.0)),
            Expansion::Temporal(dist) => {
                c.temporal = c.temporal.max(strength[&e.seed] * cfg.temporal_decay.powi(dist - 1))
            }
        }
    }

    // 4. Score every candidate that passes the filters.
    let ids: Vec<Uuid> = cands.keys().copied().collect();
    let mut args = base_args();
    args.push(ids.into());
    // A database still on an older version's SQL has no stages: everything is fresh there.
    let stage = if crate::decay::installed() { "m.stage::text" } else { "'fresh'::text" };
    let rows: Vec<(Uuid, String, String, TimestampWithTimeZone, f64, f64, f64, String)> = select_prepared(
        &format!(
            "SELECT m.id, m.content, m.type::text, m.created_at, 1 - (m.embedding {op} $1::real[]::{vt}), \
                    m.importance::float8, \
                    CASE WHEN isfinite(m.created_at) THEN extract(epoch FROM now() - m.created_at)::float8 / 86400 \
                         ELSE 0 END, {stage} \
             FROM dionysus.memories m WHERE m.id = ANY($8) AND {FILTER_SQL}",
            op = cosine_op(),
            vt = vector_type()
        ),
        &args,
        |t| {
            Some((
                t.get::<Uuid>(1).ok()??,
                t.get::<String>(2).ok()??,
                t.get::<String>(3).ok()??,
                t.get::<TimestampWithTimeZone>(4).ok()??,
                t.get::<f64>(5).ok()??,
                t.get::<f64>(6).ok()??,
                t.get::<f64>(7).ok()??,
                t.get::<String>(8).ok()??,
            ))
        },
    );
    let mut hits: Vec<Hit> = rows
        .into_iter()
        .map(|(id, content, kind, created_at, vector, importance, age_days, stage)| {
            let c = &cands[&id];
            let recency = 0.5f64.powf(age_days.max(0.0) / cfg.recency_half_life_days);
            let score = cfg.weight_vector * vector
                + cfg.weight_lexical * c.lexical
                + cfg.weight_association * c.association
                + cfg.weight_temporal * c.temporal
                + cfg.weight_importance * importance
                + cfg.weight_recency * recency;
            let found_by = match (c.vector_seed, c.lexical > 0.0) {
                (true, true) => "vector+lexical",
                (true, false) => "vector",
                (false, true) => "lexical",
                (false, false) if c.association >= c.temporal => "association",
                (false, false) => "temporal",
            };
            Hit {
                id: Some(id),
                content,
                kind,
                created_at: Some(created_at),
                vector,
                lexical: c.lexical,
                association: c.association,
                temporal: c.temporal,
                importance,
                recency,
                score,
                found_by: found_by.to_string(),
                stage,
            }
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then_with(|| a.id.unwrap().as_bytes().cmp(b.id.unwrap().as_bytes()))
    });
    hits.truncate(k);
    hits
}

enum Expansion {
    /// Through a neighborhood or a graph edge, with its weight.
    Association(f64),
    /// An episode-adjacent turn, at this distance.
    Temporal(i32),
}

struct Expanded {
    seed: Uuid,
    neighbour: Uuid,
    kind: Expansion,
}

/// Everything one hop from the seeds, in one query: precomputed neighborhoods, direct graph
/// edges (edges added since the last recompute count at once) and turns within `window`
/// positions in the same episode.
fn expansions(seeds: &[Uuid], window: i32) -> Vec<Expanded> {
    if seeds.is_empty() {
        return Vec::new();
    }
    select_prepared(
        "SELECT 'a', memory_id, n, w::float8 FROM dionysus.memory_neighborhoods, \
                unnest(neighbor_ids, neighbor_weights) AS u(n, w) WHERE memory_id = ANY($1) \
         UNION ALL \
         SELECT 'a', CASE WHEN from_id = ANY($1) THEN from_id ELSE to_id END, \
                CASE WHEN from_id = ANY($1) THEN to_id ELSE from_id END, weight::float8 \
         FROM dionysus.memory_edges WHERE from_id = ANY($1) OR to_id = ANY($1) \
         UNION ALL \
         SELECT 't', a.memory_id, b.memory_id, abs(a.sequence_order - b.sequence_order)::float8 \
         FROM dionysus.episode_memories a \
         JOIN dionysus.episode_memories b ON b.episode_id = a.episode_id \
          AND b.sequence_order BETWEEN a.sequence_order - $2 AND a.sequence_order + $2 \
          AND b.memory_id <> a.memory_id \
         WHERE a.memory_id = ANY($1) AND $2 > 0",
        &[seeds.to_vec().into(), window.into()],
        |t| {
            let kind = t.get::<String>(1).ok()??;
            let value = t.get::<f64>(4).ok()??;
            Some(Expanded {
                seed: t.get::<Uuid>(2).ok()??,
                neighbour: t.get::<Uuid>(3).ok()??,
                kind: if kind == "t" { Expansion::Temporal(value as i32) } else { Expansion::Association(value) },
            })
        },
    )
}

/// Records that memories were recalled (folded into access_count by the worker).
fn log_access(ids: &[Uuid]) {
    let writable = unsafe { !pg_sys::XactReadOnly && !pg_sys::RecoveryInProgress() };
    if ids.is_empty() || !writable {
        return;
    }
    write_prepared(
        "INSERT INTO dionysus.memory_access_log (memory_id) SELECT unnest($1::uuid[])",
        &[ids.to_vec().into()],
        |_| Some(()),
    );
}

/// Hybrid recall of the k memories most relevant to a text query, with every score
/// component and the channel that found each one.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)]
fn recall(
    query: Option<&str>,
    k: default!(Option<i32>, 10),
    types: default!(Option<Vec<Option<String>>>, "NULL"),
    since: default!(Option<TimestampWithTimeZone>, "NULL"),
    until: default!(Option<TimestampWithTimeZone>, "NULL"),
    min_importance: default!(Option<f64>, "NULL"),
    episode_id: default!(Option<Uuid>, "NULL"),
    person: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(memory_id, Uuid),
        name!(content, String),
        name!(type, String),
        name!(created_at, TimestampWithTimeZone),
        name!(score, f64),
        name!(vector_score, f64),
        name!(lexical_score, f64),
        name!(association_score, f64),
        name!(temporal_score, f64),
        name!(importance_score, f64),
        name!(recency_score, f64),
        name!(found_by, String),
        name!(stage, String),
    ),
> {
    let query = check_text("query", query);
    let k = validate::positive("k", k, 1000) as usize;
    let filters = Filters {
        types: type_filter(types),
        since,
        until,
        min_importance: min_importance.map(|v| validate::unit("min_importance", Some(v))),
        episode: episode_id,
        person: validate::optional_text("person", person),
    };
    if let (Some(s), Some(u)) = (since, until) {
        if s > u {
            errors::invalid_arg("since", "is after \"until\"");
        }
    }
    let hits = run(query, k, &filters, &Config::load());
    log_access(&hits.iter().filter_map(|h| h.id).collect::<Vec<_>>());
    TableIterator::new(hits.into_iter().map(|h| {
        (
            h.id.unwrap(),
            h.content,
            h.kind,
            h.created_at.unwrap(),
            h.score,
            h.vector,
            h.lexical,
            h.association,
            h.temporal,
            h.importance,
            h.recency,
            h.found_by,
            h.stage,
        )
    }))
}
