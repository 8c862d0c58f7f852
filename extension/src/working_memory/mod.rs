//! Working memory (sql/025_working_memory.sql): a session's focus, open threads and the items
//! recall brought up, each with a relevance that fades by the turn. The organ is SQL over
//! working_memories and working_memory_items; this module holds its unit tests beside the
//! code, on the real extension.

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn one<T: pgrx::IntoDatum + pgrx::FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    /// A turn of Ada's in an open episode, and her working memory of it.
    fn session() -> (pgrx::Uuid, pgrx::Uuid) {
        let msg: pgrx::Uuid = one("SELECT (dionysus.log_message('test', 'w1', 'dm:ada', 'ada', 'Packing for Porto tonight.') ->> 'message_id')::uuid");
        let wm: pgrx::Uuid = one(&format!(
            "SELECT (dionysus_internal.working_memory_of('test:ada', dionysus_internal.turn_episode('{msg}', false))).id"
        ));
        (msg, wm)
    }

    /// Past the capacity the least relevant leave first, the older first among equals; below
    /// the floor an item leaves whatever the room; every eviction is counted.
    #[pg_test]
    fn the_least_relevant_leave_first_and_are_counted() {
        let (_, wm) = session();
        for (i, (relevance, turn)) in [(0.9, 1), (0.5, 1), (0.5, 2), (0.2, 3), (0.04, 3)].iter().enumerate() {
            Spi::run(&format!(
                "INSERT INTO dionysus.working_memory_items (working_memory_id, kind, memory_id, relevance, loaded_turn, last_turn) \
                 SELECT '{wm}', 'memory', dionysus.remember('item {i}', 'semantic'), {relevance}, {turn}, {turn}"
            ))
            .unwrap();
        }
        let kept = || -> String {
            one(&format!(
                "SELECT string_agg(m.content, ', ' ORDER BY m.content) FROM dionysus.working_memory_items i \
                   JOIN dionysus.memories m ON m.id = i.memory_id WHERE i.working_memory_id = '{wm}'"
            ))
        };
        // Room for all: only the one under the floor leaves.
        assert_eq!(one::<i32>(&format!("SELECT dionysus_internal.working_memory_evict('{wm}')")), 1);
        assert_eq!(kept(), "item 0, item 1, item 2, item 3");
        // Room for two: the most relevant, and of two equals the one a later turn brought up.
        Spi::run("UPDATE dionysus.heartbeat_config SET value = 2 WHERE key = 'working_memory_capacity'").unwrap();
        assert_eq!(one::<i32>(&format!("SELECT dionysus_internal.working_memory_evict('{wm}')")), 2);
        assert_eq!(kept(), "item 0, item 2");
        assert_eq!(one::<i32>(&format!("SELECT evicted FROM dionysus.working_memories WHERE id = '{wm}'")), 3);
        assert_eq!(one::<i32>(&format!("SELECT dionysus_internal.working_memory_evict('{wm}')")), 0);
    }

    /// A turn steps the working memory once: what recall found enters at its score squashed
    /// into [0, 1) (1 - e^-score) or refreshes what is there, everything else fades; the same turn asked again, or
    /// an older turn asked late, changes nothing.
    #[pg_test]
    fn a_turn_steps_once_and_fades_what_it_did_not_bring_up() {
        let (msg, wm) = session();
        let a: pgrx::Uuid = one("SELECT dionysus.remember('Lea lives in Porto', 'semantic')");
        let b: pgrx::Uuid = one("SELECT dionysus.remember('The flight leaves at nine', 'semantic')");
        let step = |found: String| {
            Spi::run(&format!(
                "SELECT dionysus_internal.working_memory_turn(m, '{found}', '{{}}', true) FROM dionysus.messages m WHERE m.id = '{msg}'"
            ))
            .unwrap()
        };
        step(format!(r#"[{{"id": "{a}", "score": 1.7}}, {{"id": "{b}", "score": 0.5, "fact": true}}]"#));
        let relevance = |id: pgrx::Uuid| one::<f64>(&format!("SELECT relevance FROM dionysus.working_memory_items WHERE memory_id = '{id}'"));
        let (ra, rb) = (1.0 - (-1.7f64).exp(), 1.0 - (-0.5f64).exp());
        assert!((relevance(a) - ra).abs() < 1e-9 && (relevance(b) - rb).abs() < 1e-9, "{} {}", relevance(a), relevance(b));
        assert_eq!(one::<String>(&format!("SELECT kind FROM dionysus.working_memory_items WHERE memory_id = '{b}'")), "fact");
        step(format!(r#"[{{"id": "{a}", "score": 0.1}}]"#));
        assert_eq!(one::<i32>(&format!("SELECT turns FROM dionysus.working_memories WHERE id = '{wm}'")), 1, "a retry stepped it");
        assert!((relevance(a) - ra).abs() < 1e-9);
        // The next turn (a minute later: one transaction has one now()): a refreshed at its
        // best, b faded by 0.8.
        let next: pgrx::Uuid = one("SELECT (dionysus.log_message('test', 'w2', 'dm:ada', 'ada', 'And the tickets?') ->> 'message_id')::uuid");
        Spi::run(&format!(
            "ALTER TABLE dionysus.messages DISABLE TRIGGER messages_immutable; \
             UPDATE dionysus.messages SET created_at = created_at + interval '1 minute' WHERE id = '{next}'; \
             ALTER TABLE dionysus.messages ENABLE TRIGGER messages_immutable"
        ))
        .unwrap();
        Spi::run(&format!(
            "SELECT dionysus_internal.working_memory_turn(m, '[{{\"id\": \"{a}\", \"score\": 0.3}}]', '{{}}', true) FROM dionysus.messages m WHERE m.id = '{next}'"
        ))
        .unwrap();
        assert!((relevance(a) - ra * 0.8).abs() < 1e-9 && (relevance(b) - rb * 0.8).abs() < 1e-9, "{} {}", relevance(a), relevance(b));
        assert_eq!(one::<i32>(&format!("SELECT uses FROM dionysus.working_memory_items WHERE memory_id = '{a}'")), 2);
        step(format!(r#"[{{"id": "{b}", "score": 0.9}}]"#));
        assert_eq!(one::<i32>(&format!("SELECT turns FROM dionysus.working_memories WHERE id = '{wm}'")), 2, "an older turn asked late stepped it");
        assert_eq!(one::<String>("SELECT dionysus_internal.thread_key('  The move -- to PORTO!! ')"), "the move to porto");
    }

    /// A thread embedded by another model (before a re-index, of another width) is still closed
    /// by meaning: embedded again on the fly, never compared across models.
    #[pg_test]
    fn a_thread_from_before_a_reindex_closes_by_meaning() {
        let (msg, _) = session();
        Spi::run(
            "INSERT INTO dionysus.open_threads (person, content, thread_key, embedding, model_key, source) \
             VALUES ('test:ada', 'The job interview at Acme on Friday', 'the job interview at acme on friday', '[1,0,0]', 'an-old-model', \
                     'conversation:test:dm:ada')",
        )
        .unwrap();
        let done: pgrx::JsonB = one(&format!(
            "SELECT dionysus_internal.store_working_focus('test:ada', '{msg}', NULL, '{{\"closed\": [\"the Acme job interview on Friday\"]}}')"
        ));
        assert_eq!(done.0["closed"].as_array().map(Vec::len), Some(1), "{}", done.0);
        assert_eq!(one::<String>("SELECT status FROM dionysus.open_threads"), "closed");
    }
}
