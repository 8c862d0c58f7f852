//! Several writers at once, and the maintenance worker doing its job unasked.
use dionysus_tests::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_connections_remember_at_once_without_deadlock_or_loss() {
    let db = TestDb::new("concurrent").await;
    const WRITERS: usize = 6;
    const EACH: usize = 15;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let client = db.connect().await;
        tasks.push(tokio::spawn(async move {
            for i in 0..EACH {
                // Half the writers share one source (one episode), half have their own; all write
                // near-identical text so their neighborhood marks overlap.
                let source = if w % 2 == 0 { "shared".to_string() } else { format!("own{w}") };
                client
                    .execute(
                        "SELECT dionysus.remember($1, 'episodic', source => $2)",
                        &[&format!("writer {w} says hello number {i}"), &source],
                    )
                    .await
                    .map_err(|e| format!("writer {w} turn {i}: {} {}", sqlstate(&e), message(&e)))?;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let c = &db.client;
    assert_eq!(count(c, "memories").await, (WRITERS * EACH) as i64);
    assert_eq!(count(c, "episode_memories").await, (WRITERS * EACH) as i64);
    // The shared source's episode has gap-free, unique sequence numbers.
    let r = c
        .query_one(
            "SELECT count(*), max(sequence_order), count(DISTINCT sequence_order) FROM dionysus.episode_memories em \
             JOIN dionysus.episodes e ON e.id = em.episode_id WHERE e.source = 'shared'",
            &[],
        )
        .await
        .unwrap();
    let n = (WRITERS / 2 * EACH) as i64;
    assert_eq!((r.get::<_, i64>(0), r.get::<_, Option<i32>>(1).map(i64::from), r.get::<_, i64>(2)), (n, Some(n), n));
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.episodes WHERE source = 'shared'", &[]).await.unwrap().get::<_, i64>(0), 1);
}

/// Batches whose items run through several episode sources in opposite orders, written at
/// once: each batch takes all its episode locks up front in one order, so neither holds one
/// the other waits for (before, they deadlocked: 40P01).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_over_many_sources_never_deadlock() {
    let db = TestDb::new("batch_sources").await;
    let mut lanes = Vec::new();
    for lane in 0..2usize {
        let client = db.connect().await;
        lanes.push(tokio::spawn(async move {
            for round in 0..12usize {
                let items: Vec<serde_json::Value> = (0..6usize)
                    .map(|i| {
                        let source = if lane == 0 { i } else { 5 - i };
                        serde_json::json!({"content": format!("lane {lane} round {round} item {i}"), "source": format!("chat{source}")})
                    })
                    .collect();
                client
                    .query("SELECT * FROM dionysus.remember_batch($1)", &[&serde_json::Value::Array(items)])
                    .await
                    .map_err(|e| format!("{} {e}", sqlstate(&e)))?;
            }
            Ok::<(), String>(())
        }));
    }
    for lane in lanes {
        lane.await.unwrap().expect("a batch failed");
    }
    assert_eq!(count(&db.client, "memories").await, 2 * 12 * 6);
}

/// run_maintenance() from two sessions beside the background worker while people write and
/// recall: every pass skips the memories another pass holds, so none waits on another in a
/// cycle (before, two passes that met the same memories in different orders deadlocked, 40P01).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_passes_beside_the_worker_and_writers_never_deadlock() {
    let db = TestDb::new("maintenance_race").await;
    db.client
        .execute(
            "SELECT count(*) FROM dionysus.remember_batch((SELECT jsonb_agg(jsonb_build_object( \
               'content', 'memory ' || g || ' about topic ' || (g % 37) || ' and the garden ' || (g % 11), 'source', 's' || (g % 13))) \
               FROM generate_series(1, 600) g))",
            &[],
        )
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for lane in 0..2usize {
        let maintainer = db.connect().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                maintainer.query_one("SELECT dionysus.run_maintenance()", &[]).await.map_err(|e| format!("maintenance: {} {e}", sqlstate(&e)))?;
            }
            Ok::<(), String>(())
        }));
        let writer = db.connect().await;
        tasks.push(tokio::spawn(async move {
            for round in 0..10usize {
                writer
                    .execute(
                        "SELECT count(*) FROM dionysus.remember_batch((SELECT jsonb_agg(jsonb_build_object( \
                           'content', 'note ' || $1::text || ' ' || g || ' on topic ' || (g % 37) || ' garden ' || (g % 11), 'source', 's' || (g % 13))) \
                           FROM generate_series(1, 40) g))",
                        &[&format!("{lane}-{round}")],
                    )
                    .await
                    .map_err(|e| format!("write: {} {e}", sqlstate(&e)))?;
                writer
                    .query("SELECT * FROM dionysus.recall($1, 10)", &[&format!("garden topic {round}")])
                    .await
                    .map_err(|e| format!("recall: {} {e}", sqlstate(&e)))?;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.unwrap().expect("a pass, a write or a recall failed");
    }
    // Nothing was lost: a last pass leaves no stale neighborhood behind.
    let mut left = serde_json::Value::Null;
    for _ in 0..50 {
        left = db.client.query_one("SELECT dionysus.run_maintenance()", &[]).await.unwrap().get(0);
        if left["neighborhoods_remaining"] == serde_json::json!(0) {
            break;
        }
    }
    assert_eq!(left["neighborhoods_remaining"], serde_json::json!(0), "{left}");
    assert_eq!(count(&db.client, "memories").await, 600 + 2 * 10 * 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_recomputes_stale_neighborhoods_unasked() {
    let db = TestDb::new("worker").await;
    let c = &db.client;
    // Counted before the commit: the worker, running, could drain the queue before a later look.
    c.batch_execute(
        "BEGIN;
         SELECT dionysus.remember('The garden needs watering every evening', 'episodic', source => 'w');
         SELECT dionysus.remember('Tomatoes in the garden are ripening', 'episodic', source => 'w');
         SELECT dionysus.remember('Bought a new watering can', 'episodic', source => 'w');",
    )
    .await
    .unwrap();
    let stale: i64 = c.query_one("SELECT stale_neighborhoods FROM dionysus.memory_health", &[]).await.unwrap().get(0);
    assert!(stale >= 3, "new memories start stale ({stale})");
    c.batch_execute("COMMIT").await.unwrap();
    // Nobody calls recompute_neighborhoods: the preloaded worker must drain the queue.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let r = c
            .query_one("SELECT stale_neighborhoods, last_worker_run IS NOT NULL, last_worker_error FROM dionysus.memory_health", &[])
            .await
            .unwrap();
        if r.get::<_, i64>(0) == 0 && r.get::<_, bool>(1) {
            assert_eq!(r.get::<_, Option<String>>(2), None);
            break;
        }
        assert!(Instant::now() < deadline, "the worker did not drain the stale queue in 90 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let computed: i64 = c
        .query_one("SELECT count(*) FROM dionysus.memory_neighborhoods WHERE computed_at IS NOT NULL AND cardinality(neighbor_ids) > 0", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(computed, 3, "episode neighbours make every neighborhood non-empty");
}

#[tokio::test]
async fn a_row_that_cannot_be_computed_never_blocks_the_queue() {
    let db = TestDb::new("poison").await;
    // The maintenance pass would take the healthy row itself, between the two calls below.
    db.hold_worker_off().await;
    let c = &db.client;
    // A trigger makes one memory's neighborhood impossible to store (the first, empty row is fine).
    c.batch_execute(
        "CREATE FUNCTION public.reject() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF NEW.computed_at IS NOT NULL AND \
              (SELECT content FROM dionysus.memories WHERE id = NEW.memory_id) = 'poisoned memory' THEN \
             RAISE EXCEPTION 'cannot store this one'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER reject BEFORE INSERT OR UPDATE ON dionysus.memory_neighborhoods \
           FOR EACH ROW EXECUTE FUNCTION public.reject();",
    )
    .await
    .unwrap();
    let good: uuid::Uuid = c.query_one("SELECT dionysus.remember('healthy memory')", &[]).await.unwrap().get(0);
    let bad: uuid::Uuid = c.query_one("SELECT dionysus.remember('poisoned memory')", &[]).await.unwrap().get(0);
    c.query_one("SELECT dionysus.recompute_neighborhoods(10)", &[]).await.unwrap();
    let r = c
        .query_one("SELECT count(*) FILTER (WHERE memory_id = $1), count(*) FILTER (WHERE memory_id = $2), max(attempts), max(last_error) \
                    FROM dionysus.neighborhood_queue", &[&good, &bad])
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 0, "the healthy row was computed despite the failing one");
    assert!(r.get::<_, i64>(1) > 0, "the failing row stays queued");
    assert!(r.get::<_, Option<i32>>(2).unwrap_or(0) >= 1, "the failure is counted");
    assert!(r.get::<_, Option<String>>(3).unwrap().contains("cannot store this one"));
    let health = c.query_one("SELECT failing_neighborhoods, neighborhood_error FROM dionysus.memory_health", &[]).await.unwrap();
    assert_eq!(health.get::<_, i64>(0), 1);
    // It waits (back-off) instead of being retried at once.
    let again: i64 = c.query_one("SELECT dionysus.recompute_neighborhoods(10)", &[]).await.unwrap().get(0);
    assert_eq!(again, 0);
}
