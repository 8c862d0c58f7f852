//! A person leaving (`forget_person`) in a log of many people's turns, with every foreign key
//! indexed and, in the same run, with the indexes on the message log's keys dropped (the schema
//! before 0.20.0): deleting each of the person's turns then read the whole log for the turns
//! that point at it (prev_message_id, reply_to). The turns (theirs and the companion's to them,
//! alternating) are written directly, with no memories (no embedding): the figure is the
//! erasure of a log, not the fill.
use dionysus_tests::TestDb;
use std::time::Instant;

pub async fn leave(people: usize, turns: usize) {
    let db = TestDb::new(&format!("bench_leave_{people}")).await;
    let c = &db.client;
    db.hold_worker_off().await;
    println!("Leaving: {people} people with {turns} turns each ({} in the log); one person leaves, then another\n", people * turns);
    let t = Instant::now();
    c.batch_execute(&format!(
        "INSERT INTO dionysus.messages (id, platform, platform_message_id, channel_id, author_id, is_bot, content, created_at, person, prev_message_id)
         SELECT id, 'bench', 'm' || n, 'dm:p' || p, CASE WHEN (n / {people}) % 2 = 0 THEN 'p' || p ELSE 'bot' END, (n / {people}) % 2 = 1,
                'turn ' || n || ' of person ' || p, now() - make_interval(secs => {total} - n), 'bench:p' || p,
                lag(id) OVER (PARTITION BY p ORDER BY n)
           FROM (SELECT gen_random_uuid() AS id, n, n % {people} AS p FROM generate_series(1, {total}) n) x
          ORDER BY n;
         INSERT INTO dionysus.people (person, last_message_at) SELECT 'bench:p' || p, now() FROM generate_series(0, {people} - 1) p
         ON CONFLICT (person) DO NOTHING;
         ANALYZE dionysus.messages;",
        total = people * turns
    ))
    .await
    .unwrap();
    println!("filled in {:.1} s\n", t.elapsed().as_secs_f64());
    println!("| schema | forget_person (one of {people}, {turns} turns) | messages deleted |");
    println!("|---|---|---|");
    let mut timed = vec![];
    for (who, label) in [("bench:p1", "every foreign key indexed (0.20.0)"), ("bench:p2", "the log's keys unindexed (before)")] {
        if who == "bench:p2" {
            c.batch_execute("DROP INDEX dionysus.messages_prev_message_id; DROP INDEX dionysus.messages_reply_to;").await.unwrap();
        }
        let t = Instant::now();
        let r: serde_json::Value = c.query_one("SELECT dionysus.forget_person($1)", &[&who]).await.unwrap().get(0);
        let s = t.elapsed().as_secs_f64();
        timed.push(s);
        println!("| {label} | {s:.2} s | {} |", r["forgotten"]["messages"]);
    }
    println!("\nunindexed ÷ indexed: {:.0}×", timed[1] / timed[0]);
}
