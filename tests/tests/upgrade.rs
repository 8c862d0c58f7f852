//! People keep their data across versions. Each folder of tests/upgrade/ is a case (its
//! README says how one reads): a database at an old release is filled by the case's setup.sql,
//! updated with ALTER EXTENSION dionysus UPDATE, checked by its check.sql, and must then have
//! exactly the schema and shipped data of a fresh install. Here: the harness that runs them, the
//! two hooks that need a second connection, and the tests that are not about one old release.
use dionysus_tests::*;
use std::collections::BTreeSet;
use tokio_postgres::{Client, SimpleQueryMessage};

/// The oldest release this library updates (its full script is the fixture
/// tests/upgrade/releases/dionysus--0.10.0.sql.gz, which scripts/test.sh
/// decompresses into the extension directory); a later release is reached from it through the
/// released update scripts.
const OLDEST: &str = "0.10.0";
/// The cases' folder.
const CASES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/upgrade");

/// Everything about the extension's objects that a person or the driver could notice, one
/// line per fact, with no OIDs and no column order (ALTER TABLE ADD COLUMN appends), and
/// which tables pg_dump keeps (a table the update creates must be marked as a fresh install marks it).
const CATALOG: &str = r#"
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname IN ('dionysus', 'dionysus_internal'))
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
       || CASE WHEN a.attgenerated <> '' THEN ' generated' ELSE '' END
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
 WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind IN ('r', 'v', 'm', 'c')
UNION ALL
SELECT 'relation ' || c.relname || ' ' || c.relkind::text || c.relpersistence::text || ' acl ' || coalesce(c.relacl::text, '-')
  FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind IN ('r', 'v', 'm', 'S')
UNION ALL
SELECT 'column acl ' || c.relname || '.' || a.attname || ' ' || a.attacl::text
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace IN (SELECT oid FROM ns) AND a.attacl IS NOT NULL
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT 'index ' || pg_get_indexdef(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace IN (SELECT oid FROM ns) AND NOT t.tgisinternal
UNION ALL
SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid) FROM pg_class c
 WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind = 'v'
UNION ALL
SELECT 'function ' || p.pronamespace::regnamespace::text || '.' || p.proname || '(' || pg_get_function_arguments(p.oid) || ') ' || pg_get_function_result(p.oid)
       || ' ' || p.provolatile::text || p.proparallel::text || CASE WHEN p.proisstrict THEN ' strict' ELSE '' END
       || CASE WHEN p.proleakproof THEN ' leakproof' ELSE '' END || ' cost ' || p.procost::text || ' rows ' || p.prorows::text || ' ' || l.lanname || ' ' || md5(p.prosrc) || ' '
       || coalesce(p.probin, '') || ' ' || coalesce(p.proconfig::text, '') || ' acl ' || coalesce(p.proacl::text, '-')
       || CASE WHEN p.prosecdef THEN ' security definer' ELSE '' END || ' owner ' || p.proowner::regrole::text
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT 'type ' || t.typname || ' ' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e
                                                 WHERE e.enumtypid = t.oid), '')
  FROM pg_type t WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typtype IN ('e', 'd', 'b')
UNION ALL
SELECT 'comment ' || coalesce(c.relname, p.pronamespace::regnamespace::text || '.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')', '?') || ' ' || md5(d.description)
  FROM pg_description d
  LEFT JOIN pg_class c ON d.classoid = 'pg_class'::regclass AND c.oid = d.objoid AND d.objsubid = 0
  LEFT JOIN pg_proc p ON d.classoid = 'pg_proc'::regclass AND p.oid = d.objoid
 WHERE coalesce(c.relnamespace, p.pronamespace) IN (SELECT oid FROM ns)
UNION ALL
SELECT 'schema ' || n.nspname || ' acl ' || coalesce(n.nspacl::text, '-') || ' ' || coalesce(md5(obj_description(n.oid, 'pg_namespace')), '-')
  FROM pg_namespace n WHERE n.oid IN (SELECT oid FROM ns)
UNION ALL
SELECT 'dumped ' || x.rel::regclass::text
  FROM pg_extension e, unnest(e.extconfig) AS x(rel) WHERE e.extname = 'dionysus'
UNION ALL
SELECT 'member ' || pg_describe_object(classid, objid, objsubid) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dionysus')
"#;

async fn catalog(c: &Client) -> BTreeSet<String> {
    c.query(CATALOG, &[]).await.expect("catalog").iter().map(|r| r.get::<_, String>(0)).collect()
}

/// The data a release ships (settings, built-in rules, prompts).
/// Settings with their values and descriptions; prompts with their note, temperature, whether
/// active, their text and answer schema (md5s): an update that ships a prompt version or a
/// default differently from a fresh install shows here.
const SHIPPED: &str = "SELECT 'config ' || key || '=' || value || ' ' || coalesce(description, '') FROM dionysus.proactive_config \
                       UNION ALL SELECT 'setting ' || key || '=' || value || ' ' || coalesce(description, '') FROM dionysus.heartbeat_config \
                       UNION ALL SELECT 'rule ' || name || ' ' || trigger || ' ' || condition::text || ' ' || intents::text FROM dionysus.mind_rules WHERE origin = 'built_in' \
                       UNION ALL SELECT 'prompt ' || key || ' ' || version || ' active=' || active || ' t=' || temperature || ' ' || coalesce(note, '') \
                                        || ' ' || md5(template) || ' ' || coalesce(md5(result_schema::text), '-') FROM dionysus.prompt_templates";

async fn shipped(c: &Client) -> BTreeSet<String> {
    c.query(SHIPPED, &[]).await.expect("shipped data").iter().map(|r| r.get::<_, String>(0)).collect()
}

/// A fresh install's catalog and shipped data, read once per run.
static FRESH: tokio::sync::OnceCell<(BTreeSet<String>, BTreeSet<String>)> = tokio::sync::OnceCell::const_new();

/// The schema and the data a release ships are what a fresh install has.
async fn same_as_a_fresh_install(updated: &Client) {
    let (installed, fresh_shipped) = FRESH
        .get_or_init(|| async {
            let fresh = TestDb::new("upgrade_fresh").await;
            fresh.let_it_dream().await; // as shipped (TestDb::new turns the dream off)
            (catalog(&fresh.client).await, shipped(&fresh.client).await)
        })
        .await;
    let updated_shipped = shipped(updated).await;
    let only_fresh: Vec<_> = fresh_shipped.difference(&updated_shipped).collect();
    let only_updated: Vec<_> = updated_shipped.difference(fresh_shipped).collect();
    assert!(
        only_fresh.is_empty() && only_updated.is_empty(),
        "the shipped data differs after the update:\nonly in a fresh install: {only_fresh:#?}\nonly after the update: {only_updated:#?}"
    );
    let upgraded = catalog(updated).await;
    let missing: Vec<_> = installed.difference(&upgraded).collect();
    let extra: Vec<_> = upgraded.difference(installed).collect();
    assert!(missing.is_empty() && extra.is_empty(), "the updated schema differs from a fresh install:\nonly in a fresh install: {missing:#?}\nonly after the update: {extra:#?}");
}

/// A database of its own at `version`: the oldest release's script, then the released updates.
/// Its sessions may call the old release's functions (dionysus.allow_old_schema, as a case's
/// setup does); without it, they refuse until the update.
async fn install_release(admin: &Client, label: &str, version: &str) -> (String, Client) {
    let name = format!("t_upgrade_{label}_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    admin.batch_execute(&format!("ALTER DATABASE {name} SET dionysus.allow_old_schema = on")).await.unwrap();
    let old = connect(&name).await;
    old.batch_execute(&format!(
        "CREATE EXTENSION vector; CREATE EXTENSION dionysus VERSION '{OLDEST}'; ALTER EXTENSION dionysus UPDATE TO '{version}'"
    ))
    .await
    .unwrap_or_else(|e| panic!("install release {version}: {e}"));
    (name, old)
}

async fn installed_version(c: &Client) -> String {
    one(c, "SELECT extversion::text FROM pg_extension WHERE extname = 'dionysus'").await
}

/// One folder of tests/upgrade/: its header lines (`-- from: X`, `-- to: Y`, `-- hook: NAME`).
struct Case {
    name: String,
    setup: String,
    check: String,
    from: String,
    to: Option<String>,
    hook: Option<String>,
}

fn cases() -> Vec<Case> {
    let mut dirs: Vec<_> = std::fs::read_dir(CASES)
        .expect("tests/upgrade/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("setup.sql").exists())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{name}/{f}: {e}"));
            let (setup, check) = (read("setup.sql"), read("check.sql"));
            let header = |key: &str| {
                setup.lines().find_map(|l| l.strip_prefix(&format!("-- {key}:")).map(|v| v.trim().to_string()))
            };
            let from = header("from").unwrap_or_else(|| panic!("{name}/setup.sql: no `-- from: X` line"));
            let (to, hook) = (header("to"), header("hook"));
            Case { name, setup, check, from, to, hook }
        })
        .collect()
}

/// Runs a case's SQL file in one go; fails on an error, on a check row whose `ok` is not true,
/// and on a check query that returned no row.
async fn run_sql(c: &Client, case: &str, file: &str, sql: &str) {
    let messages = c.simple_query(sql).await.unwrap_or_else(|e| panic!("{case}/{file}: {}", message(&e)));
    let (mut is_check, mut rows, mut checks, mut failed) = (false, 0, 0, Vec::new());
    for m in messages {
        match m {
            SimpleQueryMessage::RowDescription(columns) => {
                is_check = columns.iter().map(|c| c.name()).eq(["check", "ok", "detail"]);
                checks += usize::from(is_check);
                rows = 0;
            }
            SimpleQueryMessage::Row(row) if is_check => {
                rows += 1;
                if row.get(1) != Some("t") {
                    failed.push(format!("{}: {}", row.get(0).unwrap_or("?"), row.get(2).unwrap_or("")));
                }
            }
            SimpleQueryMessage::CommandComplete(_) if is_check => {
                if rows == 0 {
                    failed.push(format!("check query {checks} of the file returned no row"));
                }
                is_check = false;
            }
            _ => {}
        }
    }
    assert!(failed.is_empty(), "{case}/{file}: checks failed:\n  {}", failed.join("\n  "));
}

/// What a hook holds across the update.
enum Held {
    Nothing,
    /// A writer's open transaction holding an episode's row.
    Writer(Client),
}

/// The part of a case that cannot be data, before the update (after setup.sql).
async fn hook_before_update(hook: &str, db: &str, old: &Client) -> Held {
    match hook {
        // 0.12.0's gap rule waits on a writer holding a stale episode (here until lock_timeout;
        // beside a batch holding another episode, a deadlock).
        "a_writer_holds_an_episode" => {
            let writer = connect(db).await;
            writer
                .batch_execute(
                    "BEGIN; UPDATE dionysus.episodes SET memory_count = memory_count + 1, last_event_at = now() - interval '110 minutes' \
                      WHERE source = 'gap_b'",
                )
                .await
                .unwrap();
            old.batch_execute("SET lock_timeout = '1s'").await.unwrap();
            let waited = old.query_one("SELECT dionysus.enqueue_language_work()", &[]).await.expect_err("0.12.0 waits on the writer");
            assert_eq!(sqlstate(&waited), "55P03", "{waited}");
            Held::Writer(writer)
        }
        // 0.14.0's recall logged what it read with a foreign key, so a forget of it waited.
        "a_forget_beside_an_open_recall" => {
            old.batch_execute(
                "BEGIN; INSERT INTO dionysus.memory_access_log (memory_id) \
                   SELECT id FROM dionysus.memories WHERE content LIKE 'The spare key%'",
            )
            .await
            .unwrap();
            let writer = connect(db).await;
            writer.batch_execute("SET lock_timeout = '2s'").await.unwrap();
            let forget = writer.batch_execute("DELETE FROM dionysus.memories WHERE content LIKE 'The spare key%'").await;
            old.batch_execute("COMMIT").await.unwrap();
            assert_eq!(forget.map_err(|e| sqlstate(&e)), Err("55P03".to_string()), "0.14.0's recall locked the key's memory");
            Held::Nothing
        }
        other => panic!("no hook {other} in tests/tests/upgrade.rs"),
    }
}

/// The part of a case that cannot be data, after check.sql.
async fn hook_after_update(hook: &str, held: Held, db: &str, old: &Client) {
    match (hook, held) {
        // The updated gap rule never waits: whichever pass gets there first closes the free
        // stale episode; the held one is left to its writer, and closed once free.
        ("a_writer_holds_an_episode", Held::Writer(writer)) => {
            let open = |source: &'static str| async move {
                one::<i64>(old, &format!("SELECT count(*) FROM dionysus.episodes WHERE source = '{source}' AND ended_at IS NULL")).await
            };
            let closes = |source: &'static str| async move {
                for _ in 0..50 {
                    old.query_one("SELECT dionysus.enqueue_language_work()", &[]).await.expect("the updated gap rule does not wait");
                    if open(source).await == 0 {
                        return true;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                false
            };
            assert!(closes("gap_a").await, "the free stale episode is closed");
            assert_eq!(open("gap_b").await, 1, "the held one is left to its writer");
            writer.batch_execute("COMMIT").await.unwrap();
            assert!(closes("gap_b").await, "closed once free");
        }
        // The updated recall locks nothing it read; the fold passes over the log row its
        // reader commits after (this session's advisory lock is its own: its fold may take it).
        ("a_forget_beside_an_open_recall", Held::Nothing) => {
            let key: uuid::Uuid = one(old, "SELECT id FROM dionysus.memories WHERE content LIKE 'The spare key%'").await;
            assert_eq!(forget_beside_an_open_recall(db, old, key).await, Ok(true), "the updated recall locks nothing it read");
            old.query_one("SELECT dionysus.run_maintenance()", &[]).await.expect("the fold passes over the forgotten memory's rows");
            assert_eq!(one::<i64>(old, "SELECT count(*) FROM dionysus.memory_access_log").await, 0, "folded");
            old.batch_execute("SELECT pg_advisory_unlock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
            assert_eq!(one::<i64>(old, "SELECT count(*) FROM dionysus.memories").await, 2);
        }
        (other, _) => panic!("no hook {other} after the update in tests/tests/upgrade.rs"),
    }
}

async fn run_case(case: Case) {
    let admin = connect("postgres").await;
    let label = case.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_").to_lowercase();
    let (db, old) = install_release(&admin, &label[..label.len().min(30)], &case.from).await;
    assert_eq!(installed_version(&old).await, case.from, "{}: not at its release", case.name);
    run_sql(&old, &case.name, "setup.sql", &case.setup).await;
    let held = match &case.hook {
        Some(hook) => hook_before_update(hook, &db, &old).await,
        None => Held::Nothing,
    };
    let to = case.to.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
    old.batch_execute(&format!("ALTER EXTENSION dionysus UPDATE TO '{to}'"))
        .await
        .unwrap_or_else(|e| panic!("{}: ALTER EXTENSION dionysus UPDATE TO '{to}': {}", case.name, message(&e)));
    assert_eq!(installed_version(&old).await, to, "{}: the update did not reach {to}", case.name);
    run_sql(&old, &case.name, "check.sql", &case.check).await;
    if let Some(hook) = &case.hook {
        hook_after_update(hook, held, &db, &old).await;
    }
    if to == env!("CARGO_PKG_VERSION") {
        same_as_a_fresh_install(&old).await;
    }
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).await.unwrap();
}

/// Every case of tests/upgrade/, two at a time; the failures of all of them are reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_update_case_keeps_what_its_release_held() {
    let cases = cases();
    assert!(cases.len() >= 9, "only {} cases in {CASES}", cases.len());
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(2));
    let mut runs = Vec::new();
    for case in cases {
        let slots = slots.clone();
        let name = case.name.clone();
        runs.push((name, tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            run_case(case).await
        })));
    }
    let mut failed = Vec::new();
    for (name, run) in runs {
        if let Err(e) = run.await {
            let why = e.try_into_panic().ok().and_then(|p| {
                p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            });
            failed.push(format!("{name}: {}", why.unwrap_or_else(|| "cancelled".into())));
        }
    }
    assert!(failed.is_empty(), "update cases failed:\n{}", failed.join("\n\n"));
}

/// The whole chain of released update scripts, from the oldest supported release, builds exactly
/// the schema and shipped data a fresh install has.
#[tokio::test]
async fn an_update_from_the_oldest_release_matches_a_fresh_install() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, "oldest", OLDEST).await;
    assert_eq!(installed_version(&old).await, OLDEST);
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    assert_eq!(installed_version(&old).await, env!("CARGO_PKG_VERSION"), "the update did not reach this version");
    same_as_a_fresh_install(&old).await;
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

/// The background passes leave a database at another version alone (this library serves only
/// its own schema): nothing runs or is recorded there, and the server log says why once, not
/// every interval.
#[tokio::test]
async fn the_worker_leaves_an_old_schema_alone_and_says_so_once() {
    let data = std::env::var("DIONYSUS_TEST_DATA").expect("DIONYSUS_TEST_DATA: run under scripts/test.sh");
    let admin = connect("postgres").await;
    // Made from a template already at the old release, so the launcher's first visit finds it
    // so (a template itself is never visited once marked).
    let template = format!("t_upgrade_stale_tpl_{}", std::process::id());
    let name = format!("t_upgrade_stale_worker_{}", std::process::id());
    for db in [&name, &template] {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).await.unwrap();
    }
    admin.batch_execute(&format!("CREATE DATABASE {template}")).await.unwrap();
    let t = connect(&template).await;
    t.batch_execute(&format!("CREATE EXTENSION vector; CREATE EXTENSION dionysus VERSION '{OLDEST}'")).await.expect("install the oldest release");
    drop(t);
    admin.batch_execute(&format!("ALTER DATABASE {template} IS_TEMPLATE true")).await.unwrap();
    // (A pass may still be connected to it for a moment.)
    let mut created = Err(String::new());
    for _ in 0..100 {
        created = admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}")).await.map_err(|e| message(&e));
        if created.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    created.expect("a database from the template");
    // A database at this version, made after it: once two of its passes have run, the launcher
    // has visited the old one (listed before it, by oid) on two rounds at least.
    let current = TestDb::new("upgrade_worker_witness").await;
    let c = &current.client;
    for round in 1..=2 {
        let last: Option<String> = one(c, "SELECT last_run_at::text FROM dionysus.worker_status").await;
        let ran = match last {
            Some(at) => format!("(SELECT last_run_at > '{at}' FROM dionysus.worker_status)"),
            None => "(SELECT last_run_at IS NOT NULL FROM dionysus.worker_status)".to_string(),
        };
        until(c, &ran, &format!("pass {round} in the database at this version")).await;
    }
    let old = connect(&name).await;
    let untouched: bool = one(&old, "SELECT (SELECT last_run_at IS NULL AND last_error IS NULL FROM dionysus.worker_status) \
                                           AND (SELECT last_tick_at IS NULL AND last_error IS NULL FROM dionysus.scheduler_status)").await;
    assert!(untouched, "a background pass ran in a database at {OLDEST}");
    let log = std::fs::read_to_string(format!("{data}/server.log")).expect("the cluster's server.log");
    let about: Vec<&str> = log.lines().filter(|l| l.contains(&format!("database {name} "))).collect();
    assert_eq!(about.len(), 1, "one line about the old database, not one every interval: {about:#?}");
    assert!(about[0].contains("LOG:") && about[0].contains(&format!("has dionysus {OLDEST}")) && about[0].contains("ALTER EXTENSION dionysus UPDATE"), "{}", about[0]);
    drop(old);
    admin.batch_execute(&format!("ALTER DATABASE {template} IS_TEMPLATE false")).await.unwrap();
    for db in [&name, &template, &current.name] {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).await.unwrap();
    }
}

/// Every foreign key has an index leading with its columns (sql/001's rule): deleting a row a key
/// points at (a person leaving, retention, decay) finds the references by index. Without them
/// `forget_person` read the whole message log twice for each of the person's turns.
#[tokio::test]
async fn every_foreign_key_is_served_by_an_index() {
    let db = TestDb::new("fk_indexes").await;
    // (A valid index whose key columns begin with the foreign key's; a partial one serves the
    // lookup of a deleted row only if it keeps every non-null key: `WHERE key IS NOT NULL`.)
    let unserved: Vec<String> = db
        .client
        .query(
            "SELECT c.conrelid::regclass::text || ' (' || (SELECT string_agg(a.attname, ', ' ORDER BY k.n) \
                                                          FROM unnest(c.conkey) WITH ORDINALITY k(att, n) \
                                                          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.att) \
                    || ') -> ' || c.confrelid::regclass::text \
               FROM pg_constraint c \
              WHERE c.contype = 'f' AND c.connamespace = 'dionysus'::regnamespace \
                AND NOT EXISTS (SELECT 1 FROM pg_index i \
                                 WHERE i.indrelid = c.conrelid AND i.indisvalid AND i.indnkeyatts >= cardinality(c.conkey) \
                                   AND (SELECT array_agg(x ORDER BY x) FROM unnest((i.indkey::int2[])[0:cardinality(c.conkey) - 1]) x) \
                                       = (SELECT array_agg(x ORDER BY x) FROM unnest(c.conkey) x) \
                                   AND (i.indpred IS NULL OR cardinality(c.conkey) = 1 AND pg_get_expr(i.indpred, i.indrelid) \
                                        = format('(%I IS NOT NULL)', (SELECT a.attname FROM pg_attribute a \
                                                                       WHERE a.attrelid = c.conrelid AND a.attnum = c.conkey[1])))) \
              ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(unserved.is_empty(), "foreign keys no index leads with: {unserved:?}");
}

/// `\df+ dionysus.*` is the reference: it lists the API and only the API, each function with
/// its comment; the helpers live in dionysus_internal, documented too.
#[tokio::test]
async fn the_api_schema_lists_exactly_the_documented_api() {
    let db = TestDb::new("api_surface").await;
    let undocumented: Vec<String> = db
        .client
        .query(
            "SELECT p.oid::regprocedure::text FROM pg_proc p \
              WHERE p.pronamespace IN ('dionysus'::regnamespace, 'dionysus_internal'::regnamespace) \
                AND obj_description(p.oid, 'pg_proc') IS NULL ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(undocumented.is_empty(), "functions without a COMMENT: {undocumented:?}");
    // Trigger functions and the checks and locks the API is made of are not something to call
    // (check_censors and check_model_text are APIs in their own right: what would a censor, or
    // the grounding check, say of these words; the driver calls the latter before storing a rule).
    let misplaced: Vec<String> = db
        .client
        .query(
            "SELECT p.proname::text FROM pg_proc p WHERE p.pronamespace = 'dionysus'::regnamespace \
                AND (p.prorettype = 'trigger'::regtype OR p.proname ~ '^(require_|check_|claim_rows$|refund_|enforce_|expire_)') \
                AND p.proname NOT IN ('check_censors', 'check_model_text') ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(misplaced.is_empty(), "internal helpers listed as API: {misplaced:?}");
    let internals: i64 =
        db.client.query_one("SELECT count(*) FROM pg_proc WHERE pronamespace = 'dionysus_internal'::regnamespace", &[]).await.unwrap().get(0);
    assert!(internals >= 20, "only {internals} helpers in dionysus_internal");
    // The driver's role reaches the API, and the API reaches its helpers as that role.
    let client = &db.client;
    client.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    client.query_one("SELECT dionysus.create_goal('Read about bees')", &[]).await.expect("the API as the driver");
    client.query_one("SELECT dionysus.heartbeat_begin()", &[]).await.expect("a heartbeat as the driver (its helpers are internal)");
    client.batch_execute("RESET ROLE").await.unwrap();
}

/// Trust III §6: a database left at an old release under a newer library. 0.1.0 declares
/// remember() with fewer arguments than the library reads, and every remember() failed with
/// XX000 ("unboxing private_to_ argument failed"). Now every function of the library refuses
/// with 55000 and the hint to update, before reading an argument; after the update it works.
#[tokio::test]
async fn an_old_schema_refuses_with_the_hint_to_update_never_xx000() {
    let admin = connect("postgres").await;
    let name = format!("t_upgrade_stale_{}", std::process::id());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let old = connect(&name).await;
    old.batch_execute(&format!("CREATE EXTENSION vector; CREATE EXTENSION dionysus VERSION '{OLDEST}'")).await.expect("install the oldest release");
    for call in [
        "SELECT dionysus.remember('The user keeps bees')",
        "SELECT dionysus.embed('bees')",
        "SELECT count(*) FROM dionysus.recall('bees', 3)",
    ] {
        let e = old.batch_execute(call).await.expect_err(&format!("{call} ran on an old schema"));
        let db = e.as_db_error().unwrap_or_else(|| panic!("{call}: not a database error: {e}"));
        assert_eq!(db.code().code(), "55000", "{call}: {} ({})", db.message(), db.code().code());
        assert!(db.message().contains(OLDEST) && db.message().contains(env!("CARGO_PKG_VERSION")), "{}", db.message());
        assert!(db.hint().unwrap_or("").contains("ALTER EXTENSION dionysus UPDATE"), "{:?}", db.hint());
    }
    // Nothing was half-written by the refused calls.
    assert_eq!(count(&old, "memories").await, 0);
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("update");
    let id: uuid::Uuid = old.query_one("SELECT dionysus.remember('The user keeps bees')", &[]).await.expect("remember after the update").get(0);
    assert_eq!(one::<i64>(&old, &format!("SELECT count(*) FROM dionysus.memories WHERE id = '{id}'")).await, 1);
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

