-- The access log is unlogged (a recall's commit waits for no disk), and keeps the recalls not
-- yet folded; the fold and the health view read it as before. The memories written before the
-- update are split into sentence vectors by the next pass; one written after is counted at once.
SELECT 'the updated log is unlogged' AS check, relpersistence = 'u' AS ok, relpersistence::text AS detail
  FROM pg_class WHERE oid = 'dionysus.memory_access_log'::regclass;
SELECT 'the recalls not yet folded are kept' AS check, count(*) = 2 AS ok, count(*)::text AS detail FROM dionysus.memory_access_log;
SELECT 'memory_health counts them' AS check, pending_access_log = 2 AS ok, pending_access_log::text AS detail FROM dionysus.memory_health;
SELECT count(*) FROM dionysus.recall('when is the boiler serviced?', 1);
SELECT 'the updated recall logs' AS check, count(*) = 3 AS ok, count(*)::text AS detail FROM dionysus.memory_access_log;
SELECT 'recall_by_id counts the hits not yet folded' AS check, access_count >= 1 AS ok, access_count::text AS detail
  FROM dionysus.recall_by_id((SELECT id FROM dionysus.memories WHERE content LIKE 'The boiler%'));
SELECT dionysus.run_maintenance();
SELECT 'folded' AS check, count(*) = 0 AS ok, count(*)::text AS detail FROM dionysus.memory_access_log;
-- The old memories' sentences: this call's pass or the worker's, whichever took them (60 s at most).
DO $$
BEGIN
    FOR i IN 1..600 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM dionysus.sentence_queue);
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SELECT 'the old memories'' sentences are embedded' AS check, NOT EXISTS (SELECT 1 FROM dionysus.sentence_queue) AS ok,
       (SELECT count(*) FROM dionysus.sentence_queue)::text || ' still queued' AS detail;
-- Their rows untouched (no count: recall looks their sentences up); the boiler's two sentences
-- have vectors, the key's one has none of its own.
SELECT 'sentence vectors of the old memories' AS check, split = 'unknown/2,unknown/0' AS ok, split AS detail
  FROM (SELECT string_agg(coalesce(m.sentence_count::text, 'unknown') || '/'
                          || (SELECT count(*) FROM dionysus.memory_sentences s WHERE s.memory_id = m.id), ',' ORDER BY m.content) AS split
          FROM dionysus.memories m) s;
CREATE TEMP TABLE new_turn AS SELECT dionysus.remember('A new turn. It has two sentences.') AS id;
SELECT 'a memory written after the update is counted' AS check, sentence_count = 2 AS ok, sentence_count::text AS detail
  FROM dionysus.memories WHERE id = (SELECT id FROM new_turn);
SELECT pg_advisory_unlock(hashtextextended('dionysus.fold_access_log', 0));
