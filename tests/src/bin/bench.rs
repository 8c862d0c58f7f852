//! `dionysus-bench`: figures, not assertions. Run through `scripts/bench.sh`.
//!
//!   dionysus-bench locomo PATH            retrieval quality on LoCoMo (recall@1/5/10/20)
//!   dionysus-bench recall N [QUERIES]     recall latency at N memories vs bare pgvector kNN,
//!                                         remember and neighborhood throughput, and the
//!                                         heartbeat cycle with 1,000 goals
//!   dionysus-bench reindex N              a re-index of N memories with the same model: vectors
//!                                         per second, the swap, recall before and during it
//!   dionysus-bench model [URL MODEL [KEY]] a model against a fixed conversation set: extraction
//!                                         precision/recall, invented facts, replies, per-task
//!                                         latency, unusable answers, tokens (no URL: scripted)
//!   dionysus-bench driver N [MESSAGES]    the driver's time per message apart from the LLM
//!                                         (scripted, instant), and its resident memory
use dionysus_tests::{connect, p50_p95, TestDb};
use serde_json::Value;
use std::time::Instant;
use tokio_postgres::Client;
use uuid::Uuid;

#[path = "bench/decay.rs"]
mod decay;
#[path = "bench/embed.rs"]
mod embed;
#[path = "bench/fortnight.rs"]
mod fortnight;
#[path = "bench/leave.rs"]
mod leave;
#[path = "bench/lives.rs"]
mod lives;
#[path = "bench/people.rs"]
mod people;
#[path = "bench/working_memory.rs"]
mod working_memory;
#[path = "bench/context.rs"]
mod context;
#[path = "bench/locomo.rs"]
mod locomo;
#[path = "bench/model.rs"]
mod model;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("locomo") => {
            let path = args.iter().skip(2).find(|a| !a.starts_with("--")).expect("usage: dionysus-bench locomo PATH [--json]");
            locomo::locomo(path, args.iter().any(|a| a == "--json")).await
        }
        Some("driver") => {
            let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let m: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(200);
            driver_overhead(n, m).await
        }
        Some("recall") => {
            let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let q: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(200);
            recall_latency(n, q).await
        }
        Some("embed") => {
            embed::embed(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200), args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2_000)).await
        }
        Some("decay") => decay::decay(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000)).await,
        Some("people") => people::people(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000)).await,
        Some("working_memory") => working_memory::working_memory(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000)).await,
        Some("context") => context::context(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000)).await,
        Some("reindex") => reindex(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000)).await,
        Some("model") => {
            // URL MODEL [API_KEY] (the key also from DIONYSUS_BENCH_LLM_KEY); none: the scripted endpoint.
            let endpoint = args.get(2).map(|url| {
                let key = args.get(4).cloned().or_else(|| std::env::var("DIONYSUS_BENCH_LLM_KEY").ok());
                (url.clone(), args.get(3).cloned().unwrap_or_else(|| "default".into()), key)
            });
            model::model(endpoint).await
        }
        Some("fortnight") => fortnight::fortnight(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(14)).await,
        Some("lives") => lives::lives(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(14)).await,
        Some("leave") => {
            leave::leave(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20), args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2_500)).await
        }
        Some("agents") => {
            let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let q: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(200);
            context_and_mcp(n, q).await
        }
        _ => eprintln!("usage: dionysus-bench locomo PATH [--json] | recall N [QUERIES] | driver N [MESSAGES] | fortnight [DAYS] | lives [DAYS] | leave [PEOPLE] [TURNS] | agents N [QUERIES] | reindex N | embed [ROUNDS] [TURNS] | decay N | people [P] | working_memory [N] | context [N]"),
    }
}

/// Calls run_maintenance() until no stale neighborhood remains; returns the last summary.
pub(crate) async fn run_maintenance_to_the_end(c: &Client) -> Value {
    loop {
        let m: Value = c.query_one("SELECT dionysus.run_maintenance()", &[]).await.unwrap().get(0);
        let count = |key: &str| m[key].as_i64().unwrap_or(0);
        // Until neither neighborhoods nor sentence vectors are left, or a call makes no progress.
        let left = count("neighborhoods_remaining") + count("sentences_remaining");
        if left == 0 || count("neighborhoods_recomputed") + count("sentences_split") == 0 {
            return m;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Latency and throughput at scale
// ---------------------------------------------------------------------------------------

const WHO: [&str; 24] = [
    "I", "My sister", "Our neighbour Tom", "The user", "Grandma", "My manager", "Priya", "The kids", "Jonas", "We",
    "My best friend", "The landlord", "Dad", "Our team", "The doctor", "Lena", "My cousin Ahmed", "The teacher",
    "Our dog", "Marco", "The plumber", "My partner", "Aunt Rosa", "The new intern",
];
const DID: [&str; 24] = [
    "booked a trip to", "complained about", "started learning", "finally finished", "keeps forgetting", "fell in love with",
    "wrote an essay on", "cooked dinner inspired by", "argued about", "donated money to", "painted a picture of",
    "read three books about", "signed up for a class on", "lost the keys near", "took photos of", "dreamed about",
    "asked for advice on", "got a promotion thanks to", "is worried about", "laughed for an hour at", "bought tickets for",
    "ran a half marathon through", "planted tomatoes next to", "recorded a podcast about",
];
const WHAT: [&str; 32] = [
    "Lisbon", "the old harbour", "jazz piano", "quantum computing", "the garden shed", "Italian cooking", "the city marathon",
    "a rescue shelter", "the mountain cabin", "Japanese pottery", "climate policy", "the school play", "vintage cameras",
    "the tax return", "a broken laptop", "the birthday party", "Rust programming", "the dentist appointment", "salsa dancing",
    "the football final", "an abandoned lighthouse", "sourdough bread", "the wedding speech", "medieval history",
    "the electricity bill", "a road trip to Norway", "the chess tournament", "bird watching", "the new apartment",
    "a vegan bakery", "the science fair", "late-night astronomy",
];
const WHEN: [&str; 16] = [
    "last weekend", "this morning", "two years ago", "during the storm", "after work on Tuesday", "in the summer holidays",
    "right before Christmas", "on a rainy afternoon", "while travelling", "at midnight", "since the spring", "yesterday",
    "at the family reunion", "over lunch", "on the night train", "before the exam",
];
const HOW: [&str; 12] = [
    "and it felt wonderful.", "but nobody believed it.", "which surprised everyone.", "and wants to do it again.",
    "though it cost too much.", "and told the whole story twice.", "and it changed a lot of plans.", "with a lot of patience.",
    "and took careful notes.", "despite feeling tired.", "and shared it with friends.", "and still talks about it.",
];

/// A varied, natural-looking sentence from a deterministic index (no two alike for i < 2.6M).
fn sentence(i: usize) -> String {
    let mut x = i;
    let mut pick = |n: usize| {
        let r = x % n;
        x /= n;
        r
    };
    format!("{} {} {} {} {}", WHO[pick(24)], DID[pick(24)], WHAT[pick(32)], WHEN[pick(16)], HOW[pick(12)])
}

async fn recall_latency(n: usize, queries: usize) {
    println!("Recall benchmark at {n} memories ({queries} queries; server GUCs as configured)");
    // DIONYSUS_BENCH_REUSE=1 keeps the store (recall_keep_N) and, when it is already there, times
    // recall on it again without filling it (for trying recall changes: a 100k fill takes 20 min).
    if std::env::var("DIONYSUS_BENCH_REUSE").is_ok_and(|v| v == "1") {
        let name = format!("recall_keep_{n}");
        let admin = connect("postgres").await;
        let kept = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name]).await.unwrap().is_some();
        // A fill cut short is filled again, not timed.
        let whole = kept
            && connect(&name).await.query_one("SELECT count(*) >= $1 FROM dionysus.memories", &[&(n as i64)]).await.is_ok_and(|r| r.get(0));
        if kept && !whole {
            admin.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).await.unwrap();
        }
        if whole {
            println!("(the kept store {name}: recall timed again, nothing filled; its embedding cache emptied)");
            let c = connect(&name).await;
            // The earlier run's query texts are cached: emptied, so the embedding is timed again.
            c.batch_execute("DELETE FROM dionysus.embedding_cache").await.unwrap();
            recall_timing(&c, queries).await;
            return;
        }
        admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        let client = connect(&name).await;
        client.batch_execute("CREATE EXTENSION dionysus CASCADE").await.unwrap();
        let db = TestDb { name, client };
        let fill = fill(&db, n).await;
        println!("remember_batch throughput: {:.0} memories/s ({n} in {fill:.1} s, 2 connections)", n as f64 / fill);
        recall_latency_rest(&db, n, queries).await;
        return;
    }
    let db = TestDb::new(&format!("bench_{n}")).await;
    let fill = fill(&db, n).await;
    println!("remember_batch throughput: {:.0} memories/s ({n} in {fill:.1} s, 2 connections)", n as f64 / fill);
    recall_latency_rest(&db, n, queries).await;
}

/// Fills a database with n generated memories: batches of 200 from two connections in
/// parallel (the machine has two cores). Returns the seconds it took.
async fn fill(db: &TestDb, n: usize) -> f64 {
    let t = Instant::now();
    let now = chrono::Utc::now();
    let chunk = 200;
    let mut handles = Vec::new();
    for lane in 0..2usize {
        let client = db.connect().await;
        handles.push(tokio::spawn(async move {
            let mut start = lane * chunk;
            while start < n {
                let end = (start + chunk).min(n);
                let items: Vec<Value> = (start..end)
                    .map(|i| {
                        // Conversations of 20 turns a minute apart, six hours between them, over
                        // 7 sources: recency and time are as varied as a real store's, and
                        // episodes are conversation-sized.
                        // The last conversation ends a day ago (at 100k the first is 3.4 years back;
                        // a store never holds memories from the future).
                        let session = i / 20;
                        let sessions = n.div_ceil(20) as i64;
                        let at = now - chrono::Duration::days(1) - chrono::Duration::hours(6 * sessions)
                            + chrono::Duration::hours(6 * session as i64)
                            + chrono::Duration::minutes((i % 20) as i64);
                        serde_json::json!({"content": sentence(i.wrapping_mul(2_654_435_761) % 2_654_208), "type": if i % 5 == 0 { "semantic" } else { "episodic" },
                                           "source": format!("chat{}", session % 7), "importance": (i % 10) as f64 / 10.0,
                                           "created_at": at.to_rfc3339()})
                    })
                    .collect();
                client.query("SELECT * FROM dionysus.remember_batch($1)", &[&Value::Array(items)]).await.unwrap();
                start += 2 * chunk;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    t.elapsed().as_secs_f64()
}

async fn recall_latency_rest(db: &TestDb, n: usize, queries: usize) {
    let c = &db.client;
    // Single remember throughput.
    let mut singles = Vec::new();
    for i in 0..100 {
        let t = Instant::now();
        c.execute("SELECT dionysus.remember($1)", &[&format!("single insert number {i}: {}", sentence(i * 7919))]).await.unwrap();
        singles.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (s50, s95) = p50_p95(&mut singles);
    println!("remember (single): p50 {s50:.1} ms, p95 {s95:.1} ms → {:.0} memories/s", 1000.0 / s50);
    // Neighborhoods: drain the backlog and time it.
    let backlog: i64 = c.query_one("SELECT stale_neighborhoods FROM dionysus.memory_health", &[]).await.unwrap().get(0);
    let t = Instant::now();
    let mut done = 0i64;
    let sample = backlog.min(5000);
    while done < sample {
        let d: i64 = c.query_one("SELECT dionysus.recompute_neighborhoods(500)", &[]).await.unwrap().get(0);
        if d == 0 {
            break;
        }
        done += d;
    }
    let secs = t.elapsed().as_secs_f64();
    println!("neighborhood recompute: {:.0} memories/s ({done} of a backlog of {backlog} in {secs:.1} s)", done as f64 / secs);
    run_maintenance_to_the_end(c).await;
    c.batch_execute("VACUUM ANALYZE dionysus.memories").await.unwrap();

    recall_timing(c, queries).await;
    heartbeat_cycle(c, n).await;
    let _ = connect("postgres").await;
}

/// Recall's latency, its embedding and its search part, against bare kNN, per query.
async fn recall_timing(c: &tokio_postgres::Client, queries: usize) {
    let qs: Vec<String> = (0..queries).map(|i| sentence((i * 104_729 + 17) % 2_654_208)).map(|s| {
        // Questions rather than statements, with some words swapped out.
        format!("what happened with {}?", s.split_whitespace().skip(2).take(5).collect::<Vec<_>>().join(" "))
    }).collect();
    // Warm up the model and caches, then measure each part.
    for q in qs.iter().take(5) {
        c.query("SELECT * FROM dionysus.recall($1, 10)", &[q]).await.unwrap();
    }
    c.batch_execute("SET hnsw.ef_search = 40").await.unwrap();
    let mut embed_ms = Vec::new();
    let mut recall_ms = Vec::new();
    let mut asked = Vec::new();
    let mut vectors = Vec::new();
    for (i, q) in qs.iter().enumerate() {
        // Embedding alone (a text not in the cache).
        let fresh = format!("{q} #{i}");
        let t = Instant::now();
        c.query_one("SELECT dionysus.embed($1)::text", &[&fresh]).await.unwrap();
        embed_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        // Full recall including its embedding (a query text not in the cache).
        let text = format!("{q} ({i})");
        let t = Instant::now();
        c.query("SELECT * FROM dionysus.recall($1, 10)", &[&text]).await.unwrap();
        recall_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        vectors.push(c.query_one("SELECT dionysus.embed($1)::text", &[&text]).await.unwrap().get::<_, String>(0));
        asked.push(text);
    }
    // The search part, measured, not subtracted: each query again, its embedding now cached (so
    // recall pays a cache lookup), against bare kNN with the very same vector. In two passes, all
    // the recalls and then all the kNNs, so that each walks the HNSW graph from where the query
    // before it left the caches: measured right after recall (the old order, kept below for
    // comparison), the kNN walks the very path recall's seed query has just warmed, and at 100k
    // that alone makes it about a third faster.
    let timed = |sql: &'static str, arg: &String| {
        let arg = arg.clone();
        async move {
            let t = Instant::now();
            c.query(sql, &[&arg]).await.unwrap();
            t.elapsed().as_secs_f64() * 1000.0
        }
    };
    const RECALL: &str = "SELECT * FROM dionysus.recall($1, 10)";
    const BARE: &str = "SELECT id FROM dionysus.memories ORDER BY embedding <=> $1::text::vector LIMIT 10";
    let mut search_ms = Vec::new();
    for text in &asked {
        search_ms.push(timed(RECALL, text).await);
    }
    let mut bare_ms = Vec::new();
    for v in &vectors {
        bare_ms.push(timed(BARE, v).await);
    }
    let mut ratios: Vec<f64> = search_ms.iter().zip(&bare_ms).map(|(s, b)| s / b).collect();
    let mut warm_ratios = Vec::new();
    for (text, v) in asked.iter().zip(&vectors) {
        let search = timed(RECALL, text).await;
        warm_ratios.push(search / timed(BARE, v).await);
    }
    let (e50, e95) = p50_p95(&mut embed_ms);
    let (r50, r95) = p50_p95(&mut recall_ms);
    let (s50, s95) = p50_p95(&mut search_ms);
    let (b50, b95) = p50_p95(&mut bare_ms);
    let (q50, q95) = p50_p95(&mut ratios);
    let (w50, w95) = p50_p95(&mut warm_ratios);
    println!("| part                                          | p50 ms | p95 ms |");
    println!("|-----------------------------------------------|--------|--------|");
    println!("| query embedding alone                         | {e50:6.2} | {e95:6.2} |");
    println!("| dionysus.recall, k=10, with embedding         | {r50:6.2} | {r95:6.2} |");
    println!("| recall search part (same query, cached embed) | {s50:6.2} | {s95:6.2} |");
    println!("| bare pgvector ORDER BY <=> LIMIT 10 (same vec) | {b50:6.2} | {b95:6.2} |");
    println!("search part / bare kNN, per query: median {q50:.2}×, p95 {q95:.2}×");
    println!("(the kNN timed right after its recall, on the path recall just warmed: median {w50:.2}×, p95 {w95:.2}×)");
    let rss = backend_rss(c).await;
    println!("backend resident memory with the model loaded: {rss}");
}

/// A re-index of a store of n memories (no turns to read again: the vectors alone), step by
/// step as the maintenance pass runs it: how fast vectors are made, how long the one swap
/// transaction takes, and what recall costs while the run builds (it reads the store's row
/// on every embedding) against before it.
async fn reindex(n: usize) {
    let db = TestDb::new(&format!("bench_reindex_{n}")).await;
    let c = &db.client;
    println!("Re-index benchmark at {n} memories (same model, one backend)");
    fill(&db, n).await;
    run_maintenance_to_the_end(c).await;
    c.batch_execute("VACUUM ANALYZE dionysus.memories").await.unwrap();
    let qs: Vec<String> = (0..100).map(|i| format!("what about {}?", sentence(i * 7_919 + 3))).collect();
    let timed = |label: &'static str| {
        let qs = qs.clone();
        let c = &db.client;
        async move {
            let mut ms = Vec::new();
            for (i, q) in qs.iter().enumerate() {
                let asked = format!("{q} [{label} {i}]");
                let t = Instant::now();
                c.query("SELECT * FROM dionysus.recall($1, 10)", &[&asked]).await.unwrap();
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            p50_p95(&mut ms)
        }
    };
    let (b50, b95) = timed("before").await;
    c.query_one("SELECT dionysus.reindex_start('bench')", &[]).await.unwrap();
    let (d50, d95) = timed("during").await;
    let t = Instant::now();
    let mut steps = Vec::new();
    let swap_ms = loop {
        let s = Instant::now();
        let step: Option<Value> = c.query_one("SELECT dionysus_internal.reindex_step(256)", &[]).await.unwrap().get(0);
        let ms = s.elapsed().as_secs_f64() * 1000.0;
        match step {
            Some(v) if v.get("embedded").is_some() => steps.push(ms / v["embedded"].as_f64().unwrap_or(1.0)),
            Some(v) if v["swapped"] == true => break ms,
            other => panic!("unexpected step: {other:?}"),
        }
    };
    let total = t.elapsed().as_secs_f64();
    let (v50, v95) = p50_p95(&mut steps);
    println!("| part                                        | p50    | p95    |");
    println!("|---------------------------------------------|--------|--------|");
    println!("| recall before the run, ms                   | {b50:6.2} | {b95:6.2} |");
    println!("| recall while the run builds, ms             | {d50:6.2} | {d95:6.2} |");
    println!("| new vector, ms per memory (batches of 256)  | {v50:6.2} | {v95:6.2} |");
    println!("recall during / before: p50 {:.2}×, p95 {:.2}×", d50 / b50, d95 / b95);
    println!("re-index of {n} memories: {total:.1} s in all, {:.0} vectors/s; the swap transaction {swap_ms:.0} ms", n as f64 / total);
}

/// begin + commit + finish on the store just filled, with 1,000 goals in the backlog.
async fn heartbeat_cycle(c: &Client, n: usize) {
    c.batch_execute(
        "SELECT dionysus.create_goal('goal number ' || i, source => (ARRAY['curiosity','identity','external'])[1 + i % 3])          FROM generate_series(1, 1000) i",
    )
    .await
    .unwrap();
    let ids: Vec<String> = c
        .query("SELECT id::text FROM dionysus.memories ORDER BY created_at DESC LIMIT 2", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let goal: String = c.query_one("SELECT id::text FROM dionysus.goals WHERE priority = 'active' LIMIT 1", &[]).await
        .map(|r| r.get(0))
        .unwrap_or_else(|_| String::new());
    let (mut begin_ms, mut commit_ms, mut finish_ms, mut total_ms) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..100 {
        c.batch_execute("SELECT dionysus.update_energy(20)").await.unwrap();
        let t0 = Instant::now();
        let ctx: Value = c.query_one("SELECT dionysus.heartbeat_begin()", &[]).await.unwrap().get(0);
        let t1 = Instant::now();
        let id: Uuid = ctx["heartbeat_id"].as_str().unwrap().parse().unwrap();
        // The appendix-B shape without the embedding-bound recall: reflect, synthesize, connect, rest.
        let decision = serde_json::json!({"reasoning": "steady work", "actions": [
            {"action": "reflect", "params": {"focus": "recent learning"}},
            {"action": "synthesize", "params": {"topic": "the week"}},
            {"action": "connect", "params": {"from_id": ids[0], "to_id": ids[1], "relation": "ASSOCIATED"}},
            {"action": "rest", "params": {}}],
            "goal_changes": if goal.is_empty() { serde_json::json!([]) } else { serde_json::json!([{"goal_id": goal, "change": "progress", "note": format!("step {i}")}]) }});
        c.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &decision]).await.unwrap();
        let t2 = Instant::now();
        c.query_one("SELECT dionysus.heartbeat_finish($1, $2, 0.1)", &[&id, &format!("Heartbeat {i}: reflected, synthesized and connected two memories.")]).await.unwrap();
        let t3 = Instant::now();
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1000.0;
        begin_ms.push(ms(t0, t1));
        commit_ms.push(ms(t1, t2));
        finish_ms.push(ms(t2, t3));
        total_ms.push(ms(t0, t3));
    }
    let (b50, b95) = p50_p95(&mut begin_ms);
    let (c50, c95) = p50_p95(&mut commit_ms);
    let (f50, f95) = p50_p95(&mut finish_ms);
    let (t50, t95) = p50_p95(&mut total_ms);
    println!("Heartbeat cycle at {n} memories and 1000 goals (100 heartbeats):");
    println!("| part                                   | p50 ms | p95 ms |");
    println!("|----------------------------------------|--------|--------|");
    println!("| heartbeat_begin (context building)     | {b50:6.2} | {b95:6.2} |");
    println!("| heartbeat_commit (4 actions, 1 change) | {c50:6.2} | {c95:6.2} |");
    println!("| heartbeat_finish (narrative embedded)  | {f50:6.2} | {f95:6.2} |");
    println!("| all three                              | {t50:6.2} | {t95:6.2} |");
}

/// VmRSS of the backend serving `c` (it has the model loaded by now).
async fn backend_rss(c: &Client) -> String {
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| status.lines().find(|l| l.starts_with(name)).map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string()).unwrap_or("?".into());
    // Pss splits pages shared with the postmaster (the preloaded model) among their users.
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kb = |name: &str| rollup.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let pss = kb("Pss:");
    let private = kb("Private_Clean:") + kb("Private_Dirty:");
    let postmaster = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("PPid:")).and_then(|l| l.split_whitespace().nth(1)).map(String::from))
        .and_then(|pp| std::fs::read_to_string(format!("/proc/{pp}/status")).ok())
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).map(String::from))
        .unwrap_or("?".into());
    format!(
        "VmRSS {} kB (RssAnon {} kB, RssFile {} kB, shared buffers included), private {private} kB, Pss {pss} kB; postmaster VmRSS {postmaster} kB",
        field("VmRSS:"), field("RssAnon:"), field("RssFile:")
    )
}

/// The real `dionysus chat --json` binary beside a store of n memories, with a scripted LLM
/// that answers at once: the time from a message written to its stdin to the reply read from
/// its stdout is the driver's overhead (plus the database's work). The baseline, measured in
/// the same run, is the database calls of the reply path made directly by one client.
async fn driver_overhead(n: usize, messages: usize) {
    use dionysus_tests::fake_llm::{Answer, FakeLlm};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let db = TestDb::new(&format!("bench_driver_{n}")).await;
    println!("Driver benchmark at {n} memories ({messages} messages; the scripted LLM answers instantly)");
    let secs = fill(&db, n).await;
    println!("filled in {secs:.0} s");
    run_maintenance_to_the_end(&db.client).await;
    db.client.batch_execute("VACUUM ANALYZE dionysus.memories").await.unwrap();
    db.client.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat", Answer::Text("Noted, thank you.".into()));
    llm.json("Read the latest message", serde_json::json!({"facts": [], "triples": [], "goals": []}));
    llm.json("TASK: summarize_episode", serde_json::json!({"summary": "A stretch of generated notes."}));
    llm.json("TASK: extract_concepts", serde_json::json!({"memories": []}));
    let bin = std::env::current_exe().unwrap().parent().unwrap().join("dionysus");
    let url = format!("{} dbname={}", dionysus_tests::cluster_conninfo(), db.name);
    let mut child = tokio::process::Command::new(&bin)
        .args(["chat", "--json"])
        .env("DIONYSUS_DATABASE_URL", &url)
        .env("DIONYSUS_LLM_BASE_URL", &llm.base_url)
        .env("DIONYSUS_TERMINAL_USER", "bench")
        .env("DIONYSUS_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut driver_ms = Vec::new();
    for i in 0..messages + 10 {
        let text = format!("note {i}: {}", sentence((i * 7_919 + 3) % 2_654_208));
        let line = serde_json::json!({"id": format!("bench-{i}"), "text": text}).to_string() + "\n";
        let t = Instant::now();
        stdin.write_all(line.as_bytes()).await.unwrap();
        let reply = out.next_line().await.unwrap().expect("driver closed stdout");
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        assert!(reply.contains("Noted"), "unexpected reply {reply}");
        if i >= 10 {
            driver_ms.push(ms); // the first ten warm the caches
        }
        // Let the extraction that follows each reply finish, as between real messages.
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| status.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let (rss, hwm) = (kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0);
    let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let _ = child.wait().await;

    // Baseline: log_message + chat_context, the database's share of the same path.
    let c = &db.client;
    let mut base_ms = Vec::new();
    for i in 0..messages {
        let text = format!("baseline note {i}: {}", sentence((i * 104_729 + 11) % 2_654_208));
        let t = Instant::now();
        let v: Value = c
            .query_one("SELECT dionysus.log_message('bench', $1, 'baseline', 'bench', $2)", &[&format!("base-{i}"), &text])
            .await
            .unwrap()
            .get(0);
        let id = Uuid::parse_str(v["message_id"].as_str().unwrap()).unwrap();
        c.query_one("SELECT dionysus.chat_context($1, 8, 12)", &[&id]).await.unwrap();
        base_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (d50, d95) = p50_p95(&mut driver_ms);
    let (b50, b95) = p50_p95(&mut base_ms);
    println!("message received → reply sent, through the driver: p50 {d50:.1} ms, p95 {d95:.1} ms (target < 50 ms p50)");
    println!("database calls of that path alone (baseline):   p50 {b50:.1} ms, p95 {b95:.1} ms");
    println!("driver's own share: p50 {:.1} ms; ratio driver/baseline {:.2}× (p50), {:.2}× (p95)", d50 - b50, d50 / b50, d95 / b95);
    println!("driver resident memory: {rss:.1} MB now, {hwm:.1} MB peak (target < 50 MB)");
}

// ---------------------------------------------------------------------------------------
// What the alignment loop and MCP add: chat_context with its archetype against without, and
// a recall through `dionysus mcp` (stdio, rmcp's client) against the same SQL call directly.
// ---------------------------------------------------------------------------------------

async fn context_and_mcp(n: usize, queries: usize) {
    use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    use rmcp::ServiceExt;
    let db = TestDb::new(&format!("bench_agents_{n}")).await;
    println!("Alignment and MCP benchmark at {n} memories ({queries} queries)");
    let secs = fill(&db, n).await;
    println!("filled in {secs:.0} s");
    run_maintenance_to_the_end(&db.client).await;
    db.client.batch_execute("VACUUM ANALYZE dionysus.memories").await.unwrap();
    let c = &db.client;
    let (mut shaped, mut fixed) = (Vec::new(), Vec::new());
    for i in 0..queries + 10 {
        let text = format!("question {i}: {}", sentence((i * 15_485_863 + 7) % 2_654_208));
        let v: Value = c
            .query_one("SELECT dionysus.log_message('bench', $1, 'ctx', 'bench', $2)", &[&format!("ctx-{i}"), &text])
            .await
            .unwrap()
            .get(0);
        let id = Uuid::parse_str(v["message_id"].as_str().unwrap()).unwrap();
        // Alternate which goes first, so neither always finds the caches warm.
        for first in [i % 2 == 0, i % 2 != 0] {
            let t = Instant::now();
            c.query_one("SELECT dionysus.chat_context($1, 8, 12, use_archetype => $2)", &[&id, &first]).await.unwrap();
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if i >= 10 {
                if first { shaped.push(ms) } else { fixed.push(ms) }
            }
        }
    }
    let (s50, s95) = p50_p95(&mut shaped);
    let (f50, f95) = p50_p95(&mut fixed);
    println!("chat_context with its archetype: p50 {s50:.2} ms, p95 {s95:.2} ms");
    println!("chat_context without (baseline): p50 {f50:.2} ms, p95 {f95:.2} ms; ratio {:.2}× (p50), {:.2}× (p95)", s50 / f50, s95 / f95);

    let bin = std::env::current_exe().unwrap().parent().unwrap().join("dionysus");
    let url = format!("{} dbname={}", dionysus_tests::cluster_conninfo(), db.name);
    let transport = TokioChildProcess::new(tokio::process::Command::new(&bin).configure(|cmd| {
        cmd.arg("mcp").env("DIONYSUS_DATABASE_URL", &url).env("DIONYSUS_MCP_PERSON", "bench:me").env("DIONYSUS_LOG", "error");
    }))
    .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let client = ClientConfig::new(ClientCapabilities::default(), Implementation::new("bench", "1")).serve(transport).await.expect("initialize");
    let (mut via_mcp, mut direct) = (Vec::new(), Vec::new());
    for i in 0..queries + 10 {
        let q = sentence((i * 7_368_787 + 13) % 2_654_208);
        let args = serde_json::json!({"query": q, "k": 10});
        let t = Instant::now();
        let r = client
            .call_tool(CallToolRequestParams::new("recall").with_arguments(args.as_object().unwrap().clone()))
            .await
            .expect("recall over MCP");
        let m = t.elapsed().as_secs_f64() * 1000.0;
        assert_ne!(r.is_error, Some(true));
        let t = Instant::now();
        c.query("SELECT * FROM dionysus.recall($1, 10, person => 'bench:me')", &[&q]).await.unwrap();
        let d = t.elapsed().as_secs_f64() * 1000.0;
        if i >= 10 {
            via_mcp.push(m);
            direct.push(d);
        }
    }
    let _ = client.cancel().await;
    let (m50, m95) = p50_p95(&mut via_mcp);
    let (d50, d95) = p50_p95(&mut direct);
    println!("recall through dionysus mcp (stdio): p50 {m50:.2} ms, p95 {m95:.2} ms");
    println!("the same recall in SQL (baseline):   p50 {d50:.2} ms, p95 {d95:.2} ms; MCP's own share p50 {:.2} ms, ratio {:.2}× (p50)", m50 - d50, m50 / d50);
}
