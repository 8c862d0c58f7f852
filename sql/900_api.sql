-- Dionysus public SQL surface: wrappers over the Rust core, views, and the documentation
-- every function carries (`\df+ dionysus.*` and `\dv dionysus.*` read it back).
-- Loaded last by CREATE EXTENSION (pgrx `finalize`).

-- ---------------------------------------------------------------------------------------
-- Embeddings as pgvector values. SQL-standard bodies are parsed now, with pgvector's
-- schema on the search_path, so they work whatever the caller's search_path is.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION embed(content text) RETURNS vector
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    RETURN embed_real(content)::vector;

CREATE FUNCTION embed_batch(contents text[]) RETURNS TABLE (ord integer, embedding vector)
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
    SELECT b.ord, b.embedding::vector FROM embed_batch_real(contents) AS b;
END;

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
-- Documentation of every table and function.
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE memories IS
    'Every memory: episodic, semantic (facts), procedural, strategic. Embedded by the store''s model (embedding_store: '
    'all-MiniLM-L6-v2, vector(384), unless a re-index moved it; HNSW cosine) and indexed for full text (search, GIN).';
COMMENT ON TABLE episodes IS
    'Runs of episodic memories from one source; a gap over dionysus.episode_gap_minutes starts a new one. Once summarised: its participants (the people whose turns it holds), outcome, surprise and lessons (024).';
COMMENT ON TABLE episode_memories IS 'Which episode each episodic memory belongs to, in order.';
COMMENT ON TABLE facts IS 'Lifecycle of semantic memories learned as facts: learned, confirmed, superseded, deactivated.';
COMMENT ON TABLE entities IS 'Things triples talk about; identity is case- and space-insensitive.';
COMMENT ON TABLE triples IS 'Subject–predicate–object statements over entities, with provenance.';
COMMENT ON TABLE memory_edges IS 'The memory graph: typed, weighted edges, one per (from, to, relation).';
COMMENT ON TABLE concepts IS 'Concepts, in a hierarchy (parent_id).';
COMMENT ON TABLE memory_concepts IS 'Memory–concept links with strength.';
COMMENT ON TABLE memory_neighborhoods IS 'Precomputed top-20 associations of each memory (seed 000 §6.3).';
COMMENT ON TABLE neighborhood_queue IS
    'Append-only queue of stale neighborhoods; rows that failed wait with back-off (not_before).';
COMMENT ON TABLE embedding_cache IS 'Embeddings by (model, sha256 of the text).';
COMMENT ON TABLE memory_access_log IS 'Recall hits not yet folded into memory_access by the worker. No foreign key, so that recall locks no memory: the rows of a memory since deleted go with the next fold. Unlogged, so that a recall''s commit waits for no disk: a crash or failover loses the hits since the last fold, and a hot standby cannot read it.';
COMMENT ON TABLE memory_access IS 'How often and how lately each memory was recalled (recall_by_id adds the hits not yet folded; decay slows with the count). Beside memories, not in it: changing a memory''s row puts it into every index again, the vector index included.';
COMMENT ON TABLE memory_sentences IS
    'A vector per sentence of a memory of several (at most 16, in runs of consecutive sentences), made by the maintenance pass with the store''s model; recall raises a memory''s vector score towards its closest sentence''s (recall_config.sentence_share). Emptied by a re-index swap, which queues them all again.';
COMMENT ON TABLE sentence_queue IS
    'Memories of several sentences waiting for their sentence vectors (the maintenance pass, oldest first).';
COMMENT ON COLUMN memories.sentence_count IS
    'How many sentences the text has for sentence vectors (1: none of its own, its vector is its sentence''s), counted when it is written or changed; NULL: written before 0.16.0.';
COMMENT ON FUNCTION dionysus_internal.sentence_count(text) IS
    'memories.sentence_count of a text: its sentences of three words or more, the "Name: " label aside, at most 16 (1 when fewer than two).';
COMMENT ON FUNCTION dionysus_internal.sentences_follow_content() IS
    'Trigger: a memory''s changed text is counted again, its old sentence vectors deleted, and queued when it has several.';
COMMENT ON TABLE recall_config IS 'Every weight and knob of recall, in one place. UPDATE to tune.';
COMMENT ON TABLE lexicon IS 'Document frequency of each lexeme, for BM25 (refresh_lexicon()).';
COMMENT ON TABLE worker_status IS 'The maintenance worker''s last pass in this database.';

COMMENT ON FUNCTION embed(text) IS
    'Embedding of a text by the store''s model (embedding_store), computed inside the database (local all-MiniLM-L6-v2, '
    'vector(384), or an OpenAI-compatible http endpoint). Cached by content hash.';
COMMENT ON FUNCTION embed_batch(text[]) IS
    'Embeddings of many texts in one call (batched forward passes), with their 1-based position.';
COMMENT ON FUNCTION embed_real IS 'embed() as real[]: for clients without the vector type.';
COMMENT ON FUNCTION embed_batch_real IS 'embed_batch() as real[] rows.';
COMMENT ON FUNCTION embedding_info IS
    'The embedding provider in use, its model and whether it loads: for diagnostics (dionysus doctor).';

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
COMMENT ON FUNCTION recall IS
    'Hybrid recall of the k memories most relevant to a text: HNSW vector seeds, the nearest within the days or months '
    'the text names, and BM25 lexical seeds scored as the share of the query''s information matched; the best expanded '
    'through neighborhoods, graph edges and episode-adjacent turns (a neighbour inherits a share of its seed''s relevance, '
    'beyond its own); the people the text names (what they said) and its dates count; weighted by importance and recency '
    '(weights in dionysus.recall_config). Filters: types, since/until, min_importance, episode_id, and person '
    '(only what that person may see: nothing private to someone else). Returns each score component and found_by, '
    'the channel that found the memory, and stage: fresh, fading (its summary) or distant (its residue), sql/021_decay.sql.';
COMMENT ON FUNCTION recall_recent IS 'The k most recent active memories, optionally of some types or one source.';
COMMENT ON FUNCTION recall_by_id IS 'One memory with every field (access counts include the unfolded log).';
COMMENT ON FUNCTION recompute_neighborhoods IS
    'Recomputes up to batch (at most 1000) stale neighborhoods now and returns how many; the worker does this on its own.';
COMMENT ON FUNCTION refresh_lexicon IS 'Recounts lexeme document frequencies for BM25; returns the memories counted.';
COMMENT ON FUNCTION run_maintenance IS
    'One maintenance pass in this session: up to 1000 neighborhoods, up to 64 memories split into sentence vectors, the access log, '
    'the lexicon (retention is prune_history(), which the worker runs and the driver''s role may not). '
    'Returns a summary with neighborhoods_remaining and sentences_remaining: call again while either is above zero.';

-- ---------------------------------------------------------------------------------------
-- The heartbeat organ
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE heartbeat_config IS
    'Energy parameters, action costs (cost_<action>), goal limits, cooldown and timeouts (seed 000 §2.2, §2.4). '
    'Values must be finite and >= 0.';
COMMENT ON TABLE heartbeat_state IS 'The single heartbeat state row: energy, count, schedule, session, in-flight heartbeat.';
COMMENT ON TABLE energy_ledger IS 'Every change of energy, with the heartbeat and action it belongs to.';
COMMENT ON TABLE goals IS 'The goal backlog (seed 000 §4): active, queued, backburner, completed, abandoned.';
COMMENT ON TABLE goal_memory_links IS 'Goal–memory links: origin, progress, completion, blocker.';
COMMENT ON TABLE identity_aspects IS 'Who the agent takes itself to be, with confidence (written by reflect).';
COMMENT ON TABLE worldview_beliefs IS 'What the agent believes about the world, with confidence (written by reflect).';
COMMENT ON TABLE memory_changes IS 'What the maintain action changed: each judgement with the state before and after, and why.';
COMMENT ON TABLE heartbeat_log IS 'One row per heartbeat (§7.3): energy, snapshots, decision, actions with cost and result, narrative.';
COMMENT ON TABLE work_queue IS 'Actions for the driver (LLM or network), claimed with SKIP LOCKED, each with an idempotency key.';
COMMENT ON TABLE outbox IS 'Messages for the person (or public, after approval) that the driver delivers: pending → sent/failed.';

COMMENT ON FUNCTION get_action_cost(text) IS 'Energy cost of an action (heartbeat_config.cost_<action>); unknown actions are an error.';
COMMENT ON FUNCTION get_current_energy() IS 'The energy available now.';
COMMENT ON FUNCTION update_energy(double precision, uuid, text, text) IS
    'Adds delta to the energy, clamped to [min_energy, max_energy] under the state row''s lock; writes the ledger. Returns the new energy.';
COMMENT ON FUNCTION heartbeat_begin() IS
    'Starts a heartbeat (or returns the one in flight): regenerates energy, observes, orients, and returns the whole '
    'context as jsonb: energy, environment, goal review, recent memories, activated themes, identity, worldview, '
    'action costs and warnings, within the heartbeat''s token budget (027; what it cut is under context_budget).';
COMMENT ON FUNCTION heartbeat_commit IS
    'Applies a decision {reasoning, actions[{action, params}], goal_changes[{goal_id, change, note}]} to the heartbeat in '
    'flight: each action validated against its schema, walked in order within the energy available, database actions '
    'done now, the others queued for the driver (only those in available_actions, when given); rejections recorded with '
    'their reason. One commit per heartbeat.';
COMMENT ON FUNCTION action_schema() IS
    'The action taxonomy (seed 000 §3) as jsonb: for each action its performer (database or driver) and its parameters '
    '(kind, required). heartbeat_commit validates against it; the driver builds its prompt from it.';
COMMENT ON FUNCTION heartbeat_finish(uuid, text, double precision) IS
    'Records a committed heartbeat: the narrative becomes an episodic memory linked to the goals touched, and the log row is completed.';
COMMENT ON FUNCTION heartbeat_default_decision() IS 'The fallback decision of §9.6 (reflect, then rest) for when the LLM fails.';
COMMENT ON FUNCTION review_goals() IS
    'The goal assessment of §4.4: active, queued, blocked, stale, promotion candidates, whether to brainstorm, a promotion to suggest.';
COMMENT ON FUNCTION create_goal IS
    'Adds a goal. Default priority by source (user_request → active, derived → the parent''s, else queued); over the '
    'limits a goal is demoted one level, never dropped (a user''s request displaces the stalest active goal). '
    'A title is at most 200 characters, a description 4000 (22001 naming the argument).';
COMMENT ON FUNCTION change_goal_priority(uuid, text, text) IS
    'Moves a goal: backburner ↔ queued ↔ active, active → completed, any open goal → abandoned (with a reason). '
    'A parent completes when all its children have.';
COMMENT ON FUNCTION add_goal_progress(uuid, text, uuid) IS 'Appends a progress note (and optionally links a memory); touches the goal.';
COMMENT ON FUNCTION set_goal_blockers(uuid, jsonb) IS 'Sets what blocks a goal: goal ids (resolved when they complete) or free texts.';
COMMENT ON FUNCTION link_goal_memory(uuid, uuid, text) IS 'Links a goal and a memory (origin, progress, completion, blocker).';
COMMENT ON FUNCTION claim_work(text, text[], integer, uuid) IS
    'Claims up to max_items available work items (optionally of some actions, or of one heartbeat) for a worker, with a lease; '
    'expired leases return to the queue.';
COMMENT ON FUNCTION dionysus_internal.claim_rows(text, uuid[]) IS
    'Marks the given pending items claimed by a worker, with a lease and a new lease_token (used by claim_work and claim_work_item).';
COMMENT ON FUNCTION claim_work_item(uuid, text) IS
    'Claims one known pending item whatever its available_at (the conversation extracting its own turn); no row when it is not pending.';
COMMENT ON FUNCTION release_work(uuid, text, integer, uuid) IS
    'Hands a claimed item back without spending an attempt (the driver could not work on it: LLM down, shutting down); '
    'claimable again after delay_seconds. With lease (the claim''s lease_token), only its holder may.';
COMMENT ON FUNCTION dionysus_internal.expire_work_leases() IS
    'Returns items whose lease ran out to the queue (or fails them when their attempts are spent, refunding their energy).';
COMMENT ON FUNCTION complete_work(uuid, jsonb, uuid) IS
    'Applies a claimed work item''s result (memories, facts, triples, goals, goal_progress, identity, worldview, concepts, '
    'episode_summary, message, summary; basis: the memory ids the model was shown; person: whom a reach-out is for; objectives: the person''s, '
    'from their turn''s extraction; people and relations: the people in their life the turn speaks of; focus and threads: their session''s focus and the threads the turn opened or closed; dream: a dream''s proposals, stored pending) and marks it done, '
    'in one transaction. What it writes is as private as the item''s person, its heartbeat''s context and the basis; what an inquiry '
    'brought is stored as web content; a reach-out that drew on someone else''s private words, or only on the web, is refused (42501). '
    'Completing again returns the first summary and repeats nothing. With lease (the claim''s lease_token), only its holder may: '
    'a driver whose lease lapsed and whose item was claimed again gets 55000.';
COMMENT ON FUNCTION fail_work(uuid, text, boolean, uuid) IS
    'Fails a claimed work item: back to pending after an exponential back-off while attempts remain, else failed for good and '
    'the energy its heartbeat spent on it refunded. With lease, only its holder may.';
COMMENT ON FUNCTION pending_outbox(integer) IS 'Messages ready to deliver (public ones only once approved).';
COMMENT ON FUNCTION mark_outbox_sent(uuid, text) IS
    'Marks a message delivered, exactly once (by hand; the driver uses reserve_outbox / confirm_outbox).';
COMMENT ON FUNCTION mark_outbox_failed(uuid, text, boolean) IS 'Records a failed delivery; the message stays pending until 5 attempts.';
COMMENT ON FUNCTION approve_outbox(uuid) IS 'A human''s approval of a public message.';
COMMENT ON FUNCTION dionysus_internal.outbox_lease() IS 'How long a reservation of an outbox message lasts (heartbeat_config.outbox_lease_seconds).';
COMMENT ON FUNCTION reserve_outbox(text, text, integer) IS
    'Reserves up to max_items deliverable messages of a platform for a worker (a lease, committed at once; nothing stays locked '
    'while the platform is called). Reservations that lapsed are taken again. A message Dionysus starts that a censor with hours '
    'blocks now waits (last_error says so) and goes once the hours have passed.';
COMMENT ON FUNCTION dionysus_internal.held_at_this_hour(text, text) IS
    'Whether a censor with hours (the person''s or everyone''s, watching reach-outs) blocks these words for this person now, in their own time; false at once when they have none.';
COMMENT ON FUNCTION dionysus_internal.require_reserved_outbox(uuid, text) IS 'The outbox row, locked, unsent and still reserved by this worker; otherwise 55000 saying why.';
COMMENT ON FUNCTION outbox_part_sent(uuid, text, integer, text) IS
    'Records that part N (from 0, in order) of a message was delivered, with its platform id; a repeat is a no-op. Renews the lease.';
COMMENT ON FUNCTION confirm_outbox(uuid, text, text, text) IS
    'Every part is out: logs the bot''s turn in the channel it went to and marks the message sent, in one transaction; a reach-out '
    'starts the contact cooldown now. Returns the logged message''s id.';
COMMENT ON FUNCTION release_outbox(uuid, text, text, boolean) IS
    'Hands a reserved message back: unavailable channel, no attempt spent; rejected by the platform, an attempt spent (the fifth fails it).';
COMMENT ON FUNCTION maintain_target(text, uuid) IS
    'The maintain action''s target (§3.2.3) with its evidence: memory_id, else the belief or identity aspect named by target, else the '
    'memory recall finds for it; with neither, the least confident belief or the oldest unconfirmed fact. NULL when there is nothing.';
COMMENT ON FUNCTION dionysus_internal.apply_maintenance(jsonb, uuid, uuid) IS
    'Applies a maintain verdict {kind, id, verdict keep|update|retire, confidence, content, reason} and records it in memory_changes: '
    'a memory''s new wording supersedes it, a retired belief or aspect is removed, a new text resting on the web alone is refused.';
COMMENT ON FUNCTION dionysus_internal.refund_work(uuid) IS 'Gives back, once, the energy a heartbeat spent on an action that failed for good.';
COMMENT ON FUNCTION dionysus_internal.require_claimed_work(uuid, uuid) IS
    'The work item, locked; with a lease, the caller must still hold it (an item claimed again since is someone else''s: 55000).';
COMMENT ON FUNCTION heartbeat_touch(uuid) IS
    'The driver''s sign of life while it works on a heartbeat; returns its status (''recovered'': the scheduler closed it after silence, stop).';
COMMENT ON FUNCTION dionysus_internal.recover_stalled_heartbeats() IS
    'Closes heartbeats whose driver fell silent for heartbeat_timeout_minutes, each in its own subtransaction (one that fails is closed by force, with its reason).';
COMMENT ON FUNCTION session_start() IS 'The person is talking: heartbeats pause.';
COMMENT ON FUNCTION note_user_message() IS 'The person spoke (ends the reach-out cooldown).';
COMMENT ON FUNCTION session_end(boolean) IS 'The conversation ended; a significant one requests an immediate heartbeat.';
COMMENT ON FUNCTION request_heartbeat(text) IS 'Asks for a heartbeat now (the scheduler notifies the driver).';
COMMENT ON FUNCTION pause_heartbeats(boolean) IS 'Pauses or resumes scheduled heartbeats.';
COMMENT ON FUNCTION heartbeat_due() IS 'Whether a heartbeat is due: not paused, no session, none in flight, and requested or past its time.';
COMMENT ON FUNCTION scheduler_tick() IS
    'What the scheduler worker does each tick: closes stalled heartbeats with the fallback, ends an idle session, queues '
    'language work, and NOTIFYs dionysus_heartbeat when one is due, dionysus_work / dionysus_outbox while items wait.';
COMMENT ON FUNCTION heartbeat_warnings() IS 'Warnings of §9: hoarding, reach-out spam, stagnation, loops.';
COMMENT ON VIEW heartbeat_health IS
    'Appendix A: heartbeats, energy, goals, reach-outs; plus queue depth, oldest pending work, outbox backlog, warnings and the tables'' sizes in bytes.';
COMMENT ON FUNCTION prune_history(integer) IS
    'Retention: deletes, at most batch rows per table, ledger entries, finished heartbeats, finished work, sent messages of the outbox, '
    'access-log rows and cache entries older than heartbeat_config.retention_days (90). Never the message log or memories. '
    'The maintenance pass calls it; returns the counts.';
COMMENT ON FUNCTION dionysus_internal.table_bytes(text[]) IS 'Total sizes (with indexes and TOAST) of the named dionysus tables, in bytes.';
COMMENT ON FUNCTION action_costs() IS 'The cost of every action (heartbeat_config.cost_<action>) as a jsonb object, cheapest first.';
COMMENT ON FUNCTION dionysus_internal.recently_recalled(timestamptz, integer) IS
    'The memories recall touched since a time that the access log still holds, newest first; none on a hot standby (the log is unlogged).';
COMMENT ON FUNCTION activated_themes(integer) IS
    'Themes recall touched in the last day: the concepts of recently recalled memories, else the memories themselves (for the heartbeat context).';
COMMENT ON FUNCTION dionysus_internal.check_self_model(text, text, double precision) IS
    'Internal: the shared checks of set_identity_aspect and set_worldview_belief (a statement, a confidence in [0, 1]).';
COMMENT ON FUNCTION dionysus_internal.complete_parent_goals(uuid) IS 'Internal: completes a goal''s parents, up the hierarchy, once all their children are completed (§4.6).';
COMMENT ON FUNCTION dionysus_internal.enforce_goal_limits(uuid) IS
    'Internal: keeps the goal limits (max_active_goals, max_queued_goals) by demoting the least recently touched overflow one level, never keep.';
COMMENT ON FUNCTION dionysus_internal.goal_brief(dionysus.goals) IS 'Internal: a goal as the heartbeat context shows it (with its last progress and open blockers).';
COMMENT ON FUNCTION dionysus_internal.goal_level(dionysus.goal_priority) IS 'Internal: the rank of a priority (active 3, queued 2, backburner 1, closed 0).';
COMMENT ON FUNCTION dionysus_internal.goal_open_blockers(dionysus.goals) IS 'Internal: a goal''s unresolved blockers: free texts, and ids of goals not completed.';
COMMENT ON FUNCTION dionysus_internal.heartbeat_config_check() IS 'Trigger: heartbeat_config values must be finite numbers >= 0 (carry_over, the working-memory decay and floor and procedure_match_similarity within [0, 1]; working_memory_capacity a whole number within [1, 200], procedure_match_max within [0, 10]).';
COMMENT ON FUNCTION dionysus_internal.heartbeat_interval_minutes() IS 'The time between heartbeats in minutes (the dionysus.heartbeat_interval setting, default 60).';
COMMENT ON FUNCTION heartbeat_observe() IS 'The environment a heartbeat observes (§5.1): time, the person''s presence and silence, pending work, system status.';
COMMENT ON FUNCTION dionysus_internal.heartbeat_setting(text) IS 'One value of heartbeat_config; an unknown key is an error naming it.';
COMMENT ON FUNCTION dionysus_internal.messages_immutable() IS 'Trigger: the message log is immutable (only links that deletions clear may change).';
COMMENT ON FUNCTION dionysus_internal.require_goal(uuid, text) IS 'Internal: the goal, locked, or an error naming the argument.';
COMMENT ON FUNCTION dionysus_internal.require_outbox(uuid) IS 'Internal: the outbox message, locked, or an error naming outbox_id.';
COMMENT ON FUNCTION set_identity_aspect(text, double precision) IS
    'Adds an identity aspect (who the agent takes itself to be), or updates its confidence; returns its id (reflect writes these).';
COMMENT ON FUNCTION set_worldview_belief(text, double precision) IS
    'Adds a worldview belief, or updates its confidence; returns its id (reflect writes these).';
COMMENT ON VIEW active_goals IS 'Active goals, most recently touched first.';
COMMENT ON VIEW goal_backlog IS 'Open goals by priority.';

-- ---------------------------------------------------------------------------------------
-- The conversation organ
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE messages IS
    'The immutable message log (seed 004 raw_messages): every turn once per (platform, platform_message_id), chained to the '
    'previous turn of its channel, with the episodic memory it became.';
COMMENT ON TABLE prompt_templates IS
    'Versioned prompt templates with {{placeholders}}, one active version per key; set_prompt_template() adds a version.';
COMMENT ON FUNCTION log_message(text, text, text, text, text, boolean, boolean, uuid, text) IS
    'Logs one turn in one transaction: deduplicated by the platform''s message id, chained, remembered as an episodic memory '
    'private to the turn''s person (the author of a person''s turn; for the bot''s, person or the author of reply_to); '
    'a person''s turn also starts the session and queues its extraction. Returns {message_id, duplicate, prev_message_id, memory_id, work_id, person}.';
COMMENT ON FUNCTION chat_context(uuid, integer, integer, boolean, integer) IS
    'Everything a reply needs: the last turns of the channel, recalled memories (turns in view left out; facts marked), '
    'triples about the entities named and the person, the people in their life it names with how they relate (people), the active goals, the person''s north stars and objectives; only what the message''s person may see. '
    'With use_archetype, the nearest context archetype sets the turns, memories, similarity threshold and triple depth (reported as archetype), '
    'within max_memories and max_turns (which alone apply when no archetype is near enough). '
    'working_memory: the session''s focus, open threads and what earlier turns brought up (a context with memories steps it once per turn; NULL outside a person''s open session). '
    'All within a token budget (027): the archetype''s task''s (casual chat''s without one), or budget tokens (100 to 200000); each item at the richest level that fits '
    '(a memory''s or turn''s content is that level''s text, with level and tokens), the rest cut; context_budget reports what was included at which level and what was cut.';
COMMENT ON FUNCTION queue_reply(uuid, text, text) IS
    'The reply to a person''s message, in the outbox and reserved for the worker that sends it (reserve → send → confirm). One reply '
    'per message: asked again it returns the reply already queued (re-reserved for the caller when nobody else holds it); with '
    'content NULL it only looks for that reply.';
COMMENT ON FUNCTION prompt_template(text) IS 'The active version of a prompt template: {key, version, template, temperature}.';
COMMENT ON FUNCTION set_prompt_template(text, text, double precision, text) IS
    'Adds a new active version of a prompt template (the previous stays, inactive); returns the version number.';
COMMENT ON FUNCTION end_idle_session() IS
    'Ends the session when the person has been silent for session_idle_minutes; with significant_session_turns or more of '
    'their turns it requests a heartbeat. Returns whether it ended one.';
COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver (seed 000 §6.4–6.5): summaries of closed episodes, concepts of young memories, '
    'the summary and micro levels of long fresh memories (027). '
    'Closes episodes left open past the gap first. Returns how many were queued.';
COMMENT ON FUNCTION episode_transcript(uuid) IS 'An episode''s memories in order, for its summary.';

-- ---------------------------------------------------------------------------------------
-- Privacy between people, trust of web content
-- ---------------------------------------------------------------------------------------
COMMENT ON FUNCTION person_key(text, text) IS 'The key of a person on a platform, ''platform:author_id'': what private_to lists.';
COMMENT ON FUNCTION dionysus_internal.visible_to(text[], text) IS
    'Whether a person may see something private to private_to: it is private to nobody, or to nobody but them.';
COMMENT ON FUNCTION dionysus_internal.privacy_union(text[], text[]) IS 'The privacy of something made of two things: the people of both, sorted; NULL if neither is private.';
COMMENT ON FUNCTION dionysus_internal.memory_privacy(uuid[]) IS 'The people whose private words these memories hold (what is made from them is as private).';
COMMENT ON FUNCTION dionysus_internal.web_only_basis(text) IS
    'True when the active memories closest to a text (five nearest, similarity >= 0.5) exist and all came from the web: '
    'identity, worldview and reach-outs resting on it alone are refused.';
COMMENT ON FUNCTION reach_out_target(text) IS
    'Whom a reach-out goes to: the named person (who must have talked here), else whoever wrote last; {person, platform, author_id}.';
COMMENT ON FUNCTION known_people() IS 'The people who talk with Dionysus, most recent first (for the heartbeat''s context).';

-- ---------------------------------------------------------------------------------------
-- The proactive mind (014_proactive.sql)
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE clock IS 'The one clock of the proactive mind: frozen_at set, time stands there (tests replay days by advancing it); NULL, it is now().';
COMMENT ON TABLE proactive_config IS 'Every rate, threshold and limit of the proactive mind, as data (UPDATE to tune).';
COMMENT ON TABLE contact_weights IS 'The neuron of contact: pressure = sum of weight × input (social debt, acquaintance, task pressure, curiosity).';
COMMENT ON TABLE personality IS 'Traits in [0, 1] that change behaviour (thresholds, back-off, curiosity) and the composer''s voice; they move very slowly.';
COMMENT ON TABLE agent_state IS 'The agent''s own state: vitality (0–1, not the heartbeat''s energy), mode, disturbance, and its dynamic tick.';
COMMENT ON TABLE people IS 'Each person as the proactive mind sees them: social debt, curiosity, task pressure, restraint, mood, contact history, a contact their rule asked for, the check-in cadence.';
COMMENT ON TABLE person_rhythm IS 'When a person writes, by hour of their week (decayed counts): the belief about when they are available.';
COMMENT ON TABLE person_signals IS 'What a person said about contact (busy, asleep, away, stop checking in), held until it expires or they write again.';
COMMENT ON TABLE events IS 'The event queue (CRITICAL 0 … IDLE 4): merged, dropped under load, filtered while the agent rests, processed by the tick.';
COMMENT ON TABLE event_counters IS 'Events that never reached processing, by why (merged, dropped by age, dropped by overload, filtered) and priority.';
COMMENT ON TABLE event_patterns IS 'Pattern accumulation: this many events of a type within the window become one HIGH event.';
COMMENT ON TABLE contact_evaluations IS 'Every evaluation of contact with its inputs, weights, contributions, threshold, gates, outcome and decision: why Dionysus wrote, or did not.';
COMMENT ON VIEW proactive_health IS 'The proactive mind at a glance: mode, vitality, pressure, tick, queued and lost events, waiting crossings, the last evaluation.';
COMMENT ON FUNCTION clock_now() IS 'The proactive mind''s time: the frozen test clock if set, else now().';
COMMENT ON FUNCTION set_clock(timestamptz) IS 'Freezes the clock at an instant (NULL: real time again). For tests and replays; not granted to the driver.';
COMMENT ON FUNCTION advance_clock(interval) IS 'Moves the clock forward (freezing it at now() first if it ran in real time); returns the new time. Not granted to the driver.';
COMMENT ON FUNCTION is_acknowledgement(text) IS 'True for a message that only acknowledges ("ok", "thanks", "👍"): it needs no reply and no model.';
COMMENT ON FUNCTION push_event(text, text, integer, jsonb, text, text) IS
    'Queues an event (source communication/thoughts/internal/time, a type, priority 0 CRITICAL … 4 IDLE): the same again within 5 s is merged; patterns are hoisted; HIGH and CRITICAL bring the next tick forward.';
COMMENT ON FUNCTION explain_contact(text, integer) IS
    'Why Dionysus wrote or did not: the latest evaluations (of one person, or anyone), each with its inputs, weights, contributions, threshold, gates and decision.';
COMMENT ON FUNCTION proactive_tick() IS
    'One tick of the proactive mind: scheduled events released, the hour''s time events, events dropped, filtered or processed (with their rules), vitality and disturbance, the tick rules moving each person''s state, contact evaluated where the cadence is due, the next interval computed. The scheduler calls it when due.';
COMMENT ON FUNCTION contact_opportunity(uuid) IS 'What the thinking layer needs at a crossing: the explanation, the person''s own recent turns, their open requests, the personality.';
COMMENT ON FUNCTION decide_contact(uuid, text, text, text, text) IS
    'The thinking layer''s answer to a crossing: wait (the check-in interval backs off) or message (gates checked again, energy spent, the message queued for the person exactly once). Idempotent.';
COMMENT ON FUNCTION set_person_time_zone(text, text) IS 'The person''s time zone (an IANA name): their quiet hours and rhythm are in their local time.';
COMMENT ON FUNCTION dionysus_internal.proactive_setting(text) IS 'One value of proactive_config; an unknown key is an error naming it.';
COMMENT ON FUNCTION dionysus_internal.trait(text) IS 'A personality trait''s value (0.5 if unknown).';
COMMENT ON FUNCTION dionysus_internal.priority_name(smallint) IS 'CRITICAL, HIGH, NORMAL, LOW or IDLE.';
COMMENT ON FUNCTION dionysus_internal.count_event(text, smallint, bigint) IS 'Counts events that did not reach processing.';
COMMENT ON FUNCTION dionysus_internal.person_row(text) IS 'The person''s row, created on first sight, locked.';
COMMENT ON FUNCTION dionysus_internal.hour_of_week(timestamptz, text) IS 'Hour of the week (Monday 00:00 = 0) of an instant in a time zone.';
COMMENT ON FUNCTION dionysus_internal.availability(text, timestamptz) IS
    'The belief that a person is available at an instant: their learned rhythm blended with the day/night prior by the confidence in it.';
COMMENT ON FUNCTION dionysus_internal.contact_signal(text, timestamptz, text) IS 'The person''s own word about contact in a message (busy, asleep, away, stop checking in) and when it ends.';
COMMENT ON FUNCTION dionysus_internal.note_person_message(text, uuid, text) IS 'A person wrote: rhythm, signals, social debt, an answered contact, the check-in cadence reset.';
COMMENT ON FUNCTION dionysus_internal.evaluate_contact(text) IS 'One evaluation of contact with one person, written to contact_evaluations; NOTIFY dionysus_contact at a crossing.';
COMMENT ON FUNCTION dionysus_internal.note_miss(text, timestamptz, double precision) IS 'A contact at that hour of the person''s week went unanswered (1) or was answered late (0.5): less availability believed there.';
COMMENT ON FUNCTION dionysus_internal.proactive_config_check() IS 'Trigger: proactive_config values within their ranges (shares in [0, 1], time constants above 0, whole hours).';
COMMENT ON FUNCTION dionysus_internal.proactive_tick_due() IS 'Whether the proactive tick''s interval is up.';
COMMENT ON FUNCTION dionysus_internal.note_contact_delivered(text) IS 'A contact Dionysus started reached the person: awaiting their reply (unless they asked for it), social debt relieved.';

-- ---------------------------------------------------------------------------------------
-- The proactive mind's rules and learning (015_mind_rules.sql)
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE mind_rules IS 'Rules as data: trigger (event type or tick), a declarative condition over named values, intents (adjust, create_objective, schedule_event, request_contact), weight and use; built-in, the person''s own, or learned (those strengthen with use, decay unused, are forgotten).';
COMMENT ON TABLE rule_firings IS 'Every rule pass that fired: the values the conditions read, and what each rule changed or made.';
COMMENT ON TABLE learning_log IS 'Every change learned from how a person answered or ignored a contact (timing, topic weight, personality), with before, after and cause.';
COMMENT ON TABLE person_contact_weights IS 'What a person''s answers taught about each reason to write to them: a factor in [0.5, 1.5] on the global contact weight.';
COMMENT ON FUNCTION rule_vocabulary() IS 'Everything a rule may use: triggers, values a condition reads, operators, the condition grammar and the intents. The fast model is given this; add_rule accepts nothing else.';
COMMENT ON FUNCTION add_rule(text, text, jsonb) IS
    'A rule in the person''s words (as the fast model proposed it: name, trigger, condition, intents): checked against rule_vocabulary(), stored as theirs, acting only on them. Errors name the part that is wrong.';
COMMENT ON FUNCTION person_rules(text) IS 'A person''s rules (active, forgotten) and the built-ins that apply to everyone, with weight and use.';
COMMENT ON FUNCTION remove_rule(text, bigint) IS 'The person takes one of their own rules back; false if it is not theirs or not active.';
COMMENT ON FUNCTION contact_feedback(uuid, text, text) IS 'The fast model''s reading (positive, neutral, negative) of a reply the cues could not judge; learned from once.';
COMMENT ON FUNCTION explain_learning(text, integer) IS 'What the proactive mind learned from answers and silences, newest first: what moved, from what to what, and why.';
COMMENT ON FUNCTION dionysus_internal.check_rule_condition(jsonb, text, integer) IS 'Checks a rule condition against the grammar and vocabulary (at most 32 parts, 6 deep); errors name the path.';
COMMENT ON FUNCTION dionysus_internal.check_rule_intents(jsonb) IS 'Checks a rule''s intents (1 to 8, each adjust, create_objective, schedule_event or request_contact with its bounds); errors name the intent.';
COMMENT ON FUNCTION dionysus_internal.rule_holds(jsonb, jsonb) IS 'Whether a checked condition holds for the values (an unknown value makes its comparison false).';
COMMENT ON FUNCTION dionysus_internal.rule_values(text, timestamptz, dionysus.events) IS 'The values rules read for one person (or none) at an instant.';
COMMENT ON FUNCTION dionysus_internal.run_rules(text, text, double precision, dionysus.events) IS
    'Runs the active rules of a trigger for a person: conditions read once, intents applied in a fixed order (adjust, create_objective, schedule_event, request_contact), the pass logged, learned rules strengthened.';
COMMENT ON FUNCTION dionysus_internal.decay_rules() IS 'Learned rules unused for a day lose weight; below rule_forget_below they are forgotten.';
COMMENT ON FUNCTION dionysus_internal.message_tone(text) IS 'The tone of a message in [-1, 1] from cheap cues (warm or cold words, emoji, exclamation).';
COMMENT ON FUNCTION dionysus_internal.reply_signal(text, double precision, double precision) IS 'How good a reply to a contact was (latency, length, tone) in [-1, 1], and whether the cues were too mixed to tell.';
COMMENT ON FUNCTION dionysus_internal.learn_from_contact(text, uuid, timestamptz, double precision, text) IS
    'Learns from one answered or ignored contact: its hour (fast), the reason it was sent for (moderate), shyness, independence and patience (very slow); every change logged.';
COMMENT ON FUNCTION dionysus_internal.evaluate_requested_contact(dionysus.people) IS 'Weighs a contact the person''s own rule asked for: their word, one at a time, a daily limit; lapses when it cannot go out in time.';
COMMENT ON FUNCTION note_reaction(text, text, text, text) IS
    'A person reacted to a message Dionysus sent them: an event, and on a contact still waiting, its answer (learned from by the emoji''s tone, no reply, no model). Reactions to messages sent to others are ignored.';
COMMENT ON FUNCTION dionysus_internal.mind_rules_check() IS 'Trigger: a rule''s condition and intents are checked however they arrive.';
COMMENT ON FUNCTION dionysus_internal.require_own_memory(text, uuid) IS
    'Refuses (42501) a memory that is not the person''s own (private to them alone), without saying whether it exists.';
COMMENT ON FUNCTION forget_own(text, uuid) IS
    'Other agents (MCP): deletes one of the person''s own memories for good. Shared memories and other people''s are refused (42501). Runs with the extension owner''s rights; the driver''s role may call it, PUBLIC may not.';
COMMENT ON FUNCTION supersede_own(text, uuid, text, double precision, double precision, text) IS
    'Other agents (MCP): replaces one of the person''s own memories with what is true now (supersede); others'' and shared ones are refused (42501).';
COMMENT ON FUNCTION person_goals(text, integer) IS 'The companion''s active, queued and back-burner goals this person may see, the most pressing first.';
COMMENT ON FUNCTION person_status(text) IS
    'How the companion is doing as one person may see it: energy, heartbeats, their open goals, the memories they may see and own.';

COMMENT ON TABLE cue_phrases IS 'Cheap recognition before any model: regular expressions (case-insensitive) for an explicit north star and for phrases that may declare one.';
COMMENT ON TABLE north_stars IS 'What matters most to each person: protected facts (never decayed, superseded or deleted by anything automatic), retired only by their word.';
COMMENT ON TABLE feedback IS 'Invisible feedback: a person''s reply to one of Dionysus''s messages (or a command, or a dream item''s button). Never in the message log, never answered.';
COMMENT ON TABLE objectives IS 'The person''s objectives (seed 004): what they are working toward, extracted from their turns; theirs, not Dionysus''s goals.';
COMMENT ON TABLE context_archetypes IS 'Kinds of message and the context shape each selects (turns, memories, similarity threshold, triple depth); the centroid of the examples is computed in the database.';
COMMENT ON TABLE dreams IS 'One nightly dream per local date: what it reviewed since, and what it found.';
COMMENT ON TABLE proposals IS 'What a dream proposes about Dionysus itself (a template, the extraction, an archetype), pending until the person approves or rejects it.';
COMMENT ON FUNCTION dionysus_internal.cue_phrase_check() IS 'Trigger: a cue phrase must be a valid regular expression (22023 otherwise).';
COMMENT ON FUNCTION dionysus_internal.protect_north_star() IS 'Trigger: the memory of a north star is not updated, archived, superseded or deleted except by retire_north_star (the person''s word).';
COMMENT ON FUNCTION north_star_cue(text) IS '''explicit'' for a north star with its prefix ("North star: …"), ''maybe'' for a cue phrase (the fast model decides), else NULL.';
COMMENT ON FUNCTION set_north_star(text, text, uuid) IS
    'Stores a person''s north star (prefix taken off) as a protected fact private to them; the same words twice are one. Returns {north_star_id, memory_id, content, duplicate, ack}.';
COMMENT ON FUNCTION retire_north_star(text, uuid) IS 'The person''s word: one of their north stars is retired and its memory archived; false if it is not theirs or not active.';
COMMENT ON FUNCTION person_north_stars(text) IS 'A person''s active north stars, oldest first.';
COMMENT ON FUNCTION give_feedback(text, text, text, text, text, text, text) IS
    'Stores invisible feedback about one of Dionysus''s messages to this person (about: its platform id; NULL: the last one), idempotent per carrying message. '
    'A message sent to someone else is refused (stored: false). Never touches the message log.';
COMMENT ON FUNCTION undo_feedback(text, text, text) IS 'Takes back the person''s feedback carried by that message of theirs (NULL: their latest).';
COMMENT ON FUNCTION dionysus_internal.note_objective(text, text, double precision, text, uuid) IS
    'One objective from an extraction: the same objective said again (cosine ≥ 0.85) updates saliency and status instead of adding a second.';
COMMENT ON FUNCTION person_objectives(text, boolean) IS 'A person''s pending objectives, most salient first (include_done: the completed too).';
COMMENT ON FUNCTION set_objective_status(text, uuid, text) IS 'The person marks one of their objectives pending, completed or archived; false if it is not theirs.';
COMMENT ON FUNCTION dionysus_internal.invalidate_centroid() IS 'Trigger: an archetype''s centroid is forgotten when its examples change (recomputed at the next match).';
COMMENT ON FUNCTION dionysus_internal.archetype_centroid(text[]) IS 'The mean embedding of an archetype''s example messages.';
COMMENT ON FUNCTION match_archetype(vector, text) IS
    'The active archetype nearest a message''s embedding with its context shape, among the shared ones and the person''s own (theirs stands in for a shared one of its name), when at least archetype_min_similarity near (else only the nearest name); counts the match unless on a standby.';
COMMENT ON FUNCTION match_archetype(vector) IS 'match_archetype among the shared archetypes only (a message of nobody''s).';
COMMENT ON FUNCTION dionysus_internal.schedule_dream() IS
    'Queues tonight''s dream (a dream work item) once per local date, from dream_hour to dream_window_hours after it, in the time zone of whoever wrote last.';
COMMENT ON FUNCTION dream_evidence(uuid) IS
    'What a dream reviews: feedback since the last dream, reply and contact signals, corrections, the templates and archetypes it may change.';
COMMENT ON FUNCTION dionysus_internal.check_proposal(text, text, jsonb) IS 'A proposal''s kind, target and content are checked (22023 naming the part) before it is stored or applied.';
COMMENT ON FUNCTION dionysus_internal.record_dream(uuid, jsonb) IS 'Stores a dream''s proposals as pending (NOTIFY dionysus_dream each), or its note that nothing is worth proposing.';
COMMENT ON FUNCTION pending_proposals() IS 'Proposals waiting for the person (pending or under discussion), oldest first.';
COMMENT ON FUNCTION approve_proposal(uuid, text) IS
    'The person''s approval (decided_by: the person its dream was for, else 42501): a template proposal becomes their own active version of the template, an archetype their own. The only way a dream changes anything, and for nobody else.';
COMMENT ON FUNCTION reject_proposal(uuid, text, text, boolean) IS
    'The person rejects a proposal (decided_by: the person its dream was for, else 42501; discuss: keeps it open as under discussion); false if it is no longer open.';
COMMENT ON TABLE person_prompt_templates IS 'A person''s own versions of a prompt template (approved dream proposals of theirs): used for them instead of the shared one, for nobody else.';
COMMENT ON FUNCTION prompt_template(text, text) IS 'The template as used for a person: their own active version, else the shared one ({key, version, template, temperature[, person]}).';
COMMENT ON FUNCTION activate_own_template(text, text, integer) IS 'Makes one of a person''s own versions of a template theirs again (version NULL: the shared one): rollback in one call.';
COMMENT ON FUNCTION dionysus_internal.proposal_one_way() IS 'Trigger: a proposal''s status moves one way and a decision stands, whoever writes (42501).';
COMMENT ON FUNCTION dionysus_internal.protect_built_in_rules() IS 'Trigger: a built-in rule''s weight and status change only by a role that may write rules (the owner), not the driver''s (42501).';
COMMENT ON FUNCTION activate_prompt_template(text, integer) IS 'Makes any stored version of a template the active one: rollback (or forward) in one call.';

-- ---------------------------------------------------------------------------------------
-- Imports (018_import.sql)
-- ---------------------------------------------------------------------------------------
COMMENT ON TABLE imports IS
    'Histories brought in from elsewhere (dionysus import): whose, what, and how far; a rerun of the same input (person, fingerprint) resumes at position.';
COMMENT ON FUNCTION begin_import(text, text, text, text, integer) IS
    'Starts an import of total turns for a person, or finds the one this input (its fingerprint) began. Returns {import_id, position, total, imported, duplicates, started_at, finished_at}.';
COMMENT ON FUNCTION dionysus_internal.import_time(text, text) IS 'An imported turn''s time, or 22007/22023 naming the argument (not a time, before 1900, or in the future).';
COMMENT ON FUNCTION import_messages(uuid, integer, jsonb) IS
    'A batch of turns at first_position of an import, in one transaction: each into the message log once, at its own time, '
    'as a memory private to the person; their own turns queued for extraction at background priority. A batch sent again skips what is in.';
COMMENT ON FUNCTION import_status(integer) IS 'The latest imports with their progress and the extractions the queue still owes them.';

-- The dream channel (019).
COMMENT ON TABLE mirror_items IS
    'The dream channel: each autonomous activity (reply, check-in, extraction, heartbeat, proposal, dream) as a card with its prompt, posted best effort and as private as what it mirrors.';
COMMENT ON FUNCTION dionysus_internal.mirror_add(text, uuid, text, text[], jsonb, text) IS
    'Adds a dream-channel item once per activity, expires old ones, drops the oldest pending beyond mirror_max_pending, and NOTIFYs dionysus_mirror.';
COMMENT ON FUNCTION mirror_record(text, uuid, text, jsonb, jsonb, text) IS
    'Records a reply, check-in, extraction or heartbeat for the dream channel after the fact; the card comes from the activity''s rows, the driver adds the prompt, metrics and context used. NULL (nothing stored) when the viewer may not see it, or for an imported turn''s extraction.';
COMMENT ON FUNCTION claim_mirror_items(text, text, integer) IS
    'Reserves (1 minute) the oldest dream-channel items waiting to be posted that the viewer may see; items that failed too often are dropped.';
COMMENT ON FUNCTION mirror_settle(uuid, text, text, text, text, boolean) IS
    'A claimed dream-channel item was posted (its platform id) or not (released to retry, or dropped); only its holder may settle it.';
COMMENT ON FUNCTION mirror_view(uuid, text, text) IS
    'A dream-channel item with its full prompt, for the person who pressed View prompt; 42501 for anyone it is not visible to.';
COMMENT ON FUNCTION mirror_feedback(uuid, text, text, text, text, text) IS
    'Feedback from a dream-channel item''s Feedback modal (sentiment, comment), stored about what the item mirrors (source dream); one per interaction.';
COMMENT ON FUNCTION mirror_decide(uuid, text, text, text, text, text) IS
    'Approve, reject or discuss a proposal from its dream-channel card: only the person the dream was for; discuss keeps it pending and stores the note as feedback.';
COMMENT ON FUNCTION dionysus_internal.mirror_dream(uuid, uuid[], text) IS
    'Mirrors a dream''s proposals (or its note that it proposes nothing) to the dream channel; called by record_dream.';

-- Re-indexing (020).
COMMENT ON TABLE embedding_store IS
    'The model that made the stored vectors ({provider, url, model, model_path}, never the API key) and their width; moved only by a re-index swap.';
COMMENT ON TABLE reindex_runs IS
    'Re-index runs (dionysus reindex): the model and extraction template each rebuilds with (taken from the settings, never the caller), its progress note and what its swap replaced.';
COMMENT ON TABLE reindex_vectors IS 'A building run''s new vectors (any width) for memories, episode summaries and objectives.';
COMMENT ON TABLE reindex_extractions IS 'A building run''s new extractions of the person''s turns, applied by the swap.';
COMMENT ON TABLE reindex_tombstones IS 'Facts of a turn that were deleted (forgotten), as a hash of their words: a re-index keeps that turn as it is and learns none of them back from any turn.';
COMMENT ON FUNCTION dionysus_internal.fact_md5(text) IS 'The words of a fact, normalised (case, spacing) and hashed: what a tombstone keeps.';
COMMENT ON FUNCTION dionysus_internal.reindex_tombstone() IS 'Trigger: a deleted fact of a conversation or imported turn leaves a tombstone (reindex_tombstones).';
COMMENT ON FUNCTION dionysus_internal.turn_source(uuid, uuid) IS 'The provenance a turn''s extraction gives its facts and triples: conversation:<id>, or imported:<id> for an imported turn.';
COMMENT ON FUNCTION embedding_store_adopt(boolean) IS
    'Owner only: declares the stored vectors the settings'' model''s, for a store with no memories yet (force: vectors made elsewhere by that model); its width must be the store''s (22000). Anything else is a re-index.';
COMMENT ON FUNCTION dionysus_internal.reindex_runs_guard() IS
    'Trigger: a run''s model comes from the settings when it is created; its model, width and a finished run never change; only its swap ends it as swapped.';
COMMENT ON FUNCTION reindex_start(text) IS
    'Starts rebuilding everything derived from the message log with the current extraction template and embedding settings (one reindex_message work item per person''s turn, vectors by the maintenance pass), or answers the run already building. Returns reindex_status() with resumed and queued.';
COMMENT ON FUNCTION reindex_status() IS
    'The latest re-index run: its model and width, extractions (total, done, failed, waiting), vectors made of how many, phase (extracting, embedding, swapping, swapped, cancelled), note and result.';
COMMENT ON FUNCTION reindex_cancel() IS 'Cancels the building re-index run: its waiting extractions fail, its staged data goes; the old derived data was never touched.';
COMMENT ON FUNCTION dionysus_internal.reindex_stage(dionysus.work_queue, jsonb) IS
    'complete_work of a reindex_message item: its facts, triples and objectives (objects only) are kept for the swap, nothing is applied.';
COMMENT ON FUNCTION dionysus_internal.reindex_sources(text) IS 'What has a vector (memory, episode, objective) and the text it is embedded from.';
COMMENT ON FUNCTION dionysus_internal.reindex_embed_missing(uuid, integer) IS
    'Embeds with the run''s model up to max_items (NULL: all) of what has no new vector yet; the run''s width is its first vector''s.';
COMMENT ON FUNCTION dionysus_internal.reindex_vector(uuid, text, uuid) IS 'A row''s new vector in a run (the swap''s ALTER ... USING).';
COMMENT ON FUNCTION dionysus_internal.reindex_step(integer) IS
    'One maintenance step of the building run: up to batch new vectors, else the swap. NULL when nothing is building.';
COMMENT ON FUNCTION dionysus_internal.reindex_swap(uuid) IS
    'When no extraction waits: in one transaction, every vector replaced (the columns retyped when the width changed), the store moved to the run''s model, each re-read turn''s old facts, triples and pending objectives replaced by its new reading (unless the person corrected, archived or forgot one of them; a completed or archived objective is never reopened), every neighbourhood requeued. Tries its locks and waits for none.';
COMMENT ON FUNCTION embedding_settings() IS 'The embedding model the settings name ({provider, url, model, model_path, model_key}), never the API key.';
COMMENT ON FUNCTION dionysus.reindex_embed_real(uuid, text[]) IS 'Embeddings by a building re-index run''s model, without the cache, in input order (internal to the re-index).';

-- Memory that fades (021).
COMMENT ON TABLE decay_config IS
    'How memories fade (seed 003 §8): the stage thresholds in effective days, what slows fading (recall, importance, feeling), the mention similarity that resets a memory''s clock, the types that decay, the pass interval and batch, and the off switch (enabled). UPDATE to tune.';
COMMENT ON TABLE decay_mentions IS 'New memories not yet compared with older ones: a near repeat resets their decay clock (the next decay pass).';
COMMENT ON TABLE decay_log IS 'Every automatic decay step (mentioned, waiting for a level, fading, distant, forgotten) with its inputs; ids and numbers only, never words.';
COMMENT ON VIEW memory_decay IS 'The decay rule for every memory: its stage, effective days and slowdown, why it is exempt, and the stage its age calls for (due).';
COMMENT ON FUNCTION decay_pass() IS
    'Owner only: one decay pass now, after any running one ends (the maintenance worker runs one every decay_config.pass_interval): mentions reset clocks, then each memory due a later stage moves one stage, compressing (summary, then micro line, asked of the model when missing) before it is deleted. Returns what it did.';
COMMENT ON FUNCTION dionysus_internal.decay_run() IS 'A decay pass (decay_pass, decay_step); skips when another pass holds the decay lock (decay_pass takes it first, waiting).';
COMMENT ON FUNCTION dionysus_internal.decay_step() IS 'The maintenance worker''s decay step: a pass when the last one is decay_config.pass_interval old on the clock, else NULL.';
COMMENT ON FUNCTION dionysus_internal.decay_reinforce(dionysus.decay_config) IS
    'Resets the decay clock of older memories a newly made one repeats (at least mention_similarity near, as private or shared), logged as mentioned.';
COMMENT ON FUNCTION dionysus_internal.queue_decay_mentions() IS 'Trigger: a new active memory is queued to be compared with older ones (decay_mentions).';
COMMENT ON FUNCTION dionysus_internal.clip_words(text, integer) IS 'Text clipped to at most n characters at a word boundary, marked with an ellipsis (decay''s fallback when the model gives no shorter level).';
COMMENT ON FUNCTION dionysus_internal.stage_rank(text) IS 'The order of the stages: fresh 1, fading 2, distant 3, forgotten 4.';
COMMENT ON FUNCTION memory_stage(uuid) IS
    'Where a memory is in its life and why: stage, exemption, effective days and slowdown, the next stage and when it falls due, the level it waits for, and its decay history. A forgotten memory answers from its history.';
COMMENT ON FUNCTION pin(uuid, boolean) IS 'Pins a memory so it never decays (pinned false: unpins it); returns the new state.';
COMMENT ON FUNCTION pin_own(text, uuid, boolean) IS 'pin for one of the person''s own memories (an agent acting for them); anyone else''s is refused (42501).';
COMMENT ON FUNCTION dionysus_internal.store_levels(dionysus.work_queue, jsonb) IS
    'complete_work of a condense_memory item: its memory''s summary and micro line, where it has none yet.';
COMMENT ON FUNCTION dionysus_internal.condense_source(uuid) IS 'What a condense_memory item shows the model: the memory''s words, levels and stage.';

-- Censors (022).
COMMENT ON TABLE censor_config IS 'How near words must be to a censor''s trigger to match it (similarity), and how many active censors a person may have. UPDATE to tune.';
COMMENT ON TABLE censors IS
    'Things not to do (seed 002): a trigger (embedded, with the model that made it) and optional pattern, a scope (person, kinds, local hours from_hour to to_hour, any_content), a reason, a severity (warn, block, absolute), where it was learned, its activations and false positives, and its escalation threshold.';
COMMENT ON TABLE censor_events IS 'Every censor''s life: added, activated (with what was being done), escalated, de_escalated, false_positive, retired.';
COMMENT ON FUNCTION censor_cue(text) IS 'Whether words may ask for a censor ("never message me before 9"): cue_phrases of kind censor_maybe; the fast model then decides.';
COMMENT ON FUNCTION dionysus_internal.store_model_key() IS 'The model the store''s vectors are made with now (embedding_store.model_key).';
COMMENT ON FUNCTION dionysus_internal.censor_checked(text, text, text, text, text[], integer, integer, boolean) IS 'Validates a censor''s words and scope (22023 naming the argument); returns its severity.';
COMMENT ON FUNCTION add_censor(text, text, text, text, text, text[], integer, integer, boolean, text, uuid) IS
    'Owner only: adds a censor for a person, or for everyone (person NULL); the same words for the same person return the censor there is. kinds: reply, reach_out or heartbeat action names; from_hour/to_hour: the local hours it holds in, [from, to), wrapping past midnight when from > to; any_content: it holds whatever is said.';
COMMENT ON FUNCTION add_own_censor(text, text, text, text, text, text[], integer, integer, boolean, uuid) IS
    'A person''s own censor in their words (the driver, after the fast model read them), learned from their message (which must be theirs, 42501).';
COMMENT ON FUNCTION check_censors(text, text, text, timestamp with time zone) IS
    'The censors that hold for these words (the person''s and everyone''s; kind and local hour narrowing them): severity, action (warn or block), reason, matched_by (similarity, pattern or scope), similarity (to the words or their nearest sentence) and personal (a person''s own). Reads only.';
COMMENT ON FUNCTION dionysus_internal.censor_hits(text, text, text) IS 'check_censors as the JSON list censor_record takes.';
COMMENT ON FUNCTION censor_record(text, text, jsonb, jsonb) IS
    'Counts one operation''s censor hits (censor_hits): each activation written with what was being done, a warn raised to a block at its threshold, a trigger of an earlier model embedded again; returns {verdict: pass, warn or block, censors, reasons}.';
COMMENT ON FUNCTION censor_gate(text, text, text, jsonb) IS
    'The hooks'' gate (reach-outs, contacts, replies): censor_hits then censor_record; returns {verdict: pass, warn or block, censors, reasons}.';
COMMENT ON FUNCTION dionysus_internal.censor_of(uuid, text) IS 'The censor a person may change (their own; everyone''s only in a superuser''s session); the same 42501 whether or not it exists.';
COMMENT ON FUNCTION mark_censor_false_positive(uuid, text, text) IS
    'The person says a censor stopped something fine: counted, block steps down to warn, a warn retires; an absolute stays. Returns its state.';
COMMENT ON FUNCTION retire_censor(uuid, text) IS 'The person''s word lifts one of their censors (an absolute one too); everyone''s censors by the owner (person NULL).';
COMMENT ON FUNCTION person_censors(text) IS 'The active censors that hold for a person (theirs and everyone''s) with their scope and counts; never another person''s.';

-- The people in a person's life (023).
COMMENT ON TABLE relation_words IS 'Words that name a relation rather than a person ("mom" is whoever is their mother): word → relation. The owner''s to extend.';
COMMENT ON TABLE known_persons IS
    'The people in each person''s life (of_person: whose life; nobody else ever sees the row): name, relation to the person, how they feel about them (-1…1), traits, topics, mentions and confidence.';
COMMENT ON TABLE person_aliases IS 'Every name a person used for someone (keys lower-cased, a leading "my" dropped); one someone per key in a person''s life.';
COMMENT ON TABLE person_relations IS 'How two people in a person''s life relate: kind, sentiment −1…1, confidence, source (said or inferred: an inference never overwrites what was said), the turn it came from, last update.';
COMMENT ON TABLE person_sources IS 'Where each thing known about someone came from: what (named, alias, relation, feeling, trait, topic, merged, related), its value and the turn.';
COMMENT ON FUNCTION dionysus_internal.person_key(text) IS 'A name''s key: lower case, single spaces, no surrounding punctuation, no possessive ''s, a leading "my"/"our" dropped.';
COMMENT ON FUNCTION dionysus_internal.is_self(text) IS 'Whether a name key is the person themselves or Dionysus (user, me, you…): never someone in their life.';
COMMENT ON FUNCTION dionysus_internal.resolve_person(text, text) IS 'The one known person a name means in a person''s life (an alias, else a relation word naming exactly one person in that relation), or NULL.';
COMMENT ON FUNCTION dionysus_internal.person_strings(jsonb, text, integer) IS 'An extraction item''s list of short strings (22023 naming it otherwise).';
COMMENT ON FUNCTION dionysus_internal.person_number(jsonb, text, double precision, double precision) IS 'An extraction item''s number within bounds, or NULL (22023 naming it otherwise).';
COMMENT ON FUNCTION dionysus_internal.person_alias(uuid, text, text, uuid) IS 'Gives a known person a name they were called: never a relation word or the person themselves; a key already someone else''s stays theirs.';
COMMENT ON FUNCTION dionysus_internal.merge_persons(uuid, uuid, uuid) IS 'Folds one known person into another when the conversation says they are one: aliases, sources, relations, mentions, traits and topics move; a proper name wins over a relation word; 42501 across two people''s lives.';
COMMENT ON FUNCTION dionysus_internal.person_list_add(text[], text[]) IS 'A short list with new words added: no repeats by case, the 20 most recent.';
COMMENT ON FUNCTION dionysus_internal.note_person(text, jsonb, uuid) IS 'One person from an extraction item {name, aliases, same_as, relation, feeling, traits, topics, confidence}: resolved (name and same_as meaning two known people merge them; a proper name in a singular relation is the one known only by its word) or new; aliases added where free; times the turn''s; each change sourced to the turn.';
COMMENT ON FUNCTION dionysus_internal.note_relation(text, jsonb, uuid) IS 'How two people relate, from an extraction item {a, b, kind, sentiment, confidence, source}; either end may be new; an item that cannot be placed (the person themselves, an ambiguous relation word, one person twice, no letters) is skipped, never the turn.';
COMMENT ON FUNCTION dionysus_internal.store_people(text, jsonb, jsonb, uuid) IS 'complete_work''s people and relations of a person''s turn (which must be theirs, 42501), under their people lock (at most 20 of each); returns the people, the relations and how many relations were skipped.';
COMMENT ON FUNCTION dionysus_internal.person_json(dionysus.known_persons, boolean) IS 'A known person as JSON with their aliases and relations both ways; with sources, where each thing came from.';
COMMENT ON FUNCTION person(text, text) IS
    'What is known about someone: every known person the name means (in of_person''s life; in everyone''s when NULL, a superuser''s view only), with aliases, relation, feeling, traits, topics, relations and the turns each came from (the last 30). P0002 when nobody by that name is known; a name or of_person of more than 200 characters is 22001.';
COMMENT ON FUNCTION people_of(text) IS 'The people in one person''s life (never anyone else''s), the most mentioned first, each with aliases and relations.';
COMMENT ON FUNCTION forget_known_person(text, uuid) IS 'The person''s word: forgets someone in their life with every alias, relation and source; false when that someone is not theirs (or nobody).';
COMMENT ON FUNCTION dionysus_internal.ship_template(text, text, text, double precision, text) IS
    'Ships a new version of a prompt template: active where the shipped version it follows (by note) is active; beside the person''s own otherwise (a NOTICE names it). Returns the version.';
COMMENT ON FUNCTION dionysus_internal.people_in_context(text, text[]) IS 'The people a message names (its word groups as keys, resolved in the viewer''s life only) with their relations; at most eight.';

-- Episodes that end with what they meant (024).
COMMENT ON FUNCTION dionysus_internal.episode_participants(uuid) IS 'The people whose turns an episode holds.';
COMMENT ON FUNCTION dionysus_internal.propose_censors(uuid, jsonb) IS
    'A failed episode of one person (not an imported history''s) proposes up to three of its censor candidates to that person (propose_censor_candidates); returns their ids.';
COMMENT ON FUNCTION dionysus_internal.propose_censor_candidates(text, jsonb, text, text, uuid, jsonb) IS
    'SECURITY DEFINER, not the driver''s: proposes up to three {trigger, reason} censors to one person (status proposed, severity warn, learned from an episode or a heartbeat), none that holds, was proposed, or was dropped or lifted for them, at most ten waiting; returns their ids.';
COMMENT ON FUNCTION dionysus_internal.store_episode_outcome(dionysus.work_queue, jsonb) IS
    'complete_work''s result.episode of a summarize_episode item: participants (the episode''s people), outcome, surprise, lessons; a failure proposes its censors.';
COMMENT ON FUNCTION accept_censor(uuid, text) IS 'The person keeps a censor proposed to them: it holds from now on as a warn. Only their own (42501); false when it was not waiting.';
COMMENT ON FUNCTION proposed_censors(text) IS 'The censors proposed to a person and waiting for their word, with the episode each was learned from.';

-- Working memory (025).
COMMENT ON TABLE open_threads IS 'What a person''s conversations left unresolved (the extraction''s threads.opened), theirs until a turn or the person closes it; carried into their next session while younger than open_thread_days.';
COMMENT ON TABLE working_memories IS 'One per person per open conversation episode: focus, turns stepped, the last turn, evictions. Cleared when the episode closes (its record goes to working_memory_sessions).';
COMMENT ON TABLE working_memory_items IS 'What a working memory holds: memories and facts recall brought up, and open threads, each with a relevance that fades every turn that does not bring it up again; capacity-limited, the least relevant leaves first.';
COMMENT ON TABLE working_memory_sessions IS 'The record of each cleared working memory: focus, turns, the items it held at the end (kind, id, relevance, uses), the threads left open, evictions.';
COMMENT ON FUNCTION dionysus_internal.thread_key(text) IS 'A thread''s words lower-cased with punctuation and spacing folded: the same words are the same thread.';
COMMENT ON FUNCTION dionysus_internal.turn_episode(uuid, boolean) IS 'The open episode a turn belongs to, or NULL; with lock, its row FOR SHARE (a close waits for the turn''s working memory, and clears it).';
COMMENT ON FUNCTION dionysus_internal.working_memory_of(text, uuid) IS 'A person''s working memory of an episode, begun when missing with the threads their last sessions left open (at most five); the caller holds their working-memory lock.';
COMMENT ON FUNCTION dionysus_internal.working_memory_evict(uuid) IS 'Drops what fell below working_memory_min_relevance, then the least relevant past working_memory_capacity; counts them; returns how many left.';
COMMENT ON FUNCTION dionysus_internal.working_memory_json(dionysus.working_memories, uuid[]) IS 'A working memory as a context shows it: focus, turn, evictions, open threads, and the items not in view (active, still the person''s to see), most relevant first.';
COMMENT ON FUNCTION dionysus_internal.working_memory_turn(dionysus.messages, jsonb, uuid[], boolean) IS
    'chat_context''s step: a person''s lived turn in an open episode moves their working memory once (what recall found enters or is refreshed, the rest fades, the least relevant leave) and returns it; moves = false or a standby only reads; NULL without a session.';
COMMENT ON FUNCTION dionysus_internal.store_working_focus(text, uuid, jsonb, jsonb) IS
    'complete_work''s result.focus and result.threads ({opened, closed}: at most five strings each) of a person''s turn (which must be theirs, 42501): threads closed by their words or the nearest open one (0.8), opened (the same thread touched at 0.85), the session''s focus set; an imported turn has none.';
COMMENT ON FUNCTION dionysus_internal.end_working_memories() IS 'Trigger: an episode that closes clears its working memories, each recorded in working_memory_sessions first (open threads stay open).';
COMMENT ON FUNCTION working_memory(text) IS 'A person''s working memories now (one per open conversation): focus, turn, open threads and items, most relevant first. Theirs only.';
COMMENT ON FUNCTION person_open_threads(text) IS 'The threads still open with a person, the most recently touched first.';
COMMENT ON FUNCTION close_open_thread(text, uuid) IS 'The person''s word closes one of their open threads (it leaves their working memories); false when it is not theirs or not open.';

-- Procedures (026).
COMMENT ON TABLE procedures IS 'How-to knowledge (seed 002''s K-lines): name, domain, goals (upper fringe), core patterns, tools and concepts, implementation notes (lower fringe), for everyone or one person; activation, success and failure counts and effectiveness ((successes + 1) / (successes + failures + 2)).';
COMMENT ON TABLE procedure_activations IS 'Every activation of a procedure: for whom, in which episode and turn, how (matched by meaning or asked for), its similarity, and the episode''s outcome once known. Once per procedure, episode and person.';
COMMENT ON FUNCTION dionysus_internal.procedure_list(text[], text) IS 'A procedure''s list argument: at most 10 non-empty strings of at most 300 characters, trimmed (22023 naming it otherwise).';
COMMENT ON FUNCTION dionysus_internal.procedure_text(text, text, text[], text[], text[]) IS 'What a procedure''s embedding is of: name, domain, goals, core patterns and concepts.';
COMMENT ON FUNCTION store_procedure(text, text[], text[], text, text[], text[], text[], text) IS
    'Owner only: stores a procedure for everyone (person NULL) or one person; the same name for the same person rewrites its definition and keeps its counts. Needs goals or core patterns. Returns its id.';
COMMENT ON FUNCTION retire_procedure(uuid) IS 'Owner only: a procedure is activated no more and leaves every working memory; its record stays. False when it was not active.';
COMMENT ON FUNCTION dionysus_internal.procedure_activate(uuid, text, dionysus.working_memories, uuid, text, double precision, double precision) IS
    'Activates a procedure for a person: counted and recorded once per episode, loaded into the working memory given; the caller holds the person''s working-memory lock. True when counted now.';
COMMENT ON FUNCTION dionysus_internal.match_procedures(dionysus.messages, dionysus.working_memories) IS
    'The procedures a person''s turn calls for by meaning (theirs and everyone''s, at least procedure_match_similarity, the nearest procedure_match_max), activated into their working memory; returns how many.';
COMMENT ON FUNCTION activate_procedure(text, text, uuid) IS
    'Seed 002''s activate_procedure: the person''s own procedure by that name, else everyone''s, activated for the turn''s episode (the turn must be theirs, 42501) or their latest session, at full relevance in its working memory. P0002 when there is none. Returns it with its counts.';
COMMENT ON FUNCTION dionysus_internal.procedure_json(dionysus.procedures) IS 'A procedure as contexts and readers show it: its bands, counts and effectiveness.';
COMMENT ON FUNCTION person_procedures(text) IS 'The procedures a person may be served (theirs and everyone''s, active), the most effective first.';
COMMENT ON FUNCTION dionysus_internal.score_procedures(uuid, text) IS 'An episode''s outcome scores the procedures it activated, each once (success or failure; mixed and neutral count neither); returns how many.';
COMMENT ON FUNCTION recall_all(text, integer, text) IS
    'Seed 002''s unified recall: memories and facts (as recall scores them), procedures, censors and the person''s own episode summaries (weight_vector · similarity: found by meaning alone), one list ranked by score with kind and detail; only what the person may see.';

-- Context budgets and detail levels (027).
COMMENT ON TABLE context_budgets IS 'Token budgets by task (seed 002: 3K casual chat, 6K a deep conversation, 8K a heartbeat decision, 12K reflection or synthesis), each with the order its sections are served in; a context archetype names its task (budget_task).';
COMMENT ON COLUMN context_archetypes.budget_task IS 'The context budget (context_budgets.task) of this kind of message.';
COMMENT ON FUNCTION count_tokens(text) IS 'The tokens of a text by the embedding model''s WordPiece tokenizer, never truncated (four bytes a token without tokenizer.json).';
COMMENT ON FUNCTION dionysus_internal.fit_context(jsonb, integer, text[], text) IS
    'Fits a context into a budget: the message, north stars, focus and a heartbeat''s goals and surroundings always; then, sections in the order given (the rest after), every item at its smallest level while it fits, then each in rank order up to the richest that fits (full, summary, micro, clipped); cut items leave; the report goes under context_budget.';
COMMENT ON FUNCTION dionysus_internal.fit_task_context(jsonb, text, integer) IS 'fit_context with a task''s budget and section order (budget tokens instead, when given).';
COMMENT ON FUNCTION fit_to_budget(text, jsonb) IS 'A context assembled by the caller (as chat_context''s or heartbeat_begin''s sections), fitted into a task''s budget (context_budgets); reports under context_budget.';
COMMENT ON FUNCTION dionysus_internal.keep_shipped_budgets() IS 'Trigger: the four shipped context budgets (chat, deep_conversation, heartbeat, reflection) are asked for by name; they change, they are not deleted (23001).';
COMMENT ON FUNCTION dionysus_internal.enqueue_condense_levels() IS 'Queues condense_memory work for long fresh memories (over 100 characters, of the last 30 days) lacking a summary or micro line, ten a pass, newest first; returns how many.';

-- The censors an unwelcome heartbeat proposes (028).
COMMENT ON FUNCTION dionysus_internal.feedback_reach_out(dionysus.feedback) IS 'The heartbeat''s reach-out a feedback is about: its sent outbox row (the one it names, or the one whose bot turn it names) and the heartbeat; NULLs when no heartbeat sent it.';
COMMENT ON FUNCTION dionysus_internal.withdraw_heartbeat_lesson() IS 'Trigger: feedback taken back retires the censors its lesson proposed that still wait (with a retired event saying why).';
COMMENT ON FUNCTION dionysus_internal.queue_heartbeat_lesson() IS 'Trigger: negative feedback about a heartbeat''s reach-out queues a heartbeat_censors item (once per feedback).';
COMMENT ON FUNCTION dionysus_internal.heartbeat_lesson_source(uuid) IS 'What a heartbeat_censors item shows the model: the message the person got and their words about it; NULL once the feedback is taken back.';
COMMENT ON FUNCTION dionysus_internal.propose_heartbeat_censors(dionysus.work_queue, jsonb) IS
    'complete_work of a claimed heartbeat_censors item: its candidates proposed to the feedback''s person, learned from the heartbeat; nothing when the feedback was taken back; 22023 when the item is not the lesson of its negative feedback about that heartbeat''s reach-out. Returns their ids.';

-- The store's vectors were made by the model the settings name at install (or upgrade) time.
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
