-- Working memory: what a conversation is holding in mind right now.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;
SELECT dionysus.set_clock('2026-03-02 09:00+00');

-- Something Ada said before, already in memory (private to her).
SELECT dionysus.remember('Ada has a job interview at Globex on Friday', 'semantic',
                         private_to => ARRAY['test:ada']) IS NOT NULL AS stored;

-- Her turn today. chat_context(message_id) is what the driver asks for before it replies: the
-- last turns, what recall found for her, her people, her goals, and her working memory, which
-- each turn of hers steps once (what recall finds enters it; the rest fades).
SELECT r ->> 'message_id' AS turn, r ->> 'work_id' AS job
  FROM dionysus.log_message('test', 'm1', 'dm:ada', 'ada', 'I am nervous about Friday, what should I prepare?') AS r \gset
SELECT m ->> 'content' AS recalled
  FROM jsonb_array_elements(dionysus.chat_context(:'turn') -> 'memories') AS m
 WHERE m ->> 'content' NOT LIKE 'I am nervous%'
 ORDER BY recalled;

-- The turn's extraction names the focus and the threads it opened (or closed).
SELECT action FROM dionysus.claim_work_item(:'job', 'regress');
SELECT r -> 'facts' AS facts
  FROM dionysus.complete_work(:'job', '{"facts": [], "triples": [], "goals": [],
         "focus": "preparing for the Globex interview",
         "threads": {"opened": ["ask how the interview on Friday went"]}}') AS r;

-- working_memory(person) shows it: the focus, the open threads, and the items recall brought
-- up (references to long-term memories, with a relevance that fades turn by turn).
SELECT w ->> 'focus' AS focus,
       (SELECT jsonb_agg(t ->> 'content') FROM jsonb_array_elements(w -> 'threads') t) AS threads,
       (SELECT jsonb_agg(i ->> 'content' ORDER BY i ->> 'content') FROM jsonb_array_elements(w -> 'items') i) AS items
  FROM jsonb_array_elements(dionysus.working_memory('test:ada')) AS w;

-- An open thread outlives the session: person_open_threads lists it until her word closes it.
SELECT content, opened_at FROM dionysus.person_open_threads('test:ada') ORDER BY content;
SELECT dionysus.close_open_thread('test:ada', (SELECT id FROM dionysus.person_open_threads('test:ada')));
SELECT count(*) AS open_threads FROM dionysus.person_open_threads('test:ada');

-- Her working memory is hers: nobody else's context holds it.
SELECT jsonb_array_length(dionysus.working_memory('test:bob')) AS bobs_working_memories;
