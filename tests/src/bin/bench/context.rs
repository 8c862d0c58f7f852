//! Context budgets (#13 §4) at N memories: the tokens a chat_context takes under each task's
//! budget (3K, 6K, 8K, 12K), what it includes at which level and cuts, and its latency; the fit
//! alone against the whole chat_context in the same run; count_tokens per memory. The store is
//! filled directly (each memory its kind's real embedding with a little noise; six in ten
//! memories a sentence, three a paragraph of
//! about 120 tokens, one a story of about 450; half the longer ones with a summary and micro
//! line), all the person's; the turns are real log_message calls with real embeddings, a third
//! asking after what the paragraphs say, a third after what the stories say.
use dionysus_tests::{p50_p95, TestDb};
use serde_json::Value;
use std::time::Instant;

const TOPICS: [&str; 8] = ["exam", "garden", "sister", "job interview", "cat", "marathon", "move to Porto", "cello lessons"];

pub async fn context(n: usize) {
    let db = TestDb::new(&format!("bench_context_{n}")).await;
    let c = &db.client;
    println!("Context budget benchmark at {n} memories (one backend; up to 15 memories and 12 turns a context)");
    let t = Instant::now();
    let topics = TOPICS.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
    c.batch_execute(&format!(
        "DROP INDEX dionysus.memories_embedding_hnsw;
         -- Each kind of memory about each topic has its real meaning, and every memory its
         -- kind's vector with a little noise: recall finds them as it would real ones.
         CREATE TEMP TABLE kinds AS
         SELECT t.topic, k.kind, dionysus.embed(CASE k.kind WHEN 0 THEN 'The user mentioned their ' || t.topic || ' again today.'
                                                          WHEN 1 THEN 'About their ' || t.topic || ': what worried them and what went well.'
                                                          ELSE 'A long day about their ' || t.topic || ': a grey morning, kind strangers, a phone call home.' END) AS v
           FROM unnest(ARRAY[{topics}]) t(topic), generate_series(0, 2) k(kind);
         INSERT INTO dionysus.memories (type, content, summary, micro, embedding, importance, private_to, source, created_at)
         SELECT 'episodic',
                CASE WHEN i % 10 < 6 THEN 'The user mentioned their ' || topic || ' again today (note ' || i || ').'
                     WHEN i % 10 < 9 THEN 'About their ' || topic || ' (note ' || i || '): ' || repeat('they talked it through at length, what worried them, what went well, and what they want to try next week. ', 4)
                     ELSE 'A long story about their ' || topic || ' (note ' || i || '): ' || repeat('it began on a grey morning, went through a long afternoon of small setbacks and kind strangers, and ended late with a phone call home. ', 12)
                END,
                CASE WHEN i % 10 >= 6 AND (i / 10) % 2 = 0 THEN 'They went over their ' || topic || ': worries, what went well, and next steps.' END,
                CASE WHEN i % 10 >= 6 AND (i / 10) % 2 = 0 THEN 'Their ' || topic || ', talked through.' END,
                (SELECT k.v FROM kinds k WHERE k.topic = x.topic AND k.kind = CASE WHEN i % 10 < 6 THEN 0 WHEN i % 10 < 9 THEN 1 ELSE 2 END)
                  + (SELECT array_agg((random() - 0.5) * 0.04)::real[] FROM generate_series(1, 384 + 0 * i))::vector,
                random() * 0.8, ARRAY['bench:ada'], 'bench', now() - random() * interval '60 days'
           FROM (SELECT i, (ARRAY[{topics}])[1 + i % 8] AS topic FROM generate_series(1, {n}) i) x;
         CREATE INDEX memories_embedding_hnsw ON dionysus.memories USING hnsw (embedding vector_cosine_ops);
         SELECT dionysus.refresh_lexicon();"
    ))
    .await
    .unwrap();
    // Turns of one conversation, each its own transaction.
    for i in 0..48 {
        c.execute(
            "SELECT dionysus.log_message('bench', $1, 'dm:ada', 'ada', $2)",
            &[&format!("t{i}"), &match i % 3 {
                0 => format!("What worried me about my {}, and what went well? ({i})", TOPICS[i % 8]),
                1 => format!("Remind me of that grey morning with the kind strangers and the phone call home, with my {} ({i})", TOPICS[i % 8]),
                _ => format!("Anything new about my {}? ({i})", TOPICS[i % 8]),
            }],
        )
        .await
        .unwrap();
    }
    c.batch_execute("VACUUM ANALYZE").await.unwrap();
    println!("filled in {:.0} s", t.elapsed().as_secs_f64());

    c.batch_execute(
        "CREATE FUNCTION pg_temp.timed(id uuid, budget integer, OUT ms float8, OUT ctx jsonb) LANGUAGE plpgsql AS $$
         DECLARE t timestamptz := clock_timestamp();
         BEGIN
             ctx := dionysus.chat_context(id, 15, 12, false, budget);
             ms := extract(epoch FROM clock_timestamp() - t) * 1000;
         END $$;
         CREATE FUNCTION pg_temp.count_ms(content text) RETURNS float8 LANGUAGE plpgsql AS $$
         DECLARE t timestamptz := clock_timestamp();
         BEGIN
             PERFORM dionysus.count_tokens(content);
             RETURN extract(epoch FROM clock_timestamp() - t) * 1000;
         END $$;",
    )
    .await
    .unwrap();
    let ids: Vec<uuid::Uuid> =
        c.query("SELECT id FROM dionysus.messages ORDER BY created_at, id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    // Warm the backend (model, tokenizer) once.
    c.query_one("SELECT pg_temp.timed($1, 3000)", &[&ids[0]]).await.unwrap();
    println!(
        "{:>7} | {:>22} | {:>9} | {:>28} | {:>6} | {:>17}",
        "budget", "tokens used p50 / p95", "memories", "levels (full/summary/micro/clipped)", "cut", "latency p50 / p95"
    );
    let mut unfitted: Vec<Value> = Vec::new();
    let mut whole_12k = Vec::new();
    for budget in [3000, 6000, 8000, 12000, 200000] {
        let (mut used, mut ms, mut included, mut cut) = (Vec::new(), Vec::new(), Vec::new(), 0u64);
        let mut levels = [0u64; 4];
        for id in &ids[8..] {
            let r = c.query_one("SELECT * FROM pg_temp.timed($1, $2)", &[id, &budget]).await.unwrap();
            ms.push(r.get::<_, f64>(0));
            let ctx: Value = r.get(1);
            let b = &ctx["context_budget"];
            used.push(b["used"].as_f64().unwrap());
            let mems = &b["sections"]["memories"];
            included.push(mems["included"].as_f64().unwrap_or(0.0));
            for (k, name) in ["full", "summary", "micro", "clipped"].iter().enumerate() {
                levels[k] += mems["levels"][*name].as_u64().unwrap_or(0);
            }
            cut += b["sections"].as_object().unwrap().values().map(|s| s["cut"].as_u64().unwrap_or(0)).sum::<u64>();
            if budget == 200000 {
                unfitted.push(ctx);
            }
        }
        if budget == 12000 {
            whole_12k = ms.clone();
        }
        let (u50, u95) = p50_p95(&mut used);
        let (m50, m95) = p50_p95(&mut ms);
        let (i50, _) = p50_p95(&mut included);
        println!(
            "{:>7} | {:>10.0} / {:>9.0} | {:>9.0} | {:>28} | {:>6} | {:>6.2} / {:>6.2} ms",
            if budget == 200000 { "none".to_string() } else { budget.to_string() },
            u50, u95, i50, format!("{}/{}/{}/{}", levels[0], levels[1], levels[2], levels[3]), cut, m50, m95
        );
    }
    // The fit alone, on contexts with everything in full (the unbounded run's), into 3K: in a
    // new backend (its token counts not yet kept, the contexts in their order, as a
    // conversation comes) and again in the same one (every count kept).
    let fresh = db.connect().await;
    fresh.batch_execute(
        "SELECT dionysus.count_tokens('the tokenizer, loaded'); \
         CREATE FUNCTION pg_temp.fit_ms(ctx jsonb, budget integer) RETURNS float8 LANGUAGE plpgsql AS $$ \
         DECLARE t timestamptz := clock_timestamp(); \
         BEGIN PERFORM dionysus_internal.fit_context(ctx, budget, NULL, 'chat'); RETURN extract(epoch FROM clock_timestamp() - t) * 1000; END $$;",
    )
    .await
    .unwrap();
    for pass in ["new backend", "counts kept"] {
        let (mut fit, mut ratio) = (Vec::new(), Vec::new());
        for (ctx, whole) in unfitted.iter().zip(&whole_12k) {
            let ms: f64 = fresh.query_one("SELECT pg_temp.fit_ms($1, 3000)", &[ctx]).await.unwrap().get(0);
            fit.push(ms);
            ratio.push(ms / whole);
        }
        let (f50, f95) = p50_p95(&mut fit);
        let (r50, _) = p50_p95(&mut ratio);
        println!("the fit alone (into 3K, from a whole context; {pass}): {f50:.2} / {f95:.2} ms p50/p95, median {:.0} % of a 12K chat_context", r50 * 100.0);
    }
    // count_tokens per memory, short and long alike (each text new to the backend).
    let mut per = Vec::new();
    for r in c.query("SELECT content FROM dionysus.memories WHERE source = 'bench' ORDER BY random() LIMIT 2000", &[]).await.unwrap() {
        let content: String = r.get(0);
        per.push(c.query_one("SELECT pg_temp.count_ms($1)", &[&content]).await.unwrap().get::<_, f64>(0));
    }
    let (p50, p95) = p50_p95(&mut per);
    println!("count_tokens per memory (2000 of them, 15 to 450 tokens): {p50:.3} / {p95:.3} ms p50/p95");
}
