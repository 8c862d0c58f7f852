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

/// `cargo pgrx test --runas` (scripts/test.sh's units) installs its build with `sudo cp`, over
/// the library in place: a server running beside it, which has that file mapped, had its code
/// changed under it and died of SIGBUS. scripts/fresh-library.sh, run first, gives the path a
/// new file: the running server keeps the one it loaded, and keeps answering.
#[tokio::test]
async fn a_fresh_library_file_leaves_a_running_servers_code_alone() {
    use std::os::unix::fs::MetadataExt;
    let data = std::env::var("DIONYSUS_TEST_DATA").expect("DIONYSUS_TEST_DATA: run under scripts/test.sh");
    let major = std::env::var("PG_MAJOR").unwrap_or_else(|_| "15".into());
    let libdir = std::process::Command::new(format!("/usr/lib/postgresql/{major}/bin/pg_config")).arg("--pkglibdir").output().expect("pg_config");
    let lib = format!("{}/dionysus.so", String::from_utf8_lossy(&libdir.stdout).trim());
    let postmaster = std::fs::read_to_string(format!("{data}/postmaster.pid")).expect("the test cluster's postmaster.pid");
    let postmaster = postmaster.lines().next().unwrap_or_default().trim().to_string();
    // The inodes of the library files the postmaster has mapped (preloaded), from /proc/PID/maps.
    let mapped = || -> Vec<u64> {
        let maps = std::fs::read_to_string(format!("/proc/{postmaster}/maps")).expect("the postmaster's maps");
        maps.lines().filter(|l| l.contains("/dionysus.so")).filter_map(|l| l.split_whitespace().nth(4)?.parse().ok()).collect()
    };
    let loaded = mapped();
    let before = std::fs::metadata(&lib).expect("the installed library").ino();
    assert!(loaded.contains(&before), "the running server maps the installed library (started after scripts/install.sh)");
    let db = dionysus_tests::TestDb::new("fresh_library").await;
    db.client.execute("SELECT dionysus.remember('The kettle is in the second cupboard')", &[]).await.unwrap();

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let status = std::process::Command::new(format!("{root}/scripts/fresh-library.sh")).status().expect("scripts/fresh-library.sh");
    assert!(status.success(), "scripts/fresh-library.sh failed");

    let now = std::fs::metadata(&lib).expect("the installed library").ino();
    assert!(!loaded.contains(&now), "the path still names the file the running server has mapped: an install would write into its code");
    assert_eq!(mapped(), loaded, "the server keeps the library it loaded");
    let top: String = db.client.query_one("SELECT content FROM dionysus.recall('where is the kettle?', 1)", &[]).await.unwrap().get(0);
    assert_eq!(top, "The kettle is in the second cupboard");
}
