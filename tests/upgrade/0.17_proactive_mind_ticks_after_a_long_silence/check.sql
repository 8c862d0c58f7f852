-- The update mends it in place: the very tick that failed then runs, and moves the clock's mark.
SELECT 'the tick after the update runs' AS check, jsonb_typeof(tick) = 'object' AS ok, tick::text AS detail
  FROM (SELECT dionysus.proactive_tick() AS tick) t;
SELECT 'the tick moved the clock''s mark' AS check, last_tick_at::text LIKE '2026-05-12 10:00%' AS ok, last_tick_at::text AS detail
  FROM dionysus.agent_state;
