//! The store: remember, batches, facts, supersede/archive/forget, episodes, graph, triples, concepts.
use dionysus_tests::*;
use uuid::Uuid;

#[tokio::test]
async fn remember_stores_every_field_and_embeds_inside_the_database() {
    let db = TestDb::new("remember").await;
    let c = &db.client;
    let id: Uuid = c
        .query_one(
            "SELECT dionysus.remember('Met Sam at the climbing gym', 'episodic', importance => 0.7, valence => 0.5, \
               metadata => '{\"channel\": \"discord\"}', source => 'dm', created_at => '2024-03-01 18:00+00', \
               summary => 'Met Sam climbing', micro => 'Sam, gym', confidence => 0.9)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let r = c
        .query_one(
            "SELECT type, content, summary, micro, importance, confidence, valence, status, source, metadata->>'channel', \
                    created_at = '2024-03-01 18:00+00', episode_id IS NOT NULL, sequence_order \
             FROM dionysus.recall_by_id($1)",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "episodic");
    assert_eq!(r.get::<_, String>(1), "Met Sam at the climbing gym");
    assert_eq!(r.get::<_, Option<String>>(2).as_deref(), Some("Met Sam climbing"));
    assert_eq!(r.get::<_, Option<String>>(3).as_deref(), Some("Sam, gym"));
    assert!((r.get::<_, f64>(4) - 0.7).abs() < 1e-6);
    assert!((r.get::<_, f64>(5) - 0.9).abs() < 1e-6);
    assert!((r.get::<_, f64>(6) - 0.5).abs() < 1e-6);
    assert_eq!(r.get::<_, String>(7), "active");
    assert_eq!(r.get::<_, Option<String>>(8).as_deref(), Some("dm"));
    assert_eq!(r.get::<_, Option<String>>(9).as_deref(), Some("discord"));
    assert!(r.get::<_, bool>(10), "created_at is settable for imported history");
    assert!(r.get::<_, bool>(11), "episodic memories join an episode");
    assert_eq!(r.get::<_, Option<i32>>(12), Some(1));
    // The stored embedding is the model's: unit length, 384 dimensions, equal to embed().
    let e = c
        .query_one(
            "SELECT vector_dims(embedding), round(vector_norm(embedding)::numeric, 4)::float8, \
                    embedding = dionysus.embed('Met Sam at the climbing gym') FROM dionysus.memories WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(e.get::<_, i32>(0), 384);
    assert_eq!(e.get::<_, f64>(1), 1.0);
    assert!(e.get::<_, bool>(2));
}

#[tokio::test]
async fn embed_batch_matches_single_embeddings_and_the_cache_is_used() {
    let db = TestDb::new("embed").await;
    let c = &db.client;
    let same: bool = c
        .query_one(
            "SELECT bool_and(b.embedding = dionysus.embed(t.s)) FROM dionysus.embed_batch(ARRAY['one thing', 'another thing', 'a third']) b \
             JOIN unnest(ARRAY['one thing', 'another thing', 'a third']) WITH ORDINALITY AS t(s, ord) ON t.ord = b.ord",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(same);
    assert_eq!(count(c, "embedding_cache").await, 3);
    // Paraphrases are close, unrelated texts are not: the model is real.
    let r = c
        .query_one(
            "SELECT 1 - (dionysus.embed('The cat sits on the mat') <=> dionysus.embed('A kitten is resting on the rug')), \
                    1 - (dionysus.embed('The cat sits on the mat') <=> dionysus.embed('Quarterly revenue grew by 4 percent'))",
            &[],
        )
        .await
        .unwrap();
    let (close, far): (f64, f64) = (r.get(0), r.get(1));
    assert!(close > 0.5 && far < 0.2 && close > far + 0.3, "close {close}, far {far}");
}

#[tokio::test]
async fn remember_batch_returns_ids_in_order_and_is_all_or_nothing() {
    let db = TestDb::new("batch").await;
    let c = &db.client;
    let rows = c
        .query(
            "SELECT ord, memory_id FROM dionysus.remember_batch('[\
               {\"content\": \"first\", \"type\": \"semantic\"},\
               {\"content\": \"second\", \"importance\": 0.9, \"created_at\": \"2020-05-05T10:00:00Z\"},\
               {\"content\": \"third\", \"metadata\": {\"k\": 1}}]')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    for (i, r) in rows.iter().enumerate() {
        let id: Uuid = r.get(1);
        let content: String =
            c.query_one("SELECT content FROM dionysus.memories WHERE id = $1", &[&id]).await.unwrap().get(0);
        assert_eq!(content, ["first", "second", "third"][i]);
        assert_eq!(r.get::<_, i32>(0), i as i32 + 1);
    }
    let before = count(c, "memories").await;
    let (state, msg) = expect_error(
        c,
        "SELECT * FROM dionysus.remember_batch('[{\"content\": \"fine\"}, {\"content\": \"bad\", \"importance\": 3}]')",
    )
    .await;
    assert_eq!(state, "22023");
    assert!(msg.contains("items[1].importance"), "{msg}");
    assert_eq!(count(c, "memories").await, before, "nothing half-written");
}

#[tokio::test]
async fn learning_a_near_duplicate_fact_confirms_it() {
    let db = TestDb::new("facts").await;
    let c = &db.client;
    let a: Uuid = c
        .query_one("SELECT dionysus.learn('The user is allergic to shellfish', subject => 'user', confidence => 0.6)", &[])
        .await
        .unwrap()
        .get(0);
    let b: Uuid = c
        .query_one("SELECT dionysus.learn('The user is allergic to shellfish.', confidence => 0.9)", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(a, b, "a ≥ 0.95 similar fact confirms the first");
    let r = c
        .query_one(
            "SELECT f.state::text, f.confirmations, m.confidence, f.last_confirmed IS NOT NULL \
             FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id WHERE f.memory_id = $1",
            &[&a],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "confirmed");
    assert_eq!(r.get::<_, i32>(1), 1);
    assert!((r.get::<_, f32>(2) - 0.9).abs() < 1e-6);
    assert!(r.get::<_, bool>(3));
    let other: Uuid =
        c.query_one("SELECT dionysus.learn('The user lives in a flat in Vienna')", &[]).await.unwrap().get(0);
    assert_ne!(other, a);
    assert_eq!(count(c, "facts").await, 2);
}

#[tokio::test]
async fn supersede_archive_and_forget_follow_the_lifecycle() {
    let db = TestDb::new("lifecycle").await;
    let c = &db.client;
    let old: Uuid = c.query_one("SELECT dionysus.learn('The user works at Acme', subject => 'user', category => 'work')", &[]).await.unwrap().get(0);
    let new: Uuid = c.query_one("SELECT dionysus.supersede($1, 'The user works at Globex')", &[&old]).await.unwrap().get(0);
    let r = c
        .query_one(
            "SELECT m.status::text, m.superseded_by, f.state::text FROM dionysus.memories m JOIN dionysus.facts f ON f.memory_id = m.id WHERE m.id = $1",
            &[&old],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "superseded");
    assert_eq!(r.get::<_, Option<Uuid>>(1), Some(new));
    assert_eq!(r.get::<_, String>(2), "superseded");
    let n = c.query_one("SELECT state::text, subject, category FROM dionysus.facts WHERE memory_id = $1", &[&new]).await.unwrap();
    assert_eq!((n.get::<_, String>(0), n.get::<_, Option<String>>(1), n.get::<_, Option<String>>(2)),
               ("learned".into(), Some("user".into()), Some("work".into())));
    let hits: Vec<Uuid> = c.query("SELECT memory_id FROM dionysus.recall('where does the user work?', 5)", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert!(hits.contains(&new) && !hits.contains(&old), "superseded memories are not recalled");
    let (state, _) = expect_error(c, &format!("SELECT dionysus.supersede('{old}', 'again')")).await;
    assert_eq!(state, "22023");

    c.execute("SELECT dionysus.archive($1)", &[&new]).await.unwrap();
    let st: String = c.query_one("SELECT state::text FROM dionysus.facts WHERE memory_id = $1", &[&new]).await.unwrap().get(0);
    assert_eq!(st, "deactivated");
    assert!(c.query("SELECT 1 FROM dionysus.recall('where does the user work?', 5) WHERE memory_id = $1", &[&new]).await.unwrap().is_empty());

    c.execute("SELECT dionysus.forget($1)", &[&new]).await.unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.memories WHERE id = $1", &[&new]).await.unwrap().get::<_, i64>(0), 0);
}

#[tokio::test]
async fn a_gap_over_thirty_minutes_starts_a_new_episode() {
    let db = TestDb::new("episodes").await;
    // The scheduler's language work closes episodes quiet for 30 minutes of real time (these
    // are from 2024): between the turns it would end the one the next turn belongs to.
    db.hold_worker_off().await;
    let c = &db.client;
    for (t, src) in [("10:00", "chat"), ("10:20", "chat"), ("10:49", "chat"), ("11:30", "chat"), ("10:05", "other")] {
        c.execute(
            "SELECT dionysus.remember('turn at ' || $1, 'episodic', source => $2, created_at => ('2024-05-01 ' || $1 || '+00')::timestamptz)",
            &[&t, &src],
        )
        .await
        .unwrap();
    }
    let rows = c
        .query("SELECT source, memory_count, ended_at IS NOT NULL FROM dionysus.episodes ORDER BY source, started_at", &[])
        .await
        .unwrap();
    let got: Vec<(String, i32, bool)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    assert_eq!(got, vec![("chat".into(), 3, true), ("chat".into(), 1, false), ("other".into(), 1, false)]);
    let orders: Vec<i32> = c
        .query("SELECT sequence_order FROM dionysus.episode_memories em JOIN dionysus.episodes e ON e.id = em.episode_id \
                WHERE e.source = 'chat' AND e.ended_at IS NOT NULL ORDER BY 1", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(orders, vec![1, 2, 3]);
    // The gap is configurable.
    c.batch_execute("SET dionysus.episode_gap_minutes = 120").await.unwrap();
    c.execute("SELECT dionysus.remember('late turn', 'episodic', source => 'chat', created_at => '2024-05-01 13:00+00')", &[]).await.unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.episodes WHERE source = 'chat'", &[]).await.unwrap().get::<_, i64>(0), 2);
}

#[tokio::test]
async fn explicit_episodes_ignore_the_gap_until_closed() {
    let db = TestDb::new("explicit").await;
    let c = &db.client;
    let ep: Uuid = c.query_one("SELECT dionysus.open_episode('call', 'Weekly call', '2024-05-01 09:00+00')", &[]).await.unwrap().get(0);
    for t in ["09:00", "11:00", "15:00"] {
        c.execute("SELECT dionysus.remember('call note', 'episodic', source => 'call', created_at => ('2024-05-01 ' || $1 || '+00')::timestamptz)", &[&t]).await.unwrap();
    }
    let n: i32 = c.query_one("SELECT memory_count FROM dionysus.episodes WHERE id = $1", &[&ep]).await.unwrap().get(0);
    assert_eq!(n, 3);
    c.execute("SELECT dionysus.close_episode($1)", &[&ep]).await.unwrap();
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.close_episode('{ep}')")).await;
    assert_eq!(state, "22023");
    assert!(msg.contains("episode_id"));
    c.execute("SELECT dionysus.remember('after the call', 'episodic', source => 'call', created_at => '2024-05-01 15:05+00')", &[]).await.unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.episodes WHERE source = 'call'", &[]).await.unwrap().get::<_, i64>(0), 2);
}

#[tokio::test]
async fn connecting_twice_updates_the_edge() {
    let db = TestDb::new("connect").await;
    let c = &db.client;
    let a: Uuid = c.query_one("SELECT dionysus.remember('It rained all day')", &[]).await.unwrap().get(0);
    let b: Uuid = c.query_one("SELECT dionysus.remember('The picnic was cancelled')", &[]).await.unwrap().get(0);
    let first: bool = c.query_one("SELECT dionysus.connect($1, $2, 'causes', 0.4, '{\"why\": \"rain\"}')", &[&a, &b]).await.unwrap().get(0);
    let second: bool = c.query_one("SELECT dionysus.connect($1, $2, 'CAUSES', 0.9, '{\"note\": \"sure\"}')", &[&a, &b]).await.unwrap().get(0);
    assert!(first && !second);
    let r = c.query_one("SELECT count(*), max(weight)::float8, max(properties::text) FROM dionysus.memory_edges", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 1);
    assert!((r.get::<_, f64>(1) - 0.9).abs() < 1e-6);
    assert!(r.get::<_, String>(2).contains("why") && r.get::<_, String>(2).contains("note"));
    // A different relation is a different edge.
    c.execute("SELECT dionysus.connect($1, $2, 'SUPPORTS')", &[&a, &b]).await.unwrap();
    assert_eq!(count(c, "memory_edges").await, 2);
}

#[tokio::test]
async fn triples_and_concepts_upsert() {
    let db = TestDb::new("triples").await;
    let c = &db.client;
    let m: Uuid = c.query_one("SELECT dionysus.remember('Alice works at Acme')", &[]).await.unwrap().get(0);
    let t1: Uuid = c.query_one("SELECT dionysus.add_triple('Alice', 'works_at', 'Acme', 0.6, 'chat', $1)", &[&m]).await.unwrap().get(0);
    let t2: Uuid = c.query_one("SELECT dionysus.add_triple(' alice ', 'WORKS_AT', 'acme', 0.9)", &[]).await.unwrap().get(0);
    assert_eq!(t1, t2, "entities are case-insensitive; the same triple updates");
    let r = c.query_one("SELECT count(*), max(confidence)::float8, max(memory_id::text) FROM dionysus.triples", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 1);
    assert!((r.get::<_, f64>(1) - 0.9).abs() < 1e-6);
    assert_eq!(r.get::<_, Option<String>>(2), Some(m.to_string()), "provenance kept");
    let about = c.query("SELECT subject, predicate, object FROM dionysus.triples_about('ACME')", &[]).await.unwrap();
    assert_eq!(about.len(), 1);
    assert_eq!(about[0].get::<_, String>(1), "works_at");

    let k1: Uuid = c.query_one("SELECT dionysus.link_concept($1, 'Employment', 0.5, 'Life')", &[&m]).await.unwrap().get(0);
    let k2: Uuid = c.query_one("SELECT dionysus.link_concept($1, 'employment', 0.8)", &[&m]).await.unwrap().get(0);
    assert_eq!(k1, k2);
    let r = c.query_one(
        "SELECT (SELECT name FROM dionysus.concepts p WHERE p.id = k.parent_id), mc.strength::float8 \
         FROM dionysus.concepts k JOIN dionysus.memory_concepts mc ON mc.concept_id = k.id WHERE k.id = $1", &[&k1]).await.unwrap();
    assert_eq!(r.get::<_, Option<String>>(0).as_deref(), Some("Life"));
    assert!((r.get::<_, f64>(1) - 0.8).abs() < 1e-6);
}
