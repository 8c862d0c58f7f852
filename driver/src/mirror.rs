//! The dream channel (#12 §5): every autonomous activity — reply, check-in,
//! extraction, heartbeat, dream proposal — mirrored as a card to a channel of the person's,
//! never into the conversation. The extension records the items and decides who may see and
//! decide them (sql/019_dream_channel.sql); here cards are rendered (pure functions), posted by
//! a task of their own (best effort, rate-limited: the conversation never waits on it), and
//! button presses and forms are relayed.
use crate::channel::{Answer, Button, ButtonStyle, Card, DreamChannel, Form, FormInput, Interaction, SendError};
use crate::db::DbError;
use crate::Mind;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

/// Discord's embed limits: a card fits all of them.
pub const TITLE_MAX: usize = 256;
pub const FIELD_NAME_MAX: usize = 256;
pub const FIELD_VALUE_MAX: usize = 1024;
pub const DESCRIPTION_MAX: usize = 4096;
pub const FIELDS_MAX: usize = 25;
pub const FOOTER_MAX: usize = 2048;
pub const CARD_TOTAL_MAX: usize = 6000;
/// A private answer's text limit (Discord's 2,000, with room for the code fence).
pub const PRIVATE_TEXT_MAX: usize = 1900;
/// Discord's limit for a button's or form's custom id.
const CUSTOM_ID_MAX: usize = 100;

/// What a button or form asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Prompt,
    Feedback,
    Approve,
    Reject,
    Discuss,
    /// The Feedback form, submitted.
    FeedbackForm,
    /// The Discuss form, submitted.
    DiscussForm,
}

const ACTIONS: [(Action, &str); 7] = [
    (Action::Prompt, "prompt"),
    (Action::Feedback, "feedback"),
    (Action::Approve, "approve"),
    (Action::Reject, "reject"),
    (Action::Discuss, "discuss"),
    (Action::FeedbackForm, "feedback-form"),
    (Action::DiscussForm, "discuss-form"),
];

/// A press on one of the mirror's buttons or forms: `dionysus:<action>:<item id>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Press {
    pub action: Action,
    pub item: Uuid,
}

impl Press {
    pub fn custom_id(action: Action, item: Uuid) -> String {
        let word = ACTIONS.iter().find(|(a, _)| *a == action).map(|(_, w)| *w).unwrap_or("prompt");
        format!("dionysus:{word}:{}", item.simple())
    }

    /// None for anything that is not exactly one of ours.
    pub fn parse(custom_id: &str) -> Option<Press> {
        if custom_id.len() > CUSTOM_ID_MAX {
            return None;
        }
        let rest = custom_id.strip_prefix("dionysus:")?;
        let (word, id) = rest.split_once(':')?;
        let action = ACTIONS.iter().find(|(_, w)| *w == word)?.0;
        let item = Uuid::try_parse(id).ok().filter(|_| id.len() == 32)?;
        Some(Press { action, item })
    }
}

/// Cuts text to `max` characters, marking the cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn kind_color(kind: &str) -> u32 {
    match kind {
        "reply" => 0x5865F2,
        "check_in" => 0x57F287,
        "extraction" => 0xFEE75C,
        "heartbeat" => 0xEB459E,
        "proposal" => 0xED4245,
        _ => 0x99AAB5,
    }
}

/// "key: value" lines of a JSON object, in its order, scalars as themselves.
fn lines_of(v: &Value) -> String {
    let Some(o) = v.as_object() else {
        return String::new();
    };
    o.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| format!("{}: {}", k.replace('_', " "), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An item's card as `mirror_record` writes it (see 019_dream_channel.sql): title, time,
/// sections, and the free-form metrics and context shown as "key: value" lines.
#[derive(Debug, Default, Deserialize)]
pub struct CardBody {
    pub title: Option<String>,
    pub at: Option<String>,
    #[serde(default)]
    pub sections: Vec<Section>,
    #[serde(default)]
    pub metrics: Value,
    #[serde(default)]
    pub context: Value,
    /// A proposal's status when the card was claimed.
    pub status: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Section {
    pub name: Option<String>,
    pub value: Option<String>,
}

/// A row of `claim_mirror_items(viewer, worker, max)`: an item to post.
#[derive(Debug, Deserialize)]
struct Claimed {
    item_id: Uuid,
    kind: String,
    card: CardBody,
    has_prompt: bool,
}

/// `mirror_view(item_id, platform, author_id)`: one item as its viewer may see it now.
#[derive(Debug, Deserialize)]
struct View {
    kind: String,
    card: CardBody,
    prompt: Option<String>,
    proposal_status: Option<String>,
}

/// A card from an item as the extension gives it (`claim_mirror_items` or `mirror_view`):
/// its sections, metrics and context, within every embed limit, and its buttons — View prompt
/// when it has one, Feedback always, and Approve / Reject / Discuss on an open proposal.
pub fn card(item_id: Uuid, kind: &str, body: &CardBody, has_prompt: bool, proposal_status: Option<&str>) -> Card {
    let mut fields: Vec<(String, String)> = body
        .sections
        .iter()
        .map(|s| (clip(s.name.as_deref().unwrap_or("·"), FIELD_NAME_MAX), clip(s.value.as_deref().unwrap_or(""), FIELD_VALUE_MAX)))
        .map(|(n, v)| (if n.trim().is_empty() { "·".into() } else { n }, if v.trim().is_empty() { "(empty)".into() } else { v }))
        .collect();
    for (name, lines) in [("Metrics", &body.metrics), ("Context used", &body.context)] {
        let text = lines_of(lines);
        if !text.is_empty() {
            fields.push((name.into(), clip(&text, FIELD_VALUE_MAX)));
        }
    }
    if let Some(status) = proposal_status {
        fields.push(("Status".into(), status.to_string()));
    }
    fields.truncate(FIELDS_MAX);
    let title = clip(body.title.as_deref().unwrap_or(kind), TITLE_MAX);
    let description =
        clip(&format!("{} · {}", kind.replace('_', "-"), body.at.as_deref().map(|t| t.get(..16).unwrap_or(t)).unwrap_or("")), DESCRIPTION_MAX);
    let footer = clip(&format!("item {item_id}"), FOOTER_MAX);
    // The whole card within Discord's total: the longest section gives way first.
    let total = |f: &[(String, String)]| {
        title.chars().count()
            + description.chars().count()
            + footer.chars().count()
            + f.iter().map(|(n, v)| n.chars().count() + v.chars().count()).sum::<usize>()
    };
    while total(&fields) > CARD_TOTAL_MAX {
        let Some(longest) = fields.iter_mut().flat_map(|(n, v)| [n, v]).max_by_key(|t| t.chars().count()) else {
            break;
        };
        let n = longest.chars().count();
        if n <= 8 {
            break; // nothing left worth cutting (25 fields of 8 characters are far below the total)
        }
        *longest = clip(longest, n / 2);
    }
    let button =
        |label: &str, action: Action, style: ButtonStyle| Button { label: label.into(), custom_id: Press::custom_id(action, item_id), style };
    let mut buttons = Vec::new();
    if has_prompt {
        buttons.push(button("View prompt", Action::Prompt, ButtonStyle::Secondary));
    }
    buttons.push(button("Feedback", Action::Feedback, ButtonStyle::Primary));
    if kind == "proposal" && matches!(proposal_status, Some("pending") | Some("discussing") | None) {
        buttons.push(button("Approve", Action::Approve, ButtonStyle::Success));
        buttons.push(button("Reject", Action::Reject, ButtonStyle::Danger));
        buttons.push(button("Discuss", Action::Discuss, ButtonStyle::Secondary));
    }
    Card { title, description, fields, footer, color: kind_color(kind), buttons }
}

/// The full prompt, privately: in the answer when it fits, else attached as a file.
pub fn prompt_answer(prompt: &str) -> Answer {
    // A fence inside would end the code block early.
    let fenced = format!("```\n{}\n```", prompt.replace('`', "`\u{200b}"));
    if fenced.chars().count() <= PRIVATE_TEXT_MAX {
        Answer::Private { text: fenced, file: None }
    } else {
        Answer::Private {
            text: format!("The full prompt ({} characters) is attached.", prompt.chars().count()),
            file: Some(("prompt.txt".into(), prompt.as_bytes().to_vec())),
        }
    }
}

/// A sentiment as typed in the form: positive, negative or neutral (and their short forms);
/// empty is neutral; anything else is None.
pub fn parse_sentiment(words: &str) -> Option<&'static str> {
    match words.trim().to_lowercase().as_str() {
        "" | "neutral" | "0" | "=" | "meh" | "ok" | "okay" => Some("neutral"),
        "positive" | "pos" | "+" | "good" | "yes" | "👍" | "like" => Some("positive"),
        "negative" | "neg" | "-" | "bad" | "no" | "👎" | "dislike" => Some("negative"),
        _ => None,
    }
}

pub fn feedback_form(item: Uuid) -> Form {
    Form {
        custom_id: Press::custom_id(Action::FeedbackForm, item),
        title: "Feedback".into(),
        inputs: vec![
            FormInput {
                custom_id: "sentiment".into(),
                label: "Positive, negative or neutral?".into(),
                placeholder: "positive / negative / neutral".into(),
                long: false,
                required: false,
                max_len: 20,
            },
            FormInput {
                custom_id: "comment".into(),
                label: "What should change (or stay)?".into(),
                placeholder: "Your words go to the next dream.".into(),
                long: true,
                required: false,
                max_len: 4000,
            },
        ],
    }
}

pub fn discuss_form(item: Uuid) -> Form {
    Form {
        custom_id: Press::custom_id(Action::DiscussForm, item),
        title: "Discuss this proposal".into(),
        inputs: vec![FormInput {
            custom_id: "note".into(),
            label: "What would you change about it?".into(),
            placeholder: "It stays pending; the next dream reads this.".into(),
            long: true,
            required: true,
            max_len: 4000,
        }],
    }
}

fn private(text: impl Into<String>) -> Answer {
    Answer::Private { text: text.into(), file: None }
}

const REFUSAL: &str = "These buttons belong to the person this dream channel is for; yours are not counted.";

// ---------------------------------------------------------------------------------------
// Recording (after the fact, never on the conversation's path) and posting
// ---------------------------------------------------------------------------------------

/// The longest prompt an item keeps (the extension's limit).
const PROMPT_MAX: usize = 200_000;

/// Whether anything is mirrored at all: a dream channel is configured.
pub fn enabled(mind: &Mind) -> bool {
    mind.channel.dream_channel().is_some()
}

/// Records one activity for the dream channel; best effort (a failure is only logged).
pub async fn record(mind: &Mind, kind: &str, subject: Uuid, prompt: Option<String>, metrics: Value, context: Value) {
    // Only what the channel's person may see is recorded at all.
    let Some(dream) = mind.channel.dream_channel() else { return };
    let prompt = prompt.map(|p| clip(&p, PROMPT_MAX));
    let platform = mind.channel.platform();
    let sql = "SELECT to_jsonb(dionysus.mirror_record($1, $2, $3, $4, $5, dionysus.person_key($6, $7)))";
    if let Err(e) = mind.mirror_db.json(sql, &[&kind, &subject, &prompt, &metrics, &context, &platform, &dream.owner]).await {
        tracing::warn!(kind, %subject, error = %e, "not mirrored to the dream channel");
    }
}

/// The same, on a task of its own: the caller does not wait.
pub fn record_later(mind: &Arc<Mind>, kind: &'static str, subject: Uuid, prompt: Option<String>, metrics: Value, context: Value) {
    if !enabled(mind) {
        return;
    }
    let mind = mind.clone();
    tokio::spawn(async move { record(&mind, kind, subject, prompt, metrics, context).await });
}

/// Rendered messages as one text, for View prompt.
pub fn prompt_text(msgs: &[crate::llm::Msg]) -> String {
    msgs.iter().map(|m| format!("[{}]\n{}", m.role, m.content)).collect::<Vec<_>>().join("\n\n")
}

/// A stable nonce per item (Discord: at most 25 characters): a retry never posts twice.
fn nonce(item: Uuid) -> String {
    format!("m{}", &item.simple().to_string()[..24])
}

/// Posts the waiting items, oldest first, one every `mirror_gap`; a channel that is down stops
/// the pass (its items are tried again later), a refused card is dropped.
pub async fn deliver(mind: &Mind, dream: &DreamChannel) -> usize {
    let platform = mind.channel.platform();
    let worker = &mind.config.worker_name;
    let mut posted = 0;
    loop {
        // One at a time, oldest first: a channel that goes down costs only that item an attempt.
        let sql = "SELECT to_jsonb(c) FROM dionysus.claim_mirror_items(dionysus.person_key($1, $2), $3, 1) c";
        let items = match mind.mirror_db.all::<Claimed>(sql, &[&platform, &dream.owner, worker]).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim dream-channel items");
                return posted;
            }
        };
        if items.is_empty() {
            return posted;
        }
        for item in items {
            let id = item.item_id;
            let c = card(id, &item.kind, &item.card, item.has_prompt, item.card.status.as_deref());
            let settle = "SELECT to_jsonb(dionysus.mirror_settle($1, $2, $3, $4, $5, $6))";
            let none: Option<String> = None;
            let (result, stop) = match mind.channel.post_card(&dream.channel_id, &c, &nonce(id)).await {
                Ok(pid) => {
                    posted += 1;
                    (mind.mirror_db.json(settle, &[&id, worker, &dream.channel_id, &Some(pid), &none, &true]).await, false)
                }
                Err(SendError::Unavailable(e)) => (mind.mirror_db.json(settle, &[&id, worker, &none, &none, &Some(e), &true]).await, true),
                Err(SendError::Rejected(e)) => {
                    tracing::warn!(item = %id, error = %e, "the dream channel refused a card (may the bot post there?); dropped");
                    (mind.mirror_db.json(settle, &[&id, worker, &none, &none, &Some(e), &false]).await, false)
                }
            };
            if let Err(e) = result {
                tracing::warn!(item = %id, error = %e, "cannot settle a dream-channel item (its reservation expires)");
            }
            if stop || mind.shutdown.is_cancelled() {
                return posted;
            }
            tokio::select! {
                _ = tokio::time::sleep(mind.config.mirror_gap) => {}
                _ = mind.shutdown.cancelled() => return posted,
            }
        }
    }
}

/// The mirror's own task: a pass at start, on every NOTIFY dionysus_mirror (and reconnect),
/// and every minute for what a channel that was down left waiting.
pub async fn run(mind: Arc<Mind>, mut wakes: mpsc::Receiver<()>) {
    let Some(dream) = mind.channel.dream_channel() else {
        return;
    };
    tracing::info!(channel = %dream.channel_id, owner = %dream.owner,
        "dream channel: it shows what its person said in private to whoever can read it; keep it theirs (and the bot's) alone");
    loop {
        deliver(&mind, &dream).await;
        tokio::select! {
            w = wakes.recv() => if w.is_none() { return },
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = mind.shutdown.cancelled() => return,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Button presses and forms
// ---------------------------------------------------------------------------------------

/// Answers a press on one of the mirror's cards (the channel delivers the answer).
pub async fn on_interaction(mind: &Mind, i: &Interaction) {
    let answer = respond(mind, i).await;
    if let Err(e) = mind.channel.answer(i, answer).await {
        tracing::warn!(error = %e, "the interaction could not be answered");
    }
}

fn refused_or(e: DbError, what: &str) -> Answer {
    match e {
        DbError::Sql { code, .. } if code == "42501" => private(REFUSAL),
        DbError::Sql { message, .. } => private(format!("I couldn't {what}: {message}")),
        DbError::Down(_) => private(format!("I couldn't {what}: my memory is unreachable right now. Try again in a minute.")),
    }
}

async fn view(mind: &Mind, item: Uuid, i: &Interaction) -> Result<View, Answer> {
    let platform = mind.channel.platform();
    mind.mirror_db.one("SELECT dionysus.mirror_view($1, $2, $3)", &[&item, &platform, &i.author_id]).await.map_err(|e| refused_or(e, "open that"))
}

/// The card as it is now (after a decision: its status, without the decision buttons).
fn card_of(view: &View, item: Uuid) -> Card {
    card(item, &view.kind, &view.card, view.prompt.is_some(), view.proposal_status.as_deref())
}

fn field<'a>(i: &'a Interaction, name: &str) -> &'a str {
    i.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
}

async fn respond(mind: &Mind, i: &Interaction) -> Answer {
    let Some(press) = Press::parse(&i.custom_id) else {
        return private("That button is not one of mine.");
    };
    // Only allowed people count at all; the extension then checks the item is theirs to see.
    if !mind.channel.allowed(&i.author_id) {
        tracing::info!(author = %i.author_id, "a stranger's press on a dream-channel card refused");
        return private(REFUSAL);
    }
    let platform = mind.channel.platform();
    let item = press.item;
    match press.action {
        Action::Prompt => match view(mind, item, i).await {
            Ok(v) => match v.prompt.as_deref() {
                Some(p) => prompt_answer(p),
                None => private("This item has no prompt: no model was asked."),
            },
            Err(a) => a,
        },
        Action::Feedback => match view(mind, item, i).await {
            Ok(_) => Answer::Form(feedback_form(item)),
            Err(a) => a,
        },
        Action::Discuss => match view(mind, item, i).await {
            Ok(_) => Answer::Form(discuss_form(item)),
            Err(a) => a,
        },
        Action::FeedbackForm => {
            let Some(sentiment) = parse_sentiment(field(i, "sentiment")) else {
                return private("Sentiment must be positive, negative or neutral; nothing was stored.");
            };
            let comment = field(i, "comment").trim().to_string();
            let sql = "SELECT dionysus.mirror_feedback($1, $2, $3, $4, $5, $6)";
            match mind.mirror_db.json(sql, &[&item, &platform, &i.author_id, &i.id, &sentiment, &comment]).await {
                Ok(_) => private(format!("🫡 Noted ({sentiment}). The next dream reads it.")),
                Err(e) => refused_or(e, "store that feedback"),
            }
        }
        Action::Approve | Action::Reject | Action::DiscussForm => {
            let decision = match press.action {
                Action::Approve => "approve",
                Action::Reject => "reject",
                _ => "discuss",
            };
            let note = field(i, "note").trim().to_string();
            let note = (!note.is_empty()).then_some(note);
            let sql = "SELECT dionysus.mirror_decide($1, $2, $3, $4, $5, $6)";
            match mind.mirror_db.one::<crate::api::ProposalDecision>(sql, &[&item, &platform, &i.author_id, &decision, &note, &i.id]).await {
                Ok(v) if decision == "approve" && v.approved == Some(false) => {
                    private(format!("Not approved: {}", v.reason.as_deref().unwrap_or("it is no longer open")))
                }
                Ok(v) if v.decided == Some(false) => private(format!("Already {}.", v.status.as_deref().unwrap_or("decided"))),
                Ok(_) => match view(mind, item, i).await {
                    Ok(v) => Answer::Update(card_of(&v, item)),
                    Err(a) => a,
                },
                Err(e) => refused_or(e, "record that decision"),
            }
        }
    }
}

/// What a card says in plain text, for a channel without cards (and for logs).
pub fn card_text(c: &Card) -> String {
    let mut s = format!("**{}** — {}\n", c.title, c.description);
    for (n, v) in &c.fields {
        s.push_str(&format!("{n}: {v}\n"));
    }
    s.push_str(&c.footer);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A card body as the extension writes it.
    fn body(v: Value) -> CardBody {
        serde_json::from_value(v).unwrap()
    }

    fn id() -> Uuid {
        Uuid::parse_str("7f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b").unwrap()
    }

    #[test]
    fn a_press_round_trips_and_nothing_else_parses() {
        for (action, _) in ACTIONS {
            let cid = Press::custom_id(action, id());
            assert!(cid.len() <= CUSTOM_ID_MAX, "{cid}");
            assert_eq!(Press::parse(&cid), Some(Press { action, item: id() }));
        }
        for bad in [
            "",
            "dionysus:",
            "dionysus:approve",
            "dionysus:approve:",
            "dionysus:launch:7f1c2d3e4b5a69788a9b0c1d2e3f4a5b",
            "other:approve:7f1c2d3e4b5a69788a9b0c1d2e3f4a5b",
            "dionysus:approve:7f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b",
            "dionysus:approve:7f1c2d3e4b5a69788a9b0c1d2e3f4a5bff",
            "dionysus:approve:zz1c2d3e4b5a69788a9b0c1d2e3f4a5b",
        ] {
            assert_eq!(Press::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_card_keeps_every_discord_limit_whatever_it_carries() {
        let huge = "word ".repeat(5000);
        let card_json = json!({
            "title": "T".repeat(400),
            "at": "2026-11-24T12:00:00+00:00",
            "sections": (0..30).map(|i| json!({"name": format!("{i}{}", "n".repeat(300)), "value": huge})).collect::<Vec<_>>(),
            "metrics": {"latency_ms": 1234, "model": "m".repeat(2000)},
            "context": {"archetype": "small_talk"},
        });
        let c = card(id(), "reply", &body(card_json), true, None);
        assert!(c.title.chars().count() <= TITLE_MAX);
        assert!(c.fields.len() <= FIELDS_MAX);
        for (n, v) in &c.fields {
            assert!(n.chars().count() <= FIELD_NAME_MAX && v.chars().count() <= FIELD_VALUE_MAX, "{n}");
            assert!(!n.trim().is_empty() && !v.trim().is_empty());
        }
        let total = c.title.chars().count()
            + c.description.chars().count()
            + c.footer.chars().count()
            + c.fields.iter().map(|(n, v)| n.chars().count() + v.chars().count()).sum::<usize>();
        assert!(total <= CARD_TOTAL_MAX, "{total}");
    }

    #[test]
    fn a_card_shows_its_sections_metrics_and_context_and_the_right_buttons() {
        let card_json = json!({
            "title": "Reply", "at": "2026-11-24T12:00:00+00:00",
            "sections": [{"name": "Their message", "value": "How was the concert?"}, {"name": "Response", "value": "Loud!"}],
            "metrics": {"latency_ms": 812, "model": "smart-model", "prompt_tokens": 120},
            "context": {"archetype": "small_talk", "memories": 2},
        });
        let c = card(id(), "reply", &body(card_json), true, None);
        assert_eq!(c.title, "Reply");
        assert_eq!(c.fields[0], ("Their message".to_string(), "How was the concert?".to_string()));
        assert_eq!(c.fields[1].1, "Loud!");
        assert!(c.fields[2].0 == "Metrics" && c.fields[2].1.contains("latency ms: 812") && c.fields[2].1.contains("model: smart-model"));
        assert!(c.fields[3].0 == "Context used" && c.fields[3].1.contains("archetype: small_talk"));
        assert_eq!(c.buttons.iter().map(|b| b.label.as_str()).collect::<Vec<_>>(), ["View prompt", "Feedback"]);
        assert!(c.footer.contains(&id().to_string()));
        // A heartbeat without a prompt: Feedback only.
        let c = card(id(), "heartbeat", &body(json!({"title": "Heartbeat #3", "sections": []})), false, None);
        assert_eq!(c.buttons.iter().map(|b| b.label.as_str()).collect::<Vec<_>>(), ["Feedback"]);
        // An open proposal can be decided; a decided one shows its status and cannot.
        let c = card(id(), "proposal", &body(json!({"title": "Proposal"})), true, Some("pending"));
        assert_eq!(c.buttons.iter().map(|b| b.label.as_str()).collect::<Vec<_>>(), ["View prompt", "Feedback", "Approve", "Reject", "Discuss"]);
        assert_eq!(Press::parse(&c.buttons[2].custom_id), Some(Press { action: Action::Approve, item: id() }));
        let c = card(id(), "proposal", &body(json!({"title": "Proposal"})), true, Some("approved"));
        assert_eq!(c.buttons.len(), 2);
        assert!(c.fields.contains(&("Status".to_string(), "approved".to_string())));
    }

    #[test]
    fn a_short_prompt_is_shown_and_a_long_one_attached() {
        match prompt_answer("[system]\nYou are Dionysus. ```code```") {
            Answer::Private { text, file: None } => {
                assert!(text.starts_with("```\n") && text.ends_with("\n```") && text.contains("You are Dionysus."));
                assert_eq!(text.matches("```").count(), 2, "an inner fence would end the block: {text}");
            }
            other => panic!("{other:?}"),
        }
        let long = "é".repeat(5000);
        match prompt_answer(&long) {
            Answer::Private { text, file: Some((name, bytes)) } => {
                assert!(text.chars().count() <= PRIVATE_TEXT_MAX && text.contains("5000 characters"));
                assert_eq!(name, "prompt.txt");
                assert_eq!(String::from_utf8(bytes).unwrap(), long);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sentiments_are_read_leniently_and_nonsense_is_refused() {
        assert_eq!(parse_sentiment(" Positive "), Some("positive"));
        assert_eq!(parse_sentiment("👎"), Some("negative"));
        assert_eq!(parse_sentiment(""), Some("neutral"));
        assert_eq!(parse_sentiment("purple"), None);
    }

    #[test]
    fn forms_fit_discord_and_carry_their_item() {
        for f in [feedback_form(id()), discuss_form(id())] {
            assert!(f.custom_id.len() <= CUSTOM_ID_MAX && f.title.chars().count() <= 45);
            assert_eq!(Press::parse(&f.custom_id).map(|p| p.item), Some(id()));
            assert!(!f.inputs.is_empty() && f.inputs.len() <= 5);
            for i in &f.inputs {
                assert!(i.label.chars().count() <= 45 && i.placeholder.chars().count() <= 100 && i.max_len <= 4000, "{i:?}");
            }
        }
    }
}
