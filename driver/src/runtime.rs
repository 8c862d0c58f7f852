//! Wiring: the channel's events feed the conversation, one task per channel; the extension's
//! NOTIFY channels wake the autonomous side (heartbeat, work, outbox) — there is no polling
//! loop. SIGTERM/SIGINT stop intake, let in-flight replies and work finish within the grace
//! period, and hand back the rest.
use crate::channel::{Event, Incoming};
use crate::conversation::{self, Handled};
use crate::db::{self, Wake};
use crate::{contact, heartbeat, outbox, work, Mind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// `note_reaction(...)`: whether the reaction was noted, and whether it answered a contact.
#[derive(Debug, serde::Deserialize)]
struct NotedReaction {
    noted: bool,
    answered_contact: Option<bool>,
}

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

/// Runs the driver until shutdown. A channel that ends (`run` with stdin at its end) leaves
/// heartbeats, work and the outbox running; one that closes (`chat` at the end of its input, a
/// Discord client that cannot start) has what was said answered, then the driver stops.
pub async fn run(mind: Arc<Mind>, observer: Option<Observer>) {
    // The configured time zones (`[time_zones]`) are the database's before anyone is contacted.
    crate::contact::apply_time_zones(&mind).await;
    let (events_tx, mut events) = mpsc::channel::<Event>(256);
    let (wake_tx, wake_rx) = mpsc::channel::<Wake>(256);
    let mut tasks = JoinSet::new();
    {
        let mind = mind.clone();
        tasks.spawn(async move { mind.channel.run(events_tx, mind.shutdown.clone()).await });
    }
    // The dream channel's mirror has a task of its own: nothing else ever waits on it.
    let (mirror_tx, mirror_rx) = mpsc::channel::<()>(1);
    let (listen_tx, mut listened) = mpsc::channel::<Wake>(256);
    tasks.spawn(db::listen(mind.config.database_url.clone(), listen_tx, mind.shutdown.clone()));
    {
        let (wake_tx, mirror_tx) = (wake_tx.clone(), mirror_tx.clone());
        tasks.spawn(async move {
            while let Some(w) = listened.recv().await {
                if w == Wake::Mirror {
                    let _ = mirror_tx.try_send(()); // one waiting wake-up is enough
                } else if wake_tx.send(w).await.is_err() {
                    return;
                }
            }
        });
    }
    tasks.spawn(crate::mirror::run(mind.clone(), mirror_rx));
    let autonomy = tokio::spawn(autonomy(mind.clone(), wake_rx));
    tracing::info!(platform = mind.channel.platform(), fast = %mind.fast.role.model, smart = %mind.smart.role.model, "dionysus is running");

    let mut conversations = Conversations::new(mind.clone(), observer);
    let mut listening = true;
    loop {
        let event = tokio::select! {
            e = events.recv(), if listening => e,
            _ = mind.shutdown.cancelled() => break,
        };
        match event {
            Some(Event::Message(m)) => conversations.take(m),
            // A reaction is noted by the extension (an answer to a contact, learned from); no
            // model, no reply. Only allowed people's reactions count.
            Some(Event::Reaction(r)) if mind.channel.allowed(&r.author_id) => {
                let mind = mind.clone();
                tokio::spawn(async move {
                    // 🗑️ on a message that carried feedback takes the feedback back; on anything
                    // else it is a reaction like any other.
                    if crate::alignment::is_wastebasket(&r.emoji) && crate::alignment::undo_by_reaction(&mind, &r).await {
                        tracing::info!("feedback taken back by 🗑️");
                        return;
                    }
                    let sql = "SELECT dionysus.note_reaction($1, $2, $3, $4)";
                    let platform = mind.channel.platform();
                    match mind.chat_db.one::<NotedReaction>(sql, &[&platform, &r.message_id, &r.author_id, &r.emoji]).await {
                        Ok(v) => tracing::info!(noted = v.noted, answered = ?v.answered_contact, "reaction"),
                        Err(e) => tracing::warn!(error = %e, "the reaction was not noted"),
                    }
                });
            }
            Some(Event::Reaction(_)) => {}
            // A press on a dream-channel card: answered off the conversation's path (a
            // stranger's press gets its private refusal there).
            Some(Event::Interaction(i)) => {
                let mind = mind.clone();
                tokio::spawn(async move { crate::mirror::on_interaction(&mind, &i).await });
            }
            Some(Event::Ready) => {
                let _ = wake_tx.send(Wake::Outbox).await;
                let _ = mirror_tx.try_send(());
            }
            Some(Event::Closed) => {
                conversations.close();
                tokio::select! {
                    _ = conversations.wait() => {}
                    _ = mind.shutdown.cancelled() => {}
                }
                break;
            }
            None => listening = false,
        }
    }
    mind.shutdown.cancel();
    // In-flight replies and work get the grace period (work::guarded cuts them off after it).
    let wait = mind.config.shutdown_grace + Duration::from_secs(5);
    let _ = tokio::time::timeout(wait, async {
        conversations.wait().await;
        let _ = autonomy.await;
    })
    .await;
    tasks.abort_all();
    tracing::info!("dionysus stopped");
}

/// A channel's task ends after this long without a message (the next one starts a new task).
const IDLE: Duration = Duration::from_secs(300);

/// The channels' inboxes, by channel id.
type Inboxes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Incoming>>>>;

/// The conversation, one task per channel: a channel's messages are handled one after another
/// in arrival order, different channels at the same time, so one slow reply holds up nobody
/// else. A task idle for [`IDLE`] ends, so there are only as many as channels recently active.
struct Conversations {
    mind: Arc<Mind>,
    observer: Option<Observer>,
    inboxes: Inboxes,
    tasks: JoinSet<()>,
}

impl Conversations {
    fn new(mind: Arc<Mind>, observer: Option<Observer>) -> Conversations {
        Conversations { mind, observer, inboxes: Inboxes::default(), tasks: JoinSet::new() }
    }

    /// Queues a message for its channel's task, starting the task if there is none.
    fn take(&mut self, m: Incoming) {
        while self.tasks.try_join_next().is_some() {}
        let mut inboxes = self.inboxes.lock().unwrap();
        let m = match inboxes.get(&m.channel_id) {
            Some(inbox) => match inbox.send(m) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => back, // its task died: a new one takes over
            },
            None => m,
        };
        let (inbox, messages) = mpsc::unbounded_channel();
        let channel_id = m.channel_id.clone();
        let _ = inbox.send(m);
        inboxes.insert(channel_id.clone(), inbox);
        let (mind, inboxes, observer) = (self.mind.clone(), self.inboxes.clone(), self.observer.clone());
        self.tasks.spawn(converse(mind, channel_id, messages, inboxes, observer));
    }

    /// No more messages: each task answers what it has, then ends.
    fn close(&self) {
        self.inboxes.lock().unwrap().clear();
    }

    async fn wait(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// One channel's conversation. After shutdown it takes no new message; the reply in flight
/// gets the grace period, and the extractions it started finish (or are handed back) as usual.
async fn converse(
    mind: Arc<Mind>,
    channel_id: String,
    mut messages: mpsc::UnboundedReceiver<Incoming>,
    inboxes: Inboxes,
    observer: Option<Observer>,
) {
    let mut extractions = JoinSet::new();
    loop {
        let next = tokio::select! {
            biased;
            _ = mind.shutdown.cancelled() => break,
            m = tokio::time::timeout(IDLE, messages.recv()) => m,
        };
        let m = match next {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(_idle) if retire(&inboxes, &channel_id, &messages) => break,
            Err(_idle) => continue,
        };
        match work::guarded(&mind, conversation::handle(&mind, m, &mut extractions)).await {
            Some(handled) => {
                if let Some(o) = &observer {
                    let _ = o.send(handled);
                }
            }
            None => {
                tracing::warn!(channel = %channel_id, "shutdown: a reply still in flight after the grace period was abandoned");
                break;
            }
        }
        while extractions.try_join_next().is_some() {}
    }
    while extractions.join_next().await.is_some() {}
}

/// Removes an idle channel's inbox, unless a message arrived meanwhile (the lock orders this
/// against [`Conversations::take`], so no message is left in an inbox nobody reads).
fn retire(inboxes: &Inboxes, channel_id: &str, messages: &mpsc::UnboundedReceiver<Incoming>) -> bool {
    let mut inboxes = inboxes.lock().unwrap();
    if !messages.is_empty() {
        return false;
    }
    inboxes.remove(channel_id);
    true
}

/// The autonomous side: one wake-up at a time, duplicates merged.
async fn autonomy(mind: Arc<Mind>, mut wakes: mpsc::Receiver<Wake>) {
    loop {
        let first = tokio::select! {
            w = wakes.recv() => w,
            _ = mind.shutdown.cancelled() => None,
        };
        let Some(first) = first else { return };
        let (mut heartbeat_due, mut work_waits, mut outbox_waits, mut contact_waits) = (false, false, false, false);
        let mut note = |w: Wake| match w {
            Wake::Heartbeat => heartbeat_due = true,
            Wake::Work => work_waits = true,
            Wake::Outbox => outbox_waits = true,
            Wake::Contact => contact_waits = true,
            Wake::Mirror => {} // routed to the mirror's task before it gets here
        };
        note(first);
        while let Ok(w) = wakes.try_recv() {
            note(w);
        }
        // Outbox first (a person waits on it), then the heartbeat, then the rest of the queue.
        if outbox_waits {
            outbox::deliver(&mind).await;
        }
        if contact_waits && !mind.shutdown.is_cancelled() {
            contact::decide_open(&mind).await;
        }
        if heartbeat_due && !mind.shutdown.is_cancelled() {
            match mind.work_db.one::<Option<bool>>("SELECT to_jsonb(dionysus.heartbeat_due())", &[]).await {
                Ok(Some(true)) => {
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
