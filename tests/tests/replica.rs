//! Reads scale by hot standbys: recall, recall_recent, recall_by_id and chat_context answer on
//! a real streaming replica (pg_basebackup -R of a primary of the test's own), where nothing
//! may be written (no access log, no embedding cache), and they see what the primary wrote.
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

async fn open(port: u16, db: &str) -> Client {
    let conninfo = format!("host=127.0.0.1 port={port} user=postgres dbname={db}");
    let (client, conn) = tokio_postgres::connect(&conninfo, NoTls).await.unwrap_or_else(|e| panic!("{conninfo}: {e}"));
    tokio::spawn(conn);
    client
}

async fn top_recalled(c: &Client, query: &str) -> Vec<String> {
    c.query("SELECT content FROM dionysus.recall($1, 3)", &[&query]).await.expect("recall").iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn recall_and_chat_context_work_on_a_hot_standby() {
    // Only under scripts/test.sh, which provides sudo and the installed extension.
    let _ = dionysus_tests::cluster_conninfo();
    let (primary_data, primary_port) = dionysus_tests::own_cluster("primary", 31800, &[]);

    let setup = open(primary_port, "postgres").await;
    setup.batch_execute("CREATE DATABASE agent").await.unwrap();
    let primary = open(primary_port, "agent").await;
    primary.batch_execute("CREATE EXTENSION dionysus CASCADE").await.unwrap();
    for fact in ["The user keeps bees in the garden", "The user's sister lives in Lisbon", "The user plays the cello on Sundays"] {
        primary.execute("SELECT dionysus.remember($1, 'semantic')", &[&fact]).await.unwrap();
    }
    let logged: Value = primary
        .query_one("SELECT dionysus.log_message('discord', 'm1', 'c1', 'u1', 'How are my bees doing?')", &[])
        .await
        .unwrap()
        .get(0);
    let message_id: Uuid = logged["message_id"].as_str().expect("message id").parse().unwrap();

    let standby_port = dionysus_tests::free_port(31900);
    let standby_data = format!("/tmp/dionysus-standby-{standby_port}");
    dionysus_tests::cluster_sh(&["stop", &standby_data]);
    let _ = std::fs::remove_dir_all(&standby_data);
    assert!(dionysus_tests::cluster_sh(&["standby", &standby_data, &standby_port.to_string(), &primary_port.to_string()]));
    let standby = open(standby_port, "agent").await;
    let in_recovery: bool = standby.query_one("SELECT pg_is_in_recovery()", &[]).await.unwrap().get(0);
    assert!(in_recovery, "the standby is not in recovery");

    // A memory written after the copy streams over.
    primary.execute("SELECT dionysus.remember('The user started learning Portuguese', 'semantic')", &[]).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = standby.query_one("SELECT count(*) FROM dionysus.memories", &[]).await.unwrap().get(0);
        if n >= 5 {
            break;
        }
        if Instant::now() >= deadline {
            // Why is in the standby's log (a walreceiver that cannot connect says so every 5 s).
            let log = std::fs::read_to_string(format!("{standby_data}/server.log")).unwrap_or_else(|e| format!("(unreadable: {e})"));
            let tail: Vec<&str> = log.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
            panic!("the standby did not catch up in 30 s; the end of its log:\n{}", tail.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The same answers as the primary, for queries never embedded before on either.
    for query in ["Which insects does the user look after?", "Who lives in Portugal?", "What language is the user studying?"] {
        let (on_standby, on_primary) = (top_recalled(&standby, query).await, top_recalled(&primary, query).await);
        assert!(!on_standby.is_empty(), "nothing recalled on the standby for {query}");
        assert_eq!(on_standby[0], on_primary[0], "{query}");
    }
    let recent: i64 = standby.query_one("SELECT count(*) FROM dionysus.recall_recent(10)", &[]).await.expect("recall_recent on the standby").get(0);
    assert_eq!(recent, 5);
    let id: Uuid = standby.query_one("SELECT id FROM dionysus.memories ORDER BY created_at LIMIT 1", &[]).await.unwrap().get(0);
    standby.query_one("SELECT * FROM dionysus.recall_by_id($1)", &[&id]).await.expect("recall_by_id on the standby");
    let context: Value =
        standby.query_one("SELECT dionysus.chat_context($1)", &[&message_id]).await.expect("chat_context on the standby").get(0);
    assert!(context.to_string().contains("bees"), "the context lacks the bees: {context}");

    // The access log is unlogged (a recall's commit waits for no disk), so a standby has none:
    // memory_health there says so instead of failing, as recall_by_id above counted without it.
    let pending: Option<i64> =
        standby.query_one("SELECT pending_access_log FROM dionysus.memory_health", &[]).await.expect("memory_health on the standby").get(0);
    assert_eq!(pending, None, "the standby has no access log to count");
    let pending: Option<i64> = primary.query_one("SELECT pending_access_log FROM dionysus.memory_health", &[]).await.unwrap().get(0);
    assert!(pending.is_some(), "the primary counts its log");

    drop((standby, primary, setup));
    assert!(dionysus_tests::cluster_sh(&["stop", &standby_data]));
    assert!(dionysus_tests::cluster_sh(&["stop", &primary_data]));
    let _ = std::fs::remove_dir_all(&standby_data);
    let _ = std::fs::remove_dir_all(&primary_data);
}
