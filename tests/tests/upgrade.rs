//! People keep their data across versions: a database created with the previous release is
//! filled, updated with ALTER EXTENSION dionysus UPDATE, and must then hold everything it held
//! and have exactly the schema a fresh install has.
use dionysus_tests::*;
use std::collections::BTreeSet;

/// The oldest release this library updates (its full script is the fixture
/// tests/upgrade/releases/dionysus--0.10.0.sql); a later release is reached from it through the
/// released update scripts.
const OLDEST: &str = "0.10.0";
/// The last release before context budgets.
const BEFORE_CONTEXT_BUDGETS: &str = "0.10.0";
/// The last release before Recall 2.0.
const PREVIOUS: &str = "0.11.0";
/// The last release whose gap rule waited on a writer's episode.
const WAITING_GAP_RULE: &str = "0.12.0";
/// The last release whose word search looked common words up two at a time (budget 1000).
const PAIRED_WORD_SEARCH: &str = "0.13.0";
/// The last release whose access log locked what recall read (a foreign key) and whose word
/// index kept a pending list.
const LOCKING_ACCESS_LOG: &str = "0.14.0";
/// The last release whose access log was WAL-logged (every recall's commit waited for the disk).
const LOGGED_ACCESS_LOG: &str = "0.15.0";
/// The last release that folded recall counts into the memory's own row.
const COUNTS_IN_MEMORIES: &str = "0.16.0";
/// The last release whose proactive tick failed for good after a long gap (exp() underflowing).
const UNDERFLOWING_TICK: &str = "0.17.0";

/// Everything about the extension's objects that a person or the driver could notice, one
/// line per fact, with no OIDs and no column order (ALTER TABLE ADD COLUMN appends).
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
       || ' ' || p.provolatile::text || p.proparallel::text || ' ' || l.lanname || ' ' || md5(p.prosrc) || ' '
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
SELECT 'member ' || pg_describe_object(classid, objid, objsubid) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dionysus')
"#;

async fn catalog(c: &tokio_postgres::Client) -> BTreeSet<String> {
    c.query(CATALOG, &[]).await.expect("catalog").iter().map(|r| r.get::<_, String>(0)).collect()
}

/// A database of its own with `version` installed (the oldest release's script, then the updates): its name and
/// a connection. Its sessions may call the old release's functions (dionysus.allow_old_schema),
/// as the fills before an update do; without it, they refuse until the update.
async fn install_release(admin: &tokio_postgres::Client, version: &str) -> (String, tokio_postgres::Client) {
    let name = format!("t_upgrade_{}_{}", version.replace('.', ""), std::process::id());
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

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

/// The data a release ships (settings, built-in rules, prompts) and the schema are what a
/// fresh install has.
async fn same_as_a_fresh_install(old: &tokio_postgres::Client, label: &str) {
    let fresh = TestDb::new(label).await;
    let shipped = "SELECT 'config ' || key FROM dionysus.proactive_config UNION ALL SELECT 'setting ' || key FROM dionysus.heartbeat_config \
                   UNION ALL SELECT 'rule ' || name || ' ' || trigger || ' ' || condition::text || ' ' || intents::text FROM dionysus.mind_rules WHERE origin = 'built_in' \
                   UNION ALL SELECT 'prompt ' || key || ' ' || version FROM dionysus.prompt_templates";
    let (a, b): (BTreeSet<String>, BTreeSet<String>) = (
        old.query(shipped, &[]).await.unwrap().iter().map(|r| r.get(0)).collect(),
        fresh.client.query(shipped, &[]).await.unwrap().iter().map(|r| r.get(0)).collect(),
    );
    assert_eq!(a, b, "the shipped data differs after the update");
    let (upgraded, installed) = (catalog(old).await, catalog(&fresh.client).await);
    let missing: Vec<_> = installed.difference(&upgraded).collect();
    let extra: Vec<_> = upgraded.difference(&installed).collect();
    assert!(missing.is_empty() && extra.is_empty(), "the updated schema differs from a fresh install:\nonly in a fresh install: {missing:#?}\nonly after the update: {extra:#?}");
}

/// An update from the release before context budgets keeps every memory and the conversation;
/// the budgets arrive as data with the archetypes' tasks; chat_context takes a budget (its old
/// calls still work) and keeps to it as the driver's role; the language queue asks for the
/// levels of a long memory written before the update, with the new condensing prompt.
#[tokio::test]
async fn an_update_from_the_release_before_budgets_keeps_everything_and_adds_context_budgets() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, BEFORE_CONTEXT_BUDGETS).await;
    let long = "The user described their whole first week at the new job: ".to_string()
        + &"meetings about the roadmap, a lunch with the team, a bug hunt that ran late, and a quiet walk home. ".repeat(8);
    old.execute("SELECT dionysus.remember($1, 'episodic', 0.6, 0, '{}', 'seed', private_to => ARRAY['test:ada'])", &[&long])
        .await
        .expect("fill the previous release");
    old.batch_execute("SELECT dionysus.log_message('test', 'a1', 'dm:ada', 'ada', 'How was my first week at the new job again?')")
        .await
        .unwrap();
    let state = "SELECT (SELECT string_agg(id::text || content || coalesce(summary, '-'), ',' ORDER BY id) FROM dionysus.memories) \
                        || (SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.messages) \
                        || (SELECT string_agg(name || similarity_threshold, ',' ORDER BY name) FROM dionysus.context_archetypes)";
    let before: String = old.query_one(state, &[]).await.unwrap().get(0);
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    let v: String = old.query_one("SELECT extversion FROM pg_extension WHERE extname = 'dionysus'", &[]).await.unwrap().get(0);
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    let after: String = old.query_one(state, &[]).await.unwrap().get(0);
    assert_eq!(after, before, "state lost in the update");
    assert_eq!(count(&old, "SELECT count(*) FROM dionysus.context_budgets").await, 4);
    assert_eq!(count(&old, "SELECT count(*) FROM dionysus.context_archetypes WHERE budget_task = 'deep_conversation'").await, 3);
    old.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    for call in ["dionysus.chat_context(id, 8, 12, false, 2000)", "dionysus.chat_context(id, 8, 12)"] {
        let b: serde_json::Value = old
            .query_one(&format!("SELECT {call} -> 'context_budget' FROM dionysus.messages WHERE platform_message_id = 'a1'"), &[])
            .await
            .expect("chat_context after the update")
            .get(0);
        assert_eq!(b["tokenizer"], "wordpiece", "{b}");
        assert!(b["used"].as_u64().unwrap() <= b["budget"].as_u64().unwrap(), "{b}");
    }
    let fitted: serde_json::Value = old
        .query_one("SELECT dionysus.chat_context(id, 8, 12, false, 2000) -> 'context_budget' FROM dionysus.messages WHERE platform_message_id = 'a1'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(fitted["budget"], 2000);
    assert_eq!(fitted["sections"]["memories"]["included"], 1, "{fitted}");
    old.batch_execute("RESET ROLE; SELECT dionysus.enqueue_language_work()").await.unwrap();
    assert_eq!(count(&old, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'condense_memory'").await, 1);
    let active: String =
        old.query_one("SELECT template FROM dionysus.prompt_templates WHERE key = 'condense_memory' AND active", &[]).await.unwrap().get(0);
    assert!(active.contains("shown when a context has little room"), "the shipped condensing prompt did not move on: {active}");
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

/// An update from the release before Recall 2.0 keeps every memory; recall answers with its
/// two new components as the driver's role; the lexical weight still at its old default moves
/// to the new scale, while a weight the owner set stays theirs; the new knobs arrive.
#[tokio::test]
async fn an_update_from_the_previous_release_keeps_everything_and_brings_recall_2() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, PREVIOUS).await;
    for text in ["Caroline: I went to the support group yesterday", "Melanie: I went to a pottery class yesterday"] {
        old.execute("SELECT dionysus.remember($1, 'episodic', created_at => '2023-05-08 13:56+00')", &[&text]).await.expect("fill the previous release");
    }
    old.batch_execute("UPDATE dionysus.recall_config SET value = 0.2 WHERE key = 'weight_temporal'").await.unwrap();
    let state = "SELECT string_agg(id::text || content || created_at::text, ',' ORDER BY id) FROM dionysus.memories";
    let before: String = old.query_one(state, &[]).await.unwrap().get(0);
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    let v: String = old.query_one("SELECT extversion FROM pg_extension WHERE extname = 'dionysus'", &[]).await.unwrap().get(0);
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    assert_eq!(old.query_one(state, &[]).await.unwrap().get::<_, String>(0), before, "state lost in the update");
    let knob = |k: &'static str| {
        let old = &old;
        async move { old.query_one("SELECT value FROM dionysus.recall_config WHERE key = $1", &[&k]).await.unwrap().get::<_, f64>(0) }
    };
    assert_eq!(knob("weight_lexical").await, 1.0, "the old default moves to the new scale");
    assert_eq!(knob("weight_temporal").await, 0.2, "the owner's own weight stays");
    assert_eq!(knob("weight_person").await, 0.4);
    assert_eq!(knob("inherit_beyond_own").await, 0.5);
    old.batch_execute("SET ROLE dionysus_driver").await.unwrap();
    let top = old
        .query_one("SELECT content, person_score, time_score FROM dionysus.recall('What did Melanie do on May 7, 2023?', 1)", &[])
        .await
        .expect("recall after the update, as the driver");
    assert!(top.get::<_, String>(0).starts_with("Melanie:"), "{:?}", top.get::<_, String>(0));
    assert_eq!(top.get::<_, f64>(1), 1.0);
    assert!(top.get::<_, f64>(2) > 0.5, "a day from the date asked about: {}", top.get::<_, f64>(2));
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

/// An update from 0.12.0 keeps every memory and episode, and its gap rule stops waiting on a
/// writer: with an episode left open past the gap held by a writer's open transaction, 0.12.0's
/// enqueue_language_work waited for it (here until lock_timeout, 55P03; beside a batch holding
/// another episode, a deadlock), while the updated one closes the other stale episode at once
/// and the held one on the pass after the writer commits.
#[tokio::test]
async fn an_update_from_0_12_keeps_everything_and_its_gap_rule_never_waits_on_a_writer() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, WAITING_GAP_RULE).await;
    for source in ["gap_a", "gap_b"] {
        old.execute(
            "SELECT dionysus.remember($1, 'episodic', source => $2, created_at => now() - interval '2 hours')",
            &[&format!("the first turn of {source}"), &source],
        )
        .await
        .expect("fill 0.12.0");
    }
    let state = "SELECT string_agg(m.id::text || m.content || e.episode_id::text, ',' ORDER BY m.id) \
                 FROM dionysus.memories m JOIN dionysus.episode_memories e ON e.memory_id = m.id";
    let before: String = old.query_one(state, &[]).await.unwrap().get(0);
    // A writer appends to gap_b's episode and keeps its transaction open: it holds that row.
    let writer = connect(&name).await;
    writer.batch_execute("BEGIN").await.unwrap();
    writer
        .execute("SELECT dionysus.remember('a late turn of gap_b', 'episodic', source => 'gap_b', created_at => now() - interval '110 minutes')", &[])
        .await
        .unwrap();
    let open = |source: &'static str| {
        let old = &old;
        async move {
            old.query_one("SELECT count(*) FROM dionysus.episodes WHERE source = $1 AND ended_at IS NULL", &[&source])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    old.batch_execute("SET lock_timeout = '1s'").await.unwrap();
    let waited = old.query_one("SELECT dionysus.enqueue_language_work()", &[]).await.expect_err("0.12.0 waits on the writer");
    assert_eq!(waited.code().map(|c| c.code()), Some("55P03"), "{waited}");
    // To 0.13.0, the release that brought the change: a later one builds an index on memories,
    // which waits for this writer like any CREATE INDEX (and here would time out).
    old.batch_execute(&format!("ALTER EXTENSION dionysus UPDATE TO '{PAIRED_WORD_SEARCH}'"))
        .await
        .expect("ALTER EXTENSION dionysus UPDATE TO 0.13.0");
    let v: String = old.query_one("SELECT extversion FROM pg_extension WHERE extname = 'dionysus'", &[]).await.unwrap().get(0);
    assert_eq!(v, PAIRED_WORD_SEARCH);
    assert_eq!(old.query_one(state, &[]).await.unwrap().get::<_, String>(0), before, "state lost in the update");
    // The scheduler runs the same step in this database now: whichever pass gets there first
    // closes the free episode; none waits (a pass's lock held for a moment is skipped, not waited on).
    let closes = |source: &'static str| {
        let old = &old;
        async move {
            for _ in 0..50 {
                old.query_one("SELECT dionysus.enqueue_language_work()", &[]).await.expect("the updated gap rule does not wait");
                if open(source).await == 0 {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            false
        }
    };
    assert!(closes("gap_a").await, "the free stale episode is closed");
    assert_eq!(open("gap_b").await, 1, "the held one is left to its writer");
    writer.batch_execute("COMMIT").await.unwrap();
    assert!(closes("gap_b").await, "closed once free");
    drop((old, writer));
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

/// An update from 0.13.0 keeps every memory, lowers the word search's shipped budget from 1000
/// to 200 and keeps one a person tuned; recall on the updated schema counts the query's words on
/// a memory the word search did not look up, and has the speaker index.
#[tokio::test]
async fn an_update_from_0_13_bounds_the_word_search_and_keeps_a_tuned_budget() {
    let admin = connect("postgres").await;
    let mut names = Vec::new();
    for tuned in [None, Some(500.0f64)] {
        let (name, old) = install_release(&admin, PAIRED_WORD_SEARCH).await;
        for i in 0..5 {
            old.execute("SELECT dionysus.remember($1)", &[&format!("The garden needs weeding, note {i}")]).await.expect("fill 0.13.0");
        }
        old.execute("SELECT dionysus.remember('Mira: I adopted a tortoise called Shelly')", &[]).await.expect("fill 0.13.0");
        if let Some(v) = tuned {
            old.execute("UPDATE dionysus.recall_config SET value = $1 WHERE key = 'lexical_candidates'", &[&v]).await.unwrap();
        }
        let state = "SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.memories";
        let before: String = old.query_one(state, &[]).await.unwrap().get(0);
        old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
        let v: String = old.query_one("SELECT extversion FROM pg_extension WHERE extname = 'dionysus'", &[]).await.unwrap().get(0);
        assert_eq!(v, env!("CARGO_PKG_VERSION"));
        assert_eq!(old.query_one(state, &[]).await.unwrap().get::<_, String>(0), before, "memories lost in the update");
        let now: f64 = old
            .query_one("SELECT value FROM dionysus.recall_config WHERE key = 'lexical_candidates'", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(now, tuned.unwrap_or(200.0), "the shipped budget is lowered, a tuned one kept");
        old.batch_execute("SELECT dionysus.refresh_lexicon()").await.unwrap();
        // A budget below the word's five memories: it is not looked up, only counted.
        old.batch_execute("UPDATE dionysus.recall_config SET value = 1 WHERE key = 'lexical_candidates'").await.unwrap();
        let scored: i64 = old
            .query_one("SELECT count(*) FROM dionysus.recall('the garden', 5) WHERE lexical_score > 0", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(scored, 5, "every memory recalled has the query's word counted");
        let index: bool = old
            .query_one("SELECT to_regclass('dionysus.memories_speaker_words') IS NOT NULL", &[])
            .await
            .unwrap()
            .get(0);
        assert!(index, "the speaker index arrives with the update");
        // The question's name is read as a speaker through it: her turn is hers.
        let person: f64 = old
            .query_one("SELECT person_score FROM dionysus.recall('What pet did Mira adopt?', 1)", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(person, 1.0, "Mira's turn comes first");
        drop(old);
        names.push(name);
    }
    for name in names {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
    }
}

/// An update from 0.14.0 keeps every memory and the recalls not yet folded, merges the word
/// index's pending entries, and recall stops locking what it read: on 0.14.0 a forget of a memory
/// an open transaction had recalled waited for it (here until lock_timeout, 55P03); after the
/// update it goes through at once, and the fold passes over the log row its reader commits after.
#[tokio::test]
async fn an_update_from_0_14_keeps_the_log_and_recall_locks_nothing() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, LOCKING_ACCESS_LOG).await;
    // Not the worker's to fold while this test watches the log.
    old.batch_execute("SELECT pg_advisory_lock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
    let mut ids = Vec::new();
    for text in ["The spare key is under the blue flowerpot", "Mira: I adopted a tortoise called Shelly", "The boiler is serviced every October"] {
        ids.push(old.query_one("SELECT dionysus.remember($1)", &[&text]).await.expect("fill 0.14.0").get::<_, uuid::Uuid>(0));
    }
    old.query("SELECT * FROM dionysus.recall('where is the spare key?', 2)", &[]).await.expect("recall on 0.14.0");
    assert_eq!(forget_beside_an_open_recall(&name, &old, ids[0]).await, Err("55P03".to_string()), "0.14.0's recall locked the key's memory");
    let state = "SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.memories";
    let log = "SELECT count(*) FROM dionysus.memory_access_log";
    let (before, logged): (String, i64) = (old.query_one(state, &[]).await.unwrap().get(0), count(&old, log).await);
    assert!(logged >= 2, "recalls logged on 0.14.0: {logged}");
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    let v: String = old.query_one("SELECT extversion FROM pg_extension WHERE extname = 'dionysus'", &[]).await.unwrap().get(0);
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    assert_eq!(old.query_one(state, &[]).await.unwrap().get::<_, String>(0), before, "memories lost in the update");
    assert_eq!(count(&old, log).await, logged, "recalls not yet folded are kept");
    let pending: i64 = old
        .query_one("SELECT gin_clean_pending_list('dionysus.memories_search_gin') + gin_clean_pending_list('dionysus.memories_speaker_words')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(pending, 0, "the update merged the indexes' pending entries");
    assert_eq!(forget_beside_an_open_recall(&name, &old, ids[0]).await, Ok(true), "the updated recall locks nothing it read");
    // This session's fold (the advisory lock is its own, so its fold may take it again).
    old.query_one("SELECT dionysus.run_maintenance()", &[]).await.expect("the fold passes over the forgotten memory's rows");
    assert_eq!(count(&old, log).await, 0, "folded");
    old.batch_execute("SELECT pg_advisory_unlock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
    assert_eq!(count(&old, "SELECT count(*) FROM dionysus.memories").await, 2);
    same_as_a_fresh_install(&old, "after_0_14").await;
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

/// 0.15.0's recalls not yet folded survive the update, which makes the log unlogged (a recall's
/// commit then waits for no disk); the fold and the health view read it as before. The
/// memories written before the update are split into sentence vectors by the next pass.
#[tokio::test]
async fn an_update_from_0_15_keeps_the_log_unlogged_and_splits_old_memories() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, LOGGED_ACCESS_LOG).await;
    // Not the worker's to fold while this test watches the log.
    old.batch_execute("SELECT pg_advisory_lock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
    for text in ["The spare key is under the blue flowerpot", "The boiler is serviced every October. The plumber comes on a Tuesday morning."] {
        old.query_one("SELECT dionysus.remember($1)", &[&text]).await.expect("fill 0.15.0");
    }
    old.query("SELECT * FROM dionysus.recall('where is the spare key?', 2)", &[]).await.expect("recall on 0.15.0");
    let persistence = "SELECT relpersistence::text FROM pg_class WHERE oid = 'dionysus.memory_access_log'::regclass";
    let kind: String = old.query_one(persistence, &[]).await.unwrap().get(0);
    assert_eq!(kind, "p", "0.15.0's log was logged");
    let log = "SELECT count(*) FROM dionysus.memory_access_log";
    let logged = count(&old, log).await;
    assert_eq!(logged, 2, "recalls logged on 0.15.0");
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    let kind: String = old.query_one(persistence, &[]).await.unwrap().get(0);
    assert_eq!(kind, "u", "the updated log is unlogged");
    assert_eq!(count(&old, log).await, logged, "recalls not yet folded are kept");
    let health: Option<i64> = old.query_one("SELECT pending_access_log FROM dionysus.memory_health", &[]).await.unwrap().get(0);
    assert_eq!(health, Some(logged));
    old.query("SELECT * FROM dionysus.recall('when is the boiler serviced?', 1)", &[]).await.expect("recall after the update");
    assert_eq!(count(&old, log).await, logged + 1, "the updated recall logs");
    let accessed: i32 = old
        .query_one("SELECT access_count FROM dionysus.recall_by_id((SELECT id FROM dionysus.memories WHERE content LIKE 'The boiler%'))", &[])
        .await
        .unwrap()
        .get(0);
    assert!(accessed >= 1, "recall_by_id counts the hits not yet folded: {accessed}");
    old.query_one("SELECT dionysus.run_maintenance()", &[]).await.expect("fold");
    assert_eq!(count(&old, log).await, 0, "folded");
    // (This call's pass or the worker's, whichever took the rows.)
    until(&old, "NOT EXISTS (SELECT 1 FROM dionysus.sentence_queue)", "the old memories' sentences embedded").await;
    // Their rows untouched (no count: recall looks their sentences up); the boiler's two sentences
    // have vectors, the key's one has none of its own.
    let split = "SELECT string_agg(coalesce(m.sentence_count::text, 'unknown') || '/' || \
                 (SELECT count(*) FROM dionysus.memory_sentences s WHERE s.memory_id = m.id), ',' ORDER BY m.content) FROM dionysus.memories m";
    assert_eq!(old.query_one(split, &[]).await.unwrap().get::<_, String>(0), "unknown/2,unknown/0");
    let id: uuid::Uuid = old.query_one("SELECT dionysus.remember('A new turn. It has two sentences.')", &[]).await.unwrap().get(0);
    let fresh: i16 = old.query_one("SELECT sentence_count FROM dionysus.memories WHERE id = $1", &[&id]).await.unwrap().get(0);
    assert_eq!(fresh, 2, "a memory written after the update is counted");
    old.batch_execute("SELECT pg_advisory_unlock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
    same_as_a_fresh_install(&old, "after_0_15").await;
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

/// 0.16.0's recall counts (folded into memories, and the hits not yet folded) move to
/// memory_access with the update; folding after it leaves the memory's row as it was, and what
/// reads the counts (recall_by_id, decay, the heartbeat's themes) reads them there.
#[tokio::test]
async fn an_update_from_0_16_moves_recall_counts_beside_memories() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, COUNTS_IN_MEMORIES).await;
    // Not the worker's to fold while this test watches the log.
    old.batch_execute("SELECT pg_advisory_lock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
    let key: uuid::Uuid =
        old.query_one("SELECT dionysus.remember('The spare key is under the blue flowerpot')", &[]).await.expect("fill 0.16.0").get(0);
    old.query_one("SELECT dionysus.remember('The boiler is serviced every October')", &[]).await.expect("fill 0.16.0");
    for _ in 0..3 {
        old.query("SELECT * FROM dionysus.recall('where is the spare key?', 1)", &[]).await.expect("recall on 0.16.0");
    }
    old.query_one("SELECT dionysus.run_maintenance()", &[]).await.expect("fold on 0.16.0");
    let folded: (i32, bool) = {
        let r = old.query_one("SELECT access_count, last_accessed IS NOT NULL FROM dionysus.memories WHERE id = $1", &[&key]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(folded, (3, true), "0.16.0 folds into the memory's row");
    old.query("SELECT * FROM dionysus.recall('where is the spare key?', 1)", &[]).await.expect("a hit left unfolded");
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    let moved: i32 = old.query_one("SELECT access_count FROM dionysus.memory_access WHERE memory_id = $1", &[&key]).await.unwrap().get(0);
    assert_eq!(moved, 3, "the folded count moved");
    let by_id = "SELECT access_count, last_accessed IS NOT NULL FROM dionysus.recall_by_id($1)";
    let r = old.query_one(by_id, &[&key]).await.unwrap();
    assert_eq!((r.get::<_, i32>(0), r.get::<_, bool>(1)), (4, true), "recall_by_id adds the hit not yet folded");
    let version = "SELECT xmin::text || ctid::text FROM dionysus.memories WHERE id = $1";
    let before: String = old.query_one(version, &[&key]).await.unwrap().get(0);
    old.query_one("SELECT dionysus.run_maintenance()", &[]).await.expect("fold after the update");
    assert_eq!(count(&old, "SELECT count(*) FROM dionysus.memory_access_log").await, 0, "folded");
    let after: String = old.query_one(version, &[&key]).await.unwrap().get(0);
    assert_eq!(after, before, "the fold leaves the memory's row alone");
    let r = old.query_one(by_id, &[&key]).await.unwrap();
    assert_eq!(r.get::<_, i32>(0), 4);
    // Decay's slowdown reads the count: ln(1 + 4) of recall_slowdown.
    let slowdown: bool = old
        .query_one(
            "SELECT abs(d.slowdown - (1 + c.recall_slowdown * ln(5)) * (1 + c.importance_slowdown * m.importance) * (1 + c.emotion_slowdown * abs(m.valence))) < 1e-9 \
               FROM dionysus.memory_decay d JOIN dionysus.memories m ON m.id = d.memory_id CROSS JOIN dionysus.decay_config c WHERE d.memory_id = $1",
            &[&key],
        )
        .await
        .unwrap()
        .get(0);
    assert!(slowdown, "decay counts the recalls");
    let themes: serde_json::Value = old.query_one("SELECT dionysus.activated_themes()", &[]).await.unwrap().get(0);
    assert!(themes.to_string().contains("spare key"), "the recalled memory is a theme: {themes}");
    old.batch_execute("SELECT pg_advisory_unlock(hashtextextended('dionysus.fold_access_log', 0))").await.unwrap();
    same_as_a_fresh_install(&old, "after_0_16").await;
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
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
    // (check_censors is seed 002's own name for an API: what would a censor say of these words).
    let misplaced: Vec<String> = db
        .client
        .query(
            "SELECT p.proname::text FROM pg_proc p WHERE p.pronamespace = 'dionysus'::regnamespace \
                AND (p.prorettype = 'trigger'::regtype OR p.proname ~ '^(require_|check_|claim_rows$|refund_|enforce_|expire_)') \
                AND p.proname <> 'check_censors' ORDER BY 1",
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

/// 0.17.0's proactive tick failed for good once its clock had gone two months without a tick
/// (exp() underflowing in a rule's "toward" step; a failed tick moves nothing, so the next one
/// failed the same way). The update mends it in place: the very tick that failed then runs.
#[tokio::test]
async fn an_update_from_0_17_lets_the_proactive_mind_tick_after_a_long_silence() {
    let admin = connect("postgres").await;
    let (name, old) = install_release(&admin, UNDERFLOWING_TICK).await;
    old.batch_execute(
        "SELECT dionysus.set_clock('2026-03-02 10:00+00'); \
         SELECT dionysus.log_message('test', 'm1', 'dm:alice', 'alice', 'Good morning! How are you today?'); \
         SELECT dionysus.proactive_tick(); \
         SELECT dionysus.set_clock('2026-05-12 10:00+00')",
    )
    .await
    .expect("fill 0.17.0");
    let failed = old.query_one("SELECT dionysus.proactive_tick()", &[]).await.expect_err("0.17.0's tick after ten weeks");
    assert_eq!(failed.code(), Some(&tokio_postgres::error::SqlState::NUMERIC_VALUE_OUT_OF_RANGE), "{failed}");
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("ALTER EXTENSION dionysus UPDATE");
    let ticked: serde_json::Value = old.query_one("SELECT dionysus.proactive_tick()", &[]).await.expect("the tick after the update").get(0);
    assert!(ticked.is_object(), "{ticked}");
    let last: String = old.query_one("SELECT last_tick_at::text FROM dionysus.agent_state", &[]).await.unwrap().get(0);
    assert!(last.starts_with("2026-05-12 10:00"), "the tick moved the clock's mark: {last}");
    same_as_a_fresh_install(&old, "after_0_17").await;
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
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
    assert_eq!(count(&old, "SELECT count(*) FROM dionysus.memories").await, 0);
    old.batch_execute("ALTER EXTENSION dionysus UPDATE").await.expect("update");
    let id: uuid::Uuid = old.query_one("SELECT dionysus.remember('The user keeps bees')", &[]).await.expect("remember after the update").get(0);
    assert_eq!(count(&old, &format!("SELECT count(*) FROM dionysus.memories WHERE id = '{id}'")).await, 1);
    drop(old);
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await.unwrap();
}

