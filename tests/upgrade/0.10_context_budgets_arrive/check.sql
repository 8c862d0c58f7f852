-- Every memory, the conversation and the archetypes are kept; the budgets arrive as data with
-- the archetypes' tasks; chat_context takes a budget (its old calls still work) and keeps to it
-- as the driver's role; the language queue asks for the levels of the long memory written
-- before the update, with the new condensing prompt.
SELECT 'nothing lost' AS check,
       (SELECT string_agg(id::text || content || coalesce(summary, '-'), ',' ORDER BY id) FROM dionysus.memories)
       || (SELECT string_agg(id::text || content, ',' ORDER BY id) FROM dionysus.messages)
       || (SELECT string_agg(name || similarity_threshold, ',' ORDER BY name) FROM dionysus.context_archetypes)
       = (SELECT state FROM before) AS ok,
       'memories, messages or archetypes changed' AS detail;
SELECT 'four context budgets' AS check, count(*) = 4 AS ok, count(*)::text AS detail FROM dionysus.context_budgets;
SELECT 'three archetypes are deep conversations' AS check, count(*) = 3 AS ok, count(*)::text AS detail
  FROM dionysus.context_archetypes WHERE budget_task = 'deep_conversation';

SET ROLE dionysus_driver;
SELECT 'chat_context keeps to its budget: ' || call AS check,
       b ->> 'tokenizer' = 'wordpiece' AND (b ->> 'used')::int <= (b ->> 'budget')::int AS ok, b::text AS detail
  FROM (SELECT 'a budget given' AS call, dionysus.chat_context(id, 8, 12, false, 2000) -> 'context_budget' AS b
          FROM dionysus.messages WHERE platform_message_id = 'a1'
        UNION ALL
        SELECT 'the old call', dionysus.chat_context(id, 8, 12) -> 'context_budget'
          FROM dionysus.messages WHERE platform_message_id = 'a1') calls;
SELECT 'a budget of 2000 holds the long memory' AS check,
       (b ->> 'budget')::int = 2000 AND (b #>> '{sections,memories,included}')::int = 1 AS ok, b::text AS detail
  FROM (SELECT dionysus.chat_context(id, 8, 12, false, 2000) -> 'context_budget' AS b
          FROM dionysus.messages WHERE platform_message_id = 'a1') c;
RESET ROLE;

SELECT dionysus.enqueue_language_work();
SELECT 'the long memory waits to be condensed' AS check, count(*) = 1 AS ok, count(*)::text AS detail FROM dionysus.work_queue WHERE action = 'condense_memory';
SELECT 'the shipped condensing prompt moved on' AS check, template LIKE '%shown when a context has little room%' AS ok,
       left(template, 300) AS detail
  FROM dionysus.prompt_templates WHERE key = 'condense_memory' AND active;
