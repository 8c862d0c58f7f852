//! `dionysus doctor` against the real test cluster (started by scripts/test.sh).
use std::process::Command;

fn conninfo() -> String {
    std::env::var("DIONYSUS_TEST_CONNINFO").expect("DIONYSUS_TEST_CONNINFO: run through scripts/test.sh")
}

fn doctor(url: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dionysus"))
        .arg("doctor")
        .env("DIONYSUS_DATABASE_URL", url)
        .output()
        .expect("run dionysus doctor");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn doctor_reports_every_part_of_a_healthy_stack() {
    let base = conninfo();
    let admin = format!("{base} dbname=postgres");
    let db = format!("doctor_{}", std::process::id());
    let psql = |url: &str, sql: &str| {
        let st = Command::new("psql").args([url, "-v", "ON_ERROR_STOP=1", "-qc", sql]).status().expect("psql");
        assert!(st.success(), "{sql}");
    };
    psql(&admin, &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
    psql(&admin, &format!("CREATE DATABASE {db}"));
    // Before CREATE EXTENSION: a failure that names its fix.
    let (ok, text) = doctor(&format!("{base} dbname={db}"));
    assert!(!ok, "{text}");
    assert!(text.contains("FAIL  extension") && text.contains("CREATE EXTENSION dionysus CASCADE"), "{text}");
    psql(&format!("{base} dbname={db}"), "CREATE EXTENSION dionysus CASCADE");
    let (ok, text) = doctor(&format!("{base} dbname={db}"));
    assert!(ok, "{text}");
    for name in ["postgres", "server", "pgvector", "extension", "preload", "model"] {
        assert!(text.lines().any(|l| l.starts_with("ok") && l.contains(name)), "no ok line for {name}:\n{text}");
    }
    assert!(text.contains("384 dimensions"), "{text}");
}

#[test]
fn doctor_fails_cleanly_when_postgres_is_unreachable() {
    let (ok, text) = doctor("postgresql://postgres@127.0.0.1:1/nothing");
    assert!(!ok);
    assert!(text.contains("FAIL  postgres") && text.contains("fix:"), "{text}");
}
