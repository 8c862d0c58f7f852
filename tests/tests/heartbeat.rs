//! Whole heartbeats from SQL: the energy examples (regain 10 up to 20, costs 0-7), a recorded
//! transcript of heartbeats replayed turn by turn, goals, the cooldown, the
//! queue and outbox, the scheduler's NOTIFY, concurrency, a killed commit, hostile decisions.
use dionysus_tests::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio_postgres::Client;
use uuid::Uuid;

async fn set_energy(c: &Client, e: f64) {
    c.query_one("SELECT dionysus.update_energy($1 - dionysus.get_current_energy())", &[&e]).await.unwrap();
}

async fn begin(c: &Client) -> Value {
    c.query_one("SELECT dionysus.heartbeat_begin()", &[]).await.unwrap().get(0)
}

async fn commit(c: &Client, hb: &Value, decision: Value) -> Value {
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    c.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &decision]).await.unwrap().get(0)
}

async fn finish(c: &Client, hb: &Value, narrative: &str, valence: f64) -> Uuid {
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    c.query_one("SELECT dionysus.heartbeat_finish($1, $2, $3)", &[&id, &narrative, &valence]).await.unwrap().get(0)
}

async fn energy(c: &Client) -> f64 {
    c.query_one("SELECT dionysus.get_current_energy()", &[]).await.unwrap().get(0)
}

async fn memory(c: &Client, text: &str) -> String {
    c.query_one("SELECT dionysus.remember($1, 'semantic')::text", &[&text]).await.unwrap().get(0)
}

fn act(name: &str, params: Value) -> Value {
    json!({"action": name, "params": params})
}

#[tokio::test]
async fn the_seed_example_turns_reproduce_exactly() {
    let db = TestDb::new("hb_turns").await;
    let c = &db.client;
    let a = memory(c, "The schema uses pgvector").await;
    let b = memory(c, "Recall fuses vector and lexical search").await;
    set_energy(c, 0.0).await;

    // Productive turn: 10 energy, reflect 2 + inquire shallow 3 + synthesize 4 + connect 1 = 10.
    let hb = begin(c).await;
    assert_eq!(hb["energy"]["available"].as_f64(), Some(10.0));
    let r = commit(c, &hb, json!({"reasoning": "productive", "actions": [
        act("reflect", json!({})), act("inquire_shallow", json!({"question": "What is HNSW?"})),
        act("synthesize", json!({"topic": "search"})), act("connect", json!({"from_id": a, "to_id": b}))]})).await;
    assert_eq!(r["actions_rejected"], json!([]), "{r}");
    assert_eq!(r["energy_end"].as_f64(), Some(0.0));
    finish(c, &hb, "A productive turn.", 0.2).await;

    // Saving turn: reflect 2 + maintain 2 + rest = 4 spent, 6 banked → next turn 16.
    let hb = begin(c).await;
    assert_eq!(hb["energy"]["available"].as_f64(), Some(10.0));
    let r = commit(c, &hb, json!({"actions": [act("reflect", json!({})), act("maintain", json!({})), act("rest", json!({}))]})).await;
    assert_eq!(r["energy_end"].as_f64(), Some(6.0));
    finish(c, &hb, "Saving up.", 0.0).await;

    // Expensive turn after saving: 16 available; inquire deep 6 + synthesize 4 + reach out 5 = 15 → 1 left.
    let hb = begin(c).await;
    assert_eq!(hb["energy"]["available"].as_f64(), Some(16.0));
    let r = commit(c, &hb, json!({"actions": [
        act("inquire_deep", json!({"question": "How do memories consolidate?"})),
        act("synthesize", json!({"topic": "consolidation"})),
        act("reach_out_user", json!({"intent": "share what I found"}))]})).await;
    assert_eq!(r["actions_rejected"], json!([]), "{r}");
    assert_eq!(r["energy_end"].as_f64(), Some(1.0));
    finish(c, &hb, "Deep work.", 0.4).await;
    assert_eq!(energy(c).await, 1.0);
    // Every change of energy is in the ledger, tied to a heartbeat and an action.
    let untraced: i64 = c
        .query_one("SELECT count(*) FROM dionysus.energy_ledger WHERE heartbeat_id IS NOT NULL AND action IS NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(untraced, 0);
    let spent: f64 = c
        .query_one("SELECT -sum(delta) FROM dionysus.energy_ledger WHERE action NOT IN ('regenerate') AND heartbeat_id IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(spent, 10.0 + 4.0 + 15.0);
}

#[tokio::test]
async fn the_appendix_b_transcript_replays() {
    let db = TestDb::new("hb_appendix").await;
    let c = &db.client;
    let goal: Uuid = c
        .query_one("SELECT dionysus.create_goal('Understand user''s project architecture', source => 'user_request')", &[])
        .await
        .unwrap()
        .get(0);
    let schema = memory(c, "The database schema has memories, episodes and a graph").await;
    set_energy(c, 2.0).await; // 2 + 10 regenerated = 12, as in the transcript
    let hb = begin(c).await;
    assert_eq!(hb["energy"]["available"].as_f64(), Some(12.0));
    assert_eq!(hb["goals"]["active"][0]["title"], json!("Understand user's project architecture"));
    let r = commit(c, &hb, json!({
        "reasoning": "I've been making progress on understanding the project architecture.",
        "actions": [
            act("recall", json!({"query": "project architecture database schema"})),
            act("reflect", json!({"focus": "recent learning"})),
            act("synthesize", json!({"topic": "project architecture understanding"})),
            act("connect", json!({"from_id": schema, "to_id": memory(c, "A hybrid architecture of relational, vector and graph storage").await, "relation": "DERIVED_FROM"}))],
        "goal_changes": [{"goal_id": goal.to_string(), "change": "progress", "note": "Synthesised the architecture"}]})).await;
    assert_eq!(r["energy_start"].as_f64(), Some(12.0));
    assert_eq!(r["energy_end"].as_f64(), Some(4.0), "12 - (1+2+4+1) = 4: {r}");
    let recalled = &r["actions_taken"][0]["result"]["memories"];
    assert!(recalled.as_array().unwrap().iter().any(|m| m["id"] == json!(schema)), "{r}");
    let mem = finish(c, &hb, "This heartbeat I consolidated my understanding of the project's database architecture.", 0.3).await;
    let row = c
        .query_one(
            "SELECT status::text, energy_start, energy_end, jsonb_array_length(actions_taken), goals_modified -> 0 ->> 'applied', \
                    memory_id, narrative IS NOT NULL, emotional_valence, decision_reasoning IS NOT NULL, \
                    environment_snapshot IS NOT NULL AND goals_snapshot IS NOT NULL, ended_at IS NOT NULL \
             FROM dionysus.heartbeat_log WHERE heartbeat_number = 1",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "finished");
    assert_eq!((row.get::<_, f64>(1), row.get::<_, f64>(2)), (12.0, 4.0));
    assert_eq!(row.get::<_, i32>(3), 4);
    assert_eq!(row.get::<_, Option<String>>(4).as_deref(), Some("true"));
    assert_eq!(row.get::<_, Option<Uuid>>(5), Some(mem));
    assert!(row.get::<_, bool>(6) && row.get::<_, bool>(8) && row.get::<_, bool>(9) && row.get::<_, bool>(10));
    assert_eq!(row.get::<_, Option<f64>>(7), Some(0.3));
    let costs: Vec<f64> = c
        .query("SELECT (a ->> 'cost')::float8 FROM dionysus.heartbeat_log, jsonb_array_elements(actions_taken) a", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(costs, vec![1.0, 2.0, 4.0, 1.0]);
    // The narrative is an episodic memory linked to the goal it touched.
    let linked: i64 = c
        .query_one("SELECT count(*) FROM dionysus.goal_memory_links WHERE goal_id = $1 AND memory_id = $2", &[&goal, &mem])
        .await
        .unwrap()
        .get(0);
    assert_eq!(linked, 1);
    let kind: String = c.query_one("SELECT type::text FROM dionysus.memories WHERE id = $1", &[&mem]).await.unwrap().get(0);
    assert_eq!(kind, "episodic");
}

#[tokio::test]
async fn goals_follow_their_lifecycle_and_limits() {
    let db = TestDb::new("hb_goals").await;
    let c = &db.client;
    let review = || async { c.query_one("SELECT dionysus.review_goals()", &[]).await.unwrap().get::<_, Value>(0) };
    assert_eq!(review().await["needs_brainstorm"], json!(true));
    let goal = |title: &'static str, source: &'static str| async move {
        c.query_one("SELECT dionysus.create_goal($1, source => $2)", &[&title, &source]).await.unwrap().get::<_, Uuid>(0)
    };
    let prio = |id: Uuid| async move {
        c.query_one("SELECT priority::text FROM dionysus.goals WHERE id = $1", &[&id]).await.unwrap().get::<_, String>(0)
    };
    let u1 = goal("first request", "user_request").await;
    let _u2 = goal("second request", "user_request").await;
    let _u3 = goal("third request", "user_request").await;
    assert_eq!(prio(u1).await, "active");
    c.execute("UPDATE dionysus.goals SET last_touched = now() - interval '1 day' WHERE id = $1", &[&u1]).await.unwrap();
    let u4 = goal("fourth request", "user_request").await;
    assert_eq!(prio(u4).await, "active");
    assert_eq!(prio(u1).await, "queued", "the stalest active goal is demoted one level, not dropped");
    let cur = goal("a curiosity", "curiosity").await;
    assert_eq!(prio(cur).await, "queued");
    for i in 0..12 {
        c.execute("SELECT dionysus.create_goal('idea ' || $1)", &[&i.to_string()]).await.unwrap();
    }
    let counts = c
        .query_one("SELECT count(*) FILTER (WHERE priority = 'active'), count(*) FILTER (WHERE priority = 'queued'), \
                    count(*) FILTER (WHERE priority = 'backburner'), count(*) FROM dionysus.goals", &[])
        .await
        .unwrap();
    assert_eq!((counts.get::<_, i64>(0), counts.get::<_, i64>(1), counts.get::<_, i64>(2), counts.get::<_, i64>(3)), (3, 10, 4, 17));
    // Transitions: no skipping levels, completion only from active, terminal states stay.
    let bb: Uuid = c.query_one("SELECT id FROM dionysus.goals WHERE priority = 'backburner' LIMIT 1", &[]).await.unwrap().get(0);
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.change_goal_priority('{bb}', 'active')")).await;
    assert_eq!(state, "22023");
    assert!(msg.contains("skips a level"), "{msg}");
    let (_, msg) = expect_error(c, &format!("SELECT dionysus.change_goal_priority('{bb}', 'completed')")).await;
    assert!(msg.contains("only an active goal"), "{msg}");
    let (_, msg) = expect_error(c, &format!("SELECT dionysus.change_goal_priority('{bb}', 'abandoned')")).await;
    assert!(msg.contains("\"reason\""), "{msg}");
    c.execute("SELECT dionysus.change_goal_priority($1, 'abandoned', 'lost interest')", &[&bb]).await.unwrap();
    let (_, msg) = expect_error(c, &format!("SELECT dionysus.change_goal_priority('{bb}', 'queued')")).await;
    assert!(msg.contains("abandoned"), "{msg}");
    // Hierarchy: the parent completes when its children have.
    c.batch_execute("UPDATE dionysus.goals SET priority = 'backburner' WHERE priority = 'active'").await.unwrap();
    let parent: Uuid = c.query_one("SELECT dionysus.create_goal('Understand consciousness', priority => 'active')", &[]).await.unwrap().get(0);
    let kids: Vec<Uuid> = {
        let mut v = Vec::new();
        for t in ["philosophy", "neuroscience"] {
            v.push(c.query_one("SELECT dionysus.create_goal($1, source => 'derived', parent_goal_id => $2)", &[&t, &parent]).await.unwrap().get(0));
        }
        v
    };
    assert_eq!(prio(kids[0]).await, "active", "derived goals inherit the parent's priority");
    // Blockers: the second child waits on the first.
    c.execute("SELECT dionysus.set_goal_blockers($1, jsonb_build_array($2::text, 'a free-text blocker'))", &[&kids[1], &kids[0].to_string()]).await.unwrap();
    let blocked = review().await["blocked"].clone();
    assert_eq!(blocked[0]["blocked_by"].as_array().unwrap().len(), 2, "{blocked}");
    c.execute("SELECT dionysus.change_goal_priority($1, 'completed')", &[&kids[0]]).await.unwrap();
    let blocked = review().await["blocked"].clone();
    assert_eq!(blocked[0]["blocked_by"], json!(["a free-text blocker"]), "a completed blocking goal resolves: {blocked}");
    assert_eq!(prio(parent).await, "active");
    c.execute("SELECT dionysus.change_goal_priority($1, 'completed')", &[&kids[1]]).await.unwrap();
    assert_eq!(prio(parent).await, "completed");
    // Staleness and promotion suggestions.
    let q: Uuid = c.query_one("SELECT id FROM dionysus.goals WHERE priority = 'queued' ORDER BY last_touched DESC LIMIT 1", &[]).await.unwrap().get(0);
    c.execute("SELECT dionysus.change_goal_priority($1, 'active')", &[&q]).await.unwrap();
    c.execute("UPDATE dionysus.goals SET last_touched = now() - interval '8 days' WHERE id = $1", &[&q]).await.unwrap();
    let r = review().await;
    assert_eq!(r["stale"][0]["id"], json!(q.to_string()), "{r}");
    c.execute("SELECT dionysus.add_goal_progress($1, 'moved it along')", &[&q]).await.unwrap();
    assert_eq!(review().await["stale"], json!([]));
    c.execute("SELECT dionysus.change_goal_priority($1, 'queued')", &[&q]).await.unwrap();
    let r = review().await;
    assert!(r["active"].as_array().unwrap().is_empty());
    assert!(r["suggest_promotion"].is_object(), "nothing active: a promotion is suggested: {r}");
    // Views.
    let backlog: i64 = c.query_one("SELECT count(*) FROM dionysus.goal_backlog", &[]).await.unwrap().get(0);
    assert!(backlog >= 2);
}

#[tokio::test]
async fn reach_out_waits_out_the_cooldown_unless_the_user_spoke() {
    let db = TestDb::new("hb_cooldown").await;
    let c = &db.client;
    let reach = json!({"actions": [act("reach_out_user", json!({"intent": "check in"}))]});
    set_energy(c, 10.0).await;
    let hb = begin(c).await;
    let r = commit(c, &hb, json!({"actions": [act("reach_out_user", json!({"intent": "one"})), act("reach_out_user", json!({"intent": "two"}))]})).await;
    assert_eq!(r["actions_taken"].as_array().unwrap().len(), 1);
    assert!(r["actions_rejected"][0]["reason"].as_str().unwrap().contains("cooldown"), "{r}");
    finish(c, &hb, "Reached out.", 0.1).await;
    // Committing a reach-out is not contact: the cooldown starts when it is delivered. Until
    // then the one on its way blocks a second.
    let contact: Option<std::time::SystemTime> = c.query_one("SELECT last_user_contact_at FROM dionysus.heartbeat_state", &[]).await.unwrap().get(0);
    assert_eq!(contact, None, "the cooldown started before anything was sent");
    let hb = begin(c).await;
    let r = commit(c, &hb, reach.clone()).await;
    assert!(r["actions_rejected"][0]["reason"].as_str().unwrap().contains("cooldown"), "{r}");
    finish(c, &hb, "Waited.", 0.0).await;
    // Delivered (composed, reserved, sent, confirmed): contact from now, still the cooldown.
    let w: Uuid = c.query_one("SELECT id FROM dionysus.claim_work('d', ARRAY['reach_out_user'])", &[]).await.unwrap().get(0);
    c.execute("SELECT dionysus.complete_work($1, '{\"message\": \"How are you?\"}')", &[&w]).await.unwrap();
    let o: Uuid = c.query_one("SELECT id FROM dionysus.reserve_outbox('d', 'test')", &[]).await.unwrap().get(0);
    c.execute("SELECT dionysus.outbox_part_sent($1, 'd', 0, 'p-1')", &[&o]).await.unwrap();
    c.execute("SELECT dionysus.confirm_outbox($1, 'd', 'home', 'bot')", &[&o]).await.unwrap();
    let contact: Option<std::time::SystemTime> = c.query_one("SELECT last_user_contact_at FROM dionysus.heartbeat_state", &[]).await.unwrap().get(0);
    assert!(contact.is_some(), "delivery did not start the cooldown");
    let hb = begin(c).await;
    let r = commit(c, &hb, reach.clone()).await;
    assert!(r["actions_rejected"][0]["reason"].as_str().unwrap().contains("cooldown"), "{r}");
    finish(c, &hb, "Waited again.", 0.0).await;
    // The user speaks: the cooldown no longer applies.
    c.batch_execute("SELECT dionysus.note_user_message()").await.unwrap();
    let hb = begin(c).await;
    let r = commit(c, &hb, reach.clone()).await;
    assert_eq!(r["actions_rejected"], json!([]), "{r}");
    finish(c, &hb, "Answered.", 0.2).await;
    // That reach-out fails for good: nothing is on its way any more, and its energy comes back.
    set_energy(c, 10.0).await;
    let before = energy(c).await;
    c.batch_execute("SELECT dionysus.fail_work(id, 'the model refused to write it', false) FROM dionysus.claim_work('d', ARRAY['reach_out_user'])").await.unwrap();
    assert_eq!(energy(c).await, before + 5.0, "the failed reach-out's energy was not refunded");
    let refunds: i64 = c.query_one("SELECT count(*) FROM dionysus.energy_ledger WHERE reason LIKE 'refund%'", &[]).await.unwrap().get(0);
    assert_eq!(refunds, 1);
    // Outside the cooldown window it is allowed again.
    c.batch_execute("UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() - interval '5 hours', last_user_interaction_at = NULL").await.unwrap();
    let hb = begin(c).await;
    let r = commit(c, &hb, reach).await;
    assert_eq!(r["actions_rejected"], json!([]), "{r}");
}

#[tokio::test]
async fn queued_work_becomes_memories_goals_and_one_outbox_message() {
    let db = TestDb::new("hb_queue").await;
    let c = &db.client;
    set_energy(c, 0.0).await;
    let hb = begin(c).await;
    let r = commit(c, &hb, json!({"actions": [
        act("reflect", json!({"focus": "the week"})), act("brainstorm_goals", json!({})),
        act("reach_out_user", json!({"intent": "say hello"})), act("reach_out_public", json!({"content": "a post"}))]})).await;
    // 2 + 3 + 5 = 10: the public post (7) no longer fits.
    assert_eq!(r["work_ids"].as_array().unwrap().len(), 3, "{r}");
    assert!(r["actions_rejected"][0]["reason"].as_str().unwrap().contains("over budget"));
    // Two claimers never get the same item.
    let other = db.connect().await;
    let a = c.query("SELECT id, action FROM dionysus.claim_work('a', NULL, 2)", &[]).await.unwrap();
    let b = other.query("SELECT id, action FROM dionysus.claim_work('b', NULL, 5)", &[]).await.unwrap();
    assert_eq!((a.len(), b.len()), (2, 1));
    assert!(a.iter().all(|x| x.get::<_, Uuid>(0) != b[0].get::<_, Uuid>(0)));
    let all: Vec<(Uuid, String)> = a.iter().chain(b.iter()).map(|r| (r.get(0), r.get(1))).collect();
    let id_of = |name: &str| all.iter().find(|(_, a)| a == name).unwrap().0;
    let applied: Value = c
        .query_one("SELECT dionysus.complete_work($1, $2)", &[&id_of("reflect"), &json!({
            "memories": [{"content": "I notice I favour technical detail", "importance": 0.6}],
            "identity": [{"aspect": "curious about systems", "confidence": 0.7}],
            "worldview": [{"belief": "memory is reconstruction", "confidence": 0.6}]})])
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied["memories"].as_array().unwrap().len(), 1);
    // Completing again repeats nothing.
    let again: Value = c.query_one("SELECT dionysus.complete_work($1, '{}')", &[&id_of("reflect")]).await.unwrap().get(0);
    assert_eq!(again, applied);
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.memories WHERE source = 'heartbeat'", &[]).await.unwrap().get::<_, i64>(0), 1);
    c.execute("SELECT dionysus.complete_work($1, $2)", &[&id_of("brainstorm_goals"), &json!({"goals": [
        {"title": "Learn about sleep"}, {"title": "Read on memory palaces", "description": "method of loci"}]})]).await.unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.goals", &[]).await.unwrap().get::<_, i64>(0), 2);
    // A reach-out without a message is refused and stays claimed; with one, it reaches the outbox.
    let (state, _) = expect_error(c, &format!("SELECT dionysus.complete_work('{}', '{{}}')", id_of("reach_out_user"))).await;
    assert_eq!(state, "22023");
    c.execute("SELECT dionysus.complete_work($1, $2)", &[&id_of("reach_out_user"), &json!({"message": "Hello! I found something."})]).await.unwrap();
    let pending = c.query("SELECT id, content FROM dionysus.pending_outbox()", &[]).await.unwrap();
    assert_eq!(pending.len(), 1);
    let msg: Uuid = pending[0].get(0);
    c.execute("SELECT dionysus.mark_outbox_sent($1, 'discord-123')", &[&msg]).await.unwrap();
    let (state, _) = expect_error(c, &format!("SELECT dionysus.mark_outbox_sent('{msg}')")).await;
    assert_eq!(state, "22023", "sent exactly once");
    assert!(c.query("SELECT 1 FROM dionysus.pending_outbox()", &[]).await.unwrap().is_empty());
    let reflections: Value = c.query_one("SELECT to_jsonb(array_agg(aspect)) FROM dionysus.identity_aspects", &[]).await.unwrap().get(0);
    assert_eq!(reflections, json!(["curious about systems"]));
}

#[tokio::test]
async fn public_posts_wait_for_approval_and_failures_retry_then_fail() {
    let db = TestDb::new("hb_public").await;
    let c = &db.client;
    set_energy(c, 20.0).await;
    c.batch_execute("UPDATE dionysus.heartbeat_config SET value = 2 WHERE key = 'work_max_attempts'").await.unwrap();
    let hb = begin(c).await;
    // No channel offers a public post with a person's approval: refused even from psql (no
    // available_actions), with its reason, and no energy spent on it.
    let r = commit(c, &hb, json!({"actions": [act("reach_out_public", json!({"content": "Thoughts on memory"})),
                                              act("inquire_shallow", json!({"question": "What is new in pgvector?"}))]})).await;
    assert!(r["actions_rejected"][0]["reason"].as_str().unwrap().contains("approval"), "{r}");
    assert_eq!(r["actions_taken"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["energy_end"].as_f64().unwrap(), 17.0, "{r}");
    // A public message put in the outbox by hand still waits for a person's approval.
    let msg: Uuid = c
        .query_one("INSERT INTO dionysus.outbox (audience, content, requires_approval) VALUES ('public', 'Memory is reconstruction.', true) RETURNING id", &[])
        .await
        .unwrap()
        .get(0);
    assert!(c.query("SELECT 1 FROM dionysus.pending_outbox()", &[]).await.unwrap().is_empty(), "not before approval");
    let (state, _) = expect_error(c, &format!("SELECT dionysus.mark_outbox_sent('{msg}')")).await;
    assert_eq!(state, "22023");
    c.execute("SELECT dionysus.approve_outbox($1)", &[&msg]).await.unwrap();
    assert_eq!(c.query("SELECT 1 FROM dionysus.pending_outbox()", &[]).await.unwrap().len(), 1);
    // An inquiry that fails is retried, then fails for good after max_attempts.
    let w: Uuid = c.query_one("SELECT id FROM dionysus.claim_work('d', ARRAY['inquire_shallow'])", &[]).await.unwrap().get(0);
    let s: String = c.query_one("SELECT dionysus.fail_work($1, 'search engine down')", &[&w]).await.unwrap().get(0);
    assert_eq!(s, "pending");
    // It waits out its back-off (work_retry_seconds × 2^(attempts − 1) = 30 s) first.
    assert!(c.query("SELECT 1 FROM dionysus.claim_work('d', ARRAY['inquire_shallow'])", &[]).await.unwrap().is_empty());
    // available_at was set 30 s after fail_work's own now(), so from here it is at most 30 s away.
    let wait: f64 = c.query_one("SELECT extract(epoch FROM available_at - now())::float8 FROM dionysus.work_queue WHERE id = $1", &[&w]).await.unwrap().get(0);
    assert!(wait > 0.0 && wait <= 30.0, "back-off {wait} s");
    c.execute("UPDATE dionysus.work_queue SET available_at = now() WHERE id = $1", &[&w]).await.unwrap();
    let w2: Uuid = c.query_one("SELECT id FROM dionysus.claim_work('d', ARRAY['inquire_shallow'])", &[]).await.unwrap().get(0);
    assert_eq!(w, w2);
    let s: String = c.query_one("SELECT dionysus.fail_work($1, 'still down')", &[&w]).await.unwrap().get(0);
    assert_eq!(s, "failed");
    assert!(c.query("SELECT 1 FROM dionysus.claim_work('d')", &[]).await.unwrap().is_empty());
    let health = c.query_one("SELECT failed_work, outbox_backlog FROM dionysus.heartbeat_health", &[]).await.unwrap();
    assert_eq!((health.get::<_, i64>(0), health.get::<_, i64>(1)), (1, 1));
}

#[tokio::test]
async fn bad_decisions_and_calls_are_clear_errors_that_write_nothing() {
    let db = TestDb::new("hb_bad").await;
    let c = &db.client;
    set_energy(c, 10.0).await;
    let hb = begin(c).await;
    let id = hb["heartbeat_id"].as_str().unwrap();
    for (decision, needle) in [
        ("'[1, 2]'", "must be a JSON object"),
        ("'{\"actions\": {\"action\": \"rest\"}}'", "\"actions\" must be an array"),
        ("'{\"actions\": [], \"reasoning\": 5}'", "\"reasoning\" must be a string"),
        ("'{\"goal_changes\": \"promote\"}'", "\"goal_changes\" must be an array"),
    ] {
        let (state, msg) = expect_error(c, &format!("SELECT dionysus.heartbeat_commit('{id}', {decision})")).await;
        assert_eq!(state, "22P02", "{msg}");
        assert!(msg.contains(needle) && msg.contains("\"decision\""), "{msg}");
    }
    assert_eq!(energy(c).await, 20.0, "nothing spent");
    let (state, _) = expect_error(c, "SELECT dionysus.heartbeat_commit(gen_random_uuid(), '{}')").await;
    assert_eq!(state, "P0002");
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.heartbeat_finish('{id}', 'too early')")).await;
    assert_eq!(state, "22023");
    assert!(msg.contains("committed"), "{msg}");
    // Unknown actions, bad params and unknown goals are rejected one by one; the rest runs.
    let r = commit(c, &hb, json!({"actions": [
        act("teleport", json!({})), act("recall", json!({"k": 3})), json!("rest"),
        act("connect", json!({"from_id": Uuid::new_v4().to_string(), "to_id": Uuid::new_v4().to_string()})),
        act("reflect", json!({"focus": "what went wrong"}))],
        "goal_changes": [{"goal_id": Uuid::new_v4().to_string(), "change": "promote"}, {"goal_id": "x", "change": "fly"}]})).await;
    let reasons: Vec<String> = r["actions_rejected"].as_array().unwrap().iter().map(|x| x["reason"].as_str().unwrap().to_string()).collect();
    assert_eq!(reasons.len(), 4, "{r}");
    assert!(reasons[0].contains("unknown action") && reasons[1].contains("\"query\" is required"));
    assert!(reasons[2].contains("must be an object") && reasons[3].contains("no memory"), "{reasons:?}");
    assert_eq!(r["actions_taken"].as_array().unwrap().len(), 1);
    assert_eq!(r["energy_end"].as_f64(), Some(18.0));
    assert!(r["goals_modified"].as_array().unwrap().iter().all(|g| g["applied"] == json!(false)));
    // A second commit of the same heartbeat is an error, never a double spend.
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.heartbeat_commit('{id}', '{{\"actions\": [{{\"action\": \"reflect\"}}]}}')")).await;
    assert_eq!(state, "55000", "{msg}");
    assert_eq!(energy(c).await, 18.0);
    // Config values are checked.
    let (state, msg) = expect_error(c, "UPDATE dionysus.heartbeat_config SET value = -1 WHERE key = 'cost_reflect'").await;
    assert_eq!(state, "22023");
    assert!(msg.contains("heartbeat_config.cost_reflect"), "{msg}");
    let (state, _) = expect_error(c, "UPDATE dionysus.heartbeat_config SET value = 'lots' WHERE key = 'cost_reflect'").await;
    assert_eq!(state, "22P02");
    let (state, _) = expect_error(c, "SELECT dionysus.get_action_cost('fly')").await;
    assert_eq!(state, "22023");
    let (state, _) = expect_error(c, "SELECT dionysus.update_energy('NaN')").await;
    assert_eq!(state, "22023");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_energy_updates_and_begins_keep_the_invariants() {
    let db = TestDb::new("hb_concurrent").await;
    let mut tasks = Vec::new();
    for w in 0..6i64 {
        let c = db.connect().await;
        tasks.push(tokio::spawn(async move {
            for i in 0..40i64 {
                let delta = ((w * 7 + i * 13) % 17 - 8) as f64; // -8..8
                c.query_one("SELECT dionysus.update_energy($1, NULL, 'test', 'concurrency')", &[&delta]).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let c = &db.client;
    let r = c
        .query_one("SELECT count(*), min(energy_after), max(energy_after), bool_and(energy_before + delta = energy_after) \
                    FROM dionysus.energy_ledger WHERE action = 'test'", &[])
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 240);
    assert!(r.get::<_, f64>(1) >= 0.0 && r.get::<_, f64>(2) <= 20.0);
    assert!(r.get::<_, bool>(3), "every ledger row adds up");
    // The ledger is a chain: each row starts where the previous ended.
    let broken: i64 = c
        .query_one("SELECT count(*) FROM (SELECT energy_before, lag(energy_after) OVER (ORDER BY id) AS prev FROM dionysus.energy_ledger) x \
                    WHERE prev IS NOT NULL AND prev <> energy_before", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(broken, 0);
    // Two begins at once: one heartbeat, regenerated once.
    set_energy(c, 0.0).await;
    let (c1, c2) = (db.connect().await, db.connect().await);
    let (a, b) = tokio::join!(c1.query_one("SELECT dionysus.heartbeat_begin()", &[]), c2.query_one("SELECT dionysus.heartbeat_begin()", &[]));
    let (a, b): (Value, Value) = (a.unwrap().get(0), b.unwrap().get(0));
    assert_eq!(a["heartbeat_id"], b["heartbeat_id"]);
    assert_eq!(energy(c).await, 10.0);
    assert_eq!(c.query_one("SELECT heartbeat_count FROM dionysus.heartbeat_state", &[]).await.unwrap().get::<_, i32>(0), 1);
    // Two commits at once: exactly one wins.
    let id: Uuid = a["heartbeat_id"].as_str().unwrap().parse().unwrap();
    let d = json!({"actions": [act("reflect", json!({}))]});
    let (args1, args2): ([&(dyn tokio_postgres::types::ToSql + Sync); 2], [&(dyn tokio_postgres::types::ToSql + Sync); 2]) =
        ([&id, &d], [&id, &d]);
    let (x, y) = tokio::join!(
        c1.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &args1),
        c2.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &args2)
    );
    assert_eq!([x.is_ok(), y.is_ok()].iter().filter(|ok| **ok).count(), 1);
    assert_eq!(energy(c).await, 8.0, "spent once");
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.work_queue", &[]).await.unwrap().get::<_, i64>(0), 1);
}

#[tokio::test]
async fn a_backend_killed_mid_commit_leaves_nothing_partial() {
    let db = TestDb::new("hb_kill").await;
    let c = &db.client;
    set_energy(c, 10.0).await;
    let hb = begin(c).await;
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    let victim = db.connect().await;
    let pid: i32 = victim.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    victim.batch_execute("BEGIN").await.unwrap();
    victim
        .query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &json!({"actions": [act("reflect", json!({})), act("brainstorm_goals", json!({}))]})])
        .await
        .unwrap();
    // Killed before COMMIT: the whole commit disappears.
    c.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.query_one("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", &[&pid]).await.unwrap().get::<_, i64>(0) > 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(energy(c).await, 20.0);
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.work_queue", &[]).await.unwrap().get::<_, i64>(0), 0);
    let status: String = c.query_one("SELECT status::text FROM dionysus.heartbeat_log WHERE id = $1", &[&id]).await.unwrap().get(0);
    assert_eq!(status, "in_flight");
    let r = commit(c, &hb, json!({"actions": [act("reflect", json!({}))]})).await;
    assert_eq!(r["energy_end"].as_f64(), Some(18.0));
}

/// A tiny deterministic generator, so a failure can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn hostile_value(rng: &mut Rng, depth: u32) -> Value {
    match rng.next() % if depth > 2 { 6 } else { 8 } {
        0 => Value::Null,
        1 => json!(rng.next().is_multiple_of(2)),
        2 => json!(*rng.pick(&[0.0, -1.0, 1e308, -1e-300, 3.5, 7.0, 1e9])),
        3 => json!(*rng.pick(&["", " ", "NaN", "Infinity", "'; DROP TABLE dionysus.memories; --", "\u{0}x", "😀", "00000000-0000-0000-0000-000000000000"])),
        4 => json!("x".repeat((rng.next() % 20_000) as usize)),
        5 => json!(Uuid::new_v4().to_string()),
        6 => Value::Array((0..rng.next() % 4).map(|_| hostile_value(rng, depth + 1)).collect()),
        _ => {
            let keys = ["action", "params", "query", "k", "goal_id", "change", "content", "from_id", "to_id", "weight", "priority", "intent", "question", "topic", "zzz"];
            Value::Object((0..rng.next() % 5).map(|_| (rng.pick(&keys).to_string(), hostile_value(rng, depth + 1))).collect())
        }
    }
}

fn hostile_decision(rng: &mut Rng) -> Value {
    let names = ["observe", "review_goals", "remember", "recall", "connect", "reprioritize", "reflect", "maintain", "brainstorm_goals",
                 "inquire_shallow", "synthesize", "reach_out_user", "inquire_deep", "reach_out_public", "rest", "REST", "fly", ""];
    match rng.next() % 10 {
        0 => hostile_value(rng, 0),
        _ => {
            let actions: Vec<Value> = (0..rng.next() % 8)
                .map(|_| {
                    if rng.next().is_multiple_of(4) {
                        hostile_value(rng, 1)
                    } else {
                        let mut params = serde_json::Map::new();
                        for _ in 0..rng.next() % 3 {
                            let k = *rng.pick(&["query", "k", "content", "question", "topic", "intent", "from_id", "to_id", "goal_id", "priority", "focus", "bogus"]);
                            params.insert(k.to_string(), if rng.next().is_multiple_of(2) { json!("a reasonable text") } else { hostile_value(rng, 2) });
                        }
                        json!({"action": rng.pick(&names), "params": Value::Object(params)})
                    }
                })
                .collect();
            let changes: Vec<Value> = (0..rng.next() % 3).map(|_| hostile_value(rng, 1)).collect();
            json!({"reasoning": hostile_value(rng, 2), "actions": actions, "goal_changes": changes})
        }
    }
}

#[tokio::test]
async fn a_thousand_hostile_decisions_never_break_the_invariants() {
    let db = TestDb::new("hb_fuzz").await;
    let c = &db.client;
    c.execute("SELECT dionysus.create_goal('keep going', source => 'user_request')", &[]).await.unwrap();
    let mut rng = Rng(0x5eed_d105_u64);
    let (mut committed, mut refused) = (0, 0);
    for i in 0..1000 {
        let hb = begin(c).await;
        let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
        let decision = hostile_decision(&mut rng);
        match c.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &decision]).await {
            Ok(row) => {
                committed += 1;
                let r: Value = row.get(0);
                let spent: f64 = r["actions_taken"].as_array().unwrap().iter().map(|a| a["cost"].as_f64().unwrap()).sum();
                let (start, end) = (r["energy_start"].as_f64().unwrap(), r["energy_end"].as_f64().unwrap());
                assert!((start - spent - end).abs() < 1e-9, "decision {i}: energy does not add up: {r}");
                c.query_one("SELECT dionysus.heartbeat_finish($1, $2)", &[&id, &format!("hostile heartbeat {i}")]).await.unwrap();
            }
            Err(e) => {
                refused += 1;
                // 22P02: not a decision; 22P05: text jsonb cannot hold (a NUL character).
                let state = sqlstate(&e);
                assert!(state == "22P02" || state == "22P05", "decision {i}: {state} {}", message(&e));
                // Still in flight, untouched: the default decision closes it.
                let d: Value = c.query_one("SELECT dionysus.heartbeat_default_decision()", &[]).await.unwrap().get(0);
                c.query_one("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &d]).await.unwrap();
                c.query_one("SELECT dionysus.heartbeat_finish($1, 'fallback')", &[&id]).await.unwrap();
            }
        }
        let e = energy(c).await;
        assert!((0.0..=20.0).contains(&e), "decision {i}: energy {e}");
    }
    assert!(committed > 300 && refused > 20, "the generator exercises both paths ({committed}/{refused})");
    let r = c
        .query_one("SELECT count(*), count(*) FILTER (WHERE status = 'finished'), \
                    (SELECT bool_and(energy_before + delta = energy_after) FROM dionysus.energy_ledger) FROM dionysus.heartbeat_log", &[])
        .await
        .unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (1000, 1000));
    assert!(r.get::<_, bool>(2));
    assert!(count(c, "memories").await >= 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_wakes_the_driver_by_notify_unasked() {
    use futures_util::StreamExt;
    let db = TestDb::new("hb_notify").await;
    let conninfo = format!("{} dbname={}", cluster_conninfo(), db.name);
    let (client, mut conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut stream = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = msg {
                let _ = tx.send((n.channel().to_string(), n.payload().to_string()));
            }
        }
    });
    client.batch_execute("LISTEN dionysus_heartbeat").await.unwrap();
    // A fresh agent is due at once; nobody calls anything: the scheduler worker must notify.
    let (channel, payload) = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("no NOTIFY within 60 s").unwrap();
    assert_eq!(channel, "dionysus_heartbeat");
    let p: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(p["database"], json!(db.name));
    assert_eq!(p["reason"], json!("scheduled"));
    let c = &db.client;
    let tick = c.query_one("SELECT last_scheduler_tick IS NOT NULL, last_scheduler_error FROM dionysus.heartbeat_health", &[]).await.unwrap();
    assert!(tick.get::<_, bool>(0));
    assert_eq!(tick.get::<_, Option<String>>(1), None);
    // Paused or in a session: not due.
    c.batch_execute("SELECT dionysus.session_start()").await.unwrap();
    assert!(!c.query_one("SELECT dionysus.heartbeat_due()", &[]).await.unwrap().get::<_, bool>(0));
    c.batch_execute("SELECT dionysus.session_end(significant => true)").await.unwrap();
    let requested: bool = c.query_one("SELECT requested_at IS NOT NULL FROM dionysus.heartbeat_state", &[]).await.unwrap().get(0);
    assert!(requested && c.query_one("SELECT dionysus.heartbeat_due()", &[]).await.unwrap().get::<_, bool>(0));
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    assert!(!c.query_one("SELECT dionysus.heartbeat_due()", &[]).await.unwrap().get::<_, bool>(0));
}

#[tokio::test]
async fn a_stalled_heartbeat_is_closed_with_the_fallback() {
    let db = TestDb::new("hb_stall").await;
    // The scheduler's own tick would recover it first, between the test's steps.
    db.hold_worker_off().await;
    let c = &db.client;
    set_energy(c, 0.0).await;
    let hb = begin(c).await;
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    // Long-running but alive (its driver touches it): not recovered.
    c.execute("UPDATE dionysus.heartbeat_log SET started_at = now() - interval '1 hour' WHERE id = $1", &[&id]).await.unwrap();
    assert_eq!(c.query_one("SELECT dionysus.heartbeat_touch($1)", &[&id]).await.unwrap().get::<_, String>(0), "in_flight");
    let tick: Value = c.query_one("SELECT dionysus.scheduler_tick()", &[]).await.unwrap().get(0);
    assert_eq!(tick["recovered"], json!(0), "a heartbeat that is still being worked on was taken over");
    // Silent for longer than heartbeat_timeout_minutes: recovered.
    c.execute("UPDATE dionysus.heartbeat_log SET last_alive_at = now() - interval '16 minutes' WHERE id = $1", &[&id]).await.unwrap();
    let tick: Value = c.query_one("SELECT dionysus.scheduler_tick()", &[]).await.unwrap().get(0);
    assert_eq!(tick["recovered"], json!(1));
    // Its driver, waking up late, learns that it was superseded instead of finishing it.
    assert_eq!(c.query_one("SELECT dionysus.heartbeat_touch($1)", &[&id]).await.unwrap().get::<_, String>(0), "recovered");
    let (state, msg) = expect_error(c, &format!("SELECT dionysus.heartbeat_finish('{id}', 'late narrative')")).await;
    assert_eq!(state, "55000", "{msg}");
    let r = c
        .query_one("SELECT status::text, memory_id IS NOT NULL, actions_taken -> 0 ->> 'action', actions_taken -> 1 ->> 'action' \
                    FROM dionysus.heartbeat_log WHERE id = $1", &[&id])
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "recovered");
    assert!(r.get::<_, bool>(1));
    assert_eq!((r.get::<_, Option<String>>(2).as_deref(), r.get::<_, Option<String>>(3).as_deref()), (Some("reflect"), Some("rest")));
    let in_flight: Option<Uuid> = c.query_one("SELECT in_flight FROM dionysus.heartbeat_state", &[]).await.unwrap().get(0);
    assert_eq!(in_flight, None);
    assert_eq!(energy(c).await, 8.0);
}

// ---------------------------------------------------------------------------------------
// Trust II: exactly once, the lock order, liveness, what actually happened, retention.
// ---------------------------------------------------------------------------------------

/// A driver whose lease lapsed and whose item was claimed again cannot settle it: the lease
/// token fences it out (55000); the new holder settles it once.
#[tokio::test]
async fn an_expired_lease_holder_cannot_settle_an_item_someone_else_holds() {
    let db = TestDb::new("hb_fence").await;
    // A scheduler tick would queue concept work for the insights, and claim_work would take it.
    db.hold_worker_off().await;
    let c = &db.client;
    set_energy(c, 20.0).await;
    let hb = begin(c).await;
    commit(c, &hb, json!({"actions": [act("reflect", json!({}))]})).await;
    let first = c.query_one("SELECT id, lease_token FROM dionysus.claim_work('old-driver')", &[]).await.unwrap();
    let (id, old_lease): (Uuid, Uuid) = (first.get(0), first.get(1));
    // The old driver stalls past its lease; the item goes back and a new driver claims it.
    c.execute("UPDATE dionysus.work_queue SET lease_until = now() - interval '1 second' WHERE id = $1", &[&id]).await.unwrap();
    let new_lease: Uuid = c.query_one("SELECT lease_token FROM dionysus.claim_work('new-driver')", &[]).await.unwrap().get(0);
    assert_ne!(old_lease, new_lease);
    for sql in [
        format!("SELECT dionysus.complete_work('{id}', '{{\"memories\": [{{\"content\": \"stale insight\"}}]}}', '{old_lease}')"),
        format!("SELECT dionysus.fail_work('{id}', 'late failure', false, '{old_lease}')"),
        format!("SELECT dionysus.release_work('{id}', 'late release', 0, '{old_lease}')"),
    ] {
        let (state, msg) = expect_error(c, &sql).await;
        assert_eq!(state, "55000", "{sql}: {msg}");
        assert!(msg.contains("new-driver"), "{msg}");
    }
    c.execute("SELECT dionysus.complete_work($1, '{\"memories\": [{\"content\": \"fresh insight\"}]}', $2)", &[&id, &new_lease]).await.unwrap();
    let rows: i64 = c.query_one("SELECT count(*) FROM dionysus.memories WHERE content IN ('stale insight', 'fresh insight')", &[]).await.unwrap().get(0);
    assert_eq!(rows, 1);
    finish(c, &hb, "Reflected.", 0.0).await;
    // A holder whose lease lapsed while nobody else took the item still completes it.
    let hb = begin(c).await;
    commit(c, &hb, json!({"actions": [act("reflect", json!({"focus": "again"}))]})).await;
    let item = c.query_one("SELECT id, lease_token FROM dionysus.claim_work('slow-driver')", &[]).await.unwrap();
    let (id, lease): (Uuid, Uuid) = (item.get(0), item.get(1));
    c.execute("UPDATE dionysus.work_queue SET lease_until = now() - interval '1 second' WHERE id = $1", &[&id]).await.unwrap();
    c.batch_execute("SELECT dionysus_internal.expire_work_leases()").await.unwrap();
    c.execute("SELECT dionysus.complete_work($1, '{}', $2)", &[&id, &lease]).await.expect("the lapsed but unclaimed holder completes");
}

/// The global lock order: a person's turns, deliveries confirmed in the same channel,
/// heartbeats and goal changes, all at once, never deadlock (no 40P01).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn turns_deliveries_heartbeats_and_goals_at_once_never_deadlock() {
    let db = TestDb::new("hb_locks").await;
    let goal: Uuid = db.client.query_one("SELECT dionysus.create_goal('Keep the garden alive', source => 'user_request')", &[]).await.unwrap().get(0);
    let mut tasks = Vec::new();
    for t in 0..4 {
        let c = db.connect().await;
        tasks.push(tokio::spawn(async move {
            let mut deadlocks = 0;
            for i in 0..12 {
                let r = match t {
                    // The person writing in the channel (channel lock, then the state row).
                    0 => c.batch_execute(&format!("SELECT dionysus.log_message('test', 'p{i}', 'dm:ada', 'ada', 'message {i}')")).await,
                    // A reply queued, sent and confirmed in the same channel.
                    1 => async {
                        let m: Uuid = c
                            .query_one(&format!("SELECT (dionysus.log_message('test', 'q{i}', 'dm:ada', 'ada', 'question {i}') ->> 'message_id')::uuid"), &[])
                            .await?
                            .get(0);
                        let o: Uuid = c.query_one("SELECT id FROM dionysus.queue_reply($1, 'w', 'an answer')", &[&m]).await?.get(0);
                        c.execute("SELECT dionysus.outbox_part_sent($1, 'w', 0, $2)", &[&o, &format!("r{i}")]).await?;
                        c.execute("SELECT dionysus.confirm_outbox($1, 'w', 'dm:ada', 'bot')", &[&o]).await.map(|_| ())
                    }
                    .await,
                    // Heartbeats that touch goals.
                    2 => async {
                        let hb: Value = c.query_one("SELECT dionysus.heartbeat_begin()", &[]).await?.get(0);
                        let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
                        let d = json!({"actions": [act("remember", json!({"content": format!("note {i}")}))],
                                       "goal_changes": [{"goal_id": goal, "change": "progress", "note": format!("step {i}")}]});
                        c.query("SELECT dionysus.heartbeat_commit($1, $2)", &[&id, &d]).await?;
                        c.query("SELECT dionysus.heartbeat_finish($1, 'done')", &[&id]).await.map(|_| ())
                    }
                    .await,
                    // Goals created and moved.
                    _ => async {
                        let g: Uuid = c.query_one(&format!("SELECT dionysus.create_goal('goal {i}', priority => 'queued')"), &[]).await?.get(0);
                        c.query("SELECT dionysus.change_goal_priority($1, 'active')", &[&g]).await?;
                        c.query("SELECT dionysus.change_goal_priority($1, 'queued')", &[&goal]).await?;
                        c.query("SELECT dionysus.change_goal_priority($1, 'active')", &[&goal]).await.map(|_| ())
                    }
                    .await,
                };
                match r.as_ref().map_err(sqlstate).err().as_deref() {
                    None => {}
                    Some("40P01") => deadlocks += 1,
                    // A goal move the concurrent demotions made invalid: a clean refusal, not a fault.
                    Some("22023") if t == 3 => {}
                    Some(_) => panic!("task {t} step {i}: {:?}", r.err()),
                }
            }
            deadlocks
        }));
    }
    let mut deadlocks = 0;
    for t in tasks {
        deadlocks += t.await.unwrap();
    }
    assert_eq!(deadlocks, 0, "deadlocks between the organs");
    let sent: i64 = db.client.query_one("SELECT count(*) FROM dionysus.outbox WHERE status = 'sent'", &[]).await.unwrap().get(0);
    assert_eq!(sent, 12);
}

/// One stalled heartbeat that cannot be closed normally is closed by force with its reason;
/// the others are recovered and the tick (NOTIFY, sessions, language work) goes on.
#[tokio::test]
async fn one_broken_recovery_neither_blocks_the_others_nor_the_tick() {
    let db = TestDb::new("hb_recover").await;
    db.hold_worker_off().await;
    let c = &db.client;
    // Two stalled heartbeats left by dead drivers (only one is ever in flight; the other is
    // an older one that was never closed). The older one's record is corrupt.
    c.batch_execute(
        "INSERT INTO dionysus.heartbeat_log (heartbeat_number, status, energy_start, started_at, last_alive_at, goals_modified) \
         VALUES (1, 'committed', 10, now() - interval '2 hours', now() - interval '2 hours', \
                 '[{\"goal_id\": \"00000000-0000-0000-0000-000000000001\", \"applied\": \"maybe\"}]'); \
         UPDATE dionysus.heartbeat_state SET heartbeat_count = 1",
    )
    .await
    .unwrap();
    let hb = begin(c).await;
    let id: Uuid = hb["heartbeat_id"].as_str().unwrap().parse().unwrap();
    c.execute("UPDATE dionysus.heartbeat_log SET last_alive_at = now() - interval '1 hour' WHERE id = $1", &[&id]).await.unwrap();
    let tick: Value = c.query_one("SELECT dionysus.scheduler_tick()", &[]).await.expect("the tick itself does not fail").get(0);
    assert_eq!(tick["recovered"], json!(2), "{tick}");
    let rows = c.query("SELECT heartbeat_number, status::text, recovery_error, memory_id IS NOT NULL FROM dionysus.heartbeat_log ORDER BY 1", &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, String>(1), "recovered");
    assert!(rows[0].get::<_, Option<String>>(2).is_some_and(|e| e.contains("boolean")), "the forced close has no reason");
    assert_eq!((rows[1].get::<_, String>(1).as_str(), rows[1].get::<_, Option<String>>(2), rows[1].get::<_, bool>(3)), ("recovered", None, true));
    let in_flight: Option<Uuid> = c.query_one("SELECT in_flight FROM dionysus.heartbeat_state", &[]).await.unwrap().get(0);
    assert_eq!(in_flight, None);
}

/// The walk stops at the first action that does not fit (no skipping ahead to a
/// cheaper one); one explicit remember per heartbeat.
#[tokio::test]
async fn the_budget_walk_stops_at_the_first_action_that_does_not_fit() {
    let db = TestDb::new("hb_break").await;
    let c = &db.client;
    set_energy(c, 0.0).await;
    let hb = begin(c).await; // 10 energy
    let r = commit(c, &hb, json!({"actions": [
        act("inquire_deep", json!({"question": "q"})), act("reach_out_user", json!({"intent": "hello"})), act("recall", json!({"query": "x"})),
        act("remember", json!({"content": "one"}))]})).await;
    let taken: Vec<&str> = r["actions_taken"].as_array().unwrap().iter().map(|a| a["action"].as_str().unwrap()).collect();
    assert_eq!(taken, vec!["inquire_deep"], "recall (1) and remember (0) fit the 4 left, but the walk stops: {r}");
    let reasons: Vec<&str> = r["actions_rejected"].as_array().unwrap().iter().map(|a| a["reason"].as_str().unwrap()).collect();
    assert!(reasons.len() == 3 && reasons[0].contains("over budget") && reasons[1..].iter().all(|x| x.contains("not reached")), "{r}");
    assert_eq!(energy(c).await, 4.0);
    finish(c, &hb, "Reflected.", 0.0).await;
    let hb = begin(c).await;
    let r = commit(c, &hb, json!({"actions": [act("remember", json!({"content": "one"})), act("remember", json!({"content": "two"}))]})).await;
    assert_eq!(r["actions_taken"].as_array().unwrap().len(), 1, "{r}");
    assert!(r["actions_rejected"][0]["reason"].as_str().unwrap().contains("one remember"), "{r}");
}

/// Hoarding (average unused energy over 5) is judged over 24 heartbeats, not 3.
#[tokio::test]
async fn hoarding_needs_twenty_four_heartbeats() {
    let db = TestDb::new("hb_hoard").await;
    let c = &db.client;
    async fn hoarding(c: &Client) -> bool {
        let w: Value = c.query_one("SELECT dionysus.heartbeat_warnings()", &[]).await.unwrap().get(0);
        w.as_array().unwrap().iter().any(|x| x["kind"] == "hoarding")
    }
    for n in 1..=24 {
        let hb = begin(c).await;
        commit(c, &hb, json!({"actions": [act("rest", json!({}))]})).await;
        finish(c, &hb, &format!("Rested, heartbeat {n}, keeping everything."), 0.0).await;
        if n == 3 || n == 23 {
            assert!(!hoarding(c).await, "hoarding warned after only {n} heartbeats");
        }
    }
    assert!(hoarding(c).await, "24 heartbeats of unused energy and no warning");
}

/// Retention: the maintenance pass prunes the record of the past after retention_days,
/// never the message log, never memories, never what is recent.
#[tokio::test]
async fn history_is_pruned_after_its_retention_and_the_message_log_never() {
    let db = TestDb::new("hb_retention").await;
    // The maintenance pass prunes too: it must not take the aged rows before the call below.
    db.hold_worker_off().await;
    let c = &db.client;
    let hb = begin(c).await;
    commit(c, &hb, json!({"actions": [act("rest", json!({}))]})).await;
    finish(c, &hb, "An old heartbeat.", 0.0).await;
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'old', 'dm:ada', 'ada', 'a message from long ago'); \
         INSERT INTO dionysus.work_queue (idempotency_key, action, status, completed_at, created_at) \
             VALUES ('old-work', 'reflect', 'done', now() - interval '100 days', now() - interval '100 days'); \
         INSERT INTO dionysus.outbox (audience, content, status, sent_at, created_at) \
             VALUES ('user', 'an old reach-out', 'sent', now() - interval '100 days', now() - interval '100 days'); \
         UPDATE dionysus.heartbeat_log SET started_at = now() - interval '100 days', ended_at = now() - interval '100 days'; \
         UPDATE dionysus.energy_ledger SET at = now() - interval '100 days'; \
         UPDATE dionysus.embedding_cache SET created_at = now() - interval '100 days'; \
         SELECT dionysus.check_model_text('fact', '<a fact>'), dionysus.check_model_text('fact', '...'); \
         UPDATE dionysus.model_text_refusals SET refused_at = now() - interval '100 days' WHERE value = '<a fact>'; \
         SET session_replication_role = replica; \
         UPDATE dionysus.messages SET created_at = now() - interval '100 days'; \
         SET session_replication_role = DEFAULT",
    )
    .await
    .unwrap();
    c.batch_execute("SELECT dionysus.log_message('test', 'new', 'dm:ada', 'ada', 'a message from today')").await.unwrap();
    let pruned: Value = c.query_one("SELECT dionysus.prune_history()", &[]).await.unwrap().get(0);
    for table in ["energy_ledger", "work_queue", "outbox", "heartbeat_log", "embedding_cache", "model_text_refusals"] {
        assert!(pruned[table].as_i64().unwrap() >= 1, "{table} not pruned: {pruned}");
    }
    let refusals: Vec<String> =
        c.query("SELECT value FROM dionysus.model_text_refusals", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(refusals, ["..."], "the grounding check's recent refusal stays, the old one goes");
    let left = c
        .query_one(
            "SELECT (SELECT count(*) FROM dionysus.messages), (SELECT count(*) FROM dionysus.heartbeat_log), \
                    (SELECT count(*) FROM dionysus.memories WHERE content LIKE 'a message from%'), \
                    (SELECT count(*) FROM dionysus.work_queue WHERE idempotency_key = 'old-work')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!((left.get::<_, i64>(0), left.get::<_, i64>(1), left.get::<_, i64>(2), left.get::<_, i64>(3)), (2, 0, 2, 0));
    // The health views show what the tables weigh.
    let sizes: Value = c.query_one("SELECT table_bytes FROM dionysus.heartbeat_health", &[]).await.unwrap().get(0);
    assert!(sizes["messages"].as_i64().unwrap() > 0, "{sizes}");
    let sizes: Value = c.query_one("SELECT table_bytes FROM dionysus.memory_health", &[]).await.unwrap().get(0);
    assert!(sizes["memories"].as_i64().unwrap() > 0, "{sizes}");
}

/// A heartbeat that saw a person's private words (here her north star, in its context) writes
/// nothing shared: the memory its `remember` action stores is as private as what it saw, like
/// its narrative and the results of its queued work, so it is never recalled for someone else.
#[tokio::test]
async fn what_a_tainted_heartbeat_remembers_stays_private() {
    let db = TestDb::new("hb_taint_remember").await;
    let c = &db.client;
    c.batch_execute(
        "SELECT dionysus.log_message('test', 'a1', 'dm-ada', 'ada', 'North star: finish my thesis by June'); \
         SELECT dionysus.set_north_star('test:ada', 'North star: finish my thesis by June');",
    )
    .await
    .unwrap();
    let hb = begin(c).await;
    let taint: Value = c.query_one("SELECT to_jsonb(private_to) FROM dionysus.heartbeat_log ORDER BY heartbeat_number DESC LIMIT 1", &[]).await.unwrap().get(0);
    assert_eq!(taint, json!(["test:ada"]), "the heartbeat saw Ada's north star: {hb}");
    let r = commit(c, &hb, json!({"actions": [act("remember", json!({"content": "Ada's thesis is due in June; she worries about it"}))]})).await;
    let id: Uuid = r["actions_taken"][0]["result"]["memory_id"].as_str().unwrap_or_else(|| panic!("{r}")).parse().unwrap();
    let private: Option<Value> = c.query_one("SELECT to_jsonb(private_to) FROM dionysus.memories WHERE id = $1", &[&id]).await.unwrap().get(0);
    assert_eq!(private, Some(json!(["test:ada"])), "a tainted heartbeat remembered something for everyone");
    let for_bob: i64 = c
        .query_one("SELECT count(*) FROM dionysus.recall('When is the thesis due?', 10, person => 'test:bob') r WHERE r.memory_id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(for_bob, 0, "Bob recalled what the heartbeat took from Ada");
    finish(c, &hb, "Thought about Ada's thesis.", 0.0).await;
}
