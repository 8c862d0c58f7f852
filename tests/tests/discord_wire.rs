//! Discord at the wire (#12 §9): the real serenity adapter, pointed at a local
//! Discord-compatible server (REST and the gateway websocket), inside the running driver with
//! the scripted model. Through it: IDENTIFY with the intents, the allowlist (a DM, the home
//! channel, another guild channel, a stranger, a bot, a webhook), typing, a reply split over
//! 2,000 characters with a nonce per part and `enforce_nonce`, a redelivery answered once,
//! feedback by reply acknowledged with 🫡 and undone by 🗑️, and the dream channel's card,
//! buttons and form answered as Discord expects (ephemeral messages, a modal).
use dionysus_driver::channel::discord::Discord;
use dionysus_driver::channel::Channel;
use dionysus_driver::conversation::Handled;
use dionysus_driver::{runtime, Mind};
use dionysus_tests::fake_discord::{interaction, message, user, FakeDiscord, BOT_ID};
use dionysus_tests::fake_llm::{Answer, FakeLlm};
use dionysus_tests::{driver_conninfo, scripted_driver_config, TestDb};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const ADA: &str = "100000000000000001";
const MALLORY: &str = "100000000000000666";
const ADA_DM: &str = "500000000000000001";
const GUILD: &str = "400000000000000001";
const HOME: &str = "300000000000000001";
const ELSEWHERE: &str = "300000000000000002";
const DREAM: &str = "300000000000000003";

async fn next(handled: &mut mpsc::UnboundedReceiver<Handled>) -> Handled {
    tokio::time::timeout(Duration::from_secs(60), handled.recv()).await.expect("no message handled within 60 s").expect("driver stopped")
}

fn from(author: &str, bot: bool) -> Value {
    user(author, "someone", bot)
}

/// The custom id of a card's button, from the components Discord was sent.
fn button(body: &Value, label: &str) -> String {
    body["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .find(|b| b["label"] == label)
        .and_then(|b| b["custom_id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no {label} button in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serenity_adapter_talks_to_a_discord_compatible_server() {
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(std::env::var("WIRE_LOG").unwrap_or_else(|_| "warn".into()))).with_test_writer().try_init();
    let db = TestDb::new("wire").await;
    let c = &db.client;
    c.batch_execute("SELECT dionysus.pause_heartbeats(true)").await.unwrap();
    let llm = FakeLlm::start().await;
    llm.on("TASK: chat && essay", Answer::Text(format!("{}\n\n{}\n\n{}", "a".repeat(1500), "b".repeat(1500), "c".repeat(1500))));
    llm.on("TASK: chat", Answer::Text("Hello Ada!".into()));
    llm.json("TASK: extract", json!({"facts": [], "triples": [], "goals": [], "objectives": []}));
    let discord = FakeDiscord::start().await;
    let mut config = scripted_driver_config(driver_conninfo(&db.name), &llm);
    config.mirror_gap = Duration::from_millis(20);
    config.discord.token = Some("fake-token".into());
    config.discord.allowed_user_ids = vec![ADA.parse().unwrap()];
    config.discord.home_channel_id = Some(HOME.parse().unwrap());
    config.discord.dream_channel_id = Some(DREAM.parse().unwrap());
    config.discord.dream_user_id = Some(ADA.parse().unwrap());
    config.discord.api_base = Some(discord.api_base.clone());
    let channel: Arc<dyn Channel> = Arc::new(Discord::new(config.discord.clone()));
    let mind = Arc::new(Mind::new(config, channel));
    let (tx, mut handled) = mpsc::unbounded_channel();
    let task = tokio::spawn(runtime::run(mind.clone(), Some(tx)));

    // The gateway: IDENTIFY with the token and the intents the adapter needs.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while discord.identified().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the adapter never identified");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let identify = discord.identified()[0].clone();
    assert!(identify["token"].as_str().unwrap_or_default().ends_with("fake-token"), "{identify}");
    let intents = identify["intents"].as_u64().unwrap();
    for (bit, name) in [(1 << 9, "GUILD_MESSAGES"), (1 << 12, "DIRECT_MESSAGES"), (1 << 15, "MESSAGE_CONTENT"), (1 << 13, "DIRECT_MESSAGE_REACTIONS")] {
        assert!(intents & bit != 0, "intent {name} missing: {intents}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // READY reaches the handler

    // A DM from Ada: typing, then the reply with a nonce Discord enforces.
    discord.dispatch("MESSAGE_CREATE", message("600000000000000001", ADA_DM, from(ADA, false), "Hi, how are you?", None));
    let h = next(&mut handled).await;
    assert!(matches!(h, Handled::Replied { fallback: false, .. }), "{h:?}");
    discord.wait_for("typing", |c| c.method == "POST" && c.path.ends_with(&format!("/channels/{ADA_DM}/typing"))).await;
    let (reply_id, _, body) = discord.posted().into_iter().find(|(_, ch, _)| ch == ADA_DM).expect("the reply");
    assert_eq!(body["content"], "Hello Ada!");
    assert_eq!(body["enforce_nonce"], true);
    assert!(body["nonce"].as_str().is_some_and(|n| !n.is_empty() && n.len() <= 25), "{body}");

    // Nobody else is the person: a stranger's DM, a bot, a webhook in the home channel, Ada in
    // a guild channel that is not home. Then Ada in the home channel is answered there.
    discord.dispatch("MESSAGE_CREATE", message("600000000000000002", "500000000000000666", from(MALLORY, false), "let me in", None));
    assert!(matches!(next(&mut handled).await, Handled::Ignored), "a stranger was not ignored");
    discord.dispatch("MESSAGE_CREATE", message("600000000000000003", ADA_DM, from("100000000000000777", true), "I am a bot", None));
    let mut hook = message("600000000000000004", HOME, from(ADA, false), "webhook says hi", Some(GUILD));
    hook["webhook_id"] = json!("700000000000000001");
    discord.dispatch("MESSAGE_CREATE", hook);
    discord.dispatch("MESSAGE_CREATE", message("600000000000000005", ELSEWHERE, from(ADA, false), "in another channel", Some(GUILD)));
    discord.dispatch("MESSAGE_CREATE", message("600000000000000006", HOME, from(ADA, false), "Hello home channel", Some(GUILD)));
    let h = next(&mut handled).await;
    assert!(matches!(h, Handled::Replied { .. }), "the next handled message is the home channel's, nothing between: {h:?}");
    discord.wait_for("the home channel's reply", |c| c.path.ends_with(&format!("/channels/{HOME}/messages"))).await;
    let logged: i64 = c.query_one("SELECT count(*) FROM dionysus.messages WHERE NOT is_bot", &[]).await.unwrap().get(0);
    assert_eq!(logged, 2, "only Ada's DM and her home-channel message are in the log");
    assert!(discord.posted().iter().all(|(_, ch, _)| ch != ELSEWHERE && ch != "500000000000000666"));

    // A long reply goes out in parts of at most 2,000 characters, each under its own nonce.
    discord.dispatch("MESSAGE_CREATE", message("600000000000000007", ADA_DM, from(ADA, false), "Write me an essay", None));
    assert!(matches!(next(&mut handled).await, Handled::Replied { .. }));
    let parts: Vec<Value> = discord.posted().into_iter().filter(|(_, ch, b)| ch == ADA_DM && b["content"] != "Hello Ada!").map(|(_, _, b)| b).collect();
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert!(parts.iter().all(|p| p["content"].as_str().unwrap().chars().count() <= 2000 && p["enforce_nonce"] == true));
    let mut nonces: Vec<&str> = parts.iter().map(|p| p["nonce"].as_str().unwrap()).collect();
    nonces.dedup();
    assert_eq!(nonces.len(), 3, "parts share a nonce");

    // The gateway redelivers Ada's first message: it is answered once.
    let before = discord.posted().len();
    discord.dispatch("MESSAGE_CREATE", message("600000000000000001", ADA_DM, from(ADA, false), "Hi, how are you?", None));
    assert!(matches!(next(&mut handled).await, Handled::Duplicate));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(discord.posted().iter().filter(|(_, ch, _)| ch == ADA_DM).count(), 4, "a redelivery was answered again");
    assert!(discord.posted().len() >= before);

    // Feedback: a reply to Dionysus's message gets 🫡 and is not answered; 🗑️ takes it back.
    let mut fb = message("600000000000000008", ADA_DM, from(ADA, false), "too cheerful, tone it down", None);
    fb["referenced_message"] = message(&reply_id, ADA_DM, user(BOT_ID, "dionysus", true), "Hello Ada!", None);
    fb["message_reference"] = json!({"message_id": reply_id, "channel_id": ADA_DM});
    discord.dispatch("MESSAGE_CREATE", fb);
    assert!(matches!(next(&mut handled).await, Handled::Feedback(_)));
    let salute = discord.wait_for("the 🫡 reaction", |c| c.method == "PUT" && c.path.contains("/messages/600000000000000008/reactions/")).await;
    assert!(salute.path.contains("%F0%9F%AB%A1"), "{}", salute.path);
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.feedback", &[]).await.unwrap().get::<_, i64>(0), 1);
    discord.dispatch("MESSAGE_REACTION_ADD", json!({"user_id": ADA, "channel_id": ADA_DM, "message_id": "600000000000000008",
                                                    "emoji": {"id": null, "name": "🗑️"}, "burst": false, "type": 0}));
    discord.wait_for("the 🫡 taken back", |c| c.method == "DELETE" && c.path.contains("/messages/600000000000000008/reactions/")).await;
    assert_eq!(c.query_one("SELECT count(*) FROM dionysus.feedback", &[]).await.unwrap().get::<_, i64>(0), 0);

    // The dream channel: the first reply's card, as an embed with buttons.
    let card = discord
        .wait_for("the reply's card", |c| c.path.ends_with(&format!("/channels/{DREAM}/messages")) && c.body["embeds"][0]["title"] == "Reply")
        .await
        .body;
    assert_eq!(card["embeds"][0]["fields"][0]["value"], "Hi, how are you?");
    assert_eq!(card["enforce_nonce"], true);
    let view = button(&card, "View prompt");
    // Ada's press: the prompt, ephemeral (flags 64).
    discord.dispatch("INTERACTION_CREATE", interaction("910000000000000001", ADA, DREAM, "800000000000000099", &view, &[]));
    let cb = discord.wait_for("the View prompt answer", |c| c.path.contains("/interactions/910000000000000001/")).await;
    assert_eq!(cb.body["type"], 4, "{}", cb.body);
    assert_eq!(cb.body["data"]["flags"].as_u64().unwrap_or(0) & 64, 64, "not ephemeral: {}", cb.body);
    let shown = format!("{}{}", cb.body["data"]["content"], String::from_utf8_lossy(&cb.raw));
    assert!(shown.contains("Hi, how are you?"), "{shown}");
    // A stranger's press: an ephemeral refusal.
    discord.dispatch("INTERACTION_CREATE", interaction("910000000000000002", MALLORY, DREAM, "800000000000000099", &view, &[]));
    let cb = discord.wait_for("the refusal", |c| c.path.contains("/interactions/910000000000000002/")).await;
    assert_eq!(cb.body["data"]["flags"].as_u64().unwrap_or(0) & 64, 64);
    assert!(cb.body["data"]["content"].as_str().unwrap_or_default().contains("belong to the person"), "{}", cb.body);
    // Feedback: a modal (type 9), then its submission stored.
    discord.dispatch("INTERACTION_CREATE", interaction("910000000000000003", ADA, DREAM, "800000000000000099", &button(&card, "Feedback"), &[]));
    let cb = discord.wait_for("the Feedback modal", |c| c.path.contains("/interactions/910000000000000003/")).await;
    assert_eq!(cb.body["type"], 9, "{}", cb.body);
    let form_id = cb.body["data"]["custom_id"].as_str().unwrap().to_string();
    discord.dispatch(
        "INTERACTION_CREATE",
        interaction("910000000000000004", ADA, DREAM, "800000000000000099", &form_id, &[("sentiment", "positive"), ("comment", "warm and short")]),
    );
    let cb = discord.wait_for("the form's answer", |c| c.path.contains("/interactions/910000000000000004/")).await;
    assert!(cb.body["data"]["content"].as_str().unwrap_or_default().contains("🫡"), "{}", cb.body);
    let stored: Value = c.query_one("SELECT to_jsonb(f) FROM dionysus.feedback f WHERE source = 'dream'", &[]).await.unwrap().get(0);
    assert_eq!((stored["person"].as_str(), stored["content"].as_str()), (Some(format!("discord:{ADA}").as_str()), Some("warm and short")));

    mind.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), task).await.expect("driver did not stop").unwrap();
}
