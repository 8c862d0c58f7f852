-- Retention and size: what only records the past is pruned after retention_days; the
-- heartbeat's health view shows the tables' sizes.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Retention: what only records the past is pruned after retention_days (default 90) by the
-- maintenance pass, a bounded batch per table per pass. The message log is never pruned
-- (it is what everything else can be rebuilt from), and neither are memories.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION prune_history(batch integer DEFAULT 10000) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => dionysus_internal.heartbeat_setting('retention_days') * 86400);
    pruned jsonb := '{}'::jsonb;
    n integer;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 1000000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "batch": % is outside [1, 1000000]', batch USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM dionysus.energy_ledger WHERE id IN (SELECT id FROM dionysus.energy_ledger WHERE at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('energy_ledger', n);
    DELETE FROM dionysus.work_queue WHERE id IN (SELECT id FROM dionysus.work_queue WHERE status IN ('done', 'failed')
                                                   AND coalesce(completed_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('work_queue', n);
    DELETE FROM dionysus.outbox WHERE id IN (SELECT id FROM dionysus.outbox WHERE status IN ('sent', 'failed')
                                               AND coalesce(sent_at, created_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('outbox', n);
    DELETE FROM dionysus.heartbeat_log WHERE id IN (SELECT id FROM dionysus.heartbeat_log WHERE status IN ('finished', 'recovered')
                                                      AND coalesce(ended_at, started_at) < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('heartbeat_log', n);
    DELETE FROM dionysus.memory_access_log WHERE ctid IN (SELECT ctid FROM dionysus.memory_access_log WHERE accessed_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('memory_access_log', n);
    DELETE FROM dionysus.embedding_cache WHERE (model, content_hash) IN
        (SELECT model, content_hash FROM dionysus.embedding_cache WHERE created_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('embedding_cache', n);
    -- The proactive mind's past: handled events, and evaluations (by the clock it ran on).
    DELETE FROM dionysus.events WHERE id IN (SELECT id FROM dionysus.events WHERE status NOT IN ('queued', 'scheduled')
                                               AND at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('events', n);
    DELETE FROM dionysus.contact_evaluations WHERE id IN (SELECT id FROM dionysus.contact_evaluations
                                                            WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('contact_evaluations', n);
    DELETE FROM dionysus.rule_firings WHERE id IN (SELECT id FROM dionysus.rule_firings
                                                     WHERE at < dionysus.clock_now() - (now() - cutoff) LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('rule_firings', n);
    -- What the grounding check refused (032): it explains recent refusals, and holds a model's
    -- words about someone, so it goes with the rest of the past.
    DELETE FROM dionysus.model_text_refusals WHERE id IN (SELECT id FROM dionysus.model_text_refusals
                                                            WHERE refused_at < cutoff LIMIT batch);
    GET DIAGNOSTICS n = ROW_COUNT; pruned := pruned || jsonb_build_object('model_text_refusals', n);
    RETURN pruned;
END $$;
COMMENT ON FUNCTION prune_history(integer) IS
    'Retention: deletes, at most batch rows per table, ledger entries, finished heartbeats, finished work, sent messages of the outbox, '
    'access-log rows, cache entries, handled events, contact evaluations, rule firings and the grounding check''s refusals older than '
    'heartbeat_config.retention_days (90). Never the message log or memories. '
    'The maintenance pass calls it; returns the counts.';

-- Sizes of the tables that grow, in bytes (with their indexes and TOAST).
CREATE FUNCTION dionysus_internal.table_bytes(tables text[]) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT jsonb_object_agg(t, pg_total_relation_size(('dionysus.' || quote_ident(t))::regclass) ORDER BY t) FROM unnest(tables) t
$$;
COMMENT ON FUNCTION dionysus_internal.table_bytes(text[]) IS 'Total sizes (with indexes and TOAST) of the named dionysus tables, in bytes.';

-- Appendix A, plus the queue, the outbox and the warnings.
CREATE VIEW heartbeat_health AS
SELECT
    s.heartbeat_count                                                       AS total_heartbeats,
    s.current_energy,
    s.last_heartbeat_at                                                     AS last_heartbeat,
    s.next_heartbeat_at                                                     AS next_heartbeat,
    s.in_flight,
    s.paused,
    s.session_active,
    (SELECT count(*) FROM goals WHERE priority = 'active')                  AS active_goals,
    (SELECT count(*) FROM goals WHERE priority = 'queued')                  AS queued_goals,
    (SELECT avg(energy_end - energy_start) FROM heartbeat_log
      WHERE started_at > now() - interval '24 hours')                       AS avg_energy_delta_24h,
    (SELECT count(*) FROM heartbeat_log h, jsonb_array_elements(h.actions_taken) a
      WHERE h.started_at > now() - interval '24 hours' AND a ->> 'action' = 'reach_out_user') AS reach_outs_24h,
    (SELECT count(*) FROM work_queue WHERE status IN ('pending', 'claimed')) AS queue_depth,
    (SELECT now() - min(created_at) FROM work_queue WHERE status = 'pending') AS oldest_pending_work,
    (SELECT count(*) FROM work_queue WHERE status = 'failed')               AS failed_work,
    (SELECT count(*) FROM outbox WHERE status = 'pending')                  AS outbox_backlog,
    (SELECT count(*) FROM outbox WHERE status = 'pending' AND requires_approval AND approved_at IS NULL) AS awaiting_approval,
    sc.last_tick_at                                                         AS last_scheduler_tick,
    sc.last_error                                                           AS last_scheduler_error,
    heartbeat_warnings()                                                    AS warnings,
    dionysus_internal.table_bytes(ARRAY['heartbeat_log', 'energy_ledger', 'work_queue', 'outbox', 'messages']) AS table_bytes
FROM heartbeat_state s CROSS JOIN scheduler_status sc WHERE s.id = 1;
COMMENT ON VIEW heartbeat_health IS
    'Appendix A: heartbeats, energy, goals, reach-outs; plus queue depth, oldest pending work, outbox backlog, warnings and the tables'' sizes in bytes.';

-- What `dionysus status` shows, in one answer: the driver reads functions and views, never
-- the tables themselves. Runs with the caller's rights (it shows what the caller may read).
CREATE FUNCTION status_report() RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN jsonb_build_object(
        'hb', (SELECT to_jsonb(h) FROM dionysus.heartbeat_health h),
        'goals', (SELECT coalesce(jsonb_agg(jsonb_build_object('title', g.title, 'priority', g.priority) ORDER BY g.priority, g.last_touched DESC), '[]')
                    FROM (SELECT * FROM dionysus.goals WHERE priority IN ('active', 'queued') ORDER BY priority, last_touched DESC LIMIT 8) g),
        'beats', (SELECT coalesce(jsonb_agg(b ORDER BY (b ->> 'n')::int DESC), '[]') FROM (
                    SELECT jsonb_build_object('n', heartbeat_number, 'status', status, 'started', started_at,
                           'energy_start', energy_start, 'energy_end', energy_end,
                           'actions', (SELECT coalesce(jsonb_agg(a ->> 'action'), '[]') FROM jsonb_array_elements(actions_taken) a),
                           'narrative', left(narrative, 140)) AS b
                      FROM dionysus.heartbeat_log ORDER BY heartbeat_number DESC LIMIT 5) x),
        'queue', (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) AS n FROM dionysus.work_queue GROUP BY status) q),
        'messages', (SELECT jsonb_build_object('total', count(*), 'last', max(created_at)) FROM dionysus.messages),
        'memory', (SELECT to_jsonb(m) FROM dionysus.memory_health m),
        'mind', (SELECT to_jsonb(p) FROM dionysus.proactive_health p),
        'imports', dionysus.import_status(3),
        -- The people written with last: their local time and where their time zone came from.
        'people', (SELECT coalesce(jsonb_agg(jsonb_build_object('person', x.person, 'time_zone', x.time_zone, 'source', x.time_zone_source, 'source_said', dionysus_internal.time_zone_source_said(x.time_zone_source),
                                                                'local_time', to_char(dionysus.clock_now() AT TIME ZONE x.time_zone, 'Dy HH24:MI'),
                                                                'last_message_at', x.last_message_at)
                                             ORDER BY x.last_message_at DESC NULLS LAST, x.person), '[]')
                     FROM (SELECT * FROM dionysus.people ORDER BY last_message_at DESC NULLS LAST, person LIMIT 8) x),
        -- Intervals as seconds: their text form ("00:37:30.011953") is not for people.
        'waited_s', (SELECT jsonb_build_object('work', extract(epoch FROM h.oldest_pending_work), 'stale', extract(epoch FROM m.oldest_stale_age))
                       FROM dionysus.heartbeat_health h, dionysus.memory_health m),
        'now', now());
END $$;
COMMENT ON FUNCTION status_report() IS
    'What `dionysus status` shows: {hb: heartbeat_health''s row, goals: [{title, priority}] (the 8 first active and queued), '
    'beats: [{n, status, started, energy_start, energy_end, actions: [name], narrative (140 characters)}] (the last 5 heartbeats), '
    'queue: {status: count} of the work queue, messages: {total, last}, memory: memory_health''s row, mind: proactive_health''s row, '
    'imports: import_status(3), people: [{person, time_zone, source, source_said, local_time, last_message_at}] (the 8 written with last), waited_s: {work, stale} (the oldest pending work and stale neighbourhood, in seconds), now}. '
    'Runs with the caller''s rights.';
