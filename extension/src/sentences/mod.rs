//! Sentence vectors (sql/029_sentences.sql): a memory of several sentences gets a vector for
//! each, made by the maintenance pass, and recall raises a memory's vector score towards its
//! closest sentence's (`sentence_share`): the answer said in one sentence of a long turn is not
//! lost in the greeting around it.
use crate::spi_util::{select_prepared, vector_type, write_prepared};
use pgrx::Uuid;

/// Most vectors one memory gets: a longer text's sentences go in this many runs of consecutive
/// sentences (an imported page is sixteen embeddings, not a hundred).
pub const MAX_PER_MEMORY: usize = 16;
/// Fewest words a sentence needs to count on its own ("Wow!", "Thanks, Mel!" belong to the whole).
const MIN_WORDS: usize = 3;
/// Memories one `run_maintenance()` call embeds at most (each up to sixteen sentences, all in
/// one request to an HTTP provider).
pub const MAINTENANCE_CALL_LIMIT: i64 = 16;
/// The longest a failed batch waits before it is tried again.
const MAX_BACKOFF_SECONDS: i64 = 3600;

/// The parts of a memory's text that get vectors of their own: its "Name: " label set aside (it
/// says who spoke, as recall's person component reads it), split after '.', '!' or '?' and
/// whitespace, those of three words or more; none when fewer than two are left (the whole
/// text's vector is then its sentence's).
pub fn split(content: &str) -> Vec<String> {
    let body = match content.split_once(": ") {
        Some((label, body))
            if label.chars().count() <= 40 && !label.contains(['.', '!', '?', ',', '\n']) && !body.trim().is_empty() =>
        {
            body
        }
        _ => content,
    };
    let mut sentences = Vec::new();
    let mut start = 0;
    let mut previous = ' ';
    for (i, c) in body.char_indices() {
        if c.is_whitespace() && matches!(previous, '.' | '!' | '?') {
            sentences.push(&body[start..i]);
            start = i;
        }
        previous = c;
    }
    sentences.push(&body[start..]);
    let kept: Vec<&str> = sentences.into_iter().map(str::trim).filter(|s| s.split_whitespace().count() >= MIN_WORDS).collect();
    if kept.len() < 2 {
        return Vec::new();
    }
    let per = kept.len().div_ceil(MAX_PER_MEMORY);
    kept.chunks(per).map(|run| run.join(" ")).collect()
}

/// How many sentences `content` has for `memories.sentence_count`: 1 when it gets no vectors of
/// its own (its whole vector is its sentence's).
pub fn count(content: &str) -> i16 {
    split(content).len().max(1) as i16
}

/// Queues a new memory of several sentences for the maintenance pass.
pub fn enqueue(id: Uuid) {
    write_prepared(
        "INSERT INTO dionysus.sentence_queue (memory_id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[id.into()],
        |_| Some(()),
    );
}

/// Embeds the sentences of up to `batch` queued memories that are due, oldest first, in one
/// batch of embeddings; returns how many were taken. A queue row another pass holds, or a
/// memory another transaction is forgetting, is skipped (never waited for); the memory's own
/// row is only read. A batch that fails waits with back-off, and its memories are tried one at
/// a time next (`attempts` > 0), so one text a provider refuses holds up no other.
pub fn step(batch: i64) -> i64 {
    let queued: Vec<(Uuid, String, i32)> = write_prepared(
        "SELECT q.memory_id, m.content, q.attempts FROM dionysus.sentence_queue q JOIN dionysus.memories m ON m.id = q.memory_id \
         WHERE q.not_before <= now() ORDER BY q.attempts > 0, q.queued_at, q.memory_id LIMIT $1 \
         FOR UPDATE OF q SKIP LOCKED FOR KEY SHARE OF m SKIP LOCKED",
        &[batch.into()],
        |t| Some((t.get::<Uuid>(1).ok()??, t.get::<String>(2).ok()??, t.get::<i32>(3).ok()??)),
    );
    // A memory that failed before goes alone.
    let queued: Vec<(Uuid, String, i32)> = match queued.iter().position(|q| q.2 > 0) {
        Some(0) => queued.into_iter().take(1).collect(),
        Some(first_failed) => queued.into_iter().take(first_failed).collect(),
        None => queued,
    };
    if queued.is_empty() {
        return 0;
    }
    let ids: Vec<Uuid> = queued.iter().map(|q| q.0).collect();
    let embedded = crate::spi_util::in_subtransaction(|| {
        let parts: Vec<Vec<String>> = queued.iter().map(|(_, content, _)| split(content)).collect();
        let texts: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
        // The store's model, as every other vector (embed::compute waits for a re-index swap).
        let vectors = crate::embed::compute(&texts);
        let (mut of, mut ords, mut literals) = (Vec::new(), Vec::new(), Vec::new());
        let mut vectors = vectors.iter();
        for (id, sentences) in ids.iter().zip(&parts) {
            for ord in 1..=sentences.len() {
                of.push(*id);
                ords.push(ord as i16);
                literals.push(crate::embed::vector_literal(vectors.next().expect("a vector per sentence")));
            }
        }
        // (Vectors of an earlier text of the same memory, if any, are replaced.)
        write_prepared("DELETE FROM dionysus.memory_sentences WHERE memory_id = ANY($1)", &[ids.clone().into()], |_| Some(()));
        if !of.is_empty() {
            write_prepared(
                &format!(
                    "INSERT INTO dionysus.memory_sentences (memory_id, ord, embedding) \
                     SELECT i, o, v::{} FROM unnest($1::uuid[], $2::int2[], $3::text[]) AS u(i, o, v)",
                    vector_type()
                ),
                &[of.into(), ords.into(), literals.into()],
                |_| Some(()),
            );
        }
    });
    match embedded {
        Ok(()) => {
            write_prepared("DELETE FROM dionysus.sentence_queue WHERE memory_id = ANY($1)", &[ids.into()], |_| Some(()));
        }
        Err(e) => {
            write_prepared(
                "UPDATE dionysus.sentence_queue SET attempts = attempts + 1, last_error = left($2, 500), \
                        not_before = now() + make_interval(secs => least(power(2, least(attempts, 12)) * 5, $3)) \
                  WHERE memory_id = ANY($1)",
                &[ids.into(), e.into(), (MAX_BACKOFF_SECONDS as f64).into()],
                |_| Some(()),
            );
        }
    }
    queued.len() as i64
}

/// How many memories wait for their sentence vectors now (not those waiting after a failure).
pub fn pending() -> i64 {
    select_prepared("SELECT count(*) FROM dionysus.sentence_queue WHERE not_before <= now()", &[], |t| t.get::<i64>(1).ok()?)
        .pop()
        .unwrap_or(0)
}

/// The cosine of each memory's closest sentence to `query` (a vector of the store's model), for
/// the memories among `ids` that have sentence vectors: a few index lookups each, the query
/// vector cast once.
pub fn closest(query: &[f32], ids: Vec<Uuid>) -> Vec<(Uuid, f64)> {
    if ids.is_empty() {
        return Vec::new();
    }
    select_prepared(
        &format!(
            "SELECT u.id, (SELECT max(1 - (s.embedding {op} $1)) FROM dionysus.memory_sentences s \
                            WHERE s.memory_id = u.id AND vector_dims(s.embedding) = {dims})::float8 \
             FROM unnest($2::uuid[]) AS u(id)",
            op = crate::spi_util::cosine_op(),
            dims = query.len()
        ),
        &[crate::spi_util::vector_arg(query), ids.into()],
        |t| Some((t.get::<Uuid>(1).ok()??, t.get::<f64>(2).ok()??)),
    )
}

/// The SQL surface nobody calls directly.
#[pgrx::pg_schema]
mod dionysus_internal {
    use pgrx::prelude::*;

    /// memories.sentence_count of a text (for the trigger that follows a changed text, 029).
    #[pg_extern(immutable, parallel_safe)]
    fn sentence_count(content: &str) -> i16 {
        super::count(content)
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::split;
    use pgrx::prelude::*;

    #[pg_test]
    fn a_turn_is_split_into_its_sentences_without_its_label() {
        assert_eq!(
            split("Caroline: Hey Mel! Thanks so much for the card, it made my week. Last weekend I joined a mentorship program."),
            vec!["Thanks so much for the card, it made my week.", "Last weekend I joined a mentorship program."]
        );
        // One sentence, or one with chatter around it: the whole text's vector is enough.
        assert!(split("Melanie: I went camping with the kids in the mountains.").is_empty());
        assert!(split("Wow! Great. I painted a sunset over the lake last week.").is_empty());
        // A colon that is no label ("Note, the plan: ...") stays in the text.
        assert_eq!(split("Note, the plan: buy the tickets today. Then pack the bags tonight.").len(), 2);
        // "e.g. this" is no sentence end without the whitespace; "?!" is.
        assert_eq!(split("Did you really see it?! I saw the comet e.g.tonight with my own eyes.").len(), 2);
    }

    #[pg_test]
    fn a_memory_is_counted_when_written_and_again_when_its_text_changes() {
        let id = Spi::get_one::<pgrx::Uuid>(
            "SELECT dionysus.remember('The boiler is serviced every October. The plumber comes on a Tuesday morning. He always brings his own tools.')",
        )
        .unwrap()
        .unwrap();
        let state = || {
            Spi::get_three_with_args::<i16, i64, bool>(
                "SELECT sentence_count, (SELECT count(*) FROM dionysus.memory_sentences WHERE memory_id = $1), \
                        EXISTS (SELECT 1 FROM dionysus.sentence_queue WHERE memory_id = $1) \
                 FROM dionysus.memories WHERE id = $1",
                &[id.into()],
            )
            .unwrap()
        };
        assert_eq!(state(), (Some(3), Some(0), Some(true)), "counted and queued, no vectors yet");
        // As the driver's role, as run_maintenance() in its name on a server without the worker.
        Spi::run("SET LOCAL ROLE dionysus_driver").unwrap();
        assert_eq!(super::step(10), 1);
        Spi::run("RESET ROLE").unwrap();
        assert_eq!(state(), (Some(3), Some(3), Some(false)), "three vectors, dequeued");
        // A compressed text (decay's): one sentence, no vectors of its own.
        Spi::run_with_args("UPDATE dionysus.memories SET content = 'The boiler is serviced every October.' WHERE id = $1", &[id.into()]).unwrap();
        assert_eq!(state(), (Some(1), Some(0), Some(false)));
        Spi::run_with_args(
            "UPDATE dionysus.memories SET content = 'The boiler is serviced in October. The plumber brings tools.' WHERE id = $1",
            &[id.into()],
        )
        .unwrap();
        assert_eq!(state(), (Some(2), Some(0), Some(true)), "two sentences, queued again");
    }

    #[pg_test]
    fn a_long_text_gets_at_most_sixteen_vectors_of_consecutive_sentences() {
        let text: String = (1..=40).map(|i| format!("This is sentence number {i}. ")).collect();
        let parts = split(&text);
        assert_eq!(parts.len(), 14, "40 sentences in runs of 3");
        assert!(parts[0].starts_with("This is sentence number 1.") && parts[0].ends_with("number 3."), "{}", parts[0]);
        assert!(parts[13].ends_with("number 40."), "{}", parts[13]);
    }
}
