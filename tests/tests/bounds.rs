//! Trust III §4: a long embedding can be stopped, and a batch is bounded. Until 0.19.0 the
//! embedding loop never looked at interrupts: 6,000 texts ran 25 s under statement_timeout = 1s,
//! and 100,000 ignored pg_cancel_backend and pg_terminate_backend for minutes.
use dionysus_tests::*;
use std::time::Duration;

/// The largest batch one call may embed: texts near the model's 256 tokens, all different, so
/// that embedding all of them takes minutes on this machine (over a hundred seconds).
fn long_batch(tag: &str) -> String {
    let words = "harvest hive meadow clover pollen queen drone comb wax smoke veil frame nectar swarm ";
    let text = words.repeat(14);
    format!("ARRAY(SELECT '{tag} ' || g || ' {text}' FROM generate_series(1, 4096) g)")
}

/// A guard against a hang, not a measure: the batch needs minutes; a stop honoured between
/// chunks takes a fraction of a second.
const HANG: Duration = Duration::from_secs(60);

/// Starts the batch on its own connection; returns the backend's pid once it is running it.
async fn start_long_embed(db: &TestDb, tag: &str) -> (i32, tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>) {
    let runner = db.connect().await;
    let pid: i32 = runner.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let sql = format!("SELECT count(*) FROM dionysus.embed_batch({})", long_batch(tag));
    let task = tokio::spawn(async move { runner.batch_execute(&sql).await });
    let watcher = db.connect().await;
    loop {
        let running: bool = watcher
            .query_one("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE '%embed_batch%')", &[&pid])
            .await
            .unwrap()
            .get(0);
        if running {
            break;
        }
        assert!(!task.is_finished(), "the batch ended before it was seen running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (pid, task)
}

#[tokio::test]
async fn a_long_embedding_stops_at_a_cancel_a_timeout_and_a_terminate() {
    let db = TestDb::new("embed_stop").await;
    let admin = connect("postgres").await;

    // pg_cancel_backend.
    let (pid, task) = start_long_embed(&db, "cancel").await;
    admin.query_one("SELECT pg_cancel_backend($1)", &[&pid]).await.unwrap();
    let e = tokio::time::timeout(HANG, task).await.expect("the cancel was not honoured").unwrap().expect_err("a cancelled batch returned");
    assert_eq!(sqlstate(&e), "57014", "{e}");

    // statement_timeout.
    let c = db.connect().await;
    c.batch_execute("SET statement_timeout = '1s'").await.unwrap();
    let sql = format!("SELECT count(*) FROM dionysus.embed_batch({})", long_batch("timeout"));
    let e = tokio::time::timeout(HANG, c.batch_execute(&sql)).await.expect("statement_timeout was not honoured").expect_err("ran past its timeout");
    assert_eq!(sqlstate(&e), "57014", "{e}");
    let msg = e.as_db_error().map(|d| d.message().to_string()).unwrap_or_default();
    assert!(msg.contains("statement timeout"), "{msg}");

    // pg_terminate_backend: the backend goes, its connection with it.
    let (pid, task) = start_long_embed(&db, "terminate").await;
    admin.query_one("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
    tokio::time::timeout(HANG, task).await.expect("the terminate was not honoured").unwrap().expect_err("a terminated batch returned");
    loop {
        let gone: bool = admin.query_one("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", &[&pid]).await.unwrap().get(0);
        if gone {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Nothing of the stopped batches was cached (each would have been written at its end).
    let cached: i64 = db.client.query_one("SELECT count(*) FROM dionysus.embedding_cache", &[]).await.unwrap().get(0);
    assert_eq!(cached, 0);
}

#[tokio::test]
async fn a_batch_past_its_bounds_is_refused_before_any_embedding() {
    let db = TestDb::new("embed_bounds").await;
    let c = &db.client;
    for (sql, what) in [
        ("SELECT count(*) FROM dionysus.embed_batch(ARRAY(SELECT 'a' || g FROM generate_series(1, 4097) g))", "4097 texts"),
        ("SELECT count(*) FROM dionysus.embed_batch(ARRAY(SELECT repeat('b', 90000) || g FROM generate_series(1, 200) g))", "bytes"),
        ("SELECT dionysus_internal.archetype_centroid(ARRAY(SELECT 'a' || g FROM generate_series(1, 5000) g))", "5000 texts"),
    ] {
        let e = c.batch_execute(sql).await.expect_err(what);
        let db_err = e.as_db_error().unwrap_or_else(|| panic!("{what}: {e}"));
        assert_eq!(db_err.code().code(), "54000", "{what}: {}", db_err.message());
        assert!(db_err.message().contains("\"contents\""), "{what}: {}", db_err.message());
    }
    let cached: i64 = c.query_one("SELECT count(*) FROM dionysus.embedding_cache", &[]).await.unwrap().get(0);
    assert_eq!(cached, 0, "a refused batch embedded something");
}
