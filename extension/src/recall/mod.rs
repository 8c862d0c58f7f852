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
//!    temporal, importance, recency — weighted by `dionysus.recall_config`. A memory of several
//!    sentences has its vector score raised towards its closest sentence's (sql/029_sentences.sql).
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
use crate::spi_util::{cosine_op, select_prepared, vector_arg, with_iterative_scan, with_settings, write_prepared};
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
    pub sentence_share: f64,
}

impl Config {
    pub fn load() -> Config {
        let map: HashMap<String, f64> =
            select_prepared("SELECT key, value FROM dionysus.recall_config", &[], |t| {
                Some((t.get::<String>(1).ok()??, t.get::<f64>(2).ok()??))
            })
            .into_iter()
            .collect();
        // The table is the one home of every value (its rows ship with the extension): a key
        // missing from it is an error naming it, never a default written here a second time.
        let get = |k: &str| {
            map.get(k).copied().unwrap_or_else(|| {
                errors::raise(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("dionysus: recall_config has no key \"{k}\""), None)
            })
        };
        Config {
            weight_vector: get("weight_vector"),
            weight_lexical: get("weight_lexical"),
            weight_association: get("weight_association"),
            weight_temporal: get("weight_temporal"),
            weight_importance: get("weight_importance"),
            weight_recency: get("weight_recency"),
            recency_half_life_days: get("recency_half_life_days").max(1e-6),
            seed_multiplier: get("seed_multiplier"),
            min_seeds: get("min_seeds"),
            expand_seeds: get("expand_seeds"),
            temporal_window: get("temporal_window"),
            temporal_decay: get("temporal_decay"),
            bm25_k1: get("bm25_k1"),
            bm25_b: get("bm25_b"),
            lexical_max_df: get("lexical_max_df"),
            lexical_candidates: get("lexical_candidates"),
            inherit_beyond_own: get("inherit_beyond_own").clamp(0.0, 1.0),
            weight_person: get("weight_person"),
            person_mention: get("person_mention").clamp(0.0, 1.0),
            weight_time: get("weight_time"),
            lexical_corroboration: get("lexical_corroboration"),
            sentence_share: get("sentence_share").clamp(0.0, 1.0),
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

/// How recall came by a memory: the seed queries that found it, what its neighbours lend it.
#[derive(Default, Clone)]
struct Candidate {
    vector_seed: bool,
    /// Found among the memories made when the question asks about.
    time_seed: bool,
    /// Found by the query's words (lexical::search).
    lexical_seed: bool,
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
    // $1 the query vector (as pgvector's vector: spi_util::vector_arg), $2..$7 the filters.
    let base_args = || {
        let mut a: Vec<pgrx::datum::DatumWithOid<'static>> = vec![vector_arg(&qv)];
        a.extend(filters.args());
        a
    };
    // The query's words, weighted by how rare they are: every candidate is scored by them.
    let scorer = lexical::Scorer::new(query, cfg);
    // Every memory recall considers is read once, with what its score needs, by whichever query
    // finds it first (a seed query, the read of the word matches no seed query found, or the
    // expansion's read of neighbours); the rest of what recall returns (text, type, stage) only
    // for the k it returns. Its text is
    // read for its label only when the question names someone, its local time only when the
    // question asks about a time.
    let columns = format!(
        "m.id, {content}, m.created_at, 1 - (m.embedding {op} $1) AS sim, m.importance::float8, \
         {local}, m.search, {sentences}",
        // (The whole text only where a name anywhere in it counts: person_mention.)
        content = match (names.is_empty(), cfg.person_mention > 0.0) {
            (true, _) => "NULL::text",
            (false, false) => LABEL_SQL,
            (false, true) => "m.content",
        },
        local = if times.is_empty() { "0::int8" } else { LOCAL_SECONDS_SQL },
        // (NULL: written before 0.16.0, looked up.)
        sentences = "coalesce(m.sentence_count, 2)::int4",
        op = cosine_op(),
    );
    let read = |t: pgrx::spi::SpiHeapTupleData| {
        let search = t.get::<Lexemes>(7).ok()?;
        Some(Row {
            id: t.get::<Uuid>(1).ok()??,
            person: t.get::<String>(2).ok()?.map_or(0.0, |content| query::person_match(&names, &content, cfg.person_mention)),
            created_at: t.get::<TimestampWithTimeZone>(3).ok()??,
            sim: t.get::<f64>(4).ok()??,
            importance: t.get::<f64>(5).ok()??,
            time: query::time_match(&times, t.get::<i64>(6).ok()??),
            lexical: match (&scorer, &search) {
                (Some(scorer), Some(search)) => scorer.share(search),
                _ => 0.0,
            },
            sentences: t.get::<i32>(8).ok()??,
        })
    };
    // The memories among `ids` that pass the filters.
    let read_ids = |ids: Vec<Uuid>| {
        if ids.is_empty() {
            return Vec::new();
        }
        let mut args = base_args();
        args.push(ids.into());
        select_prepared(&format!("SELECT {columns} FROM dionysus.memories m WHERE m.id = ANY($8) AND {FILTER_SQL}"), &args, read)
    };
    let mut cands: HashMap<Uuid, Candidate> = HashMap::new();
    let mut rows: HashMap<Uuid, Row> = HashMap::new();
    let note = |rows_found: Vec<Row>, cands: &mut HashMap<Uuid, Candidate>, rows: &mut HashMap<Uuid, Row>, by: Found| {
        for row in rows_found {
            let c = cands.entry(row.id).or_default();
            match by {
                Found::Vector => c.vector_seed = true,
                Found::Time => c.time_seed = true,
                Found::Words => c.lexical_seed = true,
            }
            rows.entry(row.id).or_insert(row);
        }
    };

    // 1a. Vector seeds.
    let vector_seeds = with_iterative_scan((n_seeds as i32).max(40), || {
        let mut args = base_args();
        args.push(n_seeds.into());
        select_prepared(
            &format!(
                "SELECT {columns} FROM dionysus.memories m WHERE {FILTER_SQL} ORDER BY m.embedding {op} $1 LIMIT $8",
                op = cosine_op(),
            ),
            &args,
            read,
        )
    });
    note(vector_seeds, &mut cands, &mut rows, Found::Vector);
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
        let found = select_prepared(
            &format!(
                // Each span on its own through the created_at index, by exact distance within
                // it: never the HNSW index, whose nearest few of the whole store would mostly
                // fall outside the span. (A memory in two overlapping spans comes twice; noted once.)
                // The best of all spans together are kept, as many as from any other index.
                "SELECT x.* FROM unnest($9::int8[], $10::int8[]) AS r(f, t) \
                 CROSS JOIN LATERAL ( \
                   SELECT {columns} FROM dionysus.memories m \
                   WHERE m.created_at >= (to_timestamp(r.f) AT TIME ZONE 'UTC') AT TIME ZONE current_setting('TimeZone') \
                     AND m.created_at < (to_timestamp(r.t) AT TIME ZONE 'UTC') AT TIME ZONE current_setting('TimeZone') \
                     AND {FILTER_SQL} \
                   ORDER BY sim DESC, m.id LIMIT $8) x \
                 ORDER BY x.sim DESC, x.id LIMIT $8"
            ),
            &args,
            read,
        );
        note(found, &mut cands, &mut rows, Found::Time);
    }
    // 1c. Lexical seeds: the memories the query's rarer words find, by BM25 as the share of the
    //     query's information matched (read again only if no other seed query found them).
    if let Some(scorer) = &scorer {
        let found = lexical::search(scorer, n_seeds, filters, cfg);
        for (id, _) in &found {
            cands.entry(*id).or_default().lexical_seed = true;
        }
        let unread = found.iter().map(|f| f.0).filter(|id| !rows.contains_key(id)).collect();
        note(read_ids(unread), &mut cands, &mut rows, Found::Words);
    }
    // A lexical seed the filters hid between the two reads (a concurrent change) is no candidate.
    cands.retain(|id, _| rows.contains_key(id));
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
    let lexical = |r: &Row| {
        let corroborated = if cfg.lexical_corroboration > 0.0 { (r.sim / cfg.lexical_corroboration).clamp(0.0, 1.0) } else { 1.0 };
        cfg.weight_lexical * r.lexical * corroborated
    };
    let direct = |r: &Row| cfg.weight_vector * r.sim + lexical(r) + cfg.weight_person * r.person + cfg.weight_time * r.time;
    //    A seed lends only its meaning's part (vector and words): that it is by the person or
    //    from the day asked about is true of it, not of the turns around it.
    let meaning = |r: &Row| cfg.weight_vector * r.sim + lexical(r);
    let mut seeds: Vec<(Uuid, f64)> = rows.values().map(|r| (r.id, direct(r))).collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    seeds.truncate(cfg.expand_seeds.max(0.0) as usize);

    // 3. Expansion: neighborhoods, graph edges, episode-adjacent turns. Each candidate keeps
    //    the most it is lent by any one seed (max, never a sum: ten near-duplicates do not add
    //    up).
    let window = cfg.temporal_window.clamp(0.0, 100.0) as usize;
    let lent: Vec<(Uuid, f64, f64)> = select_prepared(
        &format!("{EXPANSION_SQL} SELECT n, association, temporal FROM lent"),
        &[
            seeds.iter().map(|s| s.0).collect::<Vec<Uuid>>().into(),
            seeds.iter().map(|s| meaning(&rows[&s.0]).max(0.0)).collect::<Vec<f64>>().into(),
            (window as i32).into(),
            // What a turn `d` positions away is lent, d = 1..window: decay^(d-1), computed here
            // (SQL's power() raises an error where the result underflows).
            (0..window).map(|d| cfg.temporal_decay.powi(d as i32)).map(|v| if v.abs() < 1e-12 { 0.0 } else { v }).collect::<Vec<f64>>().into(),
        ],
        |t| Some((t.get::<Uuid>(1).ok()??, t.get::<f64>(2).ok()??, t.get::<f64>(3).ok()??)),
    );
    //    A neighbour no seed query found has little evidence of its own: its meaning is below
    //    the vector seeds', its rare words matched nothing. What it is lent is mostly what can
    //    lift it, so of those that pass the filters no more are read than the answer holds (k,
    //    and at least MIN_EXPANSION_READS), the most lent first, taken in that order
    //    (first_found: a memory the filters hide takes no one's place). A bound, not a proof:
    //    one lent a little less but with more of its own (importance, recency, the person or
    //    time asked about) can be left out. At 100k memories the ten seeds have about a hundred
    //    such neighbours, and reading them all was a third of recall's search part.
    let lend = |association: f64, temporal: f64| cfg.weight_association * association + cfg.weight_temporal * temporal;
    let mut unread: Vec<(Uuid, f64)> =
        lent.iter().filter(|l| !rows.contains_key(&l.0)).map(|&(id, association, temporal)| (id, lend(association, temporal))).collect();
    unread.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    let unread: Vec<Uuid> = unread.into_iter().map(|u| u.0).collect();
    for (id, row) in first_found(&unread, k.max(MIN_EXPANSION_READS), |ids| read_ids(ids).into_iter().map(|r| (r.id, r)).collect()) {
        cands.entry(id).or_default();
        rows.insert(id, row);
    }
    for (id, association, temporal) in lent {
        if rows.contains_key(&id) {
            let c = cands.entry(id).or_default();
            (c.association, c.temporal) = (association, temporal);
        }
    }

    let several: std::collections::HashSet<Uuid> = rows.values().filter(|r| r.sentences >= 2).map(|r| r.id).collect();
    // Recency against the transaction's start, as now() (an infinite time: as old as now).
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    let mut hits: Vec<Hit> = rows
        .into_values()
        .map(|r| {
            let c = &cands[&r.id];
            let age_days = match pg_sys::TimestampTz::from(r.created_at) {
                i64::MIN | i64::MAX => 0.0,
                at => (now - at) as f64 / 86_400e6,
            };
            let recency = 0.5f64.powf(age_days.max(0.0) / cfg.recency_half_life_days);
            // What a neighbour is lent counts only beyond its own evidence (in the share
            // `inherit_beyond_own`): a near-duplicate of a seed already has the seed's own
            // relevance, so being its neighbour adds nothing, while an answer next to a
            // strong question is lifted towards it.
            let own = direct(&r);
            let kept = cfg.inherit_beyond_own * meaning(&r).max(0.0);
            let association = (c.association - kept).max(0.0);
            let temporal = (c.temporal - kept).max(0.0);
            let score = own
                + cfg.weight_association * association
                + cfg.weight_temporal * temporal
                + cfg.weight_importance * r.importance
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
                id: Some(r.id),
                created_at: Some(r.created_at),
                vector: r.sim,
                lexical: r.lexical,
                association,
                temporal,
                importance: r.importance,
                recency,
                person: r.person,
                time: r.time,
                score,
                found_by: found_by.to_string(),
                ..Hit::default()
            }
        })
        .collect();
    // 4. A memory of several sentences: its vector score raised towards its closest sentence's
    //    (by sentence_share). Only the score: what it lent and how its words are corroborated
    //    stay with the whole text's meaning. The raise can only lift scores, and is at most
    //    weight_vector × share × (1 − cosine); so the k + 5th best score so far is a floor, and
    //    a candidate that could not reach it even so is not looked up (five to spare, for
    //    those the final read may find gone; should more than five go at once, the ones taken
    //    in their place are ranked by scores that may lack their raise).
    if cfg.sentence_share > 0.0 && !several.is_empty() {
        let mut scores: Vec<f64> = hits.iter().map(|h| h.score).collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        let floor = scores.get(k + 4).copied().unwrap_or(f64::NEG_INFINITY);
        let most = |h: &Hit| cfg.weight_vector * cfg.sentence_share * (1.0 - h.vector).max(0.0);
        let ids = hits.iter().map(|h| (h.id.unwrap(), h)).filter(|(id, h)| several.contains(id) && h.score + most(h) >= floor);
        let best: HashMap<Uuid, f64> = crate::sentences::closest(&qv, ids.map(|(id, _)| id).collect()).into_iter().collect();
        for h in &mut hits {
            if let Some(&best) = best.get(&h.id.unwrap()).filter(|b| **b > h.vector) {
                let raised = h.vector + cfg.sentence_share * (best - h.vector);
                h.score += cfg.weight_vector * (raised - h.vector);
                h.vector = raised;
            }
        }
    }
    hits.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then_with(|| a.id.unwrap().as_bytes().cmp(b.id.unwrap().as_bytes()))
    });
    // What the k returned are: their text, type and stage, read with the filters again. One that
    // a transaction committed meanwhile deleted, archived or made private is gone from the
    // answer, and the next in rank takes its place (first_found).
    let ranked: Vec<Uuid> = hits.iter().filter_map(|h| h.id).collect();
    let mut told: HashMap<Uuid, (String, String, String)> = first_found(&ranked, k, |ids| {
        let mut args = base_args();
        args.push(ids.into());
        select_prepared(
            &format!("SELECT m.id, m.content, m.type::text, m.stage::text FROM dionysus.memories m WHERE m.id = ANY($8) AND {FILTER_SQL}"),
            &args,
            |t| Some((t.get::<Uuid>(1).ok()??, (t.get::<String>(2).ok()??, t.get::<String>(3).ok()??, t.get::<String>(4).ok()??))),
        )
        .into_iter()
        .collect()
    })
    .into_iter()
    .collect();
    hits.retain_mut(|h| match told.remove(&h.id.unwrap()) {
        Some((content, kind, stage)) => {
            (h.content, h.kind, h.stage) = (content, kind, stage);
            true
        }
        None => false,
    });
    hits.truncate(k);
    hits
}

/// The first `want` of `ranked` (best first) that `read` returns: one it leaves out (hidden by
/// the filters, or gone since it was ranked) is skipped, and takes no one's place. Read in
/// rounds, each taking the next `missing × 2^r` of the list (round r from 0, the doubling
/// capped at 2^20), so usually there is one.
fn first_found<T>(ranked: &[Uuid], want: usize, mut read: impl FnMut(Vec<Uuid>) -> HashMap<Uuid, T>) -> Vec<(Uuid, T)> {
    let mut found = Vec::with_capacity(want.min(ranked.len()));
    let (mut at, mut round) = (0, 0);
    while found.len() < want && at < ranked.len() {
        let width = (want - found.len()).saturating_mul(1 << round.min(20));
        let ids = &ranked[at..at.saturating_add(width).min(ranked.len())];
        let mut read = read(ids.to_vec());
        for id in ids {
            if found.len() == want {
                break;
            }
            if let Some(v) = read.remove(id) {
                found.push((*id, v));
            }
        }
        at += ids.len();
        round += 1;
    }
    found
}

/// The fewest neighbours not yet met that the expansion reads (the default answer's size), so
/// that a short answer's first places are a longer one's up to ten.
const MIN_EXPANSION_READS: usize = 10;

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
/// speaks too.
fn speaks(name: &str, person: Option<&str>) -> bool {
    let names = [name.to_string()];
    let query = format!(
        "SELECT {LABEL_SQL} FROM dionysus.memories m \
         WHERE ({SPEAKER_WORDS_SQL}) @> ARRAY[lower($1)] AND m.status = 'active' \
           AND ($2::text IS NULL OR m.private_to IS NULL OR m.private_to <@ ARRAY[$2::text]) LIMIT 20"
    );
    select_prepared(&query, &[name.into(), person.into()], |t| t.get::<String>(1).ok()?)
        .iter()
        .any(|label| query::person_match(&names, label, 0.0) == 1.0)
}

/// A memory recall considers, read once, with what its score needs (its words, people and
/// times already matched against the query's).
struct Row {
    id: Uuid,
    created_at: TimestampWithTimeZone,
    /// Cosine similarity to the query.
    sim: f64,
    importance: f64,
    /// The share of the query's information its words match (lexical::Scorer).
    lexical: f64,
    /// By or about a person the query names (query::person_match).
    person: f64,
    /// Fit to the times the query names (query::time_match).
    time: f64,
    /// How many sentences it has (memories.sentence_count: 1 none of its own; 2 when unknown).
    sentences: i32,
}

/// Which seed query found a memory.
#[derive(Clone, Copy)]
enum Found {
    Vector,
    Time,
    Words,
}

/// What the strongest seeds lend the memories one hop from them, as `lent(n, association,
/// temporal)`: through their precomputed neighborhoods and their graph edges (either way;
/// edges added since the last recompute count at once), a share of the seed's strength by the
/// link's weight, and to the turns within `temporal_window` positions in the same episode, the
/// strength decayed by `temporal_decay` a step; of all the seeds, the most. Parameters: $1 the
/// seeds, $2 their strengths, $3 the window, $4 the share lent at each distance. An edge
/// between two seeds lends both ways (until 0.15.0 only to its `to_id`).
const EXPANSION_SQL: &str = "WITH s AS (SELECT * FROM unnest($1::uuid[], $2::float8[]) AS s(seed, strength)), \
    links AS ( \
      SELECT u.n, u.strength * least(greatest(u.w / 1.5, 0), 1) AS association, 0::float8 AS temporal \
        FROM (SELECT s.strength, unnest(nb.neighbor_ids) AS n, unnest(nb.neighbor_weights) AS w \
                FROM s JOIN dionysus.memory_neighborhoods nb ON nb.memory_id = s.seed) u \
       WHERE u.n IS NOT NULL AND u.w IS NOT NULL \
      UNION ALL \
      SELECT CASE WHEN e.from_id = s.seed THEN e.to_id ELSE e.from_id END, s.strength * least(greatest(e.weight / 1.5, 0), 1), 0 \
        FROM s JOIN dionysus.memory_edges e ON e.from_id = s.seed OR e.to_id = s.seed \
      UNION ALL \
      SELECT b.memory_id, 0, s.strength * ($4::float8[])[abs(a.sequence_order - b.sequence_order)] \
        FROM s JOIN dionysus.episode_memories a ON a.memory_id = s.seed \
        JOIN dionysus.episode_memories b ON b.episode_id = a.episode_id \
         AND b.sequence_order BETWEEN a.sequence_order - $3 AND a.sequence_order + $3 AND b.memory_id <> a.memory_id \
       WHERE $3 > 0), \
    lent AS (SELECT n, max(association)::float8 AS association, max(temporal)::float8 AS temporal FROM links GROUP BY n)";

/// Records that memories were recalled (folded into memory_access by the worker).
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

    /// A memory written goes straight into the indexes recall searches: nothing waits in a
    /// pending list that every search would read through (fastupdate off).
    #[pg_test]
    fn the_indexes_recall_searches_keep_no_pending_list() {
        for i in 0..20 {
            Spi::run(&format!("SELECT dionysus.remember('Ann: the heron came back to the pond, day {i}')")).unwrap();
        }
        let pending = Spi::get_one::<i64>(
            "SELECT gin_clean_pending_list('dionysus.memories_search_gin') + gin_clean_pending_list('dionysus.memories_speaker_words')",
        )
        .unwrap();
        assert_eq!(pending, Some(0));
    }

    /// first_found takes the first `want` that the read returns, in rank order, whatever it
    /// skips: read in rounds as wide as the number still missing, doubling, each id once.
    #[pg_test]
    fn the_first_found_are_taken_in_rank_order_in_doubling_rounds() {
        use pgrx::Uuid;
        use std::collections::HashMap;
        let ranked: Vec<Uuid> = (0..40u8).map(|i| Uuid::from_bytes([i; 16])).collect();
        let run = |want: usize, hidden: &dyn Fn(usize) -> bool| {
            let mut rounds: Vec<usize> = Vec::new();
            let mut asked: Vec<Uuid> = Vec::new();
            let found = super::first_found(&ranked, want, |ids| {
                rounds.push(ids.len());
                asked.extend(&ids);
                ids.into_iter().filter(|id| !hidden(id.as_bytes()[0] as usize)).map(|id| (id, id.as_bytes()[0] as usize)).collect::<HashMap<_, _>>()
            });
            (found.into_iter().map(|(_, rank)| rank).collect::<Vec<usize>>(), rounds, asked)
        };
        // Nothing hidden: one round of exactly `want`.
        let (found, rounds, _) = run(5, &|_| false);
        assert_eq!((found, rounds), ((0..5).collect(), vec![5]));
        // The first twelve hidden: 3 missing after each round until found, in rank order.
        let (found, rounds, asked) = run(3, &|r| r < 12);
        assert_eq!(found, vec![12, 13, 14]);
        assert_eq!(rounds, vec![3, 6, 12], "three, then twice as many each round");
        assert_eq!(asked.len(), asked.iter().collect::<std::collections::HashSet<_>>().len(), "no id read twice");
        // A round that finds more than are missing keeps the best ranked of them.
        let (found, rounds, _) = run(2, &|r| r == 0);
        assert_eq!((found, rounds), (vec![1, 2], vec![2, 2]));
        // Fewer than wanted: all there are, and the list is read to its end once.
        let (found, rounds, _) = run(10, &|r| r % 10 != 3);
        assert_eq!(found, vec![3, 13, 23, 33]);
        assert_eq!(rounds.iter().sum::<usize>(), 40);
        // Nothing wanted, nothing read.
        let (found, rounds, _) = run(0, &|_| false);
        assert!(found.is_empty() && rounds.is_empty());
    }
}
