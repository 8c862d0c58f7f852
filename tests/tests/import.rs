//! `dionysus import`: the real binary reads a Discord data package, a chat file and a LoCoMo
//! file into the real extension as the driver's role; imported turns keep their times, stay the
//! person's, wait behind live work, resume after an interruption, and never come in twice.
use dionysus_tests::{driver_conninfo, expect_error, until, TestDb};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn binary() -> String {
    let bin = env!("CARGO_BIN_EXE_dionysus-bench").replace("dionysus-bench", "dionysus");
    assert!(Path::new(&bin).exists(), "build the driver first: {bin}");
    bin
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dionysus-import-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, rel: &str, body: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, body).unwrap();
    p
}

fn import(db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(binary());
    cmd.arg("import").args(args).env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name)).env_remove("DIONYSUS_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run dionysus import")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

async fn one<T: for<'a> tokio_postgres::types::FromSql<'a>>(db: &TestDb, sql: &str) -> T {
    db.client.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[tokio::test]
async fn a_discord_package_comes_in_once_with_its_times_and_stays_the_persons() {
    let db = TestDb::new("import_discord").await;
    let c = &db.client;
    // The person already talks here: one of the package's messages is in the live log.
    c.execute("SELECT dionysus.log_message('discord', '5003', '900', '777', 'I will call my sister tonight')", &[]).await.unwrap();
    let d = scratch("discord");
    write(&d, "account/user.json", r#"{"id": "777", "username": "ada"}"#);
    write(&d, "messages/c900/channel.json", r#"{"id": "900", "type": 1, "recipients": ["777", "1"]}"#);
    write(
        &d,
        "messages/c900/messages.json",
        r#"[{"ID": 5001, "Timestamp": "2023-03-01 09:00:00", "Contents": "My sister Hana moved to Lisbon to study architecture.", "Attachments": ""},
            {"ID": 5002, "Timestamp": "2023-03-01 09:05:00", "Contents": "", "Attachments": "https://cdn.example/lisbon.jpg"},
            {"ID": 5003, "Timestamp": "2023-03-02 20:00:00", "Contents": "I will call my sister tonight", "Attachments": ""},
            {"ID": 5004, "Timestamp": "2023-03-09 18:30:00", "Contents": "", "Attachments": ""}]"#,
    );
    write(&d, "messages/901/messages.csv", "ID,Timestamp,Contents,Attachments\n6001,2022-11-20 07:15:00+00:00,\"Morning run done, 10 km.\nLegs are tired\",\n6002,2022-11-20 07:20:00+00:00,Breakfast: oats,\n");

    let out = import(&db, &[d.to_str().unwrap()], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "import failed: {stdout}\n{stderr}");
    assert!(stdout.contains("for discord:777") && stdout.contains("1 empty ones left out"), "{stdout}");
    assert!(stdout.contains("imported: 4 new turns, 1 the log held already"), "{stdout}");

    // The turns are in the log at their own times, the person's, marked as imported.
    let rows = c
        .query(
            "SELECT platform_message_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), person, channel_id, is_bot \
               FROM dionysus.messages WHERE import_id IS NOT NULL ORDER BY created_at",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String, String, String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect();
    let want = |id: &str, at: &str, ch: &str| (id.to_string(), at.to_string(), "discord:777".to_string(), ch.to_string(), false);
    assert_eq!(got, vec![want("6001", "2022-11-20 07:15", "901"), want("6002", "2022-11-20 07:20", "901"),
                         want("5001", "2023-03-01 09:00", "900"), want("5002", "2023-03-01 09:05", "900")]);
    // Their memories are private to the person, at those times, in episodes of those times.
    let private: i64 = one(&db, "SELECT count(*) FROM dionysus.memories m JOIN dionysus.messages x ON x.memory_id = m.id \
                                 WHERE x.import_id IS NOT NULL AND m.private_to = ARRAY['discord:777'] AND m.created_at = x.created_at").await;
    assert_eq!(private, 4);
    let episodes: Vec<(String, i32)> = c
        .query("SELECT source, memory_count FROM dionysus.episodes WHERE source LIKE 'imported:%' ORDER BY started_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(episodes, vec![(r#"imported:["discord:777", "discord", "901"]"#.into(), 2), (r#"imported:["discord:777", "discord", "900"]"#.into(), 2)]);

    // Recall finds the imported fact for the person, and for nobody else.
    let for_ada: Vec<String> = c
        .query("SELECT content FROM dionysus.recall('Where does my sister live now?', 3, person => 'discord:777')", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(for_ada.iter().any(|t| t.contains("Lisbon")), "{for_ada:?}");
    let for_bob: i64 = one(&db, "SELECT count(*) FROM dionysus.recall('Where does my sister live now?', 10, person => 'discord:1') r WHERE r.content LIKE '%Lisbon%'").await;
    assert_eq!(for_bob, 0, "another person recalled Ada's imported words");

    // The person's turns wait for extraction (and every memory for concepts) behind live work.
    let queued: Vec<(String, i16, i64)> = c
        .query("SELECT action, priority, count(*) FROM dionysus.work_queue WHERE params ->> 'source' LIKE 'imported:%' \
                   OR (action = 'extract_concepts' AND priority < 0) GROUP BY 1, 2 ORDER BY 1", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(queued, vec![("extract_concepts".into(), -1, 4), ("extract_message".into(), -1, 4)]);
    // Live work queued after the import is claimed before any of it (the scheduler may have
    // queued live work of its own meanwhile: that goes first too).
    c.execute("INSERT INTO dionysus.work_queue (idempotency_key, action) VALUES ('live-after-import', 'extract_concepts')", &[]).await.unwrap();
    let mut claimed = vec![];
    while claimed.last().is_none_or(|(k, _): &(String, i16)| k != "live-after-import") {
        let r = c.query_one("SELECT idempotency_key, priority FROM dionysus.claim_work('test-worker', NULL, 1)", &[]).await.unwrap();
        claimed.push((r.get(0), r.get(1)));
        assert!(claimed.len() <= 5 && claimed.iter().all(|(_, p)| *p == 0), "an import's work went before live work: {claimed:?}");
    }
    // Imported episodes are closed and summarised at background priority, after lived ones.
    c.execute("SELECT dionysus.enqueue_language_work()", &[]).await.unwrap();
    let summaries: i64 = one(&db, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'summarize_episode' AND priority = -1").await;
    assert_eq!(summaries, 2);

    // The same package again: nothing new.
    let again = import(&db, &[d.to_str().unwrap()], &[]);
    let (stdout, stderr) = text(&again);
    assert!(again.status.success() && stdout.contains("already imported"), "{stdout}\n{stderr}");
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.messages").await, 5);
    // `dionysus status` shows it.
    let status = Command::new(binary()).arg("status").env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name)).env_remove("DIONYSUS_CONFIG").output().unwrap();
    let (stdout, _) = text(&status);
    assert!(stdout.contains("import     discord") && stdout.contains("5/5 turns (4 new)"), "{stdout}");
}

#[tokio::test]
async fn a_chat_file_keeps_its_roles_and_a_malformed_one_writes_nothing() {
    let db = TestDb::new("import_chat").await;
    let c = &db.client;
    let d = scratch("chat");
    let bad = write(
        &d,
        "bad.json",
        "{\"platform\": \"whatsapp\", \"person\": \"ann\", \"conversations\": [\n  {\"channel\": \"fam\", \"messages\": [\n    \
         {\"id\": \"1\", \"author\": \"ann\", \"time\": \"2023-05-08T13:56:00Z\", \"text\": \"hi\"},\n    \
         {\"id\": \"2\", \"author\": \"bo\", \"time\": \"next tuesday\", \"text\": \"yo\"}]}]}\n",
    );
    let out = import(&db, &[bad.to_str().unwrap()], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("line 4") && stderr.contains("next tuesday") && stderr.contains("nothing was imported"), "{stderr}");
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.messages").await, 0);
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.imports").await, 0);

    let good = write(
        &d,
        "good.json",
        &json!({"platform": "whatsapp", "person": "ann", "bot": "dio", "conversations": [{"channel": "fam", "messages": [
            {"id": "w1", "author": "ann", "time": "2023-05-08T13:56:00Z", "text": "Bo, are you coming to the recital on Sunday?"},
            {"id": "w2", "author": "bo", "name": "Bo", "time": "2023-05-08T13:58:00+02:00", "text": "Only if Mum drives"},
            {"id": "w3", "author": "dio", "time": "2023-05-08T14:00:00Z", "text": "I can remind you both on Saturday."}]}]})
        .to_string(),
    );
    let out = import(&db, &[good.to_str().unwrap(), "--person", "discord:42"], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows: Vec<(String, bool, String, String)> = c
        .query("SELECT x.author_id, x.is_bot, m.content, m.metadata ->> 'role' FROM dionysus.messages x JOIN dionysus.memories m ON m.id = x.memory_id \
                 WHERE x.person = 'discord:42' AND m.private_to = ARRAY['discord:42'] ORDER BY x.created_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(rows, vec![
        ("bo".into(), false, "Bo: Only if Mum drives".into(), "other".into()),
        ("ann".into(), false, "Bo, are you coming to the recital on Sunday?".into(), "user".into()),
        ("dio".into(), true, "I can remind you both on Saturday.".into(), "assistant".into()),
    ]);
    // Only the person's own words are extracted; what they asked of someone else in 2023 is
    // no goal of the companion's, and what they aimed at then is not an objective now.
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.work_queue WHERE action = 'extract_message'").await, 1);
    let w = c.query_one("SELECT id, lease_token FROM dionysus.claim_work('test-worker', ARRAY['extract_message'], 1)", &[]).await.unwrap();
    let (work, lease): (uuid::Uuid, uuid::Uuid) = (w.get(0), w.get(1));
    let applied: Value = c
        .query_one(
            "SELECT dionysus.complete_work($1, $2, $3)",
            &[&work, &json!({"facts": [{"content": "Ann's family has a recital on Sunday", "subject": "ann"}],
                             "goals": [{"title": "Remind Bo about the recital"}],
                             "objectives": [{"description": "Get Bo to the recital", "saliency": 0.8, "status": "pending"}]}), &lease],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied["facts"].as_array().map(Vec::len), Some(1), "{applied}");
    assert_eq!(applied["refused"], json!([{"goals": 1, "reason": "asked in an imported history"},
                                          {"objectives": 1, "reason": "the past of an imported history"}]), "{applied}");
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.goals").await, 0);
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.objectives").await, 0);
    // Another person's file of the same chat, numbering its turns the same way: theirs, apart.
    let out = import(&db, &[good.to_str().unwrap(), "--person", "discord:43"], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && stdout.contains("imported: 3 new turns, 0 the log held already"), "{stdout}\n{stderr}");
    let ann: String = one(&db, "SELECT id::text FROM dionysus.messages WHERE person = 'discord:42' AND author_id = 'ann'").await;
    let ctx: Value = one(&db, &format!("SELECT dionysus.chat_context('{ann}', 0, 12, use_archetype => false) -> 'recent_turns'")).await;
    assert_eq!(ctx, json!([{"role": "other", "content": "Bo: Only if Mum drives", "at": ctx[0]["at"], "proactive": false,
                            "level": "full", "tokens": ctx[0]["tokens"]}]),
               "an imported turn's context is its person's history alone, others' words marked");
    let sources: i64 = one(&db, "SELECT count(DISTINCT source) FROM dionysus.episodes WHERE source LIKE 'imported:%'").await;
    let mixed: i64 = one(&db, "SELECT count(*) FROM dionysus.episodes e WHERE e.source LIKE 'imported:%' AND \
                               (SELECT count(DISTINCT m.private_to) FROM dionysus.episode_memories em JOIN dionysus.memories m ON m.id = em.memory_id \
                                 WHERE em.episode_id = e.id) > 1").await;
    assert_eq!((sources, mixed), (2, 0), "two people's imports of one chat shared an episode");
    // History is not someone to write to, nor someone talking now.
    assert_eq!(one::<Option<Value>>(&db, "SELECT dionysus.reach_out_target()").await, None);
    assert_eq!(one::<Value>(&db, "SELECT dionysus.known_people()").await, json!([]));
    let (state, msg) = expect_error(c, "SELECT dionysus.reach_out_target('discord:42')").await;
    assert_eq!(state, "P0002", "{msg}");
    // The log stays immutable, the import mark included.
    let (state, _) = expect_error(c, "UPDATE dionysus.messages SET import_id = NULL WHERE author_id = 'ann' AND person = 'discord:42'").await;
    assert_eq!(state, "55000");
}

#[tokio::test]
async fn an_interrupted_locomo_import_resumes_where_it_stopped() {
    let db = TestDb::new("import_resume").await;
    let d = scratch("locomo");
    let turns: Vec<Value> = (1..=120)
        .map(|i| json!({"speaker": if i % 2 == 1 { "Cara" } else { "Mel" }, "dia_id": format!("D1:{i}"),
                        "text": format!("Turn {i}: we talked about the garden, the tomatoes and plan number {i}.")}))
        .collect();
    let file = write(&d, "locomo.json", &json!([{"sample_id": "conv-9", "conversation": {"speaker_a": "Cara", "speaker_b": "Mel",
        "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns}, "qa": []}]).to_string());
    let path = file.to_str().unwrap().to_string();

    // The first run is stopped after its first batch is in.
    let mut child = Command::new(binary())
        .args(["import", &path, "--author", "Mel"])
        .env("DIONYSUS_DATABASE_URL", driver_conninfo(&db.name))
        .env("DIONYSUS_IMPORT_BATCH", "2")
        .env_remove("DIONYSUS_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a progress line").unwrap();
    assert!(first.starts_with("import: 2/120"), "{first}");
    child.kill().unwrap();
    child.wait().unwrap();
    // The killed process's last COMMIT may still be running in its server backend, which
    // finishes the statement it has before it sees the socket closed: where the import stopped
    // is known once that backend is gone (on CI this read an earlier position than the resume
    // then found).
    until(&db.client, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'dionysus driver')",
          "the killed import's backend to end").await;
    let stopped_at: i32 = one(&db, "SELECT position FROM dionysus.imports").await;
    assert!(stopped_at >= 2 && stopped_at < 120, "stopped at {stopped_at}");

    let out = import(&db, &[&path, "--author", "Mel"], &[("DIONYSUS_IMPORT_BATCH", "50")]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("resuming at turn {stopped_at} of 120")), "{stdout}");
    let (n, distinct, person_turns): (i64, i64, i64) = {
        let r = db
            .client
            .query_one("SELECT count(*), count(DISTINCT platform_message_id), count(*) FILTER (WHERE author_id = 'Mel') FROM dionysus.messages", &[])
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((n, distinct, person_turns), (120, 120, 60));
    let (pos, imported, finished): (i32, i32, bool) = {
        let r = db.client.query_one("SELECT position, imported, finished_at IS NOT NULL FROM dionysus.imports", &[]).await.unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((pos, imported, finished), (120, 120, true));
    // A minute apart, in order, private to Mel's key.
    let span: String = one(&db, "SELECT (max(created_at) - min(created_at))::text FROM dionysus.messages").await;
    assert_eq!(span, "01:59:00");
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.memories WHERE private_to = ARRAY['locomo:Mel']").await, 120);
}

#[tokio::test]
async fn import_messages_goes_in_order_and_names_what_is_wrong() {
    let db = TestDb::new("import_sql").await;
    let c = &db.client;
    let fp = "a".repeat(64);
    let id: String = one(&db, &format!("SELECT dionysus.begin_import('terminal:zoe', 'chat', 'x.json', '{fp}', 3) ->> 'import_id'")).await;
    let item = |n: u32| json!({"platform": "import", "id": format!("z{n}"), "channel": "c", "author": "zoe", "role": "person",
                               "text": format!("line {n}"), "at": format!("2024-01-0{n}T10:00:00Z")});
    let batch = json!([item(1), item(2)]).to_string();
    let call = |pos: i32, items: &str| format!("SELECT dionysus.import_messages('{id}', {pos}, '{items}')");
    let r: Value = one(&db, &call(0, &batch)).await;
    assert_eq!((r["position"].clone(), r["imported"].clone()), (json!(2), json!(2)));
    // The same batch again (its commit was never seen): skipped, not imported twice.
    let r: Value = one(&db, &call(0, &batch)).await;
    assert_eq!((r["position"].clone(), r["imported"].clone(), r["skipped"].clone()), (json!(2), json!(0), json!(2)));
    // Ahead of the position: refused.
    let (state, msg) = expect_error(c, &call(3, &json!([item(3)]).to_string())).await;
    assert_eq!(state, "55000", "{msg}");
    assert!(msg.contains("first_position"), "{msg}");
    // Past the total, a bad role, a time that is not one, one in the future: each named.
    let (state, msg) = expect_error(c, &call(2, &json!([item(3), item(4)]).to_string())).await;
    assert!(state == "22023" && msg.contains("\"items\""), "{state} {msg}");
    let mut bad = item(3);
    bad["role"] = json!("admin");
    let (state, msg) = expect_error(c, &call(2, &json!([bad]).to_string())).await;
    assert!(state == "22023" && msg.contains("items[0].role"), "{state} {msg}");
    let mut bad = item(3);
    bad["at"] = json!("soon");
    let (state, msg) = expect_error(c, &call(2, &json!([bad]).to_string())).await;
    assert!(state == "22007" && msg.contains("items[0].at"), "{state} {msg}");
    let mut bad = item(3);
    bad["at"] = json!("2999-01-01T00:00:00Z");
    let (state, msg) = expect_error(c, &call(2, &json!([bad]).to_string())).await;
    assert!(state == "22023" && msg.contains("future"), "{state} {msg}");
    let mut bad = item(3);
    bad["text"] = json!("   ");
    let (state, msg) = expect_error(c, &call(2, &json!([bad]).to_string())).await;
    assert!(state == "22023" && msg.contains("items[0].text"), "{state} {msg}");
    // Nothing of the refused batches was written; the import still stands at 2.
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.messages").await, 2);
    let r: Value = one(&db, &call(2, &json!([item(3)]).to_string())).await;
    assert_eq!((r["position"].clone(), r["finished"].clone()), (json!(3), json!(true)));
    // begin_import checks its arguments, and the same input finds the same import.
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.begin_import('zoe', 'chat', 'x', '{fp}', 3)")).await;
    assert!(state == "22023" && msg.contains("\"person\""), "{state} {msg}");
    let (state, msg) = expect_error(c, "SELECT dionysus.begin_import('terminal:zoe', 'chat', 'x', 'not-hex', 3)").await;
    assert!(state == "22023" && msg.contains("\"fingerprint\""), "{state} {msg}");
    let again: Value = one(&db, &format!("SELECT dionysus.begin_import('terminal:zoe', 'chat', 'x.json', '{fp}', 3)")).await;
    assert_eq!((again["import_id"].as_str(), again["position"].clone()), (Some(id.as_str()), json!(3)));
    // A Discord package's turns are Discord messages: another id cannot pose as one of them.
    let discord: String = one(&db, &format!("SELECT dionysus.begin_import('discord:7', 'discord', 'pkg', '{}', 1) ->> 'import_id'", "e".repeat(64))).await;
    let posing = json!([{"platform": "discord", "id": "[\"discord:bob\", \"x\", \"1\"]", "channel": "c", "author": "7", "role": "person",
                         "text": "hi", "at": "2024-01-01T10:00:00Z"}]);
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.import_messages('{discord}', 0, '{}')", posing.to_string().replace('\'', "''"))).await;
    assert!(state == "22023" && msg.contains("items[0].id"), "{state} {msg}");
    // The driver's role may not rewrite whose an import is.
    let driver = tokio_postgres::connect(&driver_conninfo(&db.name), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(driver.1);
    let e = driver.0.execute("UPDATE dionysus.imports SET person = 'terminal:eve'", &[]).await.unwrap_err();
    assert_eq!(dionysus_tests::sqlstate(&e), "42501");
}

/// 151 turns, one a line (turn k on line k + 1), the 101st (in the second batch) of the given shape.
fn chat_with_bad_turn_101(bad: Value) -> String {
    let mut lines = vec![r#"{"platform": "whatsapp", "person": "ann", "conversations": [{"channel": "fam", "messages": ["#.to_string()];
    for k in 1..=151 {
        let mut m = json!({"id": format!("m{k}"), "author": if k % 2 == 0 { "ann" } else { "bo" }, "name": "Bo",
                           "time": format!("2023-05-08T{:02}:{:02}:00Z", 10 + k / 60, k % 60), "text": format!("turn number {k}")});
        if k == 101 {
            for (key, v) in bad.as_object().unwrap() {
                m[key] = v.clone();
            }
        }
        lines.push(format!("{m}{}", if k < 151 { "," } else { "" }));
    }
    lines.push("]}]}".into());
    lines.join("\n")
}

#[tokio::test]
async fn a_bad_record_is_reported_and_skipped_and_a_rerun_finishes() {
    let db = TestDb::new("import_bad_record").await;
    let d = scratch("bad-record");
    // Each shape the database cannot take, as turn 101: the first batch of 100 used to commit and
    // the second to fail (22023, 22P05) on this run and every rerun, at 100/151 for ever.
    let shapes = [
        ("nul.json", json!({"text": "\u{0}"}), "nothing but control characters", 150),
        ("nul-space.json", json!({"text": "\u{0} "}), "nothing but control characters", 150),
        ("name.json", json!({"name": "B\u{0}o"}), "display name", 151),
        ("author.json", json!({"author": "b\u{0}o"}), "its author contains a control character", 150),
    ];
    let mut before = 0;
    for (file, bad, why, kept) in shapes {
        let f = write(&d, file, &chat_with_bad_turn_101(bad));
        // Each file's turns are one person's and another person key's: none is a duplicate of another file's.
        let person = format!("terminal:{file}");
        for run in 0..2 {
            let out = import(&db, &[f.to_str().unwrap(), "--person", &person], &[]);
            let (stdout, stderr) = text(&out);
            assert!(out.status.success(), "{file}, run {run}: {stdout}\n{stderr}");
            assert!(stderr.contains(&format!("{}, line 102: turn \"m101\" of conversation \"fam\"", f.display())) && stderr.contains(why),
                    "{file}, run {run}: the bad record is not reported with its file, line and reason:\n{stderr}");
            let want = if run == 0 { format!("imported: {kept} new turns") } else { "already imported".into() };
            assert!(stdout.contains(&want), "{file}, run {run}: {stdout}\n{stderr}");
            let n: i64 = one(&db, "SELECT count(*) FROM dionysus.messages").await;
            assert_eq!(n, before + kept, "{file}, run {run}");
        }
        before += kept;
    }
    // The display name is cleaned, its turn kept.
    let name: String = one(&db, "SELECT m.content FROM dionysus.messages x JOIN dionysus.memories m ON m.id = x.memory_id \
                                 WHERE x.person = 'terminal:name.json' AND x.platform_message_id LIKE '%\"m101\"]'").await;
    assert_eq!(name, "Bo: turn number 101");
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.imports WHERE finished_at IS NULL").await, 0);

    // A Discord package whose 101st message has an id that is not Discord's.
    let pkg = d.join("discord");
    write(&pkg, "account/user.json", r#"{"id": "777"}"#);
    let rows: Vec<String> = (1..=151)
        .map(|k| {
            let id = if k == 101 { json!("abc") } else { json!(9000 + k) };
            json!({"ID": id, "Timestamp": format!("2023-03-01 {:02}:{:02}:00", 10 + k / 60, k % 60), "Contents": format!("message {k}"), "Attachments": ""})
                .to_string()
        })
        .collect();
    let file = write(&pkg, "messages/c900/messages.json", &format!("[\n{}\n]", rows.join(",\n")));
    for run in 0..2 {
        let out = import(&db, &[pkg.to_str().unwrap()], &[]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "discord, run {run}: {stdout}\n{stderr}");
        assert!(stderr.contains(&format!("{}, line 102: turn \"abc\" of conversation \"900\"", file.display())) && stderr.contains("not a Discord message id"),
                "discord, run {run}: {stderr}");
        assert!(stdout.contains(if run == 0 { "imported: 150 new turns" } else { "already imported" }), "discord, run {run}: {stdout}\n{stderr}");
        assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.messages WHERE platform = 'discord'").await, 150, "discord, run {run}");
    }
}

#[tokio::test]
async fn an_import_stuck_on_a_bad_record_finishes_on_the_next_run_without_doubling() {
    let db = TestDb::new("import_stuck").await;
    let d = scratch("stuck");
    let f = write(&d, "nul.json", &chat_with_bad_turn_101(json!({"text": "\u{0}"})));
    // Where an older driver left it: the first batch of 100 in, the second refused for ever.
    let fp = "b".repeat(64);
    let id: String = one(&db, &format!("SELECT dionysus.begin_import('whatsapp:ann', 'chat', 'nul.json', '{fp}', 151) ->> 'import_id'")).await;
    let items: Vec<Value> = (1..=100)
        .map(|k| json!({"platform": "whatsapp", "id": format!("m{k}"), "channel": "fam", "author": if k % 2 == 0 { "ann" } else { "bo" },
                        "name": "Bo", "role": if k % 2 == 0 { "person" } else { "other" }, "text": format!("turn number {k}"),
                        "at": format!("2023-05-08T{:02}:{:02}:00Z", 10 + k / 60, k % 60)}))
        .collect();
    db.client.execute("SELECT dionysus.import_messages($1::text::uuid, 0, $2)", &[&id, &Value::Array(items)]).await.unwrap();
    let out = import(&db, &[f.to_str().unwrap()], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && stdout.contains("imported: 50 new turns, 100 the log held already"), "{stdout}\n{stderr}");
    let (n, distinct): (i64, i64) = {
        let r = db.client.query_one("SELECT count(*), count(DISTINCT platform_message_id) FROM dionysus.messages", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((n, distinct), (150, 150));
}

#[tokio::test]
async fn a_turn_over_the_databases_length_limit_is_left_out_and_a_rerun_finishes() {
    let db = TestDb::new("import_too_long").await;
    // The limit set lower than its default for this database: the driver's sessions have it.
    db.client.batch_execute(&format!("ALTER DATABASE {} SET dionysus.max_content_length = 60", db.name)).await.unwrap();
    let d = scratch("too-long");
    let f = write(&d, "long.json", &chat_with_bad_turn_101(json!({"text": "x".repeat(57)})));
    for run in 0..2 {
        let out = import(&db, &[f.to_str().unwrap()], &[]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "run {run}: {stdout}\n{stderr}");
        // "Bo: " and 57 characters: 61, one over.
        assert!(stderr.contains(&format!("{}, line 102: turn \"m101\" of conversation \"fam\": it is longer than the database's dionysus.max_content_length (60)", f.display())),
                "run {run}: {stderr}");
        assert!(stdout.contains(if run == 0 { "imported: 150 new turns" } else { "already imported" }), "run {run}: {stdout}\n{stderr}");
        assert_eq!(one::<i64>(&db, "SELECT count(*) FROM dionysus.messages").await, 150, "run {run}");
    }
}
