//! Delivers the outbox — reach-outs, and replies (every reply goes through it) — exactly once:
//! reserve → send → confirm. A message is reserved (a lease, committed at once, so nothing is
//! locked while the platform is called), sent part by part at the platform's size limit, each
//! part with a nonce made of the message id and the part number and recorded as it goes, and
//! confirmed: the bot's turn logged and the message marked sent in one transaction.
//!
//! A driver that dies anywhere leaves a reservation that lapses. The next one skips the parts
//! already recorded and resends the one that was in flight under the same nonce; Discord
//! (`enforce_nonce`) returns the message it already posted instead of posting it again, so the
//! person sees each message once.
//!
//! Each message goes where its row says: a reply to the channel the person wrote in, a
//! reach-out to its person's direct messages; only rows written before messages had a person
//! (0.1.0) fall back to the home channel.
use crate::channel::{split_message, Channel, SendError};
use crate::db::DbError;
use crate::Mind;
use std::time::Duration;
use uuid::Uuid;

/// A reserved outbox message.
pub struct Reserved {
    pub id: Uuid,
    pub content: String,
    pub person: Option<String>,
    pub channel_id: Option<String>,
    /// Parts already delivered by an earlier attempt.
    pub parts_sent: usize,
}

const COLUMNS: &str = "id, content, person, channel_id, jsonb_array_length(sent_parts), status::text, reserved_by";

impl Reserved {
    /// The row, if it is still unsent and reserved by `worker`.
    fn from_row(r: &tokio_postgres::Row, worker: &str) -> Option<Reserved> {
        let (status, by): (String, Option<String>) = (r.get(5), r.get(6));
        (status == "pending" && by.as_deref() == Some(worker)).then(|| Reserved {
            id: r.get(0),
            content: r.get(1),
            person: r.get(2),
            channel_id: r.get(3),
            parts_sent: r.get::<_, i32>(4) as usize,
        })
    }
}

/// What became of one message.
#[derive(Debug, PartialEq)]
pub enum Delivery {
    /// Every part is out and the message is confirmed: the id of the bot's logged turn.
    Delivered(Uuid),
    /// The channel is unavailable (or there is no channel to the person): it waits.
    Waiting,
    /// The platform refused it.
    Rejected(String),
}

/// The nonce of one part of one message: stable across retries and drivers, at most the 25
/// characters Discord takes.
pub fn nonce(message: Uuid, part: usize) -> String {
    format!("{}{:03}", &message.simple().to_string()[..22], part % 1000)
}

/// Reserves and delivers what waits, one message at a time, until nothing is left or the
/// channel is down. Returns how many were delivered.
pub async fn deliver(mind: &Mind) -> usize {
    let _one_pass = mind.outbox_lock.lock().await;
    let worker = &mind.config.worker_name;
    let mut sent = 0;
    while !mind.shutdown.is_cancelled() {
        let reserved = mind
            .outbox_db
            .query(&format!("SELECT {COLUMNS} FROM dionysus.reserve_outbox($1, $2, 1)"), &[worker, &mind.channel.platform()])
            .await;
        let row = match reserved {
            Ok(rows) => match rows.first().and_then(|r| Reserved::from_row(r, worker)) {
                Some(m) => m,
                None => break,
            },
            Err(e) => {
                tracing::warn!(error = %e, "outbox: cannot reserve");
                break;
            }
        };
        match send_reserved(mind, &row, 0).await {
            Ok(Delivery::Delivered(_)) => sent += 1,
            Ok(Delivery::Rejected(_)) => {}
            Ok(Delivery::Waiting) => break,
            Err(e) => {
                tracing::warn!(outbox_id = %row.id, error = %e, "outbox: delivery not recorded; its reservation will lapse and it is retried");
                break;
            }
        }
    }
    sent
}

/// Sends a message this driver has reserved, resuming after the parts already sent, and
/// confirms it. An unavailable channel is retried `retries` times (with back-off) before the
/// message is handed back to wait.
pub async fn send_reserved(mind: &Mind, m: &Reserved, retries: u32) -> Result<Delivery, DbError> {
    let ch = mind.channel.as_ref();
    let worker = &mind.config.worker_name;
    let Some(target) = destination(ch, m.person.as_deref(), m.channel_id.clone()).await else {
        release(mind, m.id, "no channel to reach this person on", false).await?;
        return Ok(Delivery::Waiting);
    };
    let parts = split_message(&m.content, ch.max_chars().max(16));
    for (i, part) in parts.iter().enumerate().skip(m.parts_sent) {
        match send_part(mind, &target, part, &nonce(m.id, i), retries).await {
            Ok(platform_id) => {
                let i = i as i32;
                mind.outbox_db
                    .query("SELECT dionysus.outbox_part_sent($1, $2, $3, $4)", &[&m.id, worker, &i, &platform_id])
                    .await?;
            }
            Err(SendError::Unavailable(e)) => {
                tracing::info!(outbox_id = %m.id, error = %e, "channel unavailable; the message waits");
                release(mind, m.id, &e, false).await?;
                return Ok(Delivery::Waiting);
            }
            Err(SendError::Rejected(e)) => {
                tracing::warn!(outbox_id = %m.id, error = %e, "the platform refused the message");
                release(mind, m.id, &e, true).await?;
                return Ok(Delivery::Rejected(e));
            }
        }
    }
    let logged = mind
        .outbox_db
        .query("SELECT dionysus.confirm_outbox($1, $2, $3, $4)", &[&m.id, worker, &target, &ch.bot_id()])
        .await?;
    tracing::info!(outbox_id = %m.id, "message delivered");
    Ok(Delivery::Delivered(logged.first().map(|r| r.get(0)).unwrap_or_default()))
}

/// One part, with up to `retries` more tries while the channel is unavailable.
async fn send_part(mind: &Mind, channel: &str, text: &str, nonce: &str, retries: u32) -> Result<String, SendError> {
    let mut delay = Duration::from_millis(500);
    let mut attempt = 0;
    loop {
        match mind.channel.send(channel, text, nonce).await {
            Err(SendError::Unavailable(e)) if attempt < retries && !mind.shutdown.is_cancelled() => {
                tracing::warn!(error = %e, attempt, "send failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

async fn release(mind: &Mind, id: Uuid, error: &str, rejected: bool) -> Result<(), DbError> {
    mind.outbox_db
        .query("SELECT dionysus.release_outbox($1, $2, $3, $4)", &[&id, &mind.config.worker_name, &error, &rejected])
        .await
        .map(|_| ())
}

/// Where a message goes: its own channel, else its person's direct messages, else (a row
/// from before messages had a person) the home channel.
async fn destination(ch: &dyn Channel, person: Option<&str>, channel: Option<String>) -> Option<String> {
    if channel.is_some() {
        return channel;
    }
    match person {
        Some(p) => ch.direct(p.split_once(':').map_or(p, |(_, author)| author)).await,
        None => ch.home().await,
    }
}

/// Reserves the reply to a person's message for this driver: queued now with `content`, or
/// (content None) the one queued by an earlier attempt. None when it is already sent or
/// someone else is sending it.
pub async fn reserve_reply(mind: &Mind, message_id: Uuid, content: Option<&str>) -> Result<Option<Reserved>, DbError> {
    let worker = &mind.config.worker_name;
    let rows = mind
        .chat_db
        .query(&format!("SELECT {COLUMNS} FROM dionysus.queue_reply($1, $2, $3)"), &[&message_id, worker, &content])
        .await?;
    Ok(rows.first().and_then(|r| Reserved::from_row(r, worker)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn nonces_are_stable_distinct_and_fit_discord() {
        let id = uuid::Uuid::parse_str("0f8fad5b-d9cb-469f-a165-70867728950e").unwrap();
        assert_eq!(super::nonce(id, 0), super::nonce(id, 0));
        assert_ne!(super::nonce(id, 0), super::nonce(id, 1));
        assert!(super::nonce(id, 12).len() <= 25);
        let other = uuid::Uuid::parse_str("1f8fad5b-d9cb-469f-a165-70867728950e").unwrap();
        assert_ne!(super::nonce(id, 0), super::nonce(other, 0));
    }
}
