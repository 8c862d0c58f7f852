//! Delivers the outbox: reach-outs and replies that waited for the channel. Each message is
//! locked (FOR UPDATE SKIP LOCKED) while it is sent and marked sent in the same transaction,
//! so two drivers never both send it. A channel that is down leaves it pending, attempts
//! untouched, until the channel is back (its Ready event wakes this again).
//!
//! Each message goes where its row says: a waiting reply to the channel the person wrote in,
//! a reach-out to its person's direct messages; only rows written before messages had a
//! person (0.1.0) fall back to the home channel.
use crate::channel::{Channel, SendError};
use crate::db::{map_err, DbError};
use crate::Mind;
use uuid::Uuid;

pub async fn deliver(mind: &Mind) -> usize {
    let _one_pass = mind.outbox_lock.lock().await;
    let mut sent = 0;
    while !mind.shutdown.is_cancelled() {
        let ch = mind.channel.clone();
        let r = mind
            .outbox_db
            .transaction(async |c| {
                let row = c
                    .query_opt(
                        "SELECT id, content, work_id, person, channel_id FROM dionysus.outbox \
                         WHERE status = 'pending' AND audience = 'user' AND (NOT requires_approval OR approved_at IS NOT NULL) \
                           AND (platform IS NULL OR platform = $1) \
                         ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
                        &[&ch.platform()],
                    )
                    .await
                    .map_err(map_err)?;
                let Some(row) = row else { return Ok(None) };
                let (id, content, work): (Uuid, String, Option<Uuid>) = (row.get(0), row.get(1), row.get(2));
                let (person, channel): (Option<String>, Option<String>) = (row.get(3), row.get(4));
                let Some(target) = destination(ch.as_ref(), person.as_deref(), channel).await else {
                    tracing::warn!(outbox_id = %id, "no channel to reach this person on; the message waits");
                    return Ok(Some(false));
                };
                match ch.send(&target, &content).await {
                    Ok(platform_id) => {
                        c.query("SELECT dionysus.mark_outbox_sent($1, $2)", &[&id, &platform_id]).await.map_err(map_err)?;
                        c.query(
                            "SELECT dionysus.log_message($1, $2, $3, $4, $5, true, $6, NULL, $7)",
                            &[&ch.platform(), &platform_id, &target, &ch.bot_id(), &content, &work.is_some(), &person],
                        )
                        .await
                        .map_err(map_err)?;
                        tracing::info!(outbox_id = %id, "outbox message sent");
                        Ok(Some(true))
                    }
                    Err(SendError::Unavailable(e)) => {
                        tracing::info!(outbox_id = %id, error = %e, "channel unavailable; the message waits");
                        Ok(Some(false))
                    }
                    Err(SendError::Rejected(e)) => {
                        c.query("SELECT dionysus.mark_outbox_failed($1, $2, false)", &[&id, &e]).await.map_err(map_err)?;
                        tracing::warn!(outbox_id = %id, error = %e, "outbox message rejected by the channel");
                        Ok(Some(true))
                    }
                }
            })
            .await;
        match r {
            Ok(Some(true)) => sent += 1,
            Ok(Some(false)) | Ok(None) => break,
            Err(DbError::Down(e)) => {
                tracing::warn!(error = %e, "outbox: database unreachable");
                break;
            }
            Err(e) => {
                tracing::error!(error = %e, "outbox delivery failed");
                break;
            }
        }
    }
    sent
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
