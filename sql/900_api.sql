-- What needs every organ file and the functions written in Rust, so CREATE EXTENSION runs it
-- last (pgrx `finalize`): the vector-typed wrappers over the Rust embedder, the search_path of
-- the functions that compare vectors, memory_health, the COMMENTs of the Rust functions (every
-- other object's is beside its definition; `\df+ dionysus.*` reads them back), the store's
-- model, the driver's role and its grants, and the marking for pg_dump.

-- ---------------------------------------------------------------------------------------
-- Embeddings as pgvector values. SQL-standard bodies are parsed now, with pgvector's
-- schema on the search_path, so they work whatever the caller's search_path is.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION embed(content text) RETURNS vector
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    RETURN embed_real(content)::vector;
COMMENT ON FUNCTION embed(text) IS
    'Embedding of a text by the store''s model (embedding_store), computed inside the database (local all-MiniLM-L6-v2, '
    'vector(384), or an OpenAI-compatible http endpoint). Cached by content hash.';

CREATE FUNCTION embed_batch(contents text[]) RETURNS TABLE (ord integer, embedding vector)
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
    SELECT b.ord, b.embedding::vector FROM embed_batch_real(contents) AS b;
END;
COMMENT ON FUNCTION embed_batch(text[]) IS
    'Embeddings of many texts in one call (batched forward passes), with their 1-based position.';

-- ---------------------------------------------------------------------------------------
-- plpgsql functions that compare vectors see pgvector's operators whatever the caller's
-- search_path (pgvector may live in any schema).
-- ---------------------------------------------------------------------------------------
DO $$
DECLARE
    vschema text := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                     WHERE e.extname = 'vector');
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['dionysus.heartbeat_warnings()', 'dionysus.chat_context(uuid, integer, integer, boolean, integer)',
                             'dionysus_internal.web_only_basis(text)', 'dionysus.match_archetype(vector)', 'dionysus.match_archetype(vector, text)',
                             'dionysus_internal.archetype_centroid(text[])',
                             'dionysus_internal.note_objective(text, text, double precision, text, uuid)',
                             'dionysus_internal.reindex_embed_missing(uuid, integer)', 'dionysus_internal.reindex_vector(uuid, text, uuid)',
                             'dionysus_internal.reindex_swap(uuid)', 'dionysus_internal.decay_reinforce(dionysus.decay_config)',
                             'dionysus.check_censors(text, text, text, timestamp with time zone)',
                             'dionysus_internal.store_working_focus(text, uuid, jsonb, jsonb)',
                             'dionysus_internal.match_procedures(dionysus.messages, dionysus.working_memories)',
                             'dionysus.recall_all(text, integer, text)',
                             'dionysus.store_procedure(text, text[], text[], text, text[], text[], text[], text)'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, dionysus, %I', f, vschema);
    END LOOP;
END $$;

-- ---------------------------------------------------------------------------------------
-- Health
-- ---------------------------------------------------------------------------------------
-- The access log is unlogged, and an unlogged table cannot be read on a hot standby (the
-- planner refuses it): counted only where it can be. PL/pgSQL plans the count only if it runs.
CREATE FUNCTION dionysus_internal.pending_access_log() RETURNS bigint
    LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT count(*) FROM dionysus.memory_access_log);
END $$;
COMMENT ON FUNCTION dionysus_internal.pending_access_log() IS
    'Recall hits not yet folded into access counts; NULL on a hot standby, which cannot read the unlogged log.';

CREATE VIEW memory_health AS
SELECT
    (SELECT count(*) FROM memories)                                   AS memories,
    (SELECT count(*) FROM memories WHERE status = 'active')           AS active_memories,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue)        AS stale_neighborhoods,
    (SELECT now() - min(queued_at) FROM neighborhood_queue)           AS oldest_stale_age,
    (SELECT count(DISTINCT memory_id) FROM neighborhood_queue
      WHERE attempts > 0)                                             AS failing_neighborhoods,
    (SELECT min(last_error) FROM neighborhood_queue
      WHERE last_error IS NOT NULL)                                   AS neighborhood_error,
    w.last_run_at                                                     AS last_worker_run,
    w.last_success_at                                                 AS last_worker_success,
    w.last_error                                                      AS last_worker_error,
    w.last_error_at                                                   AS last_worker_error_at,
    w.consecutive_failures                                            AS worker_consecutive_failures,
    w.neighborhoods_done                                              AS neighborhoods_recomputed,
    w.last_pass_ms                                                    AS last_pass_ms,
    dionysus_internal.pending_access_log()                            AS pending_access_log,
    (SELECT count(*) FROM embedding_cache)                            AS cached_embeddings,
    l.refreshed_at                                                    AS lexicon_refreshed_at,
    dionysus_internal.table_bytes(ARRAY['memories', 'memory_neighborhoods', 'memory_access_log', 'embedding_cache', 'triples', 'episodes']) AS table_bytes
FROM worker_status w CROSS JOIN lexicon_stats l;

COMMENT ON VIEW memory_health IS
    'Memory maintenance at a glance: stale neighborhood backlog and its oldest age, failing rows, the '
    'maintenance worker''s last run, success and error, the pending access log, the cache size and the tables'' sizes in bytes.';

-- ---------------------------------------------------------------------------------------
-- The functions written in Rust (extension/src/), documented here: pgrx creates them after
-- every organ file, and a COMMENT needs its object. Every other object's COMMENT is beside
-- its definition in its organ's file.
-- ---------------------------------------------------------------------------------------
-- embed/mod.rs: the embedding model, its settings and the store's
COMMENT ON FUNCTION embed_real IS 'embed() as real[]: for clients without the vector type.';
COMMENT ON FUNCTION embed_batch_real IS 'embed_batch() as real[] rows.';
COMMENT ON FUNCTION embedding_info IS
    'The embedding provider in use, its model and whether it loads: for diagnostics (dionysus doctor). '
    '{provider (local, http), model_key, dimensions, store_model_key (the model of the stored vectors, null before any), reindex_needed; '
    'local: model_path, loadable, error (when it does not load); http: url}.';
COMMENT ON FUNCTION embedding_settings() IS 'The embedding model the settings name ({provider, url, model, model_path, model_key}), never the API key.';
COMMENT ON FUNCTION embedding_store_adopt(boolean) IS
    'Owner only: declares the stored vectors the settings'' model''s, for a store with no memories yet (force: vectors made elsewhere by that model); its width must be the store''s (22000). Anything else is a re-index.';
COMMENT ON FUNCTION dionysus.reindex_embed_real(uuid, text[]) IS 'Embeddings by a building re-index run''s model, without the cache, in input order (internal to the re-index).';

-- memory/: the store
COMMENT ON FUNCTION remember IS
    'Stores a memory from plain text and returns its id. type: episodic (default), semantic, procedural, '
    'strategic. importance and confidence in [0,1], valence in [-1,1], metadata a JSON object, source names '
    'the conversation or channel (episodic memories of one source form episodes), created_at defaults to '
    'now() and may be set for imported history (finite, from 1900-01-01 to a day after now()); summary and micro are '
    'shorter detail levels; private_to lists the people whose private words it holds (person keys; NULL: nobody''s).';
COMMENT ON FUNCTION remember_batch IS
    'Stores a JSON array of memories (objects with the keys of remember) in one statement, embedding them '
    'in batches. Returns (ord, memory_id) in input order. One bad element rejects the whole batch.';
COMMENT ON FUNCTION learn IS
    'Learns a fact (a semantic memory). If an active fact is at least 0.95 similar it is confirmed instead '
    '(state confirmed, confirmations + 1, confidence raised) and its id returned.';
COMMENT ON FUNCTION supersede IS
    'Replaces a memory with new content: the old one becomes superseded and points to the new one, '
    'whose id is returned. A superseded fact hands on its subject and category.';
COMMENT ON FUNCTION archive IS 'Archives a memory: recall stops returning it; a fact becomes deactivated.';
COMMENT ON FUNCTION forget IS 'Deletes a memory with its edges, links and episode membership.';
COMMENT ON FUNCTION connect IS
    'Adds or updates a typed, weighted edge between two memories (relation: TEMPORAL_NEXT, CAUSES, '
    'DERIVED_FROM, CONTRADICTS, SUPPORTS, INSTANCE_OF, PARENT_OF, ASSOCIATED). Returns true if new.';
COMMENT ON FUNCTION add_triple IS
    'Records subject–predicate–object over entities (created as needed). The same triple again updates '
    'confidence (the higher wins) and provenance. Returns the triple id.';
COMMENT ON FUNCTION triples_about IS
    'Triples where the named entity is subject or object; with person, only those that person may see.';
COMMENT ON FUNCTION link_concept IS
    'Links a memory to a concept by name (created if new, optionally under a parent concept).';
COMMENT ON FUNCTION open_episode IS
    'Opens an episode for a source explicitly (closing the open one); it stays open until close_episode.';
COMMENT ON FUNCTION close_episode IS 'Closes an open episode.';
COMMENT ON FUNCTION recall_recent IS 'The k most recent active memories, optionally of some types or one source.';
COMMENT ON FUNCTION recall_by_id IS 'One memory with every field (access counts include the unfolded log).';

-- recall/, neighborhoods/, sentences/, workers/: recall and its maintenance
COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector seeds, the nearest within the days or months '
    'the text names, and BM25 lexical seeds scored as the share of the query''s information matched; the best expanded '
    'through neighborhoods, graph edges and episode-adjacent turns (a neighbour inherits a share of its seed''s relevance, '
    'beyond its own); the people the text names (what they said) and its dates count; weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory, and stage: fresh, fading (its summary) or distant (its residue), sql/021_decay.sql.';
COMMENT ON FUNCTION refresh_lexicon IS 'Recounts lexeme document frequencies for BM25; returns the memories counted.';
COMMENT ON FUNCTION recompute_neighborhoods IS
    'Recomputes up to batch (at most 1000) stale neighborhoods now and returns how many; the worker does this on its own.';
COMMENT ON FUNCTION dionysus_internal.sentence_count(text) IS
    'memories.sentence_count of a text: its sentences of three words or more, the "Name: " label aside, at most 16 (1 when fewer than two).';
COMMENT ON FUNCTION run_maintenance IS
    'One maintenance pass in this session: up to 1000 neighborhoods, up to 64 memories split into sentence vectors, the access log, '
    'the lexicon (retention is prune_history(), which the worker runs and the driver''s role may not). '
    'Returns a summary with neighborhoods_remaining and sentences_remaining: call again while either is above zero.';

-- heartbeat/: the commit of a heartbeat's decision
COMMENT ON FUNCTION heartbeat_commit IS
    'Applies a decision {reasoning, actions[{action, params}], goal_changes[{goal_id, change, note}]} to the heartbeat in '
    'flight: each action validated against its schema, walked in order within the energy available, database actions '
    'done now, the others queued for the driver (only those in available_actions, when given); rejections recorded with '
    'their reason. One commit per heartbeat.';
COMMENT ON FUNCTION action_schema() IS
    'The action taxonomy as jsonb: for each action its performer (database or driver) and its parameters '
    '(kind, required). heartbeat_commit validates against it; the driver builds its prompt from it.';

-- prompts.rs: the shipped prompt templates' texts
COMMENT ON FUNCTION dionysus_internal.shipped_prompt(text, integer) IS
    'The text of a shipped version of a prompt template (sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt), compiled into the library: the rows of prompt_templates a fresh install inserts. 22023 for a version never shipped.';

-- proactive/: the proactive mind's settings, read once a transaction (014); the rules' passes (015)
COMMENT ON FUNCTION dionysus_internal.proactive_setting(text) IS
    'One value of proactive_config (42704 naming an unknown key, 22004 a null one), read once a transaction: a change made in the same transaction is read at once, another''s from the next transaction.';
COMMENT ON FUNCTION dionysus_internal.forget_proactive_settings() IS
    'Forgets the proactive_config values this transaction read (the trigger proactive_config_changed calls it).';
COMMENT ON FUNCTION dionysus_internal.rhythm_at(smallint[], double precision[], double precision[], integer, boolean) IS
    'What a person''s rhythm rows (hours of the week, activity, misses, in one order) say of one hour of their week: {learned in [0, 1], contacts missed there}. availability blends it with the prior.';
COMMENT ON FUNCTION dionysus_internal.rule_passes(text, text[], double precision, bigint, smallint, integer) IS
    'run_rules_for''s passes after its checks: for each person in turn (NULL: nobody in particular) the values read once, every condition checked, adjustments by weight, what the rules make, the uses counted, the passes written (write_rule_passes); the number of rules fired.';

-- context/: token counts and budgets (027)
COMMENT ON FUNCTION count_tokens(text) IS 'The tokens of a text by the embedding model''s WordPiece tokenizer, never truncated (four bytes a token without tokenizer.json).';
COMMENT ON FUNCTION dionysus_internal.fit_context(jsonb, integer, text[], text) IS
    'Fits a context into a budget: the message, north stars, focus and a heartbeat''s goals and surroundings always; then, sections in the order given (the rest after), every item at its smallest level while it fits, then each in rank order up to the richest that fits (full, summary, micro, clipped); cut items leave; the report goes under context_budget.';

-- The store's vectors were made by the model the settings name at install (or upgrade) time
-- (embedding_store, 020; here, as embedding_settings is written in Rust).
INSERT INTO embedding_store (id, spec, model_key, dimensions)
SELECT 1, s - 'model_key', s ->> 'model_key', 384 FROM embedding_settings() s
ON CONFLICT (id) DO NOTHING;

-- ---------------------------------------------------------------------------------------
-- The driver's role (least privilege). CREATE EXTENSION creates dionysus_driver (NOLOGIN;
-- give it LOGIN and a password to use it) and grants it what the driver's calls need: both
-- schemas (the API's functions run as their caller, so its internals too), every function,
-- and rows — reading and writing the organs' tables, appending to the message log and the
-- ledger (never rewriting them), reading the configuration and the prompt templates, and clearing the maintenance queues the `maintain` action works off.
-- No DDL, no TRUNCATE, no other schema, nothing outside this database.
-- Roles are cluster-wide: a second database's CREATE EXTENSION reuses the role.
-- ---------------------------------------------------------------------------------------
DO $$
BEGIN
    CREATE ROLE dionysus_driver NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- created by another database's CREATE EXTENSION
END $$;
GRANT USAGE ON SCHEMA dionysus, dionysus_internal TO dionysus_driver;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA dionysus, dionysus_internal TO dionysus_driver;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA dionysus TO dionysus_driver;
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA dionysus TO dionysus_driver;
REVOKE INSERT, UPDATE ON heartbeat_config, recall_config, prompt_templates FROM dionysus_driver;
-- What the person tunes (the proactive mind's rates, weights, personality) and the clock.
REVOKE INSERT, UPDATE ON proactive_config, contact_weights, personality, event_patterns, clock FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION set_clock(timestamptz), advance_clock(interval) FROM PUBLIC, dionysus_driver;
GRANT UPDATE (last_hoisted_at) ON event_patterns TO dionysus_driver; -- a pattern's state, not its definition
REVOKE UPDATE ON messages, energy_ledger, rule_firings, learning_log FROM dionysus_driver;
-- Learning moves a trait's value (slowly, logged, from the person's replies the driver logs);
-- its definition and learning rate stay the person's.
GRANT UPDATE (value) ON personality TO dionysus_driver;
GRANT DELETE ON memory_access_log, neighborhood_queue, lexicon, embedding_cache TO dionysus_driver;
-- run_maintenance() as the driver's role (servers without the worker) makes sentence vectors too (029).
GRANT DELETE ON memory_sentences, sentence_queue TO dionysus_driver;
-- Who a memory is private to is fixed when it is written (forget_own relies on it): the
-- driver's role may update a memory's other columns, never private_to; nor its decay stage or
-- clock (021), or it could have the owner's decay pass forget any memory.
REVOKE UPDATE ON memories FROM dionysus_driver;
DO $$
BEGIN
    EXECUTE (SELECT format('GRANT UPDATE (%s) ON dionysus.memories TO dionysus_driver', string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum))
               FROM pg_attribute a
              WHERE a.attrelid = 'dionysus.memories'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                AND a.attname NOT IN ('id', 'private_to', 'stage', 'reinforced_at', 'sentence_count'));
END $$;
-- Invisible feedback can be taken back (undo_feedback); cue phrases are the person's to tune.
GRANT DELETE ON feedback TO dionysus_driver;
REVOKE INSERT, UPDATE ON cue_phrases FROM dionysus_driver;
-- The alignment loop's records: the driver writes what its calls need and nothing the person
-- decides. Proposals are written only by the dream (record_dream) and decided only through
-- approve_proposal and reject_proposal (all run as the owner); archetypes and a person's own
-- templates change only by an approval; a north star only by retiring it.
REVOKE UPDATE ON proposals, north_stars, context_archetypes, dreams FROM dionysus_driver;
REVOKE INSERT ON proposals, context_archetypes, dreams FROM dionysus_driver;
REVOKE INSERT, UPDATE ON person_prompt_templates FROM dionysus_driver;
GRANT UPDATE (status, retired_at) ON north_stars TO dionysus_driver;
GRANT UPDATE (centroid, match_count, avg_similarity) ON context_archetypes TO dionysus_driver;
GRANT UPDATE (finished_at, note) ON dreams TO dionysus_driver;
-- An import's person, input and size are fixed when it begins; only its progress moves.
REVOKE UPDATE ON imports FROM dionysus_driver;
GRANT UPDATE (position, imported, duplicates, updated_at, finished_at) ON imports TO dionysus_driver;
-- A dream-channel item's content, subject and privacy are fixed when it is recorded; only its
-- delivery moves.
REVOKE UPDATE ON mirror_items FROM dionysus_driver;
GRANT UPDATE (status, attempts, reserved_by, reserved_until, channel_id, platform_message_id, last_error, posted_at) ON mirror_items TO dionysus_driver;
GRANT DELETE ON mirror_items TO dionysus_driver; -- expiry (mirror_add)
-- A re-index: the driver starts, watches and cancels runs and stages extractions; the model a
-- run embeds with, the store's model and the new vectors are written only by the owner (the
-- run's trigger, the maintenance pass).
REVOKE INSERT, UPDATE ON reindex_runs, embedding_store, reindex_vectors FROM dionysus_driver;
GRANT INSERT (requested_by) ON reindex_runs TO dionysus_driver;
GRANT UPDATE (status, finished_at, note) ON reindex_runs TO dionysus_driver;
GRANT DELETE ON reindex_extractions TO dionysus_driver;
REVOKE EXECUTE ON FUNCTION dionysus_internal.reindex_step(integer), dionysus_internal.reindex_swap(uuid),
    dionysus_internal.reindex_embed_missing(uuid, integer), dionysus.reindex_embed_real(uuid, text[]), embedding_store_adopt(boolean)
    FROM PUBLIC, dionysus_driver;
-- Decay: the person tunes it and the owner's worker runs it; the driver may pin and ask why.
REVOKE INSERT, UPDATE ON decay_config FROM dionysus_driver;
REVOKE INSERT, UPDATE ON decay_log FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION decay_pass(), dionysus_internal.decay_run(), dionysus_internal.decay_step(),
    dionysus_internal.decay_reinforce(dionysus.decay_config) FROM PUBLIC, dionysus_driver;
-- Censors: the driver reads them and goes through the gate and the functions that check whose
-- a censor is; it writes none directly, and everyone's are the owner's.
REVOKE INSERT, UPDATE ON censors, censor_events, censor_config FROM dionysus_driver;
REVOKE EXECUTE ON FUNCTION add_censor(text, text, text, text, text, text[], integer, integer, boolean, text, uuid) FROM PUBLIC, dionysus_driver;
-- People: the driver's extraction writes them (complete_work, resolution merges and deletes);
-- the words for relations are the owner's.
-- Whose life a row is in is fixed when it is written.
GRANT DELETE ON known_persons, person_relations TO dionysus_driver;
REVOKE INSERT, UPDATE ON relation_words FROM dionysus_driver;
REVOKE UPDATE ON known_persons, person_aliases, person_relations FROM dionysus_driver;
GRANT UPDATE (name, relation, feeling, traits, topics, mentions, confidence, first_mentioned_at, last_mentioned_at) ON known_persons TO dionysus_driver;
GRANT UPDATE (known_person_id) ON person_aliases TO dionysus_driver;
GRANT UPDATE (from_id, to_id, sentiment, confidence, source, message_id, updated_at) ON person_relations TO dionysus_driver;
-- Episodes: a censor a failure proposes is written only through propose_censors (the driver
-- writes no censors); keeping one is the person's word (accept_censor).
REVOKE EXECUTE ON FUNCTION dionysus_internal.propose_censors(uuid, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dionysus_internal.propose_censor_candidates(text, jsonb, text, text, uuid, jsonb) FROM PUBLIC, dionysus_driver;
REVOKE EXECUTE ON FUNCTION dionysus_internal.propose_heartbeat_censors(dionysus.work_queue, jsonb) FROM PUBLIC;
-- Working memory: written through chat_context and complete_work; whose a row is, and what a
-- session record says, are fixed when written.
GRANT DELETE ON working_memories, working_memory_items TO dionysus_driver;
REVOKE UPDATE ON working_memories, working_memory_items, open_threads, working_memory_sessions FROM dionysus_driver;
GRANT UPDATE (focus, focus_at, turns, last_message_id, last_turn_at, evicted) ON working_memories TO dionysus_driver;
GRANT UPDATE (relevance, uses, last_turn) ON working_memory_items TO dionysus_driver;
GRANT UPDATE (status, touched_at, closed_at, closed_by) ON open_threads TO dionysus_driver;
-- Procedures: the owner writes and retires them; the driver's calls activate and score them.
REVOKE INSERT, UPDATE ON procedures FROM dionysus_driver;
GRANT UPDATE (activation_count, success_count, failure_count, last_activated, updated_at) ON procedures TO dionysus_driver;
REVOKE UPDATE ON procedure_activations FROM dionysus_driver;
GRANT UPDATE (outcome, scored_at) ON procedure_activations TO dionysus_driver;
REVOKE EXECUTE ON FUNCTION store_procedure(text, text[], text[], text, text[], text[], text[], text), retire_procedure(uuid)
    FROM PUBLIC, dionysus_driver;
-- Context budgets: the owner's settings, like heartbeat_config; the driver only reads them.
REVOKE INSERT, UPDATE ON context_budgets FROM dionysus_driver;
-- Mind rules: the driver adds a person's own (add_rule, as the owner) and moves a rule's use,
-- weight and status; it writes no rule outright, and a built-in's weight and status are the
-- owner's (a trigger).
REVOKE INSERT, UPDATE ON mind_rules FROM dionysus_driver;
GRANT UPDATE (use_count, last_used_at, weight, decayed_at, status, ended_at) ON mind_rules TO dionysus_driver;

-- Last of all, once every table and shipped row is in place: every table with data is marked
-- for pg_dump, and the shipped rows are recorded (sql/030_backup.sql).
SELECT dionysus_internal.mark_for_dump();
