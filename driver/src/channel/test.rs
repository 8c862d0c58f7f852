//! The test channel: messages are injected by the test, and what the driver sends is recorded.
//! It can be "down" (sends fail as unavailable) to exercise the outbox.
use super::{Answer, Card, Channel, DreamChannel, Event, Incoming, Interaction, SendError};
use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub struct TestChannel {
    allowed: Vec<String>,
    inbox: Mutex<Option<mpsc::Receiver<Event>>>,
    feed: mpsc::Sender<Event>,
    pub sent: Mutex<Vec<(String, String)>>,
    /// Dionysus's own reactions: (message id, emoji, added or removed), in order.
    pub reactions: Mutex<Vec<(String, String, bool)>>,
    pub typing_shown: AtomicU64,
    down: AtomicBool,
    next_id: AtomicU64,
    /// Like Discord with enforce_nonce: a nonce seen before returns its message, posts nothing.
    nonces: Mutex<std::collections::HashMap<String, String>>,
    /// Sends left before one posts its message and then never returns (a driver killed
    /// between sending and recording; the test drops it); negative: never.
    stall_after: std::sync::atomic::AtomicI64,
    stalled: tokio::sync::Notify,
    /// The dream channel, when the test gives one.
    dream: Mutex<Option<DreamChannel>>,
    /// Cards posted: (channel, card, the card's platform id), in order.
    pub cards: Mutex<Vec<(String, Card, String)>>,
    /// Answers to interactions: (interaction id, answer), in order.
    pub answers: Mutex<Vec<(String, Answer)>>,
    /// Cards down: posting fails as unavailable (the conversation's sends are unaffected).
    cards_down: AtomicBool,
    /// Cards stalled: posting hangs until released (a platform that does not answer).
    cards_stalled: AtomicBool,
    /// Every post_card call, a nonce replay included.
    pub card_posts: AtomicU64,
}

impl TestChannel {
    pub fn new(allowed: &[&str]) -> TestChannel {
        let (feed, inbox) = mpsc::channel(64);
        TestChannel {
            allowed: allowed.iter().map(|s| s.to_string()).collect(),
            inbox: Mutex::new(Some(inbox)),
            feed,
            sent: Mutex::new(Vec::new()),
            reactions: Mutex::new(Vec::new()),
            typing_shown: AtomicU64::new(0),
            down: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            nonces: Mutex::new(Default::default()),
            stall_after: std::sync::atomic::AtomicI64::new(-1),
            stalled: tokio::sync::Notify::new(),
            dream: Mutex::new(None),
            cards: Mutex::new(Vec::new()),
            answers: Mutex::new(Vec::new()),
            cards_down: AtomicBool::new(false),
            cards_stalled: AtomicBool::new(false),
            card_posts: AtomicU64::new(0),
        }
    }

    /// Gives the channel a dream channel, owned by `owner` (an author id).
    pub fn with_dream_channel(self, channel: &str, owner: &str) -> TestChannel {
        *self.dream.lock().unwrap() = Some(DreamChannel { channel_id: channel.into(), owner: owner.into() });
        self
    }

    pub fn cards(&self) -> Vec<(String, Card, String)> {
        self.cards.lock().unwrap().clone()
    }

    pub fn answers(&self) -> Vec<(String, Answer)> {
        self.answers.lock().unwrap().clone()
    }

    /// Card posting fails (as unavailable) or works again.
    pub fn set_cards_down(&self, down: bool) {
        self.cards_down.store(down, Ordering::SeqCst);
    }

    /// Card posting hangs (until set false again).
    pub fn set_cards_stalled(&self, stalled: bool) {
        self.cards_stalled.store(stalled, Ordering::SeqCst);
    }

    /// A press on a button (its custom id), by `author`, as interaction `interaction_id`.
    pub async fn press(&self, interaction_id: &str, author: &str, custom_id: &str) {
        self.interact(interaction_id, author, custom_id, Vec::new()).await;
    }

    /// A form submitted, with its fields.
    pub async fn submit(&self, interaction_id: &str, author: &str, custom_id: &str, fields: &[(&str, &str)]) {
        let fields = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.interact(interaction_id, author, custom_id, fields).await;
    }

    async fn interact(&self, interaction_id: &str, author: &str, custom_id: &str, fields: Vec<(String, String)>) {
        let channel_id = self.dream.lock().unwrap().as_ref().map(|d| d.channel_id.clone()).unwrap_or_default();
        let i = Interaction {
            id: interaction_id.into(),
            token: format!("token-{interaction_id}"),
            channel_id,
            author_id: author.into(),
            custom_id: custom_id.into(),
            fields,
        };
        self.feed.send(Event::Interaction(i)).await.expect("driver gone");
    }

    /// Delivers a message in the author's direct channel, as the platform would (the same id
    /// twice is a redelivery).
    pub async fn deliver(&self, message_id: &str, author: &str, text: &str) {
        self.deliver_in(&direct_channel(author), message_id, author, text, true).await;
    }

    /// A reaction to a message the driver sent (its platform id, as the outbox records it).
    pub async fn react(&self, message_id: &str, author: &str, emoji: &str) {
        let r = super::Reaction { channel_id: direct_channel(author), message_id: message_id.into(), author_id: author.into(), emoji: emoji.into() };
        self.feed.send(Event::Reaction(r)).await.expect("driver gone");
    }

    /// Delivers a message in a given channel; `private`: only the author reads it (a DM),
    /// else it is shared (a guild channel).
    pub async fn deliver_in(&self, channel: &str, message_id: &str, author: &str, text: &str, private: bool) {
        let m = Incoming {
            message_id: message_id.into(),
            channel_id: channel.into(),
            author_id: author.into(),
            content: text.into(),
            private,
            reply_to: None,
        };
        self.feed.send(Event::Message(m)).await.expect("driver gone");
    }

    /// Delivers, in the author's direct channel, a reply to (a quote of) the message with
    /// platform id `reply_to`, as Discord's replies do.
    pub async fn deliver_reply(&self, message_id: &str, author: &str, text: &str, reply_to: &str) {
        let m = Incoming {
            message_id: message_id.into(),
            channel_id: direct_channel(author),
            author_id: author.into(),
            content: text.into(),
            private: true,
            reply_to: Some(reply_to.into()),
        };
        self.feed.send(Event::Message(m)).await.expect("driver gone");
    }

    pub fn reactions(&self) -> Vec<(String, String, bool)> {
        self.reactions.lock().unwrap().clone()
    }

    /// Takes the channel down, or brings it back (which announces Ready, as a reconnect does).
    pub async fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if !down {
            let _ = self.feed.send(Event::Ready).await;
        }
    }

    pub fn sent(&self) -> Vec<(String, String)> {
        self.sent.lock().unwrap().clone()
    }

    /// The `n`th send from now posts its message and then never returns; `stalled()`
    /// resolves when one is stuck so. None: sends return normally again.
    pub fn stall_after_sends(&self, n: Option<u32>) {
        self.stall_after.store(n.map_or(-1, i64::from), Ordering::SeqCst);
    }

    pub async fn stalled(&self) {
        self.stalled.notified().await
    }
}

/// The test platform's direct channel with a person.
pub fn direct_channel(author: &str) -> String {
    format!("dm:{author}")
}

#[async_trait]
impl Channel for TestChannel {
    fn platform(&self) -> &'static str {
        "test"
    }
    fn allowed(&self, author_id: &str) -> bool {
        self.allowed.iter().any(|a| a == author_id)
    }
    fn bot_id(&self) -> String {
        "bot".into()
    }
    async fn home(&self) -> Option<String> {
        Some("test-channel".into())
    }
    async fn direct(&self, author_id: &str) -> Option<String> {
        Some(direct_channel(author_id))
    }
    fn max_chars(&self) -> usize {
        2000
    }
    async fn send(&self, channel_id: &str, text: &str, nonce: &str) -> Result<String, SendError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(SendError::Unavailable("test channel is down".into()));
        }
        if let Some(id) = self.nonces.lock().unwrap().get(nonce) {
            return Ok(id.clone());
        }
        let id = format!("sent-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        self.sent.lock().unwrap().push((channel_id.to_string(), text.to_string()));
        self.nonces.lock().unwrap().insert(nonce.to_string(), id.clone());
        if self.stall_after.load(Ordering::SeqCst) > 0 && self.stall_after.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.stalled.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(id)
    }
    async fn react(&self, _channel_id: &str, message_id: &str, emoji: &str, add: bool) {
        self.reactions.lock().unwrap().push((message_id.into(), emoji.into(), add));
    }
    async fn typing(&self, _channel_id: &str) {
        self.typing_shown.fetch_add(1, Ordering::SeqCst);
    }
    fn dream_channel(&self) -> Option<DreamChannel> {
        self.dream.lock().unwrap().clone()
    }
    async fn post_card(&self, channel_id: &str, card: &Card, nonce: &str) -> Result<String, SendError> {
        self.card_posts.fetch_add(1, Ordering::SeqCst);
        while self.cards_stalled.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if self.cards_down.load(Ordering::SeqCst) {
            return Err(SendError::Unavailable("test cards are down".into()));
        }
        if let Some(id) = self.nonces.lock().unwrap().get(nonce) {
            return Ok(id.clone());
        }
        let id = format!("card-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        self.cards.lock().unwrap().push((channel_id.to_string(), card.clone(), id.clone()));
        self.nonces.lock().unwrap().insert(nonce.to_string(), id.clone());
        Ok(id)
    }
    async fn answer(&self, interaction: &Interaction, answer: Answer) -> Result<(), SendError> {
        self.answers.lock().unwrap().push((interaction.id.clone(), answer));
        Ok(())
    }
    async fn run(&self, events: mpsc::Sender<Event>, shutdown: CancellationToken) {
        let Some(mut inbox) = self.inbox.lock().unwrap().take() else { return };
        let _ = events.send(Event::Ready).await;
        loop {
            tokio::select! {
                e = inbox.recv() => match e {
                    Some(e) => if events.send(e).await.is_err() { return },
                    None => return,
                },
                _ = shutdown.cancelled() => return,
            }
        }
    }
}
