//! Trust III §1: a backup keeps the mind. A database filled through the API (every organ, tuned
//! settings included) is dumped by pg_dump in both formats and restored into fresh databases;
//! every table's rows and a recall's answer must come back exactly. Until 0.19.0 no table was
//! marked for pg_dump and a restore brought back an empty mind at its install defaults.
use dionysus_tests::*;
use std::collections::BTreeMap;
use std::process::Command;
use tokio_postgres::GenericClient;

fn pg_tool(tool: &str) -> String {
    format!("/usr/lib/postgresql/{}/bin/{tool}", std::env::var("PG_MAJOR").unwrap_or_else(|_| "15".into()))
}

fn conninfo(db: &str) -> String {
    format!("{} dbname={db}", cluster_conninfo())
}

/// Runs a client tool; panics with its output unless it exits 0 with nothing on stderr but
/// pg_dump's warnings about foreign keys that make a cycle: a table's own (memories, goals,
/// concepts and messages refer to themselves; a COPY checks them at its end, so the order of its
/// rows does not matter) and the outbox's with contact_evaluations (checked at commit).
fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed ({}): {stderr}", out.status);
    let lines: Vec<&str> = stderr.lines().collect();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("pg_dump: warning: there are circular foreign-key constraints on this table:") {
            let table = lines.get(i + 1).and_then(|l| l.strip_prefix("pg_dump: detail: ")).unwrap_or("?");
            assert!(["memories", "goals", "concepts", "messages"].contains(&table), "{cmd:?}: a foreign-key cycle through {table}: {stderr}");
            i += 2;
            while i < lines.len() && lines[i].starts_with("pg_dump: hint: ") {
                i += 1;
            }
            continue;
        }
        // The one cycle between two tables: both of its keys are checked at commit.
        if lines[i].starts_with("pg_dump: warning: there are circular foreign-key constraints among these tables:") {
            let tables: Vec<&str> = lines[i + 1..].iter().map_while(|l| l.strip_prefix("pg_dump: detail: ")).collect();
            assert!(tables == ["outbox", "contact_evaluations"] || tables == ["contact_evaluations", "outbox"], "{cmd:?}: a cycle through {tables:?}: {stderr}");
            i += 1 + tables.len();
            while i < lines.len() && lines[i].starts_with("pg_dump: hint: ") {
                i += 1;
            }
            continue;
        }
        rest.push(lines[i]);
        i += 1;
    }
    assert!(rest.is_empty(), "{cmd:?} said on stderr: {}", rest.join("\n"));
    out.stdout
}

/// The extension's member tables and, for each, a digest of its rows (every column, in a
/// stable order), but those the dump leaves out on purpose.
const DIGESTS: &str = r#"
SELECT c.oid::regclass::text FROM pg_depend d JOIN pg_class c ON c.oid = d.objid AND d.classid = 'pg_class'::regclass
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND c.relkind = 'r'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dionysus')
   AND c.oid NOT IN (SELECT rel FROM dionysus_internal.left_out_of_dumps())
 ORDER BY 1"#;

async fn digests(c: &impl GenericClient) -> BTreeMap<String, (i64, String)> {
    let mut out = BTreeMap::new();
    for row in c.query(DIGESTS, &[]).await.expect("member tables") {
        let table: String = row.get(0);
        let r = c
            .query_one(
                &format!("SELECT count(*), md5(coalesce(string_agg(x, E'\\n' ORDER BY x), '')) FROM (SELECT to_jsonb(t)::text x FROM {table} t) s"),
                &[],
            )
            .await
            .unwrap_or_else(|e| panic!("digest of {table}: {e}"));
        out.insert(table, (r.get(0), r.get(1)));
    }
    // Every sequence of the two schemas (identity columns' included): a restored database
    // must not hand out an id again.
    for row in c
        .query(
            "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relkind = 'S'
                AND c.relnamespace IN ('dionysus'::regnamespace, 'dionysus_internal'::regnamespace) ORDER BY 1",
            &[],
        )
        .await
        .expect("sequences")
    {
        let seq: String = row.get(0);
        let r = c.query_one(&format!("SELECT last_value, is_called::text FROM {seq}"), &[]).await.unwrap();
        out.insert(seq, (r.get(0), r.get(1)));
    }
    out
}

/// The memories recall returns, in order (their scores move with the real time that passes:
/// recency is measured from now()).
async fn recall_answer(c: &impl GenericClient) -> Vec<String> {
    c.query("SELECT memory_id::text || ' ' || content FROM dionysus.recall('what does Ada keep in the garden?', 5, person => 'discord:1001')", &[])
        .await
        .expect("recall")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A plain dump, written to `script`, restored into `db` by psql in one transaction.
fn restore_plain(script: &std::path::Path, plain: Vec<u8>, db: &str) {
    std::fs::write(script, plain).unwrap();
    run(Command::new(pg_tool("psql"))
        .args(["-X", "-q", "--single-transaction", "-v", "ON_ERROR_STOP=1", "-o", "/dev/null", "-f"])
        .arg(script)
        .arg(conninfo(db)));
}

/// A fresh database the background passes leave alone (a restore is written into it).
async fn paused_database(admin: &tokio_postgres::Client, name: &str) -> dionysus_tests::DropWhenPassed {
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    admin.batch_execute(&format!("ALTER DATABASE {name} SET dionysus.worker_paused = on")).await.unwrap();
    dionysus_tests::DropWhenPassed(name.to_string())
}

#[tokio::test]
async fn a_dump_restores_every_table_and_recall_in_both_formats() {
    let admin = connect("postgres").await;
    let db = TestDb::new("backup").await;
    db.hold_worker_off().await;
    let c = &db.client;

    // Every member table is dumped, or left out with a reason: enumerated from the catalog, so
    // a table added later without its mark fails here.
    let unmarked: Vec<String> = c
        .query(
            "SELECT c.oid::regclass::text FROM pg_depend d JOIN pg_class c ON c.oid = d.objid AND d.classid = 'pg_class'::regclass
              WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND c.relkind IN ('r', 'S')
                AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dionysus')
                AND c.oid NOT IN (SELECT unnest(extconfig) FROM pg_extension WHERE extname = 'dionysus')
                AND c.oid NOT IN (SELECT rel FROM dionysus_internal.left_out_of_dumps())",
            &[],
        )
        .await
        .expect("unmarked tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(unmarked.is_empty(), "tables and sequences pg_dump would leave out: {unmarked:?}");

    // Fill it through the API: two people talking, what was learned, the mind's own state,
    // and settings the owner tuned.
    c.batch_execute(
        "SELECT dionysus.set_clock('2026-03-02 09:00+00');
         SELECT dionysus.log_message('discord', 'm1', 'c1', '1001', 'I keep bees in the garden behind the house', person => 'discord:1001');
         SELECT dionysus.log_message('discord', 'm2', 'c1', 'bot', 'Bees! How many hives?', is_bot => true);
         SELECT dionysus.log_message('discord', 'm3', 'c2', '1002', 'My sister Lena moved to Porto', person => 'discord:1002');
         SELECT dionysus.remember('Ada keeps bees in the garden behind the house', 'semantic', 0.8, private_to => ARRAY['discord:1001']);
         SELECT dionysus.remember('Ada named the queen bee Hildegard', 'semantic', 0.7, private_to => ARRAY['discord:1001']);
         SELECT dionysus.remember('The honey harvest is in August. Ada sells jars at the market.', 'episodic', 0.6, private_to => ARRAY['discord:1001']);
         SELECT dionysus.remember('Bo has a sister called Lena who lives in Porto', 'semantic', 0.6, private_to => ARRAY['discord:1002']);
         SELECT dionysus.learn('Ada keeps two hives', subject => 'Ada', private_to => ARRAY['discord:1001']);
         SELECT dionysus.add_triple('Ada', 'keeps', 'bees', private_to => ARRAY['discord:1001']);
         SELECT dionysus.connect(a.id, b.id, 'SUPPORTS', 0.9) FROM dionysus.memories a, dionysus.memories b
          WHERE a.content LIKE 'Ada keeps bees%' AND b.content LIKE 'Ada named%';
         SELECT dionysus.create_goal('Learn about beekeeping', source => 'curiosity');
         SELECT dionysus.set_identity_aspect('a companion who listens', 0.6);
         SELECT dionysus.set_worldview_belief('small things matter', 0.7);
         SELECT dionysus.set_north_star('discord:1001', 'North star: be kinder to myself');
         SELECT dionysus.add_rule('discord:1001', 'do not write to me before ten', '{\"name\": \"always curious\", \"trigger\": \"tick\", \"intents\": [{\"adjust\": \"person.curiosity\", \"to\": 1}]}');
         SELECT dionysus.add_censor('talking about work on weekends', 'she asked', 'block', 'discord:1001');
         SELECT dionysus.store_procedure('calm down', ARRAY['help someone calm down'], ARRAY['breathe slowly'], person => 'discord:1001');
         SELECT dionysus.set_person_time_zone('discord:1001', 'Europe/Berlin');
         SELECT dionysus.push_event('communication', 'user.mood', 2, '{\"mood\": \"tired\"}', 'discord:1001');
         -- A contact decided and queued: outbox and contact_evaluations refer to each other.
         INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation)
           VALUES ('discord:1001', dionysus.clock_now(), '{}', 1, 0.5, '[]', 'opportunity', 'a backup test');
         SELECT dionysus.decide_contact(id, 'message', 'How are the bees?', 'test') FROM dionysus.contact_evaluations
          WHERE explanation = 'a backup test';
         SELECT dionysus.enqueue_language_work();
         SELECT dionysus.proactive_tick();
         SELECT dionysus.heartbeat_commit((dionysus.heartbeat_begin() ->> 'heartbeat_id')::uuid, dionysus.heartbeat_default_decision());
         SELECT dionysus.run_maintenance();
         -- Tuned by the owner: a dump must bring these back, not the install's defaults.
         UPDATE dionysus.recall_config SET value = value * 2 WHERE key = 'sentence_share';
         UPDATE dionysus.heartbeat_config SET value = value + 1 WHERE key = (SELECT min(key) FROM dionysus.heartbeat_config);
         UPDATE dionysus.proactive_config SET value = value / 2 WHERE key = (SELECT min(key) FROM dionysus.proactive_config);
         UPDATE dionysus.personality SET value = 0.9 WHERE trait = 'humor';
         UPDATE dionysus.decay_config SET fading_after_days = 9;
         UPDATE dionysus.censor_config SET similarity = 0.5;
         UPDATE dionysus.context_budgets SET tokens = tokens + 100 WHERE task = (SELECT min(task) FROM dionysus.context_budgets);
         UPDATE dionysus.mind_rules SET weight = 0.5 WHERE origin = 'built_in' AND id = (SELECT min(id) FROM dionysus.mind_rules);
         INSERT INTO dionysus.relation_words (word, relation) VALUES ('godmother', 'godmother');
         SELECT dionysus.set_prompt_template('chat_system', 'You are a tuned companion. {{context}}');",
    )
    .await
    .expect("fill through the API");

    // pg_dump reads one snapshot: the source is read in the same one.
    let mut snap_conn = db.connect().await;
    let tx = snap_conn.build_transaction().isolation_level(tokio_postgres::IsolationLevel::RepeatableRead).start().await.unwrap();
    let snapshot: String = tx.query_one("SELECT pg_export_snapshot()", &[]).await.unwrap().get(0);
    let custom = std::env::temp_dir().join(format!("{}.dump", db.name));
    run(Command::new(pg_tool("pg_dump")).args(["-Fc", "--snapshot", &snapshot, "-f"]).arg(&custom).arg(conninfo(&db.name)));
    let plain = run(Command::new(pg_tool("pg_dump")).args(["--snapshot", &snapshot]).arg(conninfo(&db.name)));
    let before = digests(&tx).await;
    let answer = recall_answer(&tx).await;
    let contact: i64 = tx
        .query_one("SELECT count(*) FROM dionysus.outbox o JOIN dionysus.contact_evaluations e ON e.id = o.contact_id AND e.outbox_id = o.id", &[])
        .await
        .unwrap()
        .get(0);
    tx.commit().await.unwrap();

    let filled: Vec<&String> = before.iter().filter(|(_, (n, _))| *n > 0).map(|(t, _)| t).collect();
    assert!(filled.len() >= 30, "the fill reached only {} tables: {filled:?}", filled.len());
    assert!(answer.iter().any(|a| a.contains("bees")), "{answer:?}");
    assert_eq!(contact, 1, "the fill has no contact whose two rows refer to each other");

    // pg_restore in one transaction, and the plain script through psql.
    let (by_restore, by_psql) = (format!("{}_r", db.name), format!("{}_p", db.name));
    let _dropped_1 = paused_database(&admin, &by_restore).await;
    run(Command::new(pg_tool("pg_restore")).args(["--single-transaction", "--exit-on-error", "-d"]).arg(conninfo(&by_restore)).arg(&custom));
    let _dropped_2 = paused_database(&admin, &by_psql).await;
    let script = std::env::temp_dir().join(format!("{}.sql", db.name));
    restore_plain(&script, plain, &by_psql);

    for restored in [&by_restore, &by_psql] {
        let r = connect(restored).await;
        let after = digests(&r).await;
        let differ: Vec<String> = before
            .iter()
            .filter(|(t, d)| after.get(*t) != Some(d))
            .map(|(t, d)| format!("{t}: {d:?} -> {:?}", after.get(t)))
            .collect();
        assert!(differ.is_empty(), "restored {restored}: tables that differ from the source:\n{}", differ.join("\n"));
        assert_eq!(recall_answer(&r).await, answer, "recall on the restored {restored}");
        // And the restored shipped rows are the install's again: a second dump of a database that
        // was restored and tuned nowhere else carries exactly the tuned rows.
        let tuned: i64 = r
            .query_one("SELECT count(*) FROM dionysus.recall_config t WHERE NOT dionysus_internal.is_shipped('dionysus.recall_config', to_jsonb(t))", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(tuned, 1, "only the tuned recall setting is the owner's");
        drop(r);
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {restored} WITH (FORCE)")).await.unwrap();
    }
    let _ = std::fs::remove_file(custom);
    let _ = std::fs::remove_file(script);
}

/// A database updated from 0.18.0 (whose tables were marked by the update, with no record of
/// which rows were shipped) dumps every row of its shipped tables, and a restore takes each over
/// the fresh install's: nothing lost, nothing doubled.
#[tokio::test]
async fn a_database_updated_from_0_18_dumps_and_restores_whole() {
    let admin = connect("postgres").await;
    let name = format!("t_backup_upd_{}", std::process::id());
    let _dropped_3 = paused_database(&admin, &name).await;
    admin.batch_execute(&format!("ALTER DATABASE {name} SET dionysus.allow_old_schema = on")).await.unwrap();
    let c = connect(&name).await;
    c.batch_execute("CREATE EXTENSION vector; CREATE EXTENSION dionysus VERSION '0.18.0'").await.expect("install 0.18.0");
    // Written with plain SQL: this library serves only its own schema version, not 0.18.0's.
    c.batch_execute(
        "INSERT INTO dionysus.memories (type, content, embedding, importance, private_to)
           SELECT 'semantic', t, dionysus.embed(t), 0.8, ARRAY['discord:1001'] FROM (SELECT 'Ada keeps bees in the garden behind the house' AS t) s;
         INSERT INTO dionysus.memories (type, content, embedding, source, private_to)
           SELECT 'episodic', t, dionysus.embed(t), 'conversation:discord:c1', ARRAY['discord:1001'] FROM (SELECT 'I keep bees in the garden behind the house' AS t) s;
         INSERT INTO dionysus.messages (platform, platform_message_id, channel_id, author_id, content, memory_id, person)
           SELECT 'discord', 'm1', 'c1', '1001', content, id, 'discord:1001' FROM dionysus.memories WHERE content LIKE 'I keep bees%';
         UPDATE dionysus.recall_config SET value = 0.25 WHERE key = 'sentence_share';
         ALTER EXTENSION dionysus UPDATE;",
    )
    .await
    .expect("fill 0.18.0 and update");
    let plain = run(Command::new(pg_tool("pg_dump")).arg(conninfo(&name)));
    let before = digests(&c).await;
    assert!(before["dionysus.memories"].0 >= 1 && before["dionysus.messages"].0 == 1, "{before:?}");
    let restored = format!("{name}_r");
    let _dropped_4 = paused_database(&admin, &restored).await;
    let script = std::env::temp_dir().join(format!("{name}.sql"));
    restore_plain(&script, plain, &restored);
    let r = connect(&restored).await;
    let after = digests(&r).await;
    let differ: Vec<String> =
        before.iter().filter(|(t, d)| after.get(*t) != Some(d)).map(|(t, d)| format!("{t}: {d:?} -> {:?}", after.get(t))).collect();
    assert!(differ.is_empty(), "tables that differ after the restore:\n{}", differ.join("\n"));
    let share: f64 = r.query_one("SELECT value FROM dionysus.recall_config WHERE key = 'sentence_share'", &[]).await.unwrap().get(0);
    assert_eq!(share, 0.25, "the tuned setting came back at its default");
    drop((c, r));
    for db in [&name, &restored] {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).await.unwrap();
    }
    let _ = std::fs::remove_file(script);
}

/// Only a superuser's session with check_function_bodies off (a dump's restore) passes for a
/// restore: the driver's role setting it off still meets every guard.
#[tokio::test]
async fn only_a_superusers_restore_passes_for_one() {
    let db = TestDb::new("backup_guard").await;
    let c = &db.client;
    let restoring = |sql: &'static str| async move {
        c.batch_execute(sql).await.unwrap();
        c.query_one("SELECT dionysus_internal.restoring()", &[]).await.unwrap().get::<_, bool>(0)
    };
    assert!(!restoring("SET check_function_bodies = on").await, "a superuser's ordinary session");
    assert!(restoring("SET check_function_bodies = off").await, "a superuser's restore");
    assert!(!restoring("SET ROLE dionysus_driver").await, "the driver's role with check_function_bodies off");
    // And so the re-index guard still stamps what the driver's role inserts.
    c.batch_execute("INSERT INTO dionysus.reindex_runs (requested_by) VALUES ('x')").await.unwrap();
    let stamped: bool = c.query_one("SELECT target_key IS NOT NULL AND started_at IS NOT NULL FROM dionysus.reindex_runs", &[]).await.unwrap().get(0);
    assert!(stamped, "the guard did not stamp the run's model");
    c.batch_execute("RESET ROLE").await.unwrap();
}
