//! The cost of the people organ (#13 §6): what a turn's extraction pays to resolve and store
//! its people (three people and a relation, against a life of P people), and what every chat
//! context pays to find the people a message names (people_in_context), against the same call
//! for a person with nobody known (the baseline in the same run). The lives are filled through
//! the organ's own function; other people's lives (ten times as many rows) sit beside.
use dionysus_tests::{p50_p95, TestDb};
use std::time::Instant;

const NAMES: [&str; 12] = ["Ana", "Lea", "Marco", "Tom", "Sara", "Ivo", "Rita", "Joao", "Mira", "Nuno", "Eva", "Rui"];

pub async fn people(p: usize) {
    let db = TestDb::new(&format!("bench_people_{p}")).await;
    let c = &db.client;
    println!("People benchmark: a life of {p} people, {} in others' lives beside (one backend)", p * 10);
    let t = Instant::now();
    // Lives through note_person: the viewer's, then ten others' of the same size.
    let names = NAMES.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
    c.batch_execute(&format!(
        "SELECT dionysus_internal.note_person(o, jsonb_build_object('name', 'Person' || i || ' ' || (ARRAY[{names}])[1 + i % 12],
                                                                    'relation', (ARRAY['friend', 'colleague', 'cousin', 'neighbour'])[1 + i % 4],
                                                                    'traits', jsonb_build_array('kind'), 'topics', jsonb_build_array('work')), NULL)
           FROM generate_series(0, 10) k, LATERAL (SELECT CASE WHEN k = 0 THEN 'bench:viewer' ELSE 'bench:other' || k END AS o) x,
                generate_series(1, {p}) i;
         SELECT dionysus_internal.note_person('bench:viewer', '{{\"name\": \"Marco\", \"relation\": \"boss\"}}', NULL);
         SELECT dionysus_internal.note_person('bench:viewer', '{{\"name\": \"Lea\", \"relation\": \"sister\"}}', NULL);
         SELECT dionysus_internal.note_relation('bench:viewer', '{{\"a\": \"Marco\", \"b\": \"Lea\", \"kind\": \"dislikes\", \"source\": \"said\"}}', NULL);"
    ))
    .await
    .unwrap();
    c.batch_execute("VACUUM ANALYZE dionysus.known_persons, dionysus.person_aliases, dionysus.person_relations").await.unwrap();
    println!("filled in {:.1} s", t.elapsed().as_secs_f64());

    // Every chat context: the message's words and word groups resolved in the viewer's life.
    let message = "Dinner tonight with my boss and my sister at the new place near the river, I hope Marco behaves \
                   and that Lea does not bring up the thing from last week again, wish me luck";
    let words: Vec<String> = message.to_lowercase().split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()).map(str::to_string).collect();
    let mut grams = words.clone();
    grams.extend(words.windows(2).map(|w| w.join(" ")));
    grams.extend(words.windows(3).map(|w| w.join(" ")));
    // Prepared once, as the driver's pool does: the figures are the call, not its parsing.
    let stmt = c.prepare("SELECT dionysus_internal.people_in_context($1, $2)").await.unwrap();
    let ask = |viewer: &'static str| {
        let (grams, stmt) = (grams.clone(), stmt.clone());
        async move {
            let t = Instant::now();
            let v: serde_json::Value = c.query_one(&stmt, &[&viewer, &grams]).await.unwrap().get(0);
            (t.elapsed().as_secs_f64() * 1000.0, v.as_array().map_or(0, Vec::len))
        }
    };
    let (mut known, mut nobody) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        ask("bench:viewer").await;
    }
    for _ in 0..300 {
        let (ms, n) = ask("bench:viewer").await;
        assert_eq!(n, 2, "the boss and the sister");
        known.push(ms);
        nobody.push(ask("bench:nobody").await.0);
    }
    let (k50, k95) = p50_p95(&mut known);
    let (n50, n95) = p50_p95(&mut nobody);
    // The same calls timed inside the server (clock_timestamp around each): the organ's own cost
    // without the client's round trip, which the figures above include.
    c.batch_execute(
        "CREATE FUNCTION pg_temp.timed(viewer text, grams text[], n integer) RETURNS SETOF double precision LANGUAGE plpgsql AS $$
         DECLARE t timestamptz;
         BEGIN
             FOR i IN 1..n LOOP
                 t := clock_timestamp();
                 PERFORM dionysus_internal.people_in_context(viewer, grams);
                 RETURN NEXT extract(epoch FROM clock_timestamp() - t) * 1000;
             END LOOP;
         END $$",
    )
    .await
    .unwrap();
    let timed = |viewer: &'static str| {
        let grams = grams.clone();
        async move {
            let rows = c.query("SELECT pg_temp.timed($1, $2, 300)", &[&viewer, &grams]).await.unwrap();
            rows.iter().map(|r| r.get::<_, f64>(0)).collect::<Vec<f64>>()
        }
    };
    let (s50, s95) = p50_p95(&mut timed("bench:viewer").await);
    let (z50, z95) = p50_p95(&mut timed("bench:nobody").await);
    println!("people in a chat context ({} word groups, 2 named), in the server: {s50:.3} / {s95:.3} ms p50/p95 per call \
              (a person with nobody known: {z50:.3} / {z95:.3} ms)", grams.len());
    println!("  as a client sees it (a prepared call's round trip): {k50:.2} / {k95:.2} ms (nobody known: {n50:.2} / {n95:.2} ms; ratio {:.1}×)",
             k50 / n50);

    // A turn's extraction: three people (one new, one by alias, one by relation word) and a relation.
    let mut turns = Vec::new();
    let store = c.prepare("SELECT dionysus_internal.store_people('bench:viewer', $1, $2, NULL)").await.unwrap();
    for i in 0..300 {
        let people = serde_json::json!([{"name": format!("Newcomer {i}"), "relation": "friend", "feeling": 0.5},
                                        {"name": "Marco", "traits": ["demanding"]}, {"name": "my sister", "topics": ["the move"]}]);
        let relations = serde_json::json!([{"a": "Marco", "b": format!("Newcomer {i}"), "kind": "works with", "source": "said"}]);
        let t = Instant::now();
        c.query_one(&store, &[&people, &relations]).await.unwrap();
        turns.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (t50, t95) = p50_p95(&mut turns);
    println!("a turn's people stored (3 people, 1 relation): {t50:.2} / {t95:.2} ms p50/p95 per turn");
}
