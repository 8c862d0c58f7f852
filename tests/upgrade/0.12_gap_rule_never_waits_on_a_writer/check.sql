-- Every memory and its episode are kept (the hook then shows the gap rule no longer waits).
SELECT 'nothing lost' AS check,
       (SELECT string_agg(m.id::text || m.content || e.episode_id::text, ',' ORDER BY m.id)
          FROM dionysus.memories m JOIN dionysus.episode_memories e ON e.memory_id = m.id) = (SELECT state FROM before) AS ok,
       'memories or their episodes changed' AS detail;
