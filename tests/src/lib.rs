//! Helpers for the integration tests and benchmarks: each test gets a database of its own,
//! with the real extension, on the cluster `scripts/test.sh` starts (dionysus preloaded).
pub mod fake_discord;
pub mod fake_embeddings;
pub mod fake_llm;
pub mod running;

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio_postgres::{Client, NoTls};

/// libpq-style connection string of the test cluster, without a database name.
pub fn cluster_conninfo() -> String {
    std::env::var("DIONYSUS_TEST_CONNINFO").unwrap_or_else(|_| {
        panic!(
            "DIONYSUS_TEST_CONNINFO is not set: run the tests through scripts/test.sh, which starts a \
             cluster with dionysus preloaded (or set it to e.g. 'host=127.0.0.1 port=31329 user=postgres')"
        )
    })
}

pub async fn connect(dbname: &str) -> Client {
    let conninfo = format!("{} dbname={dbname}", cluster_conninfo());
    let (client, conn) = tokio_postgres::connect(&conninfo, NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {conninfo}: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);
static DRIVER_LOGIN: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// A fresh database with `CREATE EXTENSION dionysus CASCADE`, unique to the caller.
pub struct TestDb {
    pub name: String,
    pub client: Client,
}

impl TestDb {
    pub async fn new(label: &str) -> TestDb {
        let name = format!(
            "t_{}_{}_{}",
            label,
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let admin = connect("postgres").await;
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
        let client = connect(&name).await;
        client.batch_execute("CREATE EXTENSION dionysus CASCADE").await.expect("CREATE EXTENSION dionysus");
        // The nightly dream follows the wall clock's night (03:00 to 06:00 in UTC by default) in a
        // test that does not drive the clock: off, so no test depends on the hour CI runs at.
        // The dream's own tests turn it on and set the clock (TestDb::let_it_dream).
        client
            .batch_execute("UPDATE dionysus.proactive_config SET value = 0 WHERE key = 'dream_enabled'")
            .await
            .expect("dreams off");
        // The driver runs as the least-privileged role the extension creates (test cluster: trust).
        // Once per test binary: concurrent ALTER ROLEs of one role collide in pg_authid.
        DRIVER_LOGIN
            .get_or_init(|| async {
                client
                    .batch_execute(
                        "DO $$ BEGIN IF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'dionysus_driver') THEN \
                         ALTER ROLE dionysus_driver LOGIN; END IF; END $$",
                    )
                    .await
                    .expect("dionysus_driver can log in");
            })
            .await;
        TestDb { name, client }
    }

    /// The nightly dream on again (TestDb::new turns it off): for a test that drives the clock.
    pub async fn let_it_dream(&self) {
        self.client
            .batch_execute("UPDATE dionysus.proactive_config SET value = 1 WHERE key = 'dream_enabled'")
            .await
            .unwrap();
    }

    /// Another connection to the same database.
    pub async fn connect(&self) -> Client {
        connect(&self.name).await
    }

    /// Holds the background passes off this database, for a test that ages rows and then runs a
    /// step itself which a pass would otherwise run first: new passes skip the database
    /// (dionysus.worker_paused), and this waits until no pass begun before is still connected.
    pub async fn hold_worker_off(&self) {
        let admin = connect("postgres").await;
        admin.batch_execute(&format!("ALTER DATABASE {} SET dionysus.worker_paused = on", self.name)).await.unwrap();
        for _ in 0..1200 {
            let passes: i64 = admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type LIKE 'dionysus %'",
                    &[&self.name],
                )
                .await
                .unwrap()
                .get(0);
            if passes == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("a background pass stayed connected to {} for 60 s", self.name);
    }

    /// Lets the background passes visit this database again (after hold_worker_off).
    pub async fn let_worker_run(&self) {
        let admin = connect("postgres").await;
        admin.batch_execute(&format!("ALTER DATABASE {} RESET dionysus.worker_paused", self.name)).await.unwrap();
    }
}

/// A passed test's database is dropped: the preloaded launcher visits every database one after
/// another each interval, so hundreds of finished ones would slow every later test that waits on
/// a background pass (and load the CPU). A failed test's database stays, to be looked at.
impl Drop for TestDb {
    fn drop(&mut self) {
        drop_when_passed(&self.name);
    }
}

/// A database a test made itself (not a TestDb), dropped as a TestDb is when the guard goes.
pub struct DropWhenPassed(pub String);

impl Drop for DropWhenPassed {
    fn drop(&mut self) {
        drop_when_passed(&self.0);
    }
}

fn drop_when_passed(name: &str) {
    if std::thread::panicking() || std::env::var_os("DIONYSUS_TEST_KEEP_DATABASES").is_some() {
        return;
    }
    drop_database_now(name);
}

/// DROP DATABASE … WITH (FORCE), from synchronous code (a Drop): on a thread of its own with
/// its own runtime, since the caller's runtime may be single-threaded and busy. Best effort: a
/// database left behind costs only time.
pub fn drop_database_now(name: &str) {
    let name = name.to_string();
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        rt.block_on(async {
            let conninfo = format!("{} dbname=postgres", cluster_conninfo());
            let (client, conn) = tokio_postgres::connect(&conninfo, NoTls).await.ok()?;
            tokio::spawn(conn);
            client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.ok()
        })
    })
    .join();
}

/// The SQLSTATE of a failed statement ("" if it was not a database error).
pub fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

/// The full message, hint included, of a failed statement.
pub fn message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}", db.message(), db.hint().unwrap_or_default()),
        None => e.to_string(),
    }
}

/// Runs a statement that must fail, and returns (sqlstate, message).
pub async fn expect_error(client: &Client, sql: &str) -> (String, String) {
    match client.batch_execute(sql).await {
        Ok(()) => panic!("expected an error from: {sql}"),
        Err(e) => (sqlstate(&e), message(&e)),
    }
}

/// Counts rows of a dionysus table.
pub async fn count(client: &Client, table: &str) -> i64 {
    client.query_one(&format!("SELECT count(*) FROM dionysus.{table}"), &[]).await.unwrap().get(0)
}

/// Median and 95th percentile of a set of durations in milliseconds.
pub fn p50_p95(samples: &mut [f64]) -> (f64, f64) {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.95))
}

/// The connection string the driver uses in tests: the extension's dionysus_driver role.
pub fn driver_conninfo(dbname: &str) -> String {
    format!("{} dbname={dbname}", cluster_conninfo().replace("user=postgres", "user=dionysus_driver"))
}

/// The driver's configuration in a test: this database, both model roles on the scripted
/// server, no Discord, no search (a test adds it), the fake server's own port allowed for page
/// fetches although it is on loopback, and a short shutdown grace.
pub fn scripted_driver_config(database_url: String, llm: &fake_llm::FakeLlm) -> dionysus_driver::config::Config {
    let mut c = dionysus_driver::config::Config::load(None).expect("config");
    c.database_url = database_url;
    for (role, model) in [(&mut c.fast, "fast-model"), (&mut c.smart, "smart-model")] {
        role.base_url = llm.base_url.clone();
        role.model = model.into();
        role.api_key = None;
        role.timeout = std::time::Duration::from_secs(5);
        // The scripted server answers many requests at once, as a hosted endpoint does; the
        // one-slot default of a local model is tests/tests/real_models.rs's.
        role.slots = 2;
    }
    c.discord = Default::default();
    c.search_url = None;
    c.fetch_allow_private = vec![llm.host_port()];
    c.shutdown_grace = std::time::Duration::from_secs(3);
    c
}

/// Runs `scripts/cluster.sh` (start/stop/restart DATADIR [PORT] [conf lines]) for tests that
/// need a cluster of their own; true when it succeeded.
/// A port for a cluster of a test's own: below Linux's ephemeral range (32768 and up), where the
/// local ends of the suite's own client connections could already hold it, and free right now.
pub fn free_port(base: u16) -> u16 {
    let start = base + (std::process::id() % 90) as u16;
    (start..start + 200)
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port for the test's own cluster")
}

/// A fresh cluster of a test's own (stopped and removed first if a previous run left one):
/// its data directory and port. Stopping it disturbs no other test.
pub fn own_cluster(label: &str, base_port: u16, conf: &[&str]) -> (String, u16) {
    let port = free_port(base_port);
    let data = format!("/tmp/dionysus-{label}-{port}");
    cluster_sh(&["stop", &data]);
    let _ = std::fs::remove_dir_all(&data);
    let mut args = vec!["start", data.as_str()];
    let port_text = port.to_string();
    args.push(&port_text);
    args.extend_from_slice(conf);
    assert!(cluster_sh(&args), "the {label} cluster did not start");
    (data, port)
}

pub fn cluster_sh(args: &[&str]) -> bool {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    std::process::Command::new(format!("{root}/scripts/cluster.sh")).args(args).status().expect("scripts/cluster.sh").success()
}

/// The first column of the one row `sql` returns.
pub async fn one<T: for<'a> tokio_postgres::types::FromSql<'a>>(c: &Client, sql: &str) -> T {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

/// Waits until `sql` (a boolean; NULL is false) holds, 60 s at most.
pub async fn until(c: &Client, sql: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !one::<bool>(c, &format!("SELECT coalesce(({sql}), false)")).await {
        assert!(std::time::Instant::now() < deadline, "{what}: not within 60 s ({sql})");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Forgets `id` from a second session (lock_timeout 2 s) while `reader` holds, in a transaction
/// still open, a recall that returned it; the reader then commits. The forget's result, or the
/// SQLSTATE it failed with (55P03 when it waited for the reader).
pub async fn forget_beside_an_open_recall(db: &str, reader: &Client, id: uuid::Uuid) -> Result<bool, String> {
    reader.batch_execute("BEGIN").await.unwrap();
    let recalled: uuid::Uuid =
        reader.query_one("SELECT memory_id FROM dionysus.recall('where is the spare key?', 1)", &[]).await.unwrap().get(0);
    assert_eq!(recalled, id, "the recall reads the memory to forget");
    let writer = connect(db).await;
    writer.batch_execute("SET lock_timeout = '2s'").await.unwrap();
    let forget = writer.query_one("SELECT dionysus.forget($1)", &[&id]).await;
    reader.batch_execute("COMMIT").await.expect("the recall commits, its memory gone or not");
    forget.map(|r| r.get::<_, bool>(0)).map_err(|e| e.code().map(|s| s.code().to_string()).unwrap_or_default())
}

impl TestDb {
    /// A session as the driver's role (dionysus_driver), for checking what it may and may not do.
    pub async fn connect_as_driver(&self) -> Client {
        let (client, conn) = tokio_postgres::connect(&driver_conninfo(&self.name), NoTls).await.expect("connect as the driver");
        tokio::spawn(conn);
        client
    }
}
