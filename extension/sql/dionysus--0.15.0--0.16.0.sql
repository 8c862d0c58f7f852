-- Dionysus 0.15.0 → 0.16.0: a recall's commit waits for no disk.
-- The access log becomes unlogged: every recall wrote WAL for it, so its commit waited for an
-- fsync (a quarter of a millisecond of each recall here, more on a network disk) to keep usage
-- counts. A crash or a failover now empties the log, losing the hits since the last fold; a hot
-- standby cannot read an unlogged table, so memory_health counts the log through a function that
-- returns NULL there (recall_by_id counts without it there). Every row is kept.

ALTER TABLE memory_access_log SET UNLOGGED;
COMMENT ON TABLE memory_access_log IS
    'Recall hits not yet folded into memories.access_count by the worker. No foreign key, so that recall locks no memory: the rows of a memory since deleted go with the next fold. Unlogged, so that a recall''s commit waits for no disk: a crash or failover loses the hits since the last fold, and a hot standby cannot read it.';

-- The access log is unlogged, and an unlogged table cannot be read on a hot standby (the
-- planner refuses it): counted only where it can be. PL/pgSQL plans the count only if it runs.
CREATE FUNCTION dionysus_internal.pending_access_log() RETURNS bigint
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT count(*) FROM dionysus.memory_access_log);
END $$;
COMMENT ON FUNCTION dionysus_internal.pending_access_log() IS
    'Recall hits not yet folded into access counts; NULL on a hot standby, which cannot read the unlogged log.';

CREATE OR REPLACE VIEW memory_health AS
SELECT
    (SELECT count(*) FROM memories)                                   AS memories,
    (SELECT count(*) FROM memories WHERE status = 'active')           AS active_memories,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue)        AS stale_neighborhoods,
    (SELECT now() - min(queued_at) FROM neighborhood_queue)           AS oldest_stale_age,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue
      WHERE attempts > 0)                                             AS failing_neighborhoods,
    (SELECT min(last_error) FROM neighborhood_queue
      WHERE last_error IS NOT NULL)                                   AS neighborhood_error,
    w.last_run_at                                                     AS last_worker_run,
    w.last_success_at                                                 AS last_worker_success,
    w.last_error                                                      AS last_worker_error,
    w.last_error_at                                                   AS last_worker_error_at,
    w.consecutive_failures                                            AS worker_consecutive_failures,
    w.neighborhoods_done                                              AS neighborhoods_recomputed,
    w.last_pass_ms                                                    AS last_pass_ms,
    dionysus_internal.pending_access_log()                            AS pending_access_log,
    (SELECT count(*) FROM embedding_cache)                            AS cached_embeddings,
    l.refreshed_at                                                    AS lexicon_refreshed_at,
    dionysus_internal.table_bytes(ARRAY['memories', 'memory_neighborhoods', 'memory_access_log', 'embedding_cache', 'triples', 'episodes']) AS table_bytes
FROM worker_status w CROSS JOIN lexicon_stats l;

GRANT EXECUTE ON FUNCTION dionysus_internal.pending_access_log() TO dionysus_driver;
