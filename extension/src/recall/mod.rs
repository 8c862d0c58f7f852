//! Hybrid recall: the heart of Dionysus.
//!
//! 1. Seeds: the nearest memories by HNSW (pgvector iterative scan, so filters never starve
//!    it), the nearest within the days or months the question names, and the best BM25
//!    matches of the query's words (GIN), scored as the share of the query's information
//!    they match.
//! 2. Expansion of the strongest seeds: their precomputed neighborhoods, their graph edges,
//!    and the turns around them in their episode (temporal context). A neighbour inherits a
//!    share of its seed's meaning-relevance (the most any one seed lends, never a sum), and
//!    counts it only beyond its own in the share `inherit_beyond_own`, so near-duplicates do
//!    not lift each other.
//! 3. Every candidate is scored on the same components — vector, lexical, person (said by
//!    someone the question names), time (made when the question asks about), association,
//!    temporal, importance, recency — weighted by `dionysus.recall_config`.
//!
//! Recall appends to `memory_access_log` rather than updating memories, so concurrent
//! readers never take row locks; importance is never touched by reading.
pub mod lexical;
pub mod query;
pub mod tsvector;
use tsvector::Lexemes;

use crate::embed::{self, check_text};
use crate::errors;
use crate::memory::validate;
use crate::spi_util::{cosine_op, select_prepared, vector_type, with_iterative_scan, with_settings, write_prepared};
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
    pub inherit_beyond_own: f64,
    pub weight_person: f64,
    pub person_mention: f64,
    pub weight_time: f64,
    pub lexical_corroboration: f64,
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
            weight_lexical: get("weight_lexical", 1.0),
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
            lexical_candidates: get("lexical_candidates", 200.0),
            inherit_beyond_own: get("inherit_beyond_own", 0.5).clamp(0.0, 1.0),
            weight_person: get("weight_person", 0.4),
            person_mention: get("person_mention", 0.0).clamp(0.0, 1.0),
            weight_time: get("weight_time", 0.3),
            lexical_corroboration: get("lexical_corroboration", 0.3),
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
    /// Said by (1) or naming (`person_mention`) someone the query names.
    pub person: f64,
    /// Made within (1) or near a time the query names.
    pub time: f64,
    pub score: f64,
    pub found_by: String,
    /// Where the memory is in its life (sql/021_decay.sql): fresh, fading or distant.
    pub stage: String,
}

#[derive(Default, Clone)]
struct Candidate {
    vector_seed: bool,
    /// Found among the memories made when the question asks about.
    time_seed: bool,
    /// Found by the query's words (lexical::search).
    lexical_seed: bool,
    /// The share of the query's information its words match (lexical::Scorer), where known.
    lexical: f64,
    /// Cosine similarity to the query, where a seed query already measured it.
    similarity: Option<f64>,
    /// By or about a person the query names (query::person_match), where known.
    person: f64,
    /// Fit to the times the query names (query::time_match), where known.
    time: f64,
    association: f64,
    temporal: f64,
}

/// The local wall-clock time of `m.created_at` in seconds (0 for ±infinity), for time_match.
/// (The cast to timestamp is to the session's TimeZone, as `AT TIME ZONE current_setting(..)`
/// without its per-row lookup.)
pub const LOCAL_SECONDS_SQL: &str =
    "CASE WHEN isfinite(m.created_at) THEN extract(epoch FROM m.created_at::timestamp)::int8 ELSE 0 END";

/// The start of a memory's text, enough for its "Name: " label.
pub const LABEL_SQL: &str = "left(m.content, 64)";

/// A query's times as spans to look in, for the time seeds: spans up to two months wide
/// (a day, a week, a month; wider ones only score), annual ones in each year the store has.
fn seed_spans(times: &[query::When]) -> Vec<(i64, i64)> {
    const WIDEST: i64 = 62 * 86_400;
    let mut spans = Vec::new();
    let mut years: Option<(i64, i64)> = None;
    for w in times {
        match *w {
            query::When::Span(f, t) if t - f <= WIDEST => spans.push((f, t)),
            query::When::Span(..) => {}
            query::When::Annual { month, day } => {
                let (first, last) = *years.get_or_insert_with(|| {
                    select_prepared(
                        &format!(
                            "SELECT extract(year FROM min(m.created_at) AT TIME ZONE current_setting('TimeZone'))::int8, \
                                    extract(year FROM max(m.created_at) AT TIME ZONE current_setting('TimeZone'))::int8 \
                             FROM dionysus.memories m WHERE isfinite(m.created_at)"
                        ),
                        &[],
                        |t| Some((t.get::<i64>(1).ok()??, t.get::<i64>(2).ok()??)),
                    )
                    .pop()
                    .unwrap_or((0, -1))
                });
                // The most recent years first, at most ten of them.
                for y in (first.max(last - 9)..=last).rev() {
                    let (f, t) = match day {
                        Some(d) => {
                            let at = query::days_from_civil(y, month, d);
                            (at, at + 1)
                        }
                        None => (
                            query::days_from_civil(y, month, 1),
                            if month == 12 { query::days_from_civil(y + 1, 1, 1) } else { query::days_from_civil(y, month + 1, 1) },
                        ),
                    };
                    spans.push((f * 86_400, t * 86_400));
                }
            }
        }
    }
    spans.truncate(24);
    spans
}

/// Recall proper, callable from Rust.
pub fn run(query: &str, k: usize, filters: &Filters, cfg: &Config) -> Vec<Hit> {
    // Recall's queries take every filter as a parameter, usually NULL. Postgres would plan each
    // call afresh (a custom plan looks cheaper once the NULLs are folded away), which was a third
    // of recall's time at 10k memories; unfiltered, the generic plans use the same indexes. And no JIT: at
    // 100k the kNN's estimated cost passes jit_above_cost, and compiling took 8 ms of a query
    // that runs in 1.
    // With a narrowing filter (types, times, importance, an episode) the plans are custom, always:
    // only they can use its value to choose an index (a day's memories by created_at, an
    // episode's turns) where HNSW would scan past its limit before finding them. ("auto" would
    // not do: after five custom plans Postgres takes the generic one the unfiltered calls made
    // whenever it looks cheaper, and its estimate for "$3 IS NULL OR ..." cannot tell.)
    let narrowed = filters.types.is_some()
        || filters.since.is_some()
        || filters.until.is_some()
        || filters.min_importance.is_some()
        || filters.episode.is_some();
    let plans = if narrowed { c"force_custom_plan" } else { c"force_generic_plan" };
    with_settings(&[(c"plan_cache_mode", plans), (c"jit", c"off")], || search(query, k, filters, cfg))
}

fn search(query: &str, k: usize, filters: &Filters, cfg: &Config) -> Vec<Hit> {
    // What the question says besides its meaning: the people it names, the times it asks about
    // (relative ones on the one clock).
    let names = query::names(query);
    // Its meaning is embedded without the people and dates it names: those are matched by who
    // said a memory and when it was made, and a turn's words say neither (query::topic). Only
    // people who speak in the store, though: a place or an event it names ("Rome", "Pride") is
    // part of what it asks about.
    let speakers: Vec<String> = names.iter().filter(|n| speaks(n, filters.person.as_deref())).cloned().collect();
    let qv = embed::embed_one(&query::topic(query, &speakers));
    let now_local = query::is_relative(query).then(|| {
        select_prepared(
            "SELECT extract(epoch FROM dionysus.clock_now() AT TIME ZONE current_setting('TimeZone'))::int8",
            &[],
            |t| t.get::<i64>(1).ok()?,
        )
        .pop()
    });
    let times = query::times(query, now_local.flatten());
    let n_seeds = ((k as f64 * cfg.seed_multiplier).max(cfg.min_seeds)).round() as i64;
    // $1 the query vector, $2..$7 the filters.
    let base_args = || {
        let mut a: Vec<pgrx::datum::DatumWithOid<'static>> = vec![qv.clone().into()];
        a.extend(filters.args());
        a
    };
    // The query's words, weighted by how rare they are: every candidate is scored by them.
    let scorer = lexical::Scorer::new(query, cfg);
    let share = |search: &Option<Lexemes>| match (&scorer, search) {
        (Some(scorer), Some(search)) => scorer.share(search),
        _ => 0.0,
    };
    let mut cands: HashMap<Uuid, Candidate> = HashMap::new();
    let note = |cands: &mut HashMap<Uuid, Candidate>, seed: &Seed, by_time: bool| {
        let c = cands.entry(seed.id).or_default();
        if by_time {
            c.time_seed = true;
        } else {
            c.vector_seed = true;
        }
        c.similarity = Some(seed.sim);
        c.lexical = share(&seed.search);
        c.person = query::person_match(&names, &seed.label, cfg.person_mention);
        c.time = query::time_match(&times, seed.at);
    };

    // 1a. Vector seeds.
    let seed_row = |t: pgrx::spi::SpiHeapTupleData| {
        Some(Seed {
            id: t.get::<Uuid>(1).ok()??,
            sim: t.get::<f64>(2).ok()??,
            label: t.get::<String>(3).ok()??,
            at: t.get::<i64>(4).ok()??,
            search: t.get::<Lexemes>(5).ok()?,
        })
    };
    let vector_seeds = with_iterative_scan((n_seeds as i32).max(40), || {
        let mut args = base_args();
        args.push(n_seeds.into());
        select_prepared(
            &format!(
                "SELECT id, sim, label, at, search FROM (SELECT m.id, 1 - (m.embedding {op} (SELECT $1::real[]::{vt})) AS sim, \
                        {LABEL_SQL} AS label, {LOCAL_SECONDS_SQL} AS at, m.search \
                   FROM dionysus.memories m WHERE {FILTER_SQL} \
                   ORDER BY m.embedding {op} (SELECT $1::real[]::{vt}) LIMIT $8) s ORDER BY sim DESC",
                op = cosine_op(),
                vt = vector_type()
            ),
            &args,
            seed_row,
        )
    });
    for seed in &vector_seeds {
        note(&mut cands, seed, false);
    }
    // 1b. Time seeds: the nearest memories within the days, weeks or months the query names
    //     (a question about "October 13" looks at that day, however far its words are).
    let spans = seed_spans(&times);
    if !spans.is_empty() {
        let mut args = base_args();
        args.extend([
            n_seeds.into(),
            spans.iter().map(|s| s.0).collect::<Vec<i64>>().into(),
            spans.iter().map(|s| s.1).collect::<Vec<i64>>().into(),
        ]);
        let rows = select_prepared(
            &format!(
                // Each span on its own through the created_at index, by exact distance within
                // it: never the HNSW index, whose nearest few of the whole store would mostly
                // fall outside the span. (A memory in two overlapping spans comes twice; noted once.)
                // The best of all spans together are kept, as many as from any other index.
                "SELECT x.id, x.sim, x.label, x.at, x.search FROM unnest($9::int8[], $10::int8[]) AS r(f, t) \
                 CROSS JOIN LATERAL ( \
                   SELECT m.id, 1 - (m.embedding {op} (SELECT $1::real[]::{vt})) AS sim, {LABEL_SQL} AS label, {LOCAL_SECONDS_SQL} AS at, m.search \
                   FROM dionysus.memories m \
                   WHERE m.created_at >= (to_timestamp(r.f) AT TIME ZONE 'UTC') AT TIME ZONE current_setting('TimeZone') \
                     AND m.created_at < (to_timestamp(r.t) AT TIME ZONE 'UTC') AT TIME ZONE current_setting('TimeZone') \
                     AND {FILTER_SQL} \
                   ORDER BY sim DESC, m.id LIMIT $8) x \
                 ORDER BY x.sim DESC, x.id LIMIT $8",
                op = cosine_op(),
                vt = vector_type()
            ),
            &args,
            seed_row,
        );
        for seed in &rows {
            note(&mut cands, seed, true);
        }
    }
    // 1c. Lexical seeds: the memories the query's rarer words find, by BM25 as the share of the
    //     query's information matched.
    let lexical_seeds = match &scorer {
        Some(scorer) => lexical::search(scorer, &qv, n_seeds, filters, cfg),
        None => Vec::new(),
    };
    for m in lexical_seeds {
        let c = cands.entry(m.id).or_default();
        c.lexical_seed = true;
        c.lexical = m.score;
        c.similarity = Some(m.similarity);
        c.person = query::person_match(&names, &m.label, cfg.person_mention);
        c.time = query::time_match(&times, m.at);
    }
    if cands.is_empty() {
        return Vec::new();
    }

    // 2. Seeds to expand: the best by their direct evidence (meaning, words, the people and
    //    times asked about). It stays absolute, not relative to the best seed: what a
    //    neighbour inherits is a share of how relevant its seed really is, so a store of weak
    //    matches lends little.
    // Words in common count as far as meaning bears them out: a memory that shares the
    //    question's one rare word but is about something else (cosine near 0.1) gets a part of
    //    it, one plausibly on the same subject (lexical_corroboration and above) all of it.
    let lexical = |c: &Candidate, similarity: f64| {
        let corroborated = if cfg.lexical_corroboration > 0.0 { (similarity / cfg.lexical_corroboration).clamp(0.0, 1.0) } else { 1.0 };
        cfg.weight_lexical * c.lexical * corroborated
    };
    let direct = |c: &Candidate, similarity: f64| {
        cfg.weight_vector * similarity + lexical(c, similarity) + cfg.weight_person * c.person + cfg.weight_time * c.time
    };
    //    A seed lends only its meaning's part (vector and words): that it is by the person or
    //    from the day asked about is true of it, not of the turns around it.
    let meaning = |c: &Candidate, similarity: f64| cfg.weight_vector * similarity + lexical(c, similarity);
    let mut seeds: Vec<(Uuid, f64)> = cands.iter().map(|(id, c)| (*id, direct(c, c.similarity.unwrap_or(0.0)))).collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    seeds.truncate(cfg.expand_seeds.max(0.0) as usize);
    let strength: HashMap<Uuid, f64> =
        seeds.iter().map(|(id, _)| (*id, meaning(&cands[id], cands[id].similarity.unwrap_or(0.0)).max(0.0))).collect();
    let seed_ids: Vec<Uuid> = seeds.iter().map(|s| s.0).collect();

    // 3. Expansion: neighborhoods, graph edges, episode-adjacent turns. Each candidate keeps
    //    the most it is lent by any one seed (max, never a sum: ten near-duplicates do not add up).
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
    #[allow(clippy::type_complexity)]
    let rows: Vec<(Uuid, String, String, TimestampWithTimeZone, f64, f64, f64, String, i64, Option<Lexemes>)> = select_prepared(
        &format!(
            "SELECT m.id, m.content, m.type::text, m.created_at, 1 - (m.embedding {op} (SELECT $1::real[]::{vt})), \
                    m.importance::float8, \
                    CASE WHEN isfinite(m.created_at) THEN extract(epoch FROM now() - m.created_at)::float8 / 86400 \
                         ELSE 0 END, {stage}, {LOCAL_SECONDS_SQL}, m.search \
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
                t.get::<i64>(9).ok()??,
                t.get::<Lexemes>(10).ok()?,
            ))
        },
    );
    let mut hits: Vec<Hit> = rows
        .into_iter()
        .map(|(id, content, kind, created_at, vector, importance, age_days, stage, at, search)| {
            let c = &cands[&id];
            let recency = 0.5f64.powf(age_days.max(0.0) / cfg.recency_half_life_days);
            let person = query::person_match(&names, &content, cfg.person_mention);
            let time = query::time_match(&times, at);
            let c = Candidate { person, time, lexical: share(&search), ..c.clone() };
            // What a neighbour is lent counts only beyond its own evidence (in the share
            // `inherit_beyond_own`): a near-duplicate of a seed already has the seed's own
            // relevance, so being its neighbour adds nothing, while an answer next to a
            // strong question is lifted towards it.
            let own = direct(&c, vector);
            let kept = cfg.inherit_beyond_own * meaning(&c, vector).max(0.0);
            let association = (c.association - kept).max(0.0);
            let temporal = (c.temporal - kept).max(0.0);
            let score = own
                + cfg.weight_association * association
                + cfg.weight_temporal * temporal
                + cfg.weight_importance * importance
                + cfg.weight_recency * recency;
            let found_by = match (c.vector_seed, c.lexical_seed) {
                (true, true) => "vector+lexical",
                (true, false) => "vector",
                (false, true) => "lexical",
                (false, false) if c.time_seed => "time",
                (false, false) if association >= temporal => "association",
                (false, false) => "temporal",
            };
            Hit {
                id: Some(id),
                content,
                kind,
                created_at: Some(created_at),
                vector,
                lexical: c.lexical,
                association,
                temporal,
                importance,
                recency,
                person,
                time,
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

/// The words of `m`'s "Name: " label, lowercased: the expression of memories_speaker_words
/// (dionysus_internal.speaker_words in sql/001_schema.sql, which the planner inlines to this),
/// written out so that recall needs no access to dionysus_internal. NULL without a label, or
/// with one query::person_match would not read as a speaker (over 40 characters, sentence
/// punctuation); its words are split on Unicode whitespace, as Rust's split_whitespace.
const SPEAKER_WORDS_SQL: &str = r"CASE WHEN position(': ' IN left(m.content, 64)) > 0 AND char_length(split_part(left(m.content, 64), ': ', 1)) <= 40 AND split_part(left(m.content, 64), ': ', 1) !~ '[.!?,\n]' THEN regexp_split_to_array(lower(split_part(left(m.content, 64), ': ', 1)), '[\s\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+') END";

/// Whether `name` speaks in the store: one of the memories this person may see whose label has
/// it as a word (memories_speaker_words) is labelled with it as query::person_match reads a
/// label (each word capitalised, which the index does not check). An index lookup, so it costs
/// the same however often others mention the name, and a name that is a stop word ("Will")
/// speaks too. A database still on an older version's SQL has no such index: there it looks
/// among the first 200 memories with the word (and a stop word has none).
fn speaks(name: &str, person: Option<&str>) -> bool {
    let names = [name.to_string()];
    let query = if speaker_index() {
        format!(
            "SELECT {LABEL_SQL} FROM dionysus.memories m \
             WHERE ({SPEAKER_WORDS_SQL}) @> ARRAY[lower($1)] AND m.status = 'active' \
               AND ($2::text IS NULL OR m.private_to IS NULL OR m.private_to <@ ARRAY[$2::text]) LIMIT 20"
        )
    } else {
        format!(
            "SELECT {LABEL_SQL} FROM dionysus.memories m \
             WHERE m.search @@ (SELECT string_agg(quote_literal(l), ' & ')::tsquery \
                                FROM unnest(tsvector_to_array(to_tsvector('english', $1))) l) \
               AND strpos(lower(split_part({LABEL_SQL}, ': ', 1)), lower($1)) > 0 \
               AND position(': ' IN {LABEL_SQL}) > 0 AND m.status = 'active' \
               AND ($2::text IS NULL OR m.private_to IS NULL OR m.private_to <@ ARRAY[$2::text]) LIMIT 200"
        )
    };
    select_prepared(&query, &[name.into(), person.into()], |t| t.get::<String>(1).ok()?)
        .iter()
        .any(|label| query::person_match(&names, label, 0.0) == 1.0)
}

thread_local! {
    static SPEAKER_INDEX: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this database's schema has the speaker index (0.14.0 on).
fn speaker_index() -> bool {
    crate::spi_util::has_relation(&SPEAKER_INDEX, "dionysus.memories_speaker_words")
}

/// A memory found by a seed query, with what scoring it needs.
struct Seed {
    id: Uuid,
    sim: f64,
    label: String,
    at: i64,
    search: Option<Lexemes>,
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
/// component (the person and time components say how the question's names and dates were
/// read) and the channel that found each one.
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
        name!(person_score, f64),
        name!(time_score, f64),
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
            h.person,
            h.time,
        )
    }))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// A name is a speaker when a memory the person may see is labelled with it as query.rs
    /// reads a label: found through the label index (the plan says so: with sequential scans
    /// off, an expression the index does not match would still scan), never through someone
    /// else's private turn, nor from a label that is not a name.
    #[pg_test]
    fn a_speaker_is_told_by_the_label_index() {
        for text in ["Mira: I adopted a tortoise", "note to ann: buy milk", "Will: see you at eight", "Mary\u{a0}Jo: hi there"] {
            Spi::run(&format!("SELECT dionysus.remember('{text}')")).unwrap();
        }
        Spi::run("SELECT dionysus.remember('Rome: a secret turn')").unwrap();
        Spi::run("UPDATE dionysus.memories SET private_to = ARRAY['bob'] WHERE content LIKE 'Rome:%'").unwrap();
        assert!(super::speaks("mira", None));
        assert!(super::speaks("will", None), "a stop word that labels a turn speaks");
        assert!(super::speaks("jo", None), "a label's words are split on any whitespace");
        assert!(!super::speaks("ann", None), "a lowercase label is not a name");
        assert!(!super::speaks("tortoise", None), "a word of the text is not a speaker");
        assert!(!super::speaks("rome", Some("alice")), "someone else's private turn tells nothing");
        assert!(super::speaks("rome", Some("bob")));
        Spi::run("SET LOCAL enable_seqscan = off").unwrap();
        let plan = crate::spi_util::select_prepared(
            &format!(
                "EXPLAIN SELECT 1 FROM dionysus.memories m WHERE ({}) @> ARRAY['mira'] AND m.status = 'active'",
                super::SPEAKER_WORDS_SQL
            ),
            &[],
            |t| t.get::<String>(1).ok()?,
        )
        .join("\n");
        assert!(plan.contains("memories_speaker_words"), "{plan}");
    }
}
