//! The cost of working memory and procedures (#13 §2–3), timed inside the server per call:
//! a turn's step of a working memory at its capacity (eight recalled items entering or
//! refreshed, the rest fading, the least relevant leaving), the procedures a turn's meaning
//! calls for among P procedures, and the whole chat_context of the same turns as the baseline
//! in the same run; then recall_all against recall for the same queries.
use dionysus_tests::{p50_p95, TestDb};
use std::time::Instant;

const TOPICS: [&str; 8] = ["exam", "garden", "sister", "job interview", "cat", "marathon", "move to Porto", "cello lessons"];

pub async fn working_memory(n: usize) {
    let procedures = 100;
    let db = TestDb::new(&format!("bench_wm_{n}")).await;
    let c = &db.client;
    println!("Working memory benchmark: {n} of the person's memories, {procedures} procedures, capacity 16 (one backend)");
    let t = Instant::now();
    let topics = TOPICS.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
    c.batch_execute(&format!(
        "SELECT dionysus.remember('The user talked about their ' || (ARRAY[{topics}])[1 + i % 8] || ', note ' || i, 'semantic', 0.5, 0, '{{}}',
                                  'bench', private_to => ARRAY['bench:ada']) FROM generate_series(1, {n}) i;
         SELECT dionysus.store_procedure('Procedure ' || i || ' for the ' || (ARRAY[{topics}])[1 + i % 8],
                                         ARRAY['help with the ' || (ARRAY[{topics}])[1 + i % 8]], ARRAY['ask one question', 'suggest one step'])
           FROM generate_series(1, {procedures}) i;"
    ))
    .await
    .unwrap();
    // Turns of one session, each its own transaction (a turn's time orders the steps).
    for i in 0..300 {
        c.execute(
            "SELECT dionysus.log_message('bench', $1, 'dm:ada', 'ada', $2)",
            &[&format!("t{i}"), &format!("Let me tell you more about my {} today, part {i}", TOPICS[i % 8])],
        )
        .await
        .unwrap();
    }
    c.batch_execute("VACUUM ANALYZE").await.unwrap();
    println!("filled in {:.1} s", t.elapsed().as_secs_f64());

    // Each turn its own transaction, as in the service (a loop in one transaction would walk
    // every earlier version of the rows it rewrites): chat_context whole on odd turns (the
    // baseline, which steps the working memory itself), the step and the procedure match alone
    // on even ones, each timed inside the server around the call.
    c.batch_execute(
        "CREATE FUNCTION pg_temp.context_ms(id uuid) RETURNS float8 LANGUAGE plpgsql AS $$
         DECLARE t timestamptz := clock_timestamp();
         BEGIN
             PERFORM dionysus.chat_context(id, 8, 12);
             RETURN extract(epoch FROM clock_timestamp() - t) * 1000;
         END $$;
         CREATE FUNCTION pg_temp.step_ms(id uuid, OUT step float8, OUT match float8) LANGUAGE plpgsql AS $$
         DECLARE t timestamptz; m dionysus.messages; wm dionysus.working_memories; found_ jsonb;
         BEGIN
             SELECT * INTO m FROM dionysus.messages WHERE messages.id = step_ms.id;
             found_ := (SELECT jsonb_agg(jsonb_build_object('id', x.id, 'score', random() * 1.5))
                          FROM (SELECT memories.id FROM dionysus.memories WHERE source = 'bench' ORDER BY random() LIMIT 8) x);
             t := clock_timestamp();
             PERFORM dionysus_internal.working_memory_turn(m, found_, '{}', true);
             step := extract(epoch FROM clock_timestamp() - t) * 1000;
             SELECT * INTO wm FROM dionysus.working_memories LIMIT 1;
             t := clock_timestamp();
             PERFORM dionysus_internal.match_procedures(m, wm);
             match := extract(epoch FROM clock_timestamp() - t) * 1000;
         END $$;",
    )
    .await
    .unwrap();
    let ids: Vec<uuid::Uuid> =
        c.query("SELECT id FROM dionysus.messages ORDER BY created_at, id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let (mut context, mut step, mut matched) = (Vec::new(), Vec::new(), Vec::new());
    for (k, id) in ids.iter().enumerate() {
        if k % 2 == 0 {
            context.push(c.query_one("SELECT pg_temp.context_ms($1)", &[id]).await.unwrap().get::<_, f64>(0));
        } else {
            let r = c.query_one("SELECT * FROM pg_temp.step_ms($1)", &[id]).await.unwrap();
            step.push(r.get::<_, f64>(0));
            matched.push(r.get::<_, f64>(1));
        }
    }
    let turns = ids.len();
    let (c50, c95) = p50_p95(&mut context);
    let (s50, s95) = p50_p95(&mut step);
    let (m50, m95) = p50_p95(&mut matched);
    let held: i64 = c.query_one("SELECT count(*) FROM dionysus.working_memory_items", &[]).await.unwrap().get(0);
    let evicted: i32 = c.query_one("SELECT evicted FROM dionysus.working_memories LIMIT 1", &[]).await.unwrap().get(0);
    println!("chat_context of a turn (the baseline, with its own step): {c50:.2} / {c95:.2} ms p50/p95");
    println!("  a working-memory step (8 recalled, {held} held at the end, {evicted} evicted over {} turns): {s50:.3} / {s95:.3} ms ({:.1}% of the context at p50)",
             turns, 100.0 * s50 / c50);
    println!("  the procedures a turn calls for, among {procedures}: {m50:.3} / {m95:.3} ms ({:.1}% of the context at p50)", 100.0 * m50 / c50);

    // Unified recall against recall, the same queries (embeddings cached by the first pass).
    let queries: Vec<String> = (0..100).map(|i| format!("what did they say about the {} ({i})", TOPICS[i % 8])).collect();
    for q in &queries {
        c.query("SELECT * FROM dionysus.recall($1, 10, person => 'bench:ada')", &[q]).await.unwrap();
    }
    let (mut plain, mut all) = (Vec::new(), Vec::new());
    let (recall, unified) = (c.prepare("SELECT * FROM dionysus.recall($1, 10, person => 'bench:ada')").await.unwrap(),
                             c.prepare("SELECT * FROM dionysus.recall_all($1, 10, 'bench:ada')").await.unwrap());
    for q in &queries {
        let t = Instant::now();
        c.query(&recall, &[q]).await.unwrap();
        plain.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        c.query(&unified, &[q]).await.unwrap();
        all.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let ratios: Vec<f64> = all.iter().zip(&plain).map(|(a, p)| a / p).collect();
    let mut ratios = ratios;
    let (r50, _) = p50_p95(&mut ratios);
    let (p50, p95) = p50_p95(&mut plain);
    let (a50, a95) = p50_p95(&mut all);
    println!("recall_all (memories, {procedures} procedures, censors, episodes): {a50:.2} / {a95:.2} ms p50/p95; recall alone {p50:.2} / {p95:.2} ms; \
              median per-query ratio {r50:.2}×");
}
