//! The local embedding model's two engines side by side (#37): Dionysus's own encoder
//! (`dionysus.embedding_engine = 'native'`, the default) and candle's BERT, the reference it is
//! checked against. Both run in the same run on the same texts, interleaved call by call, so
//! a busy machine slows both alike: query latency per length, chat-turn throughput, the
//! largest cosine difference, remember_batch's rate, and a backend's private memory.
//!
//! Each engine has its own backend (one core each, as on a 1-vCPU box). The embedding cache
//! is kept out of the way: the latency and throughput connections are read-only (nothing is
//! cached) on a fresh database (nothing was), so every call computes.
use dionysus_tests::{p50_p95, TestDb};
use serde_json::Value;
use std::time::Instant;
use tokio_postgres::Client;

const ENGINES: [&str; 2] = ["native", "candle"];
const WORDS: &[&str] = &[
    "where", "did", "we", "go", "last", "summer", "with", "my", "sister", "and", "her", "dog", "what", "was", "the", "name",
    "of", "that", "little", "restaurant", "near", "harbour", "who", "told", "me", "about", "new", "job", "in", "Lisbon",
    "when", "is", "dentist", "appointment", "again", "remind", "birthday", "plans", "for", "weekend", "garden", "rain",
];

/// A text of `words` words, different for every `seed`.
fn text(words: usize, seed: usize) -> String {
    (0..words).map(|i| WORDS[(seed * 7 + i * 13 + seed / WORDS.len()) % WORDS.len()]).collect::<Vec<_>>().join(" ")
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| (*x as f64) * (*y as f64)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

async fn engine_client(db: &TestDb, engine: &str, read_only: bool) -> Client {
    let c = db.connect().await;
    c.batch_execute(&format!("SET dionysus.embedding_engine = '{engine}'; SET default_transaction_read_only = {read_only}")).await.unwrap();
    c
}

/// The backend's private memory (Private_Clean + Private_Dirty), in MB: the weights the
/// postmaster loaded are shared with it and do not count.
async fn private_mb(c: &Client) -> f64 {
    let rollup: String = c.query_one("SELECT pg_read_file('/proc/self/smaps_rollup')", &[]).await.unwrap().get(0);
    let kb: f64 = rollup
        .lines()
        .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .sum();
    kb / 1024.0
}

async fn embed_batch(c: &Client, texts: &[String]) -> Vec<Vec<f32>> {
    c.query("SELECT embedding FROM dionysus.embed_batch_real($1) ORDER BY ord", &[&texts]).await.unwrap().iter().map(|r| r.get(0)).collect()
}

pub async fn embed(rounds: usize, turns: usize) {
    let db = TestDb::new("bench_embed").await;
    println!("Embedding engines side by side (#37): native vs candle, interleaved in one run, one backend each");
    let mut clients = Vec::new();
    let mut memory = Vec::new();
    for engine in ENGINES {
        let c = engine_client(&db, engine, true).await;
        let before = private_mb(&c).await;
        embed_batch(&c, &[text(10, 0)]).await;
        let first = private_mb(&c).await;
        embed_batch(&c, &(0..64).map(|i| text(60, i)).collect::<Vec<_>>()).await;
        memory.push((engine, before, first, private_mb(&c).await));
        clients.push(c);
    }
    for (engine, before, first, full) in &memory {
        println!(
            "  {engine:6} backend private memory: {before:.1} MB before any embedding, +{:.1} MB after the first, +{:.1} MB after full 256-token passes",
            first - before,
            full - before
        );
    }

    let mut worst = 1.0f64;
    println!("Query latency (one text a call, client-timed, {rounds} calls per length and engine):");
    for words in [5, 10, 20] {
        let mut ms = [Vec::new(), Vec::new()];
        for r in 0..rounds {
            let t = text(words, 1000 * words + r);
            let mut vectors = Vec::new();
            // Alternate which engine goes first, so neither always runs on a warmer cache.
            for k in 0..2 {
                let e = (k + r) % 2;
                let started = Instant::now();
                let v: Vec<f32> = clients[e].query_one("SELECT dionysus.embed_real($1)", &[&t]).await.unwrap().get(0);
                ms[e].push(started.elapsed().as_secs_f64() * 1000.0);
                vectors.push((e, v));
            }
            vectors.sort_by_key(|(e, _)| *e);
            worst = worst.min(cosine(&vectors[0].1, &vectors[1].1));
        }
        let [(n50, n95), (c50, c95)] = ms.map(|mut m| p50_p95(&mut m));
        println!("  {words:2} words: native p50 {n50:.2} ms p95 {n95:.2} ms | candle p50 {c50:.2} ms p95 {c95:.2} ms");
    }

    // Chat-sized turns, 5 to 60 words, mixed, in calls of 100 alternating between the engines.
    let all: Vec<String> = (0..turns).map(|i| text(5 + (i * 37) % 56, 100_000 + i)).collect();
    let mut seconds = [0.0f64; 2];
    for (i, chunk) in all.chunks(100).enumerate() {
        let mut vectors = Vec::new();
        for k in 0..2 {
            let e = (k + i) % 2;
            let started = Instant::now();
            let v = embed_batch(&clients[e], chunk).await;
            seconds[e] += started.elapsed().as_secs_f64();
            vectors.push((e, v));
        }
        vectors.sort_by_key(|(e, _)| *e);
        for (a, b) in vectors[0].1.iter().zip(&vectors[1].1) {
            worst = worst.min(cosine(a, b));
        }
    }
    println!(
        "Chat turns (5–60 words, {turns} in calls of 100 to embed_batch): native {:.0} turns/s | candle {:.0} turns/s",
        turns as f64 / seconds[0],
        turns as f64 / seconds[1]
    );
    println!("Largest difference: cosine {worst:.7} (1 − cosine = {:.1e}) over every query and turn", 1.0 - worst);

    // remember_batch: the same turns stored (embedded, cached, inserted), a database per
    // engine, calls of 100 alternating between them.
    let stored = turns.min(500);
    let mut stores = Vec::new();
    for engine in ENGINES {
        let store = TestDb::new(&format!("bench_embed_{engine}")).await;
        let c = engine_client(&store, engine, false).await;
        stores.push((store, c));
    }
    let mut seconds = [0.0f64; 2];
    for chunk in all[..stored].chunks(100) {
        let items = Value::Array(chunk.iter().map(|t| serde_json::json!({"content": t, "source": "bench"})).collect());
        for (e, (_, c)) in stores.iter().enumerate() {
            let started = Instant::now();
            c.query("SELECT * FROM dionysus.remember_batch($1)", &[&items]).await.unwrap();
            seconds[e] += started.elapsed().as_secs_f64();
        }
    }
    println!(
        "remember_batch ({stored} turns in calls of 100, one connection each): native {:.0}/s | candle {:.0}/s",
        stored as f64 / seconds[0],
        stored as f64 / seconds[1]
    );
}
