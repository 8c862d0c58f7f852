//! The `dionysus` driver: a thin tokio program beside PostgreSQL. It moves words between the
//! LLM, the person and the extension's SQL functions, and keeps no memory logic of its own.
//!
//! - [`conversation`]: a message is an event: log → context → reply → extraction afterwards
//! - [`fallback`]: the honest answer when the model cannot be used
//! - [`heartbeat`]: begin → decision → commit → queued work → narrative → finish
//! - [`work`]: the queue's plumbing: claim, run, settle (complete/fail/release) under a lease
//! - [`actions`]: what each queued action and language job does
//! - [`outbox`]: unprompted messages, delivered once
//! - [`contact`]: the proactive mind's thinking layer, woken only when contact pressure crosses
//! - [`runtime`]: wiring, NOTIFY wake-ups, shutdown
//! - [`channel`]: Discord, terminal and test channels behind one trait
//! - [`alignment`]: north stars, invisible feedback, the nightly dream and the person's word on it
//! - [`mcp`]: the same memory for other agents, over the Model Context Protocol
//! - [`import`]: a person's history from elsewhere (Discord package, chat JSON, LoCoMo) into the log
//! - [`llm`], [`db`]: the two outside services, each resilient to failure
pub mod actions;
pub mod api;
pub mod alignment;
pub mod censors;
pub mod channel;
pub mod contact;
pub mod config;
pub mod conversation;
pub mod db;
pub mod doctor;
pub mod fallback;
pub mod forgetme;
pub mod grounding;
pub mod heartbeat;
pub mod import;
pub mod jsonish;
pub mod llm;
pub mod mcp;
pub mod mirror;
pub mod outbox;
pub mod people;
pub mod prompt;
pub mod reindex;
pub mod rules;
pub mod runtime;
pub mod search;
pub mod status;
pub mod web;
pub mod work;

use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything a running driver shares: configuration, the two model roles, one database
/// connection per organ, the channel, and the shutdown signal.
pub struct Mind {
    pub config: config::Config,
    pub fast: llm::Llm,
    pub smart: llm::Llm,
    /// The smart role for replies only, with a breaker of its own: a heartbeat or a reflection
    /// that keeps failing never silences the conversation.
    pub chat: llm::Llm,
    pub chat_db: db::Db,
    pub work_db: db::Db,
    pub outbox_db: db::Db,
    /// The dream channel's own connection: the mirror never waits on the others.
    pub mirror_db: db::Db,
    pub channel: Arc<dyn channel::Channel>,
    pub web: web::Web,
    pub shutdown: CancellationToken,
    /// One delivery pass at a time: it holds a transaction on `outbox_db`.
    pub outbox_lock: tokio::sync::Mutex<()>,
}

impl Mind {
    pub fn new(config: config::Config, channel: Arc<dyn channel::Channel>) -> Mind {
        Mind {
            fast: llm::Llm::new(config.fast.clone()),
            smart: llm::Llm::new(config.smart.clone()),
            chat: llm::Llm::new(config::LlmRole { name: "chat", ..config.smart.clone() }),
            chat_db: db::Db::new(&config.database_url, "conversation"),
            work_db: db::Db::new(&config.database_url, "work"),
            outbox_db: db::Db::new(&config.database_url, "outbox"),
            // Short patience: a button press must be answered within Discord's 3 seconds.
            mirror_db: db::Db::new(&config.database_url, "mirror").with_patience(std::time::Duration::from_secs(2)),
            web: web::Web::new(&config.fetch_allow_private),
            channel,
            config,
            shutdown: CancellationToken::new(),
            outbox_lock: tokio::sync::Mutex::new(()),
        }
    }
}
