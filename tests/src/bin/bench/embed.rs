//! The local embedding model side by side (#37): Dionysus's own encoder in f32 (the default)
//! and in int8 (`dionysus.embedding_precision = 'int8'`), and candle's BERT, the f32 reference
//! they are checked against. All run in the same run on the same texts, interleaved call by
//! call, so a busy machine slows them alike: query latency per length, chat-turn throughput,
//! each one's least cosine to candle's vectors, remember_batch's rate, and a backend's private
//! memory.
//!
//! Each has its own backend (one core each, as on a 1-vCPU box). The embedding cache is kept
//! out of the way: the latency and throughput connections are read-only (nothing is cached)
//! on a fresh database (nothing was), so every call computes.
use dionysus_tests::{p50_p95, TestDb};
use serde_json::Value;
use std::time::Instant;
use tokio_postgres::Client;

/// What is compared: the native encoder in f32 (the default) and int8
/// (`dionysus.embedding_precision = 'int8'`), and candle's BERT, the f32 reference.
const VARIANTS: [(&str, &str, &str); 3] = [("native f32", "native", "f32"), ("native int8", "native", "int8"), ("candle", "candle", "f32")];
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

/// A database per precision: a store holds one model's vectors, and a new one is set up for
/// int8 by adopting it while it holds none (as a database created with the setting on does).
async fn store_for(label: &str, precision: &str) -> TestDb {
    let db = TestDb::new(&format!("{label}_{precision}")).await;
    db.client.batch_execute(&format!("SET dionysus.embedding_precision = '{precision}'; SELECT dionysus.embedding_store_adopt()")).await.unwrap();
    db
}

async fn variant_client(db: &TestDb, (_, engine, precision): (&str, &str, &str), read_only: bool) -> Client {
    let c = db.connect().await;
    c.batch_execute(&format!(
        "SET dionysus.embedding_engine = '{engine}'; SET dionysus.embedding_precision = '{precision}'; SET default_transaction_read_only = {read_only}"
    ))
    .await
    .unwrap();
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
    let dbs = [store_for("bench_embed", "f32").await, store_for("bench_embed", "int8").await];
    let db_of = |precision: &str| &dbs[usize::from(precision == "int8")];
    println!("Embedding side by side (#37): native f32, native int8 and candle, interleaved in one run, one backend each");
    for (db, precision) in dbs.iter().zip(["f32", "int8"]) {
        let key: String = db.client.query_one("SELECT model_key FROM dionysus.embedding_store", &[]).await.unwrap().get(0);
        assert_eq!(key.ends_with(":int8"), precision == "int8", "the {precision} store holds {key}");
    }
    let n = VARIANTS.len();
    let mut clients = Vec::new();
    let mut memory = Vec::new();
    for v in VARIANTS {
        let c = variant_client(db_of(v.2), v, true).await;
        let before = private_mb(&c).await;
        embed_batch(&c, &[text(10, 0)]).await;
        let first = private_mb(&c).await;
        embed_batch(&c, &(0..64).map(|i| text(60, i)).collect::<Vec<_>>()).await;
        memory.push((v.0, before, first, private_mb(&c).await));
        clients.push(c);
    }
    for (name, before, first, full) in &memory {
        println!(
            "  {name:11} backend private memory: {before:.1} MB before any embedding, +{:.1} MB after the first, +{:.1} MB after full 256-token passes",
            first - before,
            full - before
        );
    }

    // The least cosine of each variant to candle's vector of the same text (f32: the same
    // vectors; int8: another model's, how near).
    let mut least = vec![1.0f64; n];
    let mut compare = |vectors: &mut Vec<(usize, Vec<f32>)>| {
        vectors.sort_by_key(|(e, _)| *e);
        for e in 0..n - 1 {
            least[e] = least[e].min(cosine(&vectors[e].1, &vectors[n - 1].1));
        }
    };
    println!("Query latency (one text a call, client-timed, {rounds} calls per length and variant):");
    for words in [5, 10, 20] {
        let mut ms = vec![Vec::new(); n];
        for r in 0..rounds {
            let t = text(words, 1000 * words + r);
            let mut vectors = Vec::new();
            // Rotate which variant goes first, so none always runs on a warmer cache.
            for k in 0..n {
                let e = (k + r) % n;
                let started = Instant::now();
                let v: Vec<f32> = clients[e].query_one("SELECT dionysus.embed_real($1)", &[&t]).await.unwrap().get(0);
                ms[e].push(started.elapsed().as_secs_f64() * 1000.0);
                vectors.push((e, v));
            }
            compare(&mut vectors);
        }
        let figures: Vec<String> = ms
            .iter_mut()
            .zip(VARIANTS)
            .map(|(m, (name, _, _))| {
                let (p50, p95) = p50_p95(m);
                format!("{name} p50 {p50:.2} ms p95 {p95:.2} ms")
            })
            .collect();
        println!("  {words:2} words: {}", figures.join(" | "));
    }

    // Chat-sized turns, 5 to 60 words, mixed, in calls of 100 rotating between the variants.
    let all: Vec<String> = (0..turns).map(|i| text(5 + (i * 37) % 56, 100_000 + i)).collect();
    let mut seconds = vec![0.0f64; n];
    for (i, chunk) in all.chunks(100).enumerate() {
        let mut vectors = Vec::new();
        for k in 0..n {
            let e = (k + i) % n;
            let started = Instant::now();
            let v = embed_batch(&clients[e], chunk).await;
            seconds[e] += started.elapsed().as_secs_f64();
            vectors.push((e, v));
        }
        vectors.sort_by_key(|(e, _)| *e);
        for t in 0..chunk.len() {
            for e in 0..n - 1 {
                least[e] = least[e].min(cosine(&vectors[e].1[t], &vectors[n - 1].1[t]));
            }
        }
    }
    let rates: Vec<String> = seconds.iter().zip(VARIANTS).map(|(s, (name, _, _))| format!("{name} {:.0} turns/s", turns as f64 / s)).collect();
    println!("Chat turns (5–60 words, {turns} in calls of 100 to embed_batch): {}", rates.join(" | "));
    println!(
        "  int8 ÷ f32: {:.2}×; native f32 ÷ candle: {:.2}×",
        seconds[0] / seconds[1],
        seconds[n - 1] / seconds[0]
    );
    for e in 0..n - 1 {
        println!(
            "Least cosine to candle's vector, {} over every query and turn: {:.7} (1 − cosine = {:.1e})",
            VARIANTS[e].0,
            least[e],
            1.0 - least[e]
        );
    }

    // remember_batch: the same turns stored (embedded, cached, inserted), a database per
    // variant, calls of 100 rotating between them.
    let stored = turns.min(500);
    let mut stores = Vec::new();
    for v in VARIANTS {
        let store = store_for(&format!("bench_embed_{}", v.1), v.2).await;
        let c = variant_client(&store, v, false).await;
        stores.push((store, c));
    }
    let mut seconds = vec![0.0f64; n];
    for chunk in all[..stored].chunks(100) {
        let items = Value::Array(chunk.iter().map(|t| serde_json::json!({"content": t, "source": "bench"})).collect());
        for (e, (_, c)) in stores.iter().enumerate() {
            let started = Instant::now();
            c.query("SELECT * FROM dionysus.remember_batch($1)", &[&items]).await.unwrap();
            seconds[e] += started.elapsed().as_secs_f64();
        }
    }
    let rates: Vec<String> = seconds.iter().zip(VARIANTS).map(|(s, (name, _, _))| format!("{name} {:.0}/s", stored as f64 / s)).collect();
    println!("remember_batch ({stored} turns in calls of 100, one connection each): {}", rates.join(" | "));
}
