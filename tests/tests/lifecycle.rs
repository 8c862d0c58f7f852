//! The server with the worker inside: it starts, works, and stops cleanly, in a cluster with
//! no "postgres" database. Uses a cluster of its own so stopping it disturbs no other test.
use std::time::{Duration, Instant};

#[tokio::test]
async fn the_server_stops_cleanly_while_the_worker_runs() {
    // Only under scripts/test.sh, which also provides sudo and the installed extension.
    let _ = dionysus_tests::cluster_conninfo();
    let (data, port) = dionysus_tests::own_cluster("lifecycle", 31400, &["dionysus.worker_interval = 1"]);
    // The agent's database, and no "postgres" database at all: the launchers must not need one.
    let connect = |db: &str| {
        let conninfo = format!("host=127.0.0.1 port={port} user=postgres dbname={db}");
        async move { tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await.unwrap() }
    };
    let (setup, setup_conn) = connect("postgres").await;
    let setup_conn = tokio::spawn(setup_conn);
    setup.batch_execute("CREATE DATABASE agent").await.unwrap();
    drop(setup);
    let _ = setup_conn.await;
    let (client, conn) = connect("agent").await;
    let conn = tokio::spawn(conn);
    client.batch_execute("DROP DATABASE postgres WITH (FORCE)").await.unwrap();
    client.batch_execute("CREATE EXTENSION dionysus CASCADE").await.unwrap();
    for i in 0..30 {
        client.execute("SELECT dionysus.remember($1)", &[&format!("lifecycle memory {i}")]).await.unwrap();
    }
    // Let the worker start working on this database.
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.query_one("SELECT last_worker_run FROM dionysus.memory_health", &[]).await.unwrap().get::<_, Option<std::time::SystemTime>>(0).is_none() {
        assert!(Instant::now() < deadline, "no maintenance pass within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Stop while a pass is running (its launcher waits for it): a backlog keeps it busy, and the
    // stop comes once the pass shows in pg_stat_activity. (pgrx clears its SIGTERM flag when
    // read: a launcher that read it there and forgot it waited for its next interval forever.)
    client
        .execute(
            "SELECT count(*) FROM dionysus.remember_batch((SELECT jsonb_agg(jsonb_build_object('content', 'backlog ' || g || ' of the garden ' || (g % 7))) \
               FROM generate_series(1, 400) g))",
            &[],
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while client
        .query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'dionysus maintenance'", &[])
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(Instant::now() < deadline, "no maintenance pass over the backlog within 60 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(client);
    let _ = conn.await;
    assert!(dionysus_tests::cluster_sh(&["stop", &data]));
    let log = std::fs::read_to_string(format!("{data}/server.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&data);
    for launcher in ["maintenance", "scheduler"] {
        assert!(log.contains(&format!("dionysus {launcher} launcher stopped")), "the {launcher} launcher did not stop cleanly:\n{log}");
    }
    assert!(log.contains("database system is shut down"), "{log}");
    // (A pass may still meet the dropped database once, if the launcher listed it just before.)
    assert!(!log.contains("database \"postgres\" does not exist"), "a launcher needed the postgres database:\n{log}");
    assert!(!log.contains("terminated by signal"), "a worker crashed:\n{log}");
    // A hung launcher makes scripts/cluster.sh escalate to an immediate shutdown.
    assert!(!log.contains("immediate shutdown request"), "fast shutdown did not complete:\n{log}");
}
