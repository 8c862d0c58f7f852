//! The work queue's plumbing: claiming items, running them (what each action does is in
//! [`crate::actions`]) and settling the outcome through the extension's queue functions. A
//! crash anywhere loses nothing (the lease expires) and repeats nothing (complete_work is
//! idempotent, and only the holder of the lease can settle).
use crate::actions::{execute, extract_concepts, Outcome, WorkItem};
use crate::db::{Db, DbError};
use crate::Mind;
use uuid::Uuid;

/// What the dream channel is told of an extraction (`actions::extract_message` puts it beside
/// the result): the prompt, the metrics, and whose channel it is.
#[derive(Debug, serde::Deserialize)]
struct Mirrored {
    prompt: Option<String>,
    #[serde(default)]
    metrics: serde_json::Value,
    platform: Option<String>,
    owner: Option<String>,
}

const COLUMNS: &str = "id, action, params, heartbeat_id, lease_token";

fn item(r: &tokio_postgres::Row) -> WorkItem {
    WorkItem { id: r.get(0), action: r.get(1), params: r.get(2), heartbeat_id: r.get(3), lease: r.get(4) }
}

pub async fn claim(db: &Db, worker: &str, actions: Option<&[&str]>, max: i32, heartbeat: Option<Uuid>) -> Result<Vec<WorkItem>, DbError> {
    let actions: Option<Vec<String>> = actions.map(|a| a.iter().map(|s| s.to_string()).collect());
    let rows = db
        .query(&format!("SELECT {COLUMNS} FROM dionysus.claim_work($1, $2, $3, $4)"), &[&worker, &actions, &max, &heartbeat])
        .await?;
    Ok(rows.iter().map(item).collect())
}

pub async fn claim_item(db: &Db, id: Uuid, worker: &str) -> Result<Option<WorkItem>, DbError> {
    let rows = db.query(&format!("SELECT {COLUMNS} FROM dionysus.claim_work_item($1, $2)"), &[&id, &worker]).await?;
    Ok(rows.first().map(item))
}

/// Records the outcome. A completion the extension refuses (the model produced something
/// invalid, e.g. an over-long fact) fails the item with the extension's message. An item
/// whose lease this driver lost (55000: someone else holds it now) is left to its holder.
pub async fn settle(db: &Db, item: &WorkItem, outcome: Outcome) -> Result<&'static str, DbError> {
    let lease = item.lease;
    let r = match outcome {
        Outcome::Done(mut result) => {
            // What the dream channel is told of an extraction travels beside its result, not in it.
            let mirror = result.as_object_mut().and_then(|o| o.remove("mirror")).and_then(|m| serde_json::from_value::<Mirrored>(m).ok());
            match db.query("SELECT dionysus.complete_work($1, $2, $3)", &[&item.id, &result, &lease]).await {
                Ok(_) => {
                    tracing::info!(action = %item.action, id = %item.id, "work done");
                    if let (Some(m), "extract_message") = (mirror, item.action.as_str()) {
                        let sql = "SELECT to_jsonb(dionysus.mirror_record('extraction', $1, $2, $3, '{}', dionysus.person_key($4, $5)))";
                        if let Err(e) = db.json(sql, &[&item.id, &m.prompt, &m.metrics, &m.platform, &m.owner]).await {
                            tracing::warn!(id = %item.id, error = %e, "extraction not mirrored to the dream channel");
                        }
                    }
                    Ok("done")
                }
                Err(DbError::Sql { code, message }) if code != "55000" => {
                    // 42501: refused by policy (privacy, web trust): trying again would be refused again.
                    let retry = code != "42501";
                    tracing::warn!(action = %item.action, id = %item.id, %code, %message, retry, "result refused; failing the item");
                    db.query("SELECT dionysus.fail_work($1, $2, $3, $4)", &[&item.id, &format!("result refused: {message}"), &retry, &lease])
                        .await
                        .map(|_| "failed")
                }
                Err(e) => Err(e),
            }
        }
        Outcome::Fail(error, retry) => {
            tracing::warn!(action = %item.action, id = %item.id, %error, retry, "work failed");
            db.query("SELECT dionysus.fail_work($1, $2, $3, $4)", &[&item.id, &error, &retry, &lease])
                .await
                .map(|rows| if rows.first().map(|r| r.get::<_, String>(0)).as_deref() == Some("failed") { "failed" } else { "retry" })
        }
        Outcome::Release(reason, delay) => {
            tracing::info!(action = %item.action, id = %item.id, %reason, "work handed back");
            db.query("SELECT dionysus.release_work($1, $2, $3, $4)", &[&item.id, &reason, &delay, &lease]).await.map(|_| "released")
        }
    };
    match r {
        Err(DbError::Sql { code, message }) if code == "55000" => {
            tracing::info!(action = %item.action, id = %item.id, %message, "lease lost; the item is someone else's now");
            Ok("lost")
        }
        other => other,
    }
}

/// Claims and runs work until the queue (or the heartbeat's share of it) is empty.
/// Returns how many items were run (done or failed; one handed back untouched is not counted).
pub async fn drain(mind: &Mind, heartbeat: Option<Uuid>) -> usize {
    let mut n = 0;
    while !mind.shutdown.is_cancelled() {
        let claimed = match claim(&mind.work_db, &mind.config.worker_name, None, 1, heartbeat).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot claim work");
                break;
            }
        };
        let Some(first) = claimed.into_iter().next() else { break };
        // Concept extraction is batched: one model call for up to 10 memories.
        let batch = if first.action == "extract_concepts" {
            let more = claim(&mind.work_db, &mind.config.worker_name, Some(&[first.action.as_str()]), 9, heartbeat).await.unwrap_or_default();
            let mut b = vec![first];
            b.extend(more);
            b
        } else {
            vec![first]
        };
        let outcomes = guarded(mind, run_batch(mind, &batch)).await.unwrap_or_else(|| {
            batch.iter().map(|_| Outcome::Release("driver shutting down".into(), 0)).collect()
        });
        for (item, outcome) in batch.iter().zip(outcomes) {
            match settle(&mind.work_db, item, outcome).await {
                // Handed back untouched (another circle's concepts, a shutdown): not run yet.
                Ok("released") => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, id = %item.id, "cannot settle work (its lease will expire and hand it back)"),
            }
            n += 1;
        }
    }
    n
}

/// Runs `f`, but once shutdown starts gives it only the grace period.
pub async fn guarded<T>(mind: &Mind, f: impl std::future::Future<Output = T>) -> Option<T> {
    let grace = async {
        mind.shutdown.cancelled().await;
        tokio::time::sleep(mind.config.shutdown_grace).await;
    };
    tokio::select! {
        v = f => Some(v),
        _ = grace => None,
    }
}

async fn run_batch(mind: &Mind, batch: &[WorkItem]) -> Vec<Outcome> {
    if batch[0].action == "extract_concepts" {
        return extract_concepts(mind, batch).await;
    }
    vec![execute(mind, &batch[0]).await]
}
