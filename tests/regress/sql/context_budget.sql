-- Context budgets: every context is fitted into a token budget chosen by its task, and every
-- memory has three levels of detail to fit with: full, summary (50 to 100 tokens), micro (~20).
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;

-- Tokens are counted by the embedding model's own WordPiece tokenizer, never truncated.
SELECT dionysus.count_tokens('Tokens are counted by the embedding model''s own WordPiece tokenizer.') AS tokens;

-- The budgets are data: a task, its tokens, the order its sections are served in.
SELECT task, tokens, sections FROM dionysus.context_budgets ORDER BY tokens;

-- Six long memories of Ada's, each with its summary and micro line.
SELECT count(dionysus.remember('Hike ' || n || ': ' || repeat('we walked through the beech forest above the lake and talked about everything. ', 8),
                               summary => 'Hike ' || n || ': a long walk through the beech forest above the lake.',
                               micro => 'Hike ' || n || ' in the forest.', private_to => ARRAY['test:ada'])) AS remembered
  FROM generate_series(1, 6) AS n;

-- A reply's context (chat_context) within 500 tokens: every memory gets in at its smallest
-- level first, so one long memory cannot starve the rest; then each, in recall's order, moves
-- up to the richest level the rest of the budget allows. The report says what went where.
SELECT r ->> 'message_id' AS turn
  FROM dionysus.log_message('test', 'm1', 'dm:ada', 'ada', 'Do you remember our hikes in the forest?') AS r \gset
SELECT dionysus.chat_context(:'turn', max_memories => 6, budget => 500) AS ctx \gset
SELECT b ->> 'task' AS task, b -> 'budget' AS budget, (b ->> 'used')::int <= 500 AS within_budget, b -> 'over' AS over,
       b -> 'sections' -> 'memories' -> 'offered' AS offered, b -> 'sections' -> 'memories' -> 'included' AS included,
       b -> 'sections' -> 'memories' -> 'levels' AS levels
  FROM (SELECT :'ctx'::jsonb -> 'context_budget' AS b) AS x;
-- Each memory shown carries its level and what it cost (the memories differ only in their number).
SELECT m ->> 'level' AS level, count(*) AS memories, min((m ->> 'tokens')::int) AS tokens_each
  FROM jsonb_array_elements(:'ctx'::jsonb -> 'memories') AS m
 WHERE m ->> 'content' LIKE 'Hike%'
 GROUP BY level ORDER BY level;

-- fit_to_budget(task, context) fits a context a caller assembled (the driver's reflection).
-- A line pays for its label too: a memory's "[date, kind, said by ...]" is 12 tokens.
SELECT m ->> 'level' AS level, m -> 'tokens' AS tokens, m ->> 'content' AS content
  FROM jsonb_array_elements(dionysus.fit_to_budget('reflection', '{"memories": [
         {"id": "00000000-0000-0000-0000-000000000001", "content": "A short note."}]}') -> 'memories') AS m;
