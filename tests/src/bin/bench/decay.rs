//! The cost of decay (#13 §5) at N memories: a pass with nothing due (the rule evaluated over
//! the whole store, which every hourly pass pays), passes that move memories a stage (with and
//! without a new embedding), and the reinforcement of mentions. The store is filled directly
//! (random unit vectors, varied ages, recalls, importance and feeling; half with a summary), as
//! decay reads only those columns; the mentions are real remember() calls.
use dionysus_tests::{p50_p95, TestDb};
use serde_json::Value;
use std::time::Instant;

pub async fn decay(n: usize) {
    let db = TestDb::new(&format!("bench_decay_{n}")).await;
    let c = &db.client;
    println!("Decay benchmark at {n} memories (one backend)");
    let t = Instant::now();
    c.batch_execute(&format!(
        "SELECT dionysus.set_clock('2026-06-01 12:00+00');
         UPDATE dionysus.decay_config SET pass_interval = '100 years', last_pass_at = dionysus.clock_now();
         DROP INDEX dionysus.memories_embedding_hnsw;
         INSERT INTO dionysus.memories (type, content, summary, micro, embedding, importance, valence, created_at, reinforced_at)
         SELECT 'episodic',
                'Memory ' || i || ': ' || repeat('an afternoon by the water with friends, talking about work and plans. ', 4 + i % 3),
                CASE WHEN i % 2 = 0 THEN 'Memory ' || i || ': an afternoon by the water with friends.' END,
                CASE WHEN i % 2 = 0 THEN 'Water, friends.' END,
                (SELECT array_agg(random() - 0.5)::real[] FROM generate_series(1, 384 + 0 * i))::vector,
                random() * 0.8, random() * 2 - 1,
                dionysus.clock_now() - random() * interval '200 days', dionysus.clock_now()
           FROM generate_series(1, {n}) i;
         INSERT INTO dionysus.memory_access (memory_id, access_count)
         SELECT id, (random() * 4)::int FROM dionysus.memories;
         CREATE INDEX memories_embedding_hnsw ON dionysus.memories USING hnsw (embedding vector_cosine_ops);
         TRUNCATE dionysus.decay_mentions;"
    ))
    .await
    .unwrap();
    c.batch_execute("VACUUM ANALYZE dionysus.memories").await.unwrap();
    println!("filled in {:.0} s", t.elapsed().as_secs_f64());
    let pass = || async move {
        let t = Instant::now();
        let v: Value = c.query_one("SELECT dionysus.decay_pass()", &[]).await.unwrap().get(0);
        (t.elapsed().as_secs_f64() * 1000.0, v)
    };

    // 1. Nothing due: every memory fresh (the clock of each started at the fill).
    let mut idle = Vec::new();
    for _ in 0..10 {
        let (ms, v) = pass().await;
        assert_eq!(v["fading"], 0, "{v}");
        idle.push(ms);
    }
    let (i50, i95) = p50_p95(&mut idle);

    // 2. Every memory 20–200 days unmet: passes of decay_config.batch (200) moves each.
    c.batch_execute("UPDATE dionysus.memories SET reinforced_at = created_at").await.unwrap();
    c.batch_execute("VACUUM ANALYZE dionysus.memories").await.unwrap();
    let (mut per_move, mut passes, mut moved, mut asked) = (Vec::new(), Vec::new(), 0i64, 0i64);
    for _ in 0..10 {
        let (ms, v) = pass().await;
        let m = v["fading"].as_i64().unwrap() + v["distant"].as_i64().unwrap() + v["forgotten"].as_i64().unwrap();
        moved += m;
        asked += v["condense_asked"].as_i64().unwrap();
        passes.push(ms);
        if m > 0 {
            per_move.push(ms / m as f64);
        }
    }
    let (p50, p95) = p50_p95(&mut passes);
    let (m50, m95) = p50_p95(&mut per_move);

    // 3. Mentions: 200 new memories repeating old ones, then the pass that compares them.
    c.batch_execute("UPDATE dionysus.decay_config SET enabled = false").await.unwrap();
    for i in 0..200 {
        let words: String = c
            .query_one("SELECT content FROM dionysus.memories ORDER BY id OFFSET $1 LIMIT 1", &[&(i as i64 * 37)])
            .await
            .unwrap()
            .get(0);
        c.query_one("SELECT dionysus.remember($1)", &[&words]).await.unwrap();
    }
    c.batch_execute("UPDATE dionysus.decay_config SET enabled = true, batch = 1").await.unwrap();
    let t = Instant::now();
    let v: Value = c.query_one("SELECT dionysus.decay_pass()", &[]).await.unwrap().get(0);
    let mention_ms = t.elapsed().as_secs_f64() * 1000.0;

    println!("| part                                               | p50     | p95     |");
    println!("|----------------------------------------------------|---------|---------|");
    println!("| a pass with nothing due, ms                        | {i50:7.1} | {i95:7.1} |");
    println!("| a pass moving up to 200 memories a stage, ms       | {p50:7.1} | {p95:7.1} |");
    println!("| per memory moved (pass time / moved), ms           | {m50:7.2} | {m95:7.2} |");
    println!("{moved} memories moved a stage in 10 passes; {asked} condense asks (no summary or micro yet)");
    println!("mentions: 200 new memories compared with the store and {} older ones renewed in {mention_ms:.0} ms ({:.2} ms per new memory)", v["mentions"], mention_ms / 200.0);
}
