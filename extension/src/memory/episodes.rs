//! Episodes: episodic memories of one source, grouped until a gap of more than
//! `dionysus.episode_gap_minutes` (default 30), or opened and closed explicitly. A memory
//! private to one person joins that person's episode of its source (see [`episode_person`]).
//!
//! Writers of one source serialise on a transaction-scoped advisory lock keyed by the source;
//! writers of different sources never wait on each other.
use super::validate;
use crate::errors;
use crate::settings::EPISODE_GAP_MINUTES;
use crate::spi_util::{first_or_none, select_prepared, write_prepared};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::Uuid;

pub const DEFAULT_SOURCE: &str = "default";
/// Members within this many positions are temporal neighbours (three either side, as the design has it).
pub const TEMPORAL_SPAN: i32 = 3;

pub fn lock_source(source: &str) {
    select_prepared(
        "SELECT pg_advisory_xact_lock(hashtextextended('dionysus.episode:' || $1, 0))",
        &[source.into()],
        |_| Some(()),
    );
}

/// Whose episode a memory joins: the one person it is private to, so that two people's words
/// never share an episode (nor its summary's prompt) because their sources share a name (two
/// MCP clients called alike, the default source). A conversation's channel is the exception:
/// its people share it, and its episode is theirs together. None: the source's shared episode.
pub fn episode_person<'a>(source: &str, private_to: Option<&'a [String]>) -> Option<&'a str> {
    match private_to {
        Some([one]) if !source.starts_with("conversation:") => Some(one.as_str()),
        _ => None,
    }
}

/// The condition on an episode's person, as parameter `$n`.
fn whose(n: u8) -> String {
    format!("person IS NOT DISTINCT FROM ${n}")
}

/// Adds an episodic memory to its source's open episode (its person's, [`episode_person`]),
/// opening a new one after a gap. Returns the members within [`TEMPORAL_SPAN`] positions before
/// it (their neighborhoods change).
pub fn assign(memory_id: Uuid, source: Option<&str>, private_to: Option<&[String]>, at: TimestampWithTimeZone) -> Vec<Uuid> {
    let source = source.unwrap_or(DEFAULT_SOURCE);
    let person = episode_person(source, private_to);
    lock_source(source);
    let gap_minutes = EPISODE_GAP_MINUTES.get();
    // The open episode, if the memory falls within the gap (or the episode is explicit).
    let open: Option<Uuid> = select_prepared(
        &format!(
            "SELECT id FROM dionysus.episodes \
             WHERE source = $1 AND {} AND ended_at IS NULL \
               AND (explicit OR $2 - last_event_at <= make_interval(mins => $3))",
            whose(4)
        ),
        &[source.into(), at.into(), gap_minutes.into(), person.into()],
        |t| t.get::<Uuid>(1).ok()?,
    )
    .pop();
    let episode = match open {
        Some(id) => id,
        None => {
            // Close the stale one at its last event, then start afresh at this memory.
            Spi::run_with_args(
                &format!(
                    "UPDATE dionysus.episodes SET ended_at = greatest(last_event_at, started_at) \
                     WHERE source = $1 AND {} AND ended_at IS NULL",
                    whose(2)
                ),
                &[source.into(), person.into()],
            )
            .expect("close episode");
            Spi::get_one_with_args::<Uuid>(
                "INSERT INTO dionysus.episodes (source, person, started_at, last_event_at) VALUES ($1, $3, $2, $2) RETURNING id",
                &[source.into(), at.into(), person.into()],
            )
            .expect("open episode")
            .expect("new episode id")
        }
    };
    let seq = write_prepared(
        "UPDATE dionysus.episodes SET memory_count = memory_count + 1, \
                last_event_at = greatest(last_event_at, $2), started_at = least(started_at, $2) \
         WHERE id = $1 RETURNING (SELECT coalesce(max(sequence_order), 0) + 1 \
                                  FROM dionysus.episode_memories WHERE episode_id = $1)",
        &[episode.into(), at.into()],
        |t| t.get::<i32>(1).ok()?,
    )
    .pop()
    .expect("sequence");
    write_prepared(
        "INSERT INTO dionysus.episode_memories (episode_id, memory_id, sequence_order) VALUES ($1, $2, $3)",
        &[episode.into(), memory_id.into(), seq.into()],
        |_| Some(()),
    );
    select_prepared(
        "SELECT memory_id FROM dionysus.episode_memories \
         WHERE episode_id = $1 AND sequence_order >= $2 - $3 AND sequence_order < $2",
        &[episode.into(), seq.into(), TEMPORAL_SPAN.into()],
        |t| t.get::<Uuid>(1).ok()?,
    )
}

/// Opens an episode for a source explicitly, closing the one open before. Episodic memories
/// of that source join it until `close_episode`, whatever the gap (those of its shared episode:
/// a memory private to one person joins that person's own, [`episode_person`]).
#[pg_extern(volatile, parallel_unsafe)]
fn open_episode(
    source: default!(Option<&str>, "'default'"),
    title: default!(Option<&str>, "NULL"),
    started_at: default!(Option<TimestampWithTimeZone>, "NULL"),
) -> Uuid {
    let source = validate::required_name("source", source);
    let title = validate::optional_text("title", title);
    let started_at = validate::timestamp("started_at", started_at);
    lock_source(&source);
    Spi::run_with_args(
        &format!(
            "UPDATE dionysus.episodes SET ended_at = greatest(last_event_at, started_at) \
             WHERE source = $1 AND {} AND ended_at IS NULL",
            whose(2)
        ),
        &[source.clone().into(), None::<&str>.into()],
    )
    .expect("close previous episode");
    Spi::get_one_with_args::<Uuid>(
        "INSERT INTO dionysus.episodes (source, title, started_at, last_event_at, explicit) \
         VALUES ($1, $2, coalesce($3, now()), coalesce($3, now()), true) RETURNING id",
        &[source.into(), title.into(), started_at.into()],
    )
    .expect("open episode")
    .expect("episode id")
}

/// Closes an episode (at its last event, or at `ended_at`). Closing a closed one is an error.
#[pg_extern(volatile, parallel_unsafe)]
fn close_episode(episode_id: Option<Uuid>, ended_at: default!(Option<TimestampWithTimeZone>, "NULL")) -> bool {
    let Some(id) = episode_id else { errors::null_arg("episode_id") };
    let ended_at = validate::timestamp("ended_at", ended_at);
    let state = first_or_none::<bool>("SELECT ended_at IS NULL FROM dionysus.episodes WHERE id = $1", &[id.into()]);
    match state {
        None => errors::not_found("episode_id", "episode", id),
        Some(false) => errors::invalid_arg("episode_id", format!("episode {id} is already closed")),
        Some(true) => {}
    }
    Spi::run_with_args(
        "UPDATE dionysus.episodes SET ended_at = greatest(coalesce($2, last_event_at), started_at) WHERE id = $1",
        &[id.into(), ended_at.into()],
    )
    .expect("close episode");
    true
}
