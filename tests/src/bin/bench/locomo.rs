//! LoCoMo retrieval quality: for each question, the share of its evidence turns among the
//! top k, for `dionysus.recall`, pure vector search and BM25 over the same store in the same
//! run, overall and per category, with recall's latency.
//!
//! `DIONYSUS_BENCH_REUSE=1` keeps each conversation's database between runs and skips the
//! ingest when it is already there (for trying recall changes; the figures we report come
//! from fresh stores).
use super::run_maintenance_to_the_end;
use chrono::NaiveDateTime;
use dionysus_tests::{connect, p50_p95, TestDb};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;
use tokio_postgres::Client;
use uuid::Uuid;

/// "1:56 pm on 8 May, 2023" → a timestamp.
fn locomo_time(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s.trim(), "%I:%M %p on %d %B, %Y")
        .unwrap_or_else(|e| panic!("unreadable session time '{s}': {e}"))
}

fn pg_time(t: NaiveDateTime) -> String {
    format!("{}+00", t.format("%Y-%m-%d %H:%M:%S"))
}

#[derive(Default)]
struct Tally {
    questions: usize,
    hits: [f64; 4],
}

const KS: [usize; 4] = [1, 5, 10, 20];
const RETRIEVERS: [&str; 3] = ["recall", "vector", "bm25"];

impl Tally {
    fn add(&mut self, evidence: &[String], ranked: &[String]) {
        self.questions += 1;
        for (i, k) in KS.iter().enumerate() {
            let top = &ranked[..ranked.len().min(*k)];
            let found = evidence.iter().filter(|e| top.contains(e)).count();
            self.hits[i] += found as f64 / evidence.len() as f64;
        }
    }
    fn recall_at(&self) -> Vec<f64> {
        self.hits.iter().map(|h| h / self.questions.max(1) as f64).collect()
    }
    fn json(&self) -> Value {
        let r = self.recall_at();
        serde_json::json!({"questions": self.questions, "r@1": r[0], "r@5": r[1], "r@10": r[2], "r@20": r[3]})
    }
    fn line(&self, name: &str) -> String {
        let r: Vec<String> = self.recall_at().iter().map(|h| format!("{h:.3}")).collect();
        format!("| {name:<38} | {} | {} | {} | {} |", r[0], r[1], r[2], r[3])
    }
}

/// BM25 over every memory with the store's own lexicon (k1 1.2, b 0.75, English stems): the
/// lexical baseline, scanned whole so nothing of recall's candidate selection helps it.
const BM25: &str = "WITH s AS (SELECT n_docs, avg_length FROM dionysus.lexicon_stats), \
     q AS (SELECT l.lexeme, ln(1 + (s.n_docs - coalesce(x.ndoc, 0) + 0.5) / (coalesce(x.ndoc, 0) + 0.5)) AS idf \
           FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS l(lexeme) CROSS JOIN s \
           LEFT JOIN dionysus.lexicon x ON x.lexeme = l.lexeme) \
     SELECT m.id FROM dionysus.memories m CROSS JOIN s \
     CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS tf FROM unnest(m.search) u) t \
     JOIN q ON q.lexeme = t.lexeme \
     GROUP BY m.id ORDER BY sum(q.idf * t.tf * 2.2 / (t.tf + 1.2 * (0.25 + 0.75 * length(m.search) / s.avg_length))) DESC, m.id \
     LIMIT 20";

pub async fn locomo(path: &str, json: bool) {
    let data: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).expect("read LoCoMo file")).expect("LoCoMo JSON");
    let reuse = std::env::var("DIONYSUS_BENCH_REUSE").is_ok_and(|v| v == "1");
    // Per retriever: overall and per category.
    let mut tallies: BTreeMap<(&str, i64), Tally> = BTreeMap::new();
    let mut latencies = Vec::new();
    for conv in &data {
        let name = conv["sample_id"].as_str().unwrap_or("conv").replace('-', "_");
        let (c, _db) = store(conv, &name, reuse).await;
        // DIONYSUS_BENCH_CONFIG="key=value,...": recall_config for this run (trying knobs).
        for kv in std::env::var("DIONYSUS_BENCH_CONFIG").unwrap_or_default().split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').expect("DIONYSUS_BENCH_CONFIG: key=value,...");
            let v: f64 = v.parse().expect("DIONYSUS_BENCH_CONFIG: a number");
            c.execute(
                "INSERT INTO dionysus.recall_config (key, value, description) VALUES ($1, $2, 'bench') \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&k, &v],
            )
            .await
            .unwrap();
        }
        let dia_of: HashMap<Uuid, String> = c
            .query("SELECT id, metadata ->> 'dia_id' FROM dionysus.memories", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default()))
            .collect();
        let ranked_by = |rows: Vec<tokio_postgres::Row>| -> Vec<String> {
            rows.iter().map(|r| dia_of.get(&r.get::<_, Uuid>(0)).cloned().unwrap_or_default()).collect()
        };
        for qa in conv["qa"].as_array().unwrap() {
            let cat = qa["category"].as_i64().unwrap_or(0);
            let evidence: Vec<String> = qa["evidence"].as_array().map(|a| a.iter().filter_map(|e| e.as_str().map(String::from)).collect()).unwrap_or_default();
            if !(1..=4).contains(&cat) || evidence.is_empty() {
                continue;
            }
            let question = qa["question"].as_str().unwrap();
            let t = Instant::now();
            let recalled = ranked_by(c.query("SELECT memory_id FROM dionysus.recall($1, 20)", &[&question]).await.unwrap());
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            let vector = ranked_by(
                c.query("SELECT id FROM dionysus.memories ORDER BY embedding <=> dionysus.embed($1) LIMIT 20", &[&question]).await.unwrap(),
            );
            let bm25 = ranked_by(c.query(BM25, &[&question]).await.unwrap());
            for (retriever, ranked) in RETRIEVERS.iter().zip([&recalled, &vector, &bm25]) {
                tallies.entry((retriever, 0)).or_default().add(&evidence, ranked);
                tallies.entry((retriever, cat)).or_default().add(&evidence, ranked);
            }
        }
    }
    let (p50, p95) = p50_p95(&mut latencies);
    let file = std::path::Path::new(path).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| path.to_string());
    let questions = tallies.get(&("recall", 0)).map(|t| t.questions).unwrap_or(0);
    if json {
        // One line to track results by: the file, each retriever overall and per category.
        let mut out = serde_json::json!({"file": file, "conversations": data.len(), "questions": questions,
                                         "recall_latency_ms": {"p50": p50, "p95": p95}});
        for r in RETRIEVERS {
            let cats: serde_json::Map<String, Value> =
                tallies.iter().filter(|((n, c), _)| *n == r && *c > 0).map(|((_, c), t)| (c.to_string(), t.json())).collect();
            out[r] = serde_json::json!({"all": tallies[&(r, 0)].json(), "categories": cats});
        }
        println!("{out}");
        return;
    }
    println!("LoCoMo {file} ({} conversations): {questions} questions (categories 1-4: multi-hop, temporal, open-domain, single-hop)", data.len());
    println!("| retriever (same run)                   | R@1   | R@5   | R@10  | R@20  |");
    println!("|----------------------------------------|-------|-------|-------|-------|");
    for r in RETRIEVERS {
        let label = match r {
            "recall" => "dionysus.recall",
            "vector" => "pure vector (cosine)",
            _ => "BM25 (k1 1.2, b 0.75)",
        };
        println!("{}", tallies[&(r, 0)].line(label));
        for ((_, cat), t) in tallies.iter().filter(|((n, c), _)| *n == r && *c > 0) {
            println!("{}", t.line(&format!("  category {cat} ({} q)", t.questions)));
        }
    }
    println!("recall latency on these stores: p50 {p50:.1} ms, p95 {p95:.1} ms");
}

/// The conversation's store: one memory per turn ("Speaker: text"), one episode per session,
/// maintenance run to the end. With `reuse`, a store left by an earlier run is taken as it is.
async fn store(conv: &Value, name: &str, reuse: bool) -> (Client, Option<TestDb>) {
    if reuse {
        let db = format!("locomo_keep_{name}");
        let admin = connect("postgres").await;
        let exists = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&db]).await.unwrap().is_some();
        if !exists {
            admin.batch_execute(&format!("CREATE DATABASE {db}")).await.unwrap();
            let c = connect(&db).await;
            c.batch_execute("CREATE EXTENSION dionysus CASCADE").await.unwrap();
            ingest(&c, conv, name).await;
            return (c, None);
        }
        let c = connect(&db).await;
        // The lexicon is the one thing a changed extension may count differently.
        c.query_one("SELECT dionysus.refresh_lexicon()", &[]).await.unwrap();
        return (c, None);
    }
    let db = TestDb::new(&format!("locomo_{name}")).await;
    ingest(&db.client, conv, name).await;
    (db.connect().await, Some(db))
}

async fn ingest(c: &Client, conv: &Value, name: &str) {
    let conversation = conv["conversation"].as_object().expect("conversation");
    let mut sessions: Vec<(usize, &Value, NaiveDateTime)> = conversation
        .iter()
        .filter_map(|(k, v)| {
            let n: usize = k.strip_prefix("session_")?.parse().ok()?;
            let when = conversation.get(&format!("session_{n}_date_time"))?.as_str()?;
            Some((n, v, locomo_time(when)))
        })
        .collect();
    sessions.sort_by_key(|s| s.0);
    let started = Instant::now();
    let mut turns_total = 0;
    for (n, turns, when) in &sessions {
        let ep: Uuid = c
            .query_one("SELECT dionysus.open_episode($1, $2, $3::text::timestamptz)", &[&name, &format!("session {n}"), &pg_time(*when)])
            .await
            .unwrap()
            .get(0);
        let items: Vec<Value> = turns
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                serde_json::json!({
                    "content": format!("{}: {}", t["speaker"].as_str().unwrap_or(""), t["text"].as_str().unwrap_or("")),
                    "type": "episodic",
                    "source": name,
                    // Turns keep their order within the session: one second apart.
                    "created_at": pg_time(*when + chrono::Duration::seconds(i as i64)),
                    "metadata": {"dia_id": t["dia_id"]},
                })
            })
            .collect();
        turns_total += items.len();
        c.query("SELECT ord, memory_id FROM dionysus.remember_batch($1)", &[&Value::Array(items)]).await.unwrap();
        c.execute("SELECT dionysus.close_episode($1)", &[&ep]).await.unwrap();
    }
    let ingest = started.elapsed().as_secs_f64();
    let m = run_maintenance_to_the_end(c).await;
    c.query_one("SELECT dionysus.refresh_lexicon()", &[]).await.unwrap();
    eprintln!("{name}: {turns_total} turns ingested in {ingest:.1} s, maintenance {m}");
}
