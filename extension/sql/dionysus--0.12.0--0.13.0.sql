-- Dionysus 0.12.0 → 0.13.0: the gap rule never waits on a writer. enqueue_language_work (the
-- scheduler's step and the maintenance pass) closed every episode left open past the gap in one
-- UPDATE, waiting for any episode row a writer held; a remember_batch appending to several
-- sources' episodes holds their rows in its own order, so the two could each hold one and wait
-- for the other (40P01). It now skips an episode another transaction holds (FOR UPDATE SKIP
-- LOCKED), which its writer or the next pass closes. Nothing else changes; every row is kept.

CREATE OR REPLACE FUNCTION enqueue_language_work() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    k integer;
    attempts integer := dionysus_internal.heartbeat_setting('work_max_attempts')::int;
BEGIN
    -- An episode a writer holds is left for the next pass (SKIP LOCKED): a batch that appends to
    -- several sources' episodes holds their rows, and waiting here for one while holding another
    -- was a deadlock (40P01, found by a 100k fill beside the scheduler).
    UPDATE dionysus.episodes SET ended_at = greatest(last_event_at, started_at)
     WHERE id IN (SELECT x.id FROM dionysus.episodes x
                   WHERE x.ended_at IS NULL AND NOT x.explicit
                     AND x.last_event_at < now() - make_interval(mins => coalesce((SELECT setting::int FROM pg_settings WHERE name = 'dionysus.episode_gap_minutes'), 30))
                   ORDER BY x.id FOR UPDATE SKIP LOCKED);
    -- Five lived episodes a pass; twenty of an import's (018: source 'imported:…') besides, at
    -- background priority, so a long history is summarised without holding up the present.
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts, priority)
    SELECT 'summarize_episode:' || e.id, 'summarize_episode', jsonb_build_object('episode_id', e.id), attempts, e.priority
      FROM (SELECT x.id, x.ended_at, CASE WHEN x.source LIKE 'imported:%' THEN -1 ELSE 0 END AS priority,
                   row_number() OVER (PARTITION BY x.source LIKE 'imported:%' ORDER BY x.ended_at) AS rank
              FROM dionysus.episodes x
             WHERE x.ended_at IS NOT NULL AND x.summary IS NULL AND x.memory_count > 0
               AND x.ended_at < now() - make_interval(secs => dionysus_internal.heartbeat_setting('summary_delay_minutes') * 60)
               AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'summarize_episode:' || x.id)) e
     WHERE e.rank <= CASE WHEN e.priority < 0 THEN 20 ELSE 5 END
     ORDER BY e.ended_at
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    n := n + k;
    INSERT INTO dionysus.work_queue (idempotency_key, action, params, max_attempts)
    SELECT 'extract_concepts:' || m.id, 'extract_concepts', jsonb_build_object('memory_id', m.id), attempts
      FROM dionysus.memories m
     WHERE m.created_at > now() - make_interval(secs => dionysus_internal.heartbeat_setting('concept_window_hours') * 3600)
       AND m.status = 'active'
       AND NOT EXISTS (SELECT 1 FROM dionysus.memory_concepts mc WHERE mc.memory_id = m.id)
       AND NOT EXISTS (SELECT 1 FROM dionysus.work_queue q WHERE q.idempotency_key = 'extract_concepts:' || m.id)
     ORDER BY m.created_at LIMIT 10
    ON CONFLICT (idempotency_key) DO NOTHING;
    GET DIAGNOSTICS k = ROW_COUNT;
    n := n + k;
    -- The detail levels of long memories (027), ahead of the contexts that need them.
    n := n + dionysus_internal.enqueue_condense_levels();
    -- The nightly dream (017), once a local date, after dream_hour.
    IF dionysus_internal.schedule_dream() THEN
        n := n + 1;
    END IF;
    IF n > 0 THEN
        PERFORM pg_notify('dionysus_work', jsonb_build_object('queued', n)::text);
    END IF;
    RETURN n;
END $$;
