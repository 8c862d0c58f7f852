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

fn psql(url: &str, sql: &str) {
    let st = Command::new("psql").args([url, "-v", "ON_ERROR_STOP=1", "-qc", sql]).status().expect("psql");
    assert!(st.success(), "{sql}");
}

#[test]
fn doctor_reports_every_part_of_a_healthy_stack() {
    let base = conninfo();
    let admin = format!("{base} dbname=postgres");
    let db = format!("doctor_{}", std::process::id());
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
    // As the superuser it works, with a warning; as dionysus_driver the role is fine.
    assert!(text.contains("WARN  role") && text.contains("dionysus_driver"), "{text}");
    psql(&format!("{base} dbname={db}"), "ALTER ROLE dionysus_driver LOGIN");
    let as_driver = format!("{} dbname={db}", base.replace("user=postgres", "user=dionysus_driver"));
    let (ok, text) = doctor(&as_driver);
    assert!(ok, "{text}");
    assert!(text.contains("ok    role") && text.contains("connected as dionysus_driver"), "{text}");
}

#[test]
fn doctor_fails_cleanly_when_postgres_is_unreachable() {
    let (ok, text) = doctor("postgresql://postgres@127.0.0.1:1/nothing");
    assert!(!ok);
    assert!(text.contains("FAIL  postgres") && text.contains("fix:"), "{text}");
}

#[test]
fn doctor_checks_the_llm_roles_and_status_reads_at_a_glance() {
    let base = conninfo();
    let admin = format!("{base} dbname=postgres");
    let db = format!("status_{}", std::process::id());
    psql(&admin, &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
    psql(&admin, &format!("CREATE DATABASE {db}"));
    let url = format!("{base} dbname={db}");
    psql(&url, "CREATE EXTENSION dionysus CASCADE");
    psql(&url, "SELECT dionysus.create_goal('Learn the names of Ada''s plants', source => 'user_request')");
    // An LLM endpoint that is down is a warning with its fix, not a failure.
    let out = Command::new(env!("CARGO_BIN_EXE_dionysus"))
        .arg("doctor")
        .env("DIONYSUS_DATABASE_URL", &url)
        .env("DIONYSUS_LLM_BASE_URL", "http://127.0.0.1:9/v1")
        .env("DIONYSUS_LLM_API_KEY", "sk-do-not-print")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("WARN  llm fast") && text.contains("WARN  llm smart") && text.contains("ollama serve"), "{text}");
    assert!(text.contains("ok    discord") && text.contains("terminal"), "{text}");
    assert!(!text.contains("sk-do-not-print"));
    let out = Command::new(env!("CARGO_BIN_EXE_dionysus")).arg("status").env("DIONYSUS_DATABASE_URL", &url).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for line in ["energy", "goals      1 active", "Learn the names of Ada's plants", "heartbeats", "queue", "outbox", "memory", "scheduler"] {
        assert!(text.contains(line), "status lacks {line:?}:\n{text}");
    }
    // A bad configuration value is refused with its key.
    let out = Command::new(env!("CARGO_BIN_EXE_dionysus")).arg("status").env("DIONYSUS_DISCORD_ALLOWED_USERS", "ada").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("DIONYSUS_DISCORD_ALLOWED_USERS"));
    psql(&admin, &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
}
