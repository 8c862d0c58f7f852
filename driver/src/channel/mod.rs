//! Channels carry words between the person and the driver: Discord, the terminal, and the
//! test channel. An adapter only translates; who may talk, what is stored and what is said
//! are decided by the conversation, the same for every channel.
pub mod discord;
pub mod terminal;
pub mod test;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A message from someone, as the platform delivered it.
#[derive(Clone, Debug)]
pub struct Incoming {
    /// The platform's id of the message: a redelivery carries the same id.
    pub message_id: String,
    pub channel_id: String,
    pub author_id: String,
    pub content: String,
    /// The channel is the author's alone (a DM, the terminal): nobody else reads the reply.
    pub private: bool,
    /// The platform's id of the message this one replies to (a Discord reply or quote): a
    /// reply to one of Dionysus's messages is feedback, not conversation.
    pub reply_to: Option<String>,
}

/// A reaction by a person to a message (the platform's id of the message reacted to).
#[derive(Clone, Debug)]
pub struct Reaction {
    pub channel_id: String,
    pub message_id: String,
    pub author_id: String,
    pub emoji: String,
}

/// A button pressed or a form (Discord's modal) submitted on one of Dionysus's cards.
#[derive(Clone, Debug)]
pub struct Interaction {
    /// The platform's id of this press: one press, one id.
    pub id: String,
    /// What the platform needs to answer this press (Discord's interaction token).
    pub token: String,
    pub channel_id: String,
    pub author_id: String,
    /// The button's or the form's id (see `mirror::Press`).
    pub custom_id: String,
    /// A form's fields by their id (empty for a button).
    pub fields: Vec<(String, String)>,
}

/// A card for the dream channel: a rich embed with sections and buttons (`mirror::card` builds
/// it; an adapter only translates it).
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    pub title: String,
    pub description: String,
    /// (name, value) sections, in order.
    pub fields: Vec<(String, String)>,
    pub footer: String,
    pub color: u32,
    pub buttons: Vec<Button>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Button {
    pub label: String,
    pub custom_id: String,
    pub style: ButtonStyle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ButtonStyle {
    Primary,
    Secondary,
    Success,
    Danger,
}

/// A form to fill in (Discord's modal): short or long text inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    pub custom_id: String,
    pub title: String,
    pub inputs: Vec<FormInput>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FormInput {
    pub custom_id: String,
    pub label: String,
    pub placeholder: String,
    pub long: bool,
    pub required: bool,
    pub max_len: u16,
}

/// The answer to an interaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// Seen only by the one who pressed (Discord's ephemeral message), with an optional file.
    Private { text: String, file: Option<(String, Vec<u8>)> },
    /// A form to fill in.
    Form(Form),
    /// The card pressed is replaced (after a decision: its new state, fewer buttons).
    Update(Card),
}

/// The dream channel: where the mirror posts, and the person it belongs to (an author id).
#[derive(Clone, Debug, PartialEq)]
pub struct DreamChannel {
    pub channel_id: String,
    pub owner: String,
}

#[derive(Clone, Debug)]
pub enum Event {
    Message(Incoming),
    Reaction(Reaction),
    Interaction(Interaction),
    /// The channel (re)connected: pending outbox messages can go out.
    Ready,
    /// The channel ended (stdin closed): the driver shuts down.
    Closed,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SendError {
    /// The platform cannot be reached now; try again later without counting an attempt.
    Unavailable(String),
    /// The platform refused this message.
    Rejected(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Unavailable(e) => write!(f, "channel unavailable: {e}"),
            SendError::Rejected(e) => write!(f, "message rejected: {e}"),
        }
    }
}

#[async_trait]
pub trait Channel: Send + Sync {
    /// "discord", "terminal", "test": the platform name stored with each message.
    fn platform(&self) -> &'static str;
    /// Whether a sender may talk to the companion (everyone else is ignored).
    fn allowed(&self, author_id: &str) -> bool;
    /// The bot's own author id in the message log.
    fn bot_id(&self) -> String;
    /// Where unprompted messages go (a home channel, a DM), if anywhere.
    async fn home(&self) -> Option<String>;
    /// A channel only this person reads (their DM), for what is meant for them alone.
    async fn direct(&self, author_id: &str) -> Option<String>;
    /// The longest message the platform takes; the outbox sends longer text in parts.
    fn max_chars(&self) -> usize {
        usize::MAX
    }
    /// Delivers one message (at most `max_chars`); returns the platform's id of it. `nonce` is
    /// stable for this part of this message: a platform that honours it (Discord's
    /// `enforce_nonce`) returns the message already posted instead of posting it twice.
    async fn send(&self, channel_id: &str, text: &str, nonce: &str) -> Result<String, SendError>;
    /// Shows that a reply is being written (best effort).
    async fn typing(&self, _channel_id: &str) {}
    /// Adds (or with `add` false, removes) Dionysus's own reaction to a message; best effort.
    async fn react(&self, _channel_id: &str, _message_id: &str, _emoji: &str, _add: bool) {}
    /// Receives messages until shutdown, sending them to `events`.
    async fn run(&self, events: mpsc::Sender<Event>, shutdown: CancellationToken);
    /// The dream channel, if this platform has one configured.
    fn dream_channel(&self) -> Option<DreamChannel> {
        None
    }
    /// Posts a card (to the dream channel); `nonce` as for `send`.
    async fn post_card(&self, _channel_id: &str, _card: &Card, _nonce: &str) -> Result<String, SendError> {
        Err(SendError::Rejected("this channel has no cards".into()))
    }
    /// Answers a button press or a submitted form.
    async fn answer(&self, _interaction: &Interaction, _answer: Answer) -> Result<(), SendError> {
        Ok(())
    }
}

/// Splits text into parts of at most `limit` characters, at the cleanest boundary available:
/// paragraph, line, sentence, word, and only then mid-word. Code fences cut in two are closed
/// and reopened, so each part renders on its own.
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    assert!(limit >= 16, "limit too small");
    let mut parts = Vec::new();
    let mut rest: &str = text.trim();
    let mut reopen_fence: Option<String> = None;
    while !rest.is_empty() {
        let prefix = reopen_fence.take().map(|f| format!("{f}\n")).unwrap_or_default();
        let budget = limit - prefix.chars().count() - 4; // room to close a fence
        if prefix.chars().count() + rest.chars().count() <= limit {
            parts.push(format!("{prefix}{rest}"));
            break;
        }
        let hard = rest.char_indices().nth(budget).map(|(i, _)| i).unwrap_or(rest.len());
        let window = &rest[..hard];
        let cut = ["\n\n", "\n", ". ", "! ", "? ", " "]
            .iter()
            .find_map(|sep| window.rfind(sep).filter(|&i| i > hard / 3).map(|i| i + sep.len()))
            .unwrap_or(hard);
        let mut part = format!("{prefix}{}", rest[..cut].trim_end());
        // An odd number of fences means the part ends inside a code block.
        if part.matches("```").count() % 2 == 1 {
            let lang = part.rfind("```").map(|i| part[i + 3..].lines().next().unwrap_or("").trim().to_string()).unwrap_or_default();
            part.push_str("\n```");
            reopen_fence = Some(format!("```{lang}"));
        }
        parts.push(part);
        rest = rest[cut..].trim_start();
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::split_message;

    #[test]
    fn short_messages_stay_whole() {
        assert_eq!(split_message("hello", 2000), vec!["hello".to_string()]);
    }

    #[test]
    fn long_messages_split_at_clean_boundaries_within_the_limit() {
        let para = "This is a sentence of moderate length. ".repeat(30);
        let text = format!("{para}\n\n{para}\n\n{para}");
        let parts = split_message(&text, 2000);
        assert!(parts.len() >= 2);
        for p in &parts {
            assert!(p.chars().count() <= 2000, "{}", p.len());
            assert!(p.ends_with('.'), "cut mid-sentence: {:?}", &p[p.len() - 20..]);
        }
        let joined: String = parts.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(joined, text.split_whitespace().collect::<Vec<_>>().join(" "));
    }

    #[test]
    fn words_without_spaces_and_multibyte_text_are_cut_safely() {
        let text = "é".repeat(4500);
        let parts = split_message(&text, 2000);
        assert_eq!(parts.iter().map(|p| p.chars().count()).sum::<usize>(), 4500);
        assert!(parts.iter().all(|p| p.chars().count() <= 2000));
    }

    #[test]
    fn code_blocks_are_closed_and_reopened() {
        let code = (0..300).map(|i| format!("let x{i} = {i};")).collect::<Vec<_>>().join("\n");
        let text = format!("Here:\n```rust\n{code}\n```\nDone.");
        let parts = split_message(&text, 2000);
        assert!(parts.len() >= 2);
        for p in &parts {
            assert!(p.chars().count() <= 2000);
            assert_eq!(p.matches("```").count() % 2, 0, "unbalanced fence in {p:?}");
        }
        assert!(parts[1].starts_with("```rust"));
    }
}
