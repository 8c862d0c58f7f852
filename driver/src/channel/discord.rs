//! Discord through serenity's gateway: direct messages, one home channel, and the dream
//! channel's cards and their buttons and forms. Translation only (cards, forms and answers are
//! built by `mirror`); serenity reconnects the gateway by itself. Intents needed: GUILD_MESSAGES, DIRECT_MESSAGES
//! and MESSAGE_CONTENT (enable "Message Content Intent" in the developer portal).
use super::{Answer, ButtonStyle, Card, Channel, DreamChannel, Event, Form, Incoming, Interaction, SendError};
use crate::config::DiscordConfig;
use async_trait::async_trait;
use serenity::all::{ChannelId, Context, CreateMessage, EventHandler, GatewayIntents, Message, Nonce, Ready, ResumedEvent, UserId};
use serenity::http::Http;
use std::sync::Arc;
use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken;

/// Discord's limit per message.
pub const MAX_CHARS: usize = 2000;

pub struct Discord {
    config: DiscordConfig,
    http: Arc<Http>,
    dm_home: Mutex<Option<String>>,
    /// Direct-message channels opened, by user id.
    dms: Mutex<std::collections::HashMap<u64, String>>,
}

impl Discord {
    pub fn new(config: DiscordConfig) -> Discord {
        Discord { http: Arc::new(http(&config)), config, dm_home: Mutex::new(None), dms: Mutex::new(Default::default()) }
    }
}

/// The REST client: discord.com, or the configured Discord-compatible API.
fn http(config: &DiscordConfig) -> Http {
    let token = config.token.clone().unwrap_or_default();
    match &config.api_base {
        // serenity's own rate limiter would call discord.com directly: behind another API its
        // limits are that API's to keep (twilight-http-proxy does).
        Some(base) => serenity::http::HttpBuilder::new(&token).proxy(base.trim_end_matches('/')).ratelimiter_disabled(true).build(),
        None => Http::new(&token),
    }
}

struct Handler {
    events: mpsc::Sender<Event>,
    home: Option<u64>,
}

#[serenity::async_trait]
impl EventHandler for Handler {
    async fn message(&self, _ctx: Context, msg: Message) {
        // Bots (Dionysus itself included) and webhooks are never the person.
        if msg.author.bot || msg.webhook_id.is_some() {
            return;
        }
        let is_dm = msg.guild_id.is_none();
        if !is_dm && Some(msg.channel_id.get()) != self.home {
            return;
        }
        let incoming = Incoming {
            message_id: msg.id.get().to_string(),
            channel_id: msg.channel_id.get().to_string(),
            author_id: msg.author.id.get().to_string(),
            content: msg.content.clone(),
            private: is_dm,
            // A reply to a bot's message; the extension checks it is Dionysus's, to this person.
            reply_to: msg.referenced_message.as_ref().filter(|r| r.author.bot).map(|r| r.id.get().to_string()),
        };
        let _ = self.events.send(Event::Message(incoming)).await;
    }
    async fn reaction_add(&self, _ctx: Context, add: serenity::all::Reaction) {
        let Some(user) = add.user_id else { return };
        let reaction = super::Reaction {
            channel_id: add.channel_id.get().to_string(),
            message_id: add.message_id.get().to_string(),
            author_id: user.get().to_string(),
            emoji: add.emoji.to_string(),
        };
        let _ = self.events.send(Event::Reaction(reaction)).await;
    }
    /// A press on a card's button, or a form submitted: the mirror answers it.
    async fn interaction_create(&self, _ctx: Context, interaction: serenity::all::Interaction) {
        use serenity::all::{ActionRowComponent, Interaction as I};
        let i = match interaction {
            I::Component(c) => Interaction {
                id: c.id.get().to_string(),
                token: c.token.clone(),
                channel_id: c.channel_id.get().to_string(),
                author_id: c.user.id.get().to_string(),
                custom_id: c.data.custom_id.clone(),
                fields: Vec::new(),
            },
            I::Modal(m) => Interaction {
                id: m.id.get().to_string(),
                token: m.token.clone(),
                channel_id: m.channel_id.get().to_string(),
                author_id: m.user.id.get().to_string(),
                custom_id: m.data.custom_id.clone(),
                fields: m
                    .data
                    .components
                    .iter()
                    .flat_map(|row| row.components.iter())
                    .filter_map(|c| match c {
                        ActionRowComponent::InputText(t) => Some((t.custom_id.clone(), t.value.clone().unwrap_or_default())),
                        _ => None,
                    })
                    .collect(),
            },
            _ => return,
        };
        let _ = self.events.send(Event::Interaction(i)).await;
    }
    async fn ready(&self, _ctx: Context, ready: Ready) {
        tracing::info!(user = %ready.user.name, "Discord gateway ready");
        let _ = self.events.send(Event::Ready).await;
    }
    async fn resume(&self, _ctx: Context, _: ResumedEvent) {
        tracing::info!("Discord gateway resumed");
        let _ = self.events.send(Event::Ready).await;
    }
}

/// A card as an embed and rows of at most five buttons.
fn embed_of(card: &Card) -> (serenity::all::CreateEmbed, Vec<serenity::all::CreateActionRow>) {
    use serenity::all::{ButtonStyle as S, CreateActionRow, CreateButton, CreateEmbed, CreateEmbedFooter};
    let mut e = CreateEmbed::new().title(&card.title).description(&card.description).colour(card.color).footer(CreateEmbedFooter::new(&card.footer));
    for (name, value) in &card.fields {
        e = e.field(name, value, false);
    }
    let rows = card
        .buttons
        .chunks(5)
        .map(|row| {
            CreateActionRow::Buttons(
                row.iter()
                    .map(|b| {
                        let style = match b.style {
                            ButtonStyle::Primary => S::Primary,
                            ButtonStyle::Secondary => S::Secondary,
                            ButtonStyle::Success => S::Success,
                            ButtonStyle::Danger => S::Danger,
                        };
                        CreateButton::new(&b.custom_id).label(&b.label).style(style)
                    })
                    .collect(),
            )
        })
        .collect();
    (e, rows)
}

fn modal_of(form: &Form) -> serenity::all::CreateModal {
    use serenity::all::{CreateActionRow, CreateInputText, CreateModal, InputTextStyle};
    let inputs = form
        .inputs
        .iter()
        .map(|i| {
            let style = if i.long { InputTextStyle::Paragraph } else { InputTextStyle::Short };
            CreateActionRow::InputText(
                CreateInputText::new(style, &i.label, &i.custom_id).placeholder(&i.placeholder).required(i.required).max_length(i.max_len),
            )
        })
        .collect();
    CreateModal::new(&form.custom_id, &form.title).components(inputs)
}

fn send_error(e: serenity::Error) -> SendError {
    use serenity::http::HttpError;
    match &e {
        serenity::Error::Http(HttpError::UnsuccessfulRequest(r)) => {
            let s = r.status_code.as_u16();
            if s == 429 || s >= 500 {
                SendError::Unavailable(e.to_string())
            } else {
                SendError::Rejected(e.to_string())
            }
        }
        _ => SendError::Unavailable(e.to_string()),
    }
}

#[async_trait]
impl Channel for Discord {
    fn platform(&self) -> &'static str {
        "discord"
    }
    fn allowed(&self, author_id: &str) -> bool {
        author_id.parse::<u64>().is_ok_and(|id| self.config.allowed_user_ids.contains(&id))
    }
    fn bot_id(&self) -> String {
        "discord-bot".into()
    }
    /// The home channel, else a DM with the first allowed person.
    async fn home(&self) -> Option<String> {
        if let Some(h) = self.config.home_channel_id {
            return Some(h.to_string());
        }
        let mut cached = self.dm_home.lock().await;
        if cached.is_none() {
            let user = *self.config.allowed_user_ids.first()?;
            match UserId::new(user).create_dm_channel(&self.http).await {
                Ok(c) => *cached = Some(c.id.get().to_string()),
                Err(e) => tracing::warn!(error = %e, "cannot open a DM with the person"),
            }
        }
        cached.clone()
    }
    /// The person's DM channel (only allowed people: nobody else is ever written to).
    async fn direct(&self, author_id: &str) -> Option<String> {
        let user: u64 = author_id.parse().ok().filter(|u| self.config.allowed_user_ids.contains(u))?;
        let mut dms = self.dms.lock().await;
        if let Some(c) = dms.get(&user) {
            return Some(c.clone());
        }
        match UserId::new(user).create_dm_channel(&self.http).await {
            Ok(c) => {
                let id = c.id.get().to_string();
                dms.insert(user, id.clone());
                Some(id)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot open a DM with the person");
                None
            }
        }
    }
    fn max_chars(&self) -> usize {
        MAX_CHARS
    }
    async fn send(&self, channel_id: &str, text: &str, nonce: &str) -> Result<String, SendError> {
        let id: u64 = channel_id.parse().map_err(|_| SendError::Rejected(format!("bad channel id {channel_id}")))?;
        // enforce_nonce: a retry of the same part within Discord's window returns the
        // original message instead of posting a second one.
        let msg = CreateMessage::new().content(text).nonce(Nonce::String(nonce.to_string())).enforce_nonce(true);
        let m = ChannelId::new(id).send_message(&self.http, msg).await.map_err(send_error)?;
        Ok(m.id.get().to_string())
    }
    async fn react(&self, channel_id: &str, message_id: &str, emoji: &str, add: bool) {
        let (Ok(c), Ok(m)) = (channel_id.parse::<u64>(), message_id.parse::<u64>()) else { return };
        let kind = serenity::all::ReactionType::Unicode(emoji.to_string());
        let done = if add {
            self.http.create_reaction(ChannelId::new(c), serenity::all::MessageId::new(m), &kind).await
        } else {
            self.http.delete_reaction_me(ChannelId::new(c), serenity::all::MessageId::new(m), &kind).await
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, emoji, add, "the reaction could not be changed");
        }
    }
    async fn typing(&self, channel_id: &str) {
        if let Ok(id) = channel_id.parse::<u64>() {
            let _ = ChannelId::new(id).broadcast_typing(&self.http).await;
        }
    }
    fn dream_channel(&self) -> Option<DreamChannel> {
        Some(DreamChannel { channel_id: self.config.dream_channel_id?.to_string(), owner: self.config.dream_user_id?.to_string() })
    }
    async fn post_card(&self, channel_id: &str, card: &Card, nonce: &str) -> Result<String, SendError> {
        let id: u64 = channel_id.parse().map_err(|_| SendError::Rejected(format!("bad channel id {channel_id}")))?;
        let (embed, rows) = embed_of(card);
        let msg = CreateMessage::new().embed(embed).components(rows).nonce(Nonce::String(nonce.to_string())).enforce_nonce(true);
        let m = ChannelId::new(id).send_message(&self.http, msg).await.map_err(send_error)?;
        Ok(m.id.get().to_string())
    }
    async fn answer(&self, interaction: &Interaction, answer: Answer) -> Result<(), SendError> {
        use serenity::all::{Builder, CreateAttachment, CreateInteractionResponse as R, CreateInteractionResponseMessage as M, InteractionId};
        let id: u64 = interaction.id.parse().map_err(|_| SendError::Rejected(format!("bad interaction id {}", interaction.id)))?;
        let response = match answer {
            Answer::Private { text, file } => {
                let mut m = M::new().content(text).ephemeral(true);
                if let Some((name, bytes)) = file {
                    m = m.add_file(CreateAttachment::bytes(bytes, name));
                }
                R::Message(m)
            }
            Answer::Form(form) => R::Modal(modal_of(&form)),
            Answer::Update(card) => {
                let (embed, rows) = embed_of(&card);
                R::UpdateMessage(M::new().embed(embed).components(rows))
            }
        };
        response.execute(&self.http, (InteractionId::new(id), interaction.token.as_str())).await.map_err(send_error)
    }
    async fn run(&self, events: mpsc::Sender<Event>, shutdown: CancellationToken) {
        let token = self.config.token.clone().unwrap_or_default();
        let intents = GatewayIntents::GUILD_MESSAGES
            | GatewayIntents::DIRECT_MESSAGES
            | GatewayIntents::MESSAGE_CONTENT
            | GatewayIntents::GUILD_MESSAGE_REACTIONS
            | GatewayIntents::DIRECT_MESSAGE_REACTIONS;
        let handler = Handler { events: events.clone(), home: self.config.home_channel_id };
        let builder = match &self.config.api_base {
            Some(_) => serenity::all::ClientBuilder::new_with_http(http(&self.config), intents),
            None => serenity::Client::builder(&token, intents),
        };
        let mut client = match builder.event_handler(handler).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot start the Discord client");
                let _ = events.send(Event::Closed).await;
                return;
            }
        };
        let shards = client.shard_manager.clone();
        tokio::select! {
            r = client.start() => {
                if let Err(e) = r {
                    tracing::error!(error = %e, "Discord client stopped");
                }
                let _ = events.send(Event::Closed).await;
            }
            _ = shutdown.cancelled() => shards.shutdown_all().await,
        }
    }
}
