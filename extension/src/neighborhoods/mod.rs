//! Memory neighborhoods: each memory's top-20 associations, precomputed so
//! recall can expand through them without walking the graph at query time.
//!
//! Staleness lives in the append-only `neighborhood_queue`. Writers only INSERT into it, so
//! they never wait on each other or on the worker. Recomputing a memory deletes the queue rows
//! it saw; a row queued meanwhile survives and triggers another pass. A memory whose
//! recomputation fails is retried with exponential back-off and never blocks the others.
use crate::errors;
use crate::memory::episodes::TEMPORAL_SPAN;
use crate::spi_util::{cosine_op, in_subtransaction, select_prepared, vector_arg, with_iterative_scan, write_prepared};
use pgrx::prelude::*;
use pgrx::{PgMemoryContexts, Uuid};
use std::collections::HashMap;
use std::time::Instant;

pub const KEEP: usize = 20;
pub const VECTOR_NEIGHBORS: i64 = 10;
pub const VECTOR_THRESHOLD: f64 = 0.75;
pub const TEMPORAL_BONUS: f64 = 0.3;
const MAX_FIRST_HOP: i64 = 50;
const MAX_SECOND_HOP: i64 = 200;
/// Retries of a failing row before it waits an hour between attempts.
const MAX_BACKOFF_SECONDS: i64 = 3600;

/// Queues memories for recomputation.
pub fn enqueue(ids: &[Uuid]) {
    if ids.is_empty() {
        return;
    }
    write_prepared(
        "INSERT INTO dionysus.neighborhood_queue (memory_id) \
         SELECT DISTINCT u FROM unnest($1::uuid[]) u WHERE EXISTS (SELECT 1 FROM dionysus.memories m WHERE m.id = u)",
        &[ids.to_vec().into()],
        |_| Some(()),
    );
}

/// A new memory: its own neighborhood, and those of its nearest existing memories and of the
/// turns just before it in its episode, are stale — old memories learn about new ones.
pub fn on_new_memory(id: Uuid, embedding: &[f32], episode_neighbors: &[Uuid]) {
    write_prepared(
        "INSERT INTO dionysus.memory_neighborhoods (memory_id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[id.into()],
        |_| Some(()),
    );
    let mut ids = vec![id];
    ids.extend(vector_neighbors(id, embedding).into_iter().filter(|(_, s)| *s > VECTOR_THRESHOLD).map(|(n, _)| n));
    ids.extend_from_slice(episode_neighbors);
    enqueue(&ids);
}

/// Memories whose neighborhood contains `id` (they must forget or re-rank it), and `id` itself.
pub fn mark_neighbors_of(id: Uuid) {
    let mut ids: Vec<Uuid> = Spi::connect(|c| {
        c.select(
            "SELECT memory_id FROM dionysus.memory_neighborhoods WHERE neighbor_ids @> ARRAY[$1::uuid]",
            None,
            &[id.into()],
        )
        .expect("neighborhoods containing memory")
        .filter_map(|t| t.get::<Uuid>(1).ok().flatten())
        .collect()
    });
    ids.push(id);
    enqueue(&ids);
}

/// After an edge change: both ends and their direct graph neighbours (whose 2-hop sets changed).
pub fn mark_graph_around(ends: &[Uuid]) {
    let mut ids: Vec<Uuid> = Spi::connect(|c| {
        c.select(
            "SELECT DISTINCT CASE WHEN from_id = ANY($1) THEN to_id ELSE from_id END \
             FROM dionysus.memory_edges WHERE from_id = ANY($1) OR to_id = ANY($1) LIMIT 200",
            None,
            &[ends.to_vec().into()],
        )
        .expect("graph neighbours")
        .filter_map(|t| t.get::<Uuid>(1).ok().flatten())
        .collect()
    });
    ids.extend_from_slice(ends);
    enqueue(&ids);
}

/// The nearest active memories to an embedding (excluding `id`), with cosine similarity.
fn vector_neighbors(id: Uuid, embedding: &[f32]) -> Vec<(Uuid, f64)> {
    with_iterative_scan(40, || {
        select_prepared(
            &format!(
                "SELECT id, 1 - (embedding {op} $1) FROM dionysus.memories \
                 WHERE status = 'active' AND id <> $2 \
                 ORDER BY embedding {op} $1 LIMIT $3",
                op = cosine_op(),
            ),
            &[vector_arg(embedding), id.into(), VECTOR_NEIGHBORS.into()],
            |t| Some((t.get::<Uuid>(1).ok()??, t.get::<f64>(2).ok()??)),
        )
    })
}

/// Computes one memory's neighborhood (graph neighbours, same-episode turns, nearest by meaning) and stores it.
pub fn recompute_one(id: Uuid) {
    let embedding =
        select_prepared("SELECT embedding::real[] FROM dionysus.memories WHERE id = $1", &[id.into()], |t| {
            t.get::<Vec<f32>>(1).ok()?
        })
        .pop();
    let Some(embedding) = embedding else {
        return; // deleted meanwhile: its queue rows went with it
    };
    let mut weights: HashMap<Uuid, f64> = HashMap::new();
    // 1. Graph neighbours within two hops: 1.0 for one hop, 0.5 for two (the design's values), times
    //    the edge weight, which is in [0, 1]: an edge marked weak counts less, none counts more
    //    than the seed's flat value. Past the caps the strongest are kept, ties by id, so the
    //    same graph always gives the same neighbourhood.
    let graph = select_prepared(
        "WITH e1 AS ( \
           SELECT CASE WHEN from_id = $1 THEN to_id ELSE from_id END AS n, max(weight) AS w \
           FROM dionysus.memory_edges WHERE from_id = $1 OR to_id = $1 GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $2), \
         e2 AS ( \
           SELECT CASE WHEN e.from_id = e1.n THEN e.to_id ELSE e.from_id END AS n, max(e.weight * e1.w) AS w \
           FROM dionysus.memory_edges e JOIN e1 ON e.from_id = e1.n OR e.to_id = e1.n \
           WHERE CASE WHEN e.from_id = e1.n THEN e.to_id ELSE e.from_id END <> $1 \
             AND CASE WHEN e.from_id = e1.n THEN e.to_id ELSE e.from_id END NOT IN (SELECT n FROM e1) \
           GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $3) \
         SELECT n, w::float8 FROM e1 \
         UNION ALL \
         SELECT n, 0.5 * w::float8 FROM e2",
        &[id.into(), MAX_FIRST_HOP.into(), MAX_SECOND_HOP.into()],
        |t| Some((t.get::<Uuid>(1).ok()??, t.get::<f64>(2).ok()??)),
    );
    weights.extend(graph);
    // 2. Vector neighbours above 0.75 similarity boost (capped at 1.5).
    for (n, sim) in vector_neighbors(id, &embedding) {
        if sim > VECTOR_THRESHOLD {
            let w = weights.entry(n).or_insert(0.0);
            *w = (*w + sim * 0.5).min(1.5);
        }
    }
    // 3. Temporal neighbours: within three positions in the same episode, +0.3.
    let temporal = select_prepared(
        "SELECT em2.memory_id FROM dionysus.episode_memories em1 \
         JOIN dionysus.episode_memories em2 ON em2.episode_id = em1.episode_id \
         WHERE em1.memory_id = $1 AND em2.memory_id <> $1 \
           AND em2.sequence_order BETWEEN em1.sequence_order - $2 AND em1.sequence_order + $2",
        &[id.into(), TEMPORAL_SPAN.into()],
        |t| t.get::<Uuid>(1).ok()?,
    );
    for n in temporal {
        *weights.entry(n).or_insert(0.0) += TEMPORAL_BONUS;
    }
    // 4. Keep the top 20 (ties broken by id, so the result is deterministic).
    let mut ranked: Vec<(Uuid, f64)> = weights.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    ranked.truncate(KEEP);
    let ids: Vec<Uuid> = ranked.iter().map(|r| r.0).collect();
    let ws: Vec<f32> = ranked.iter().map(|r| r.1 as f32).collect();
    write_prepared(
        "INSERT INTO dionysus.memory_neighborhoods (memory_id, neighbor_ids, neighbor_weights, computed_at) \
         VALUES ($1, $2, $3, now()) \
         ON CONFLICT (memory_id) DO UPDATE SET neighbor_ids = EXCLUDED.neighbor_ids, \
           neighbor_weights = EXCLUDED.neighbor_weights, computed_at = EXCLUDED.computed_at",
        &[id.into(), ids.into(), ws.into()],
        |_| Some(()),
    );
}

/// Outcome of one pass over the queue.
#[derive(Default, Debug)]
pub struct Pass {
    pub done: i64,
    pub failed: i64,
    pub last_error: Option<String>,
}

/// Recomputes up to `batch` due memories, oldest queued first, stopping early at `deadline`.
pub fn process_queue(batch: i64, deadline: Option<Instant>) -> Pass {
    // The oldest due rows, read in queue order through the index (no aggregate over the whole
    // queue); a memory queued several times is computed once.
    // Read beyond the batch: memories another pass holds are skipped, and the rest still fill it.
    let mut due: Vec<Uuid> = select_prepared(
        "SELECT memory_id FROM dionysus.neighborhood_queue WHERE not_before <= now() ORDER BY not_before, seq LIMIT $1",
        &[(batch * 4).into()],
        |t| t.get::<Uuid>(1).ok()?,
    );
    let mut seen = std::collections::HashSet::new();
    due.retain(|id| seen.insert(*id));
    let mut pass = Pass::default();
    // Each row's allocations (arrays, datums) go to a scratch context reset after the row, so
    // a long call (run_maintenance over a large backlog) stays flat in memory.
    let mut scratch = PgMemoryContexts::new("dionysus neighborhood recompute");
    for id in due {
        if deadline.is_some_and(|d| Instant::now() >= d) || pass.done + pass.failed >= batch.max(0) {
            break;
        }
        let outcome = unsafe { scratch.switch_to(|_| recompute_queued(id)) };
        unsafe { scratch.reset() };
        match outcome {
            None => {}
            Some(Ok(())) => pass.done += 1,
            Some(Err(msg)) => {
                pass.failed += 1;
                pass.last_error = Some(format!("neighborhood of {id}: {msg}"));
            }
        }
    }
    pass
}

/// Recomputes one queued memory and settles its queue rows: deleted on success, backed off on
/// failure. None when another session already took care of it.
fn recompute_queued(id: Uuid) -> Option<Result<(), String>> {
    // One pass per memory at a time: a memory another pass is on (the worker, a concurrent
    // run_maintenance() holding its rows to the end of a long call) is skipped, never waited
    // for, so passes that met the same memories in different orders cannot deadlock.
    let mine = select_prepared(
        "SELECT pg_try_advisory_xact_lock(hashtextextended('dionysus.neighborhood:' || $1::text, 0))",
        &[id.into()],
        |t| t.get::<bool>(1).ok()?,
    )
    .pop()
    .unwrap_or(false);
    if !mine {
        return None;
    }
    // Rows queued after this point (seq above the mark) survive and trigger another pass.
    let mark = select_prepared(
        "SELECT max(seq) FROM dionysus.neighborhood_queue WHERE memory_id = $1",
        &[id.into()],
        |t| t.get::<i64>(1).ok()?,
    )
    .pop()?;
    match in_subtransaction(|| recompute_one(id)) {
        Ok(()) => {
            write_prepared(
                "DELETE FROM dionysus.neighborhood_queue WHERE memory_id = $1 AND seq <= $2",
                &[id.into(), mark.into()],
                |_| Some(()),
            );
            Some(Ok(()))
        }
        Err(msg) => {
            Spi::run_with_args(
                "UPDATE dionysus.neighborhood_queue SET attempts = attempts + 1, last_error = $3, \
                   not_before = now() + make_interval(secs => least(power(2, attempts + 1), $4)) \
                 WHERE memory_id = $1 AND seq <= $2",
                &[id.into(), mark.into(), msg.clone().into(), (MAX_BACKOFF_SECONDS as f64).into()],
            )
            .expect("back off");
            Some(Err(msg))
        }
    }
}

/// Neighborhoods one `run_maintenance()` call recomputes at most: every row runs in a
/// subtransaction whose memory, and an advisory lock in the shared lock table, live until the
/// call's transaction ends, so a call is bounded (the worker commits every 50 rows).
pub const MAINTENANCE_CALL_LIMIT: i64 = 1_000;

/// Recomputes up to `batch` (at most 1,000: see MAINTENANCE_CALL_LIMIT) stale neighborhoods
/// now (the worker does this on its own). Returns how many were recomputed.
#[pg_extern(volatile, parallel_unsafe)]
fn recompute_neighborhoods(batch: default!(Option<i32>, 50)) -> i64 {
    let Some(batch) = batch else { errors::null_arg("batch") };
    if !(1..=MAINTENANCE_CALL_LIMIT as i32).contains(&batch) {
        errors::invalid_arg("batch", format!("{batch} is outside [1, {}]", MAINTENANCE_CALL_LIMIT));
    }
    process_queue(batch as i64, None).done
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;
    use pgrx::Uuid;

    fn remember(text: &str, source: &str) -> Uuid {
        Spi::get_one_with_args::<Uuid>("SELECT dionysus.remember($1, 'episodic', source => $2)", &[text.into(), source.into()])
            .unwrap()
            .unwrap()
    }

    fn weights_of(id: Uuid) -> Vec<(Uuid, f32)> {
        Spi::connect(|c| {
            c.select(
                "SELECT n, w FROM dionysus.memory_neighborhoods, unnest(neighbor_ids, neighbor_weights) u(n, w) WHERE memory_id = $1",
                None,
                &[id.into()],
            )
            .unwrap()
            .map(|t| (t.get::<Uuid>(1).unwrap().unwrap(), t.get::<f32>(2).unwrap().unwrap()))
            .collect()
        })
    }

    #[pg_test]
    fn graph_hops_weigh_one_and_a_half() {
        // Unrelated texts in separate sources: no vector boost, no episode bonus.
        let a = remember("Quarterly invoices are printed on Mondays", "s1");
        let b = remember("A heron stood in the frozen river", "s2");
        let c = remember("Violin strings should be changed yearly", "s3");
        Spi::run_with_args("SELECT dionysus.connect($1, $2)", &[a.into(), b.into()]).unwrap();
        Spi::run_with_args("SELECT dionysus.connect($1, $2, 'CAUSES', 0.5)", &[b.into(), c.into()]).unwrap();
        super::recompute_one(a);
        let w = weights_of(a);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().any(|(n, x)| *n == b && (*x - 1.0).abs() < 1e-6), "one hop weighs 1.0: {w:?}");
        assert!(w.iter().any(|(n, x)| *n == c && (*x - 0.25).abs() < 1e-6), "two hops weigh 0.5 × edge weight: {w:?}");
    }

    #[pg_test]
    fn episode_turns_within_three_add_point_three_and_near_duplicates_boost() {
        let ids: Vec<Uuid> = (0..6).map(|i| remember(&format!("turn {i} about {}", ["apples", "trains", "clouds", "poems", "lamps", "boots"][i]), "ep")).collect();
        super::recompute_one(ids[0]);
        let w = weights_of(ids[0]);
        for (n, x) in &w {
            let pos = ids.iter().position(|i| i == n).expect("only episode members");
            assert!((1..=3).contains(&pos), "turn {pos} is more than 3 away: {w:?}");
            assert!(*x >= 0.3 - 1e-6, "{w:?}");
        }
        assert_eq!(w.len(), 3);
        // A near-duplicate (similarity > 0.75) adds sim × 0.5, capped at 1.5.
        let twin = remember("turn 0 about apples!", "elsewhere");
        super::recompute_one(ids[0]);
        let w = weights_of(ids[0]);
        let (_, x) = w.iter().find(|(n, _)| *n == twin).expect("the near-duplicate is a neighbour");
        assert!(*x > 0.375 && *x <= 0.5 + 1e-6, "vector boost is sim × 0.5: {x}");
    }

    #[pg_test]
    fn new_memories_queue_their_nearest_neighbours() {
        let a = remember("The blue kettle whistles loudly every morning", "k1");
        Spi::run("DELETE FROM dionysus.neighborhood_queue").unwrap();
        let b = remember("Every morning the blue kettle whistles loudly", "k2");
        let queued: Vec<Uuid> = Spi::connect(|c| {
            c.select("SELECT DISTINCT memory_id FROM dionysus.neighborhood_queue", None, &[])
                .unwrap()
                .map(|t| t.get::<Uuid>(1).unwrap().unwrap())
                .collect()
        });
        assert!(queued.contains(&a), "the old memory learns about the new one");
        assert!(queued.contains(&b));
    }
}
