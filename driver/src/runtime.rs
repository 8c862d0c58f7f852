//! Wiring: the channel's events feed the conversation; the extension's NOTIFY channels wake
//! the autonomous side (heartbeat, work, outbox) — there is no polling loop. SIGTERM/SIGINT
//! stop intake, let in-flight work finish within the grace period, and hand back the rest.
use crate::channel::Event;
use crate::conversation::{self, Handled};
use crate::db::{self, Wake};
use crate::{heartbeat, outbox, work, Mind};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// What the conversation reports per message (the tests and the benchmark listen to it).
pub type Observer = mpsc::UnboundedSender<Handled>;

pub fn on_signals(mind: &Arc<Mind>) {
    let token = mind.shutdown.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else { return };
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::info!("shutting down: finishing in-flight work");
        token.cancel();
    });
}

/// Runs the driver until shutdown (or until the channel closes).
pub async fn run(mind: Arc<Mind>, observer: Option<Observer>) {
    let (events_tx, mut events) = mpsc::channel::<Event>(256);
    let (wake_tx, wake_rx) = mpsc::channel::<Wake>(256);
    let mut tasks = JoinSet::new();
    {
        let mind = mind.clone();
        tasks.spawn(async move { mind.channel.run(events_tx, mind.shutdown.clone()).await });
    }
    tasks.spawn(db::listen(mind.config.database_url.clone(), wake_tx.clone(), mind.shutdown.clone()));
    let autonomy = tokio::spawn(autonomy(mind.clone(), wake_rx));
    tracing::info!(platform = mind.channel.platform(), fast = %mind.fast.role.model, smart = %mind.smart.role.model, "dionysus is running");

    let mut extractions = JoinSet::new();
    loop {
        let event = tokio::select! {
            e = events.recv() => e,
            _ = mind.shutdown.cancelled() => None,
        };
        match event {
            Some(Event::Message(m)) => {
                let handled = conversation::handle(&mind, m, &mut extractions).await;
                if let Some(o) = &observer {
                    let _ = o.send(handled);
                }
            }
            Some(Event::Ready) => {
                let _ = wake_tx.send(Wake::Outbox).await;
            }
            Some(Event::Closed) | None => break,
        }
        while extractions.try_join_next().is_some() {}
    }
    mind.shutdown.cancel();
    // In-flight work gets the grace period (work::guarded hands it back after that).
    let wait = mind.config.shutdown_grace + std::time::Duration::from_secs(5);
    let _ = tokio::time::timeout(wait, async {
        while extractions.join_next().await.is_some() {}
        let _ = autonomy.await;
    })
    .await;
    tasks.abort_all();
    tracing::info!("dionysus stopped");
}

/// The autonomous side: one wake-up at a time, duplicates merged.
async fn autonomy(mind: Arc<Mind>, mut wakes: mpsc::Receiver<Wake>) {
    loop {
        let first = tokio::select! {
            w = wakes.recv() => w,
            _ = mind.shutdown.cancelled() => None,
        };
        let Some(first) = first else { return };
        let (mut heartbeat_due, mut work_waits, mut outbox_waits) = (false, false, false);
        let mut note = |w: Wake| match w {
            Wake::Heartbeat => heartbeat_due = true,
            Wake::Work => work_waits = true,
            Wake::Outbox => outbox_waits = true,
        };
        note(first);
        while let Ok(w) = wakes.try_recv() {
            note(w);
        }
        // Outbox first (a person waits on it), then the heartbeat, then the rest of the queue.
        if outbox_waits {
            outbox::deliver(&mind).await;
        }
        if heartbeat_due && !mind.shutdown.is_cancelled() {
            match mind.work_db.json("SELECT to_jsonb(dionysus.heartbeat_due())", &[]).await {
                Ok(serde_json::Value::Bool(true)) => {
                    if let Err(e) = heartbeat::run_once(&mind).await {
                        tracing::error!(error = %e, "heartbeat failed; the scheduler will recover it");
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot check whether a heartbeat is due"),
            }
        }
        if work_waits && !mind.shutdown.is_cancelled() {
            work::drain(&mind, None).await;
        }
    }
}
