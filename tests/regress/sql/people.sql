-- People: whom a person talks about, who they are to them, and how they get along.
-- A fresh install, quietly, with times shown in UTC (every file here starts so).
SET client_min_messages = warning; SET timezone = 'UTC'; SET datestyle = 'ISO';
DROP EXTENSION IF EXISTS dionysus; CREATE EXTENSION dionysus CASCADE;
-- The test clock stands still at one instant, so the times below are the same every run.
SELECT dionysus.set_clock('2026-03-02 09:00+00');

-- A person's turn enters the message log: log_message(platform, message id, channel, author,
-- words). It is remembered, private to its person ('platform:author'), and its extraction is
-- queued for the driver, who asks the fast model what the turn says.
SELECT r ->> 'work_id' AS job
  FROM dionysus.log_message('test', 'm1', 'dm:ada', 'ada',
                            'My mom called again, she keeps worrying about my sister Lea.') AS r \gset
-- The same platform id again (a redelivery) is stored once.
SELECT r ->> 'person' AS person, r ->> 'duplicate' AS duplicate
  FROM dionysus.log_message('test', 'm1', 'dm:ada', 'ada',
                            'My mom called again, she keeps worrying about my sister Lea.') AS r;

-- The driver claims that job and hands the model's answer to complete_work: the turn's facts,
-- triples, goals, the people it speaks of (relation, feeling from -1 to 1, traits) and the
-- relations between them.
SELECT action, status FROM dionysus.claim_work_item(:'job', 'regress');
SELECT jsonb_array_length(r -> 'people') AS people, jsonb_array_length(r -> 'relations') AS relations
  FROM dionysus.complete_work(:'job', '{"facts": [], "triples": [], "goals": [],
         "people": [{"name": "Mom", "relation": "mother", "feeling": 0.4, "traits": ["worrier"]},
                    {"name": "Lea", "relation": "sister", "feeling": 0.9}],
         "relations": [{"a": "Mom", "b": "Lea", "kind": "worries about", "sentiment": -0.2, "source": "said"}]}') AS r;

-- people_of(person) lists a person's people; nobody else's are ever among them.
SELECT p ->> 'name' AS name, p ->> 'relation' AS relation, p -> 'feeling' AS feeling,
       p -> 'traits' AS traits, p -> 'mentions' AS mentions
  FROM jsonb_array_elements(dionysus.people_of('test:ada')) AS p
 ORDER BY name;

-- A later turn gives Mom a name: "Ana" with the relation mother is the one known so far only
-- as Mom, so the two become one person and keep every name and mention.
SELECT r ->> 'work_id' AS job
  FROM dionysus.log_message('test', 'm2', 'dm:ada', 'ada', 'Oh, Ana is my mother by the way, I never said.') AS r \gset
SELECT action, status FROM dionysus.claim_work_item(:'job', 'regress');
SELECT jsonb_array_length(r -> 'people') AS people
  FROM dionysus.complete_work(:'job', '{"facts": [], "triples": [], "goals": [],
         "people": [{"name": "Ana", "aliases": ["Mom"], "relation": "mother", "feeling": 0.8}]}') AS r;

-- person(name, of_person) finds someone by name, alias or relation word ("my mother"), with
-- what is known and where each piece came from (the turn's words and time). Recent words
-- weigh more: the feeling is 0.6 x 0.8 + 0.4 x 0.4.
SELECT p ->> 'name' AS name, p -> 'aliases' AS aliases, p ->> 'relation' AS relation,
       p -> 'feeling' AS feeling, p -> 'mentions' AS mentions,
       p -> 'relations' -> 0 ->> 'kind' AS relation_kind, p -> 'relations' -> 0 ->> 'with' AS relation_with
  FROM jsonb_array_elements(dionysus.person('my mother', of_person => 'test:ada')) AS p;
SELECT s ->> 'what' AS what, s ->> 'value' AS value, s ->> 'at' AS at, s ->> 'said' AS said
  FROM jsonb_array_elements(dionysus.person('Ana', of_person => 'test:ada')) AS p,
       jsonb_array_elements(p -> 'sources') WITH ORDINALITY AS x(s, n)
 ORDER BY n;

-- Another person has a life of their own: Ada's people are not Bob's.
SELECT jsonb_array_length(dionysus.people_of('test:bob')) AS bobs_people;

-- forget_known_person(of_person, id) forgets one of them.
SELECT dionysus.forget_known_person('test:ada', (dionysus.person('Lea', of_person => 'test:ada') -> 0 ->> 'id')::uuid);
SELECT p ->> 'name' AS name FROM jsonb_array_elements(dionysus.people_of('test:ada')) AS p ORDER BY name;
