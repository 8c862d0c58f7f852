-- The folded count moves to memory_access; folding after the update leaves the memory's row as
-- it was; what reads the counts (recall_by_id, decay, the heartbeat's themes) reads them there.
SELECT 'the folded count moved' AS check, access_count = 3 AS ok, access_count::text AS detail
  FROM dionysus.memory_access WHERE memory_id = (SELECT id FROM key);
SELECT 'recall_by_id adds the hit not yet folded' AS check, access_count = 4 AND last_accessed IS NOT NULL AS ok,
       access_count || ' ' || coalesce(last_accessed::text, 'never') AS detail
  FROM dionysus.recall_by_id((SELECT id FROM key));
CREATE TEMP TABLE row_version AS SELECT xmin::text || ctid::text AS v FROM dionysus.memories WHERE id = (SELECT id FROM key);
SELECT dionysus.run_maintenance();
SELECT 'folded' AS check, count(*) = 0 AS ok, count(*)::text AS detail FROM dionysus.memory_access_log;
SELECT 'the fold leaves the memory''s row alone' AS check, xmin::text || ctid::text = (SELECT v FROM row_version) AS ok, '' AS detail
  FROM dionysus.memories WHERE id = (SELECT id FROM key);
SELECT 'recall_by_id reads the folded count' AS check, access_count = 4 AS ok, access_count::text AS detail
  FROM dionysus.recall_by_id((SELECT id FROM key));
-- Decay's slowdown reads the count: ln(1 + 4) of recall_slowdown.
SELECT 'decay counts the recalls' AS check,
       abs(d.slowdown - (1 + c.recall_slowdown * ln(5)) * (1 + c.importance_slowdown * m.importance) * (1 + c.emotion_slowdown * abs(m.valence))) < 1e-9 AS ok,
       d.slowdown::text AS detail
  FROM dionysus.memory_decay d JOIN dionysus.memories m ON m.id = d.memory_id CROSS JOIN dionysus.decay_config c
 WHERE d.memory_id = (SELECT id FROM key);
SELECT 'the recalled memory is a theme' AS check, themes::text LIKE '%spare key%' AS ok, themes::text AS detail
  FROM (SELECT dionysus.activated_themes() AS themes) t;
SELECT pg_advisory_unlock(hashtextextended('dionysus.fold_access_log', 0));
