-- Every memory and every recall not yet folded are kept (two, and the hook's one); the word
-- indexes' pending entries are merged. The hook then shows recall locks nothing it read, and
-- the fold passes over the log row its reader commits after.
SELECT 'nothing lost' AS check,
       (SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.memories) = (SELECT state FROM before) AS ok,
       'memories changed' AS detail;
SELECT 'the recalls not yet folded are kept' AS check, count(*) = 3 AS ok, count(*)::text AS detail FROM dionysus.memory_access_log;
SELECT 'the update merged the word indexes'' pending entries' AS check, pending = 0 AS ok, pending::text AS detail
  FROM (SELECT gin_clean_pending_list('dionysus.memories_search_gin') + gin_clean_pending_list('dionysus.memories_speaker_words') AS pending) p;
