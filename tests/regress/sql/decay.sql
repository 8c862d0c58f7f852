-- Decay: memories fade like a person's. By its effective age (days since it was last met,
-- slowed by recall, importance and feeling) a memory is fresh (under 7 days: every detail),
-- fading (7 to 30: its summary), distant (30 to 90: its micro line) and then forgotten.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;
-- The clock stands still; decay_pass() (the worker's, every hour on the clock) runs by hand.
SELECT dionysus.set_clock('2026-03-02 10:00+00');

-- A memory with its three levels given (otherwise the model is asked for the shorter two).
SELECT dionysus.remember('Yesterday my sister Mira and I walked the whole coastal path from Cascais to Guincho '
                         'in the wind and argued about whether to move to Porto.', 'episodic', importance => 0.5,
                         summary => 'Walked the coast from Cascais to Guincho with Mira, argued about moving to Porto.',
                         micro => 'A windy coastal walk with Mira.') AS walk \gset
-- A pinned memory never fades.
SELECT dionysus.remember('Mira''s birthday is on the 3rd of May', 'episodic') AS birthday \gset
SELECT dionysus.pin(:'birthday');

-- memory_stage(id) says where a memory is in its fading life, why, and when the next stage
-- falls due: importance 0.5 slows it 1.5 times, so 7 effective days are 10.5 on the clock.
SELECT s ->> 'stage' AS stage, s ->> 'why' AS why, s -> 'next' ->> 'stage' AS next_stage, s -> 'next' ->> 'at' AS next_at
  FROM dionysus.memory_stage(:'walk') AS s;

-- One stage a pass, never skipping one: the clock moves to a minute past each due time.
SELECT dionysus.set_clock((dionysus.memory_stage(:'walk') -> 'next' ->> 'at')::timestamptz + interval '1 minute');
SELECT p ->> 'fading' AS fading, p ->> 'distant' AS distant, p ->> 'forgotten' AS forgotten FROM dionysus.decay_pass() AS p;
SELECT content FROM dionysus.recall_by_id(:'walk');

SELECT dionysus.set_clock((dionysus.memory_stage(:'walk') -> 'next' ->> 'at')::timestamptz + interval '1 minute');
SELECT p ->> 'fading' AS fading, p ->> 'distant' AS distant, p ->> 'forgotten' AS forgotten FROM dionysus.decay_pass() AS p;
SELECT content FROM dionysus.recall_by_id(:'walk');

SELECT dionysus.set_clock((dionysus.memory_stage(:'walk') -> 'next' ->> 'at')::timestamptz + interval '1 minute');
SELECT p ->> 'fading' AS fading, p ->> 'distant' AS distant, p ->> 'forgotten' AS forgotten FROM dionysus.decay_pass() AS p;
SELECT NOT EXISTS (SELECT 1 FROM dionysus.memories WHERE id = :'walk') AS deleted;

-- Even gone, memory_stage says what happened: each step with its inputs, never the words.
SELECT s ->> 'stage' AS stage, s ->> 'why' AS why FROM dionysus.memory_stage(:'walk') AS s;
SELECT h ->> 'at' AS at, h -> 'inputs' ->> 'from' AS from_stage, h ->> 'event' AS to_stage,
       h -> 'inputs' ->> 'effective_days' AS effective_days, h -> 'inputs' ->> 'chars_after' AS chars_after
  FROM jsonb_array_elements(dionysus.memory_stage(:'walk') -> 'history') WITH ORDINALITY AS x(h, n)
 ORDER BY n;

-- The pinned memory, 135 days on, is as it was, and says why.
SELECT s ->> 'stage' AS stage, s ->> 'exempt' AS exempt FROM dionysus.memory_stage(:'birthday') AS s;
SELECT content FROM dionysus.recall_by_id(:'birthday');
