-- The heartbeat organ: energy, actions, goals, the heartbeat log, the driver's work queue
-- and outbox, sessions.
--
-- Everything here runs inside PostgreSQL with no LLM. The driver supplies decisions and
-- performs the actions that need language or the network, through the queue.
--
-- The global lock order. Every function that takes more than one of these takes them in
-- this order, so no two transactions ever wait on each other in a cycle:
--   0. an import's row in imports    FOR UPDATE  (import_messages; nothing else takes it)
--   1. the channel's advisory lock  'dionysus.channel:<platform>:<channel>'  (log_message, confirm_outbox)
--   2. the heartbeat_state row      FOR UPDATE  (heartbeats, energy, sessions, contact time, refunds)
--   3. the agent_state row          FOR UPDATE  (the proactive tick, HIGH events, contact decisions)
--   4. the goals advisory lock      'dionysus.goals'  (create_goal, change_goal_priority, heartbeat_commit,
--                                   complete_work of a result with goals)
--   5. the row a call is about      the heartbeat_log row of a commit or finish, the work_queue row
--                                   of a complete/fail/release, the outbox row of a confirm/release,
--                                   the contact evaluation of a decision
--   6. a person's row in people     (their turn logged, an evaluation, a contact delivered or decided,
--                                   a rule pass), then the personality rows learning moves;
--                                   a person's north-star lock 'dionysus.north_star:<person>' (set_north_star,
--                                   retire_north_star)
--   7. the learn and episode advisory locks  'dionysus.learn', 'dionysus.episode:<source>'  (learn, remember),
--                                   a template's lock 'dionysus.prompt:<key>' (set_prompt_template,
--                                   activate_prompt_template, approve_proposal after its proposal row),
--                                   a person's people lock 'dionysus.people:<person>' (complete_work's people and
--                                   relations after its facts and triples, forget_known_person; then their rows),
--                                   a person's objectives lock 'dionysus.objectives:<person>' (complete_work's
--                                   objectives, after its facts; only an episode's row and a working-memory
--                                   lock (8, 9) come after it, in complete_work's focus and threads)
--   8. any other rows, by primary key: goals, memories, facts, triples, events, censors (censor_gate);
--      an episode's row FOR SHARE before its working memory (chat_context, complete_work's focus and threads,
--      activate_procedure); a feedback row before the censors its heartbeat lesson proposed (028: FOR SHARE
--      in complete_work's censor_candidates, deleted by /undo, which then retires them); a memory's row
--      before its access-log and memory_access rows (forget, whose delete cascades to its
--      memory_access row; the access-log fold, which takes the memory FOR KEY SHARE and skips one
--      another transaction holds for update or delete; recall only appends to the log and locks
--      no memory)
--   9. a person's working-memory lock 'dionysus.working_memory:<person>' (025: chat_context, complete_work's
--                                   focus and threads at its very end, an episode's close after its row,
--                                   close_open_thread, activate_procedure; then only working-memory,
--                                   open-thread and procedure-activation rows, and procedure rows by id (026))
--      The gap rule closes several episodes in one statement (enqueue_language_work, the maintenance pass,
--      one at a time per database): it skips an episode another transaction holds (SKIP LOCKED, never
--      waiting on a writer), and their working-memory locks are taken episode by episode.
-- Maintenance passes (the worker, run_maintenance()) only try their locks and skip what another
-- pass holds, never waiting: 'dionysus.neighborhood:<memory>' per recomputed memory and
-- 'dionysus.fold_access_log', 'dionysus.decay' (a decay pass, 021, then the decay_config row,
-- then each memory it moves FOR UPDATE SKIP LOCKED; decay_pass() waits for the first two); 'dionysus.lexicon' (refresh_lexicon) is waited for, with nothing else held.
-- A function that may need a lock later (a refund needs the state row) takes it at its start.

-- ---------------------------------------------------------------------------------------
-- Configuration: energy parameters (§2.2), action costs (§2.4), goal limits (§4.2), cooldown (§9.3).
-- ---------------------------------------------------------------------------------------
CREATE TABLE heartbeat_config (
    key         text PRIMARY KEY,
    value       double precision NOT NULL,
    description text NOT NULL DEFAULT ''
);
COMMENT ON TABLE heartbeat_config IS
    'Energy parameters, action costs (cost_<action>), goal limits, cooldown and timeouts. '
    'Values must be finite and >= 0.';

-- Costs and limits must be finite, non-negative numbers: a bad value is refused with its key named.
CREATE FUNCTION dionysus_internal.heartbeat_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.value IS NULL OR NEW.value = 'NaN'::float8 OR NEW.value IN ('Infinity'::float8, '-Infinity'::float8)
       OR NEW.value < 0 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be a finite number >= 0', NEW.key, NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('carry_over', 'working_memory_turn_decay', 'working_memory_min_relevance', 'procedure_match_similarity') AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be within [0, 1]', NEW.key, NEW.value
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (NEW.key = 'working_memory_capacity' AND (NEW.value < 1 OR NEW.value > 200 OR NEW.value <> trunc(NEW.value)))
       OR (NEW.key = 'procedure_match_max' AND (NEW.value > 10 OR NEW.value <> trunc(NEW.value)))
       OR (NEW.key = 'open_thread_days' AND NEW.value > 3650) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "heartbeat_config.%": % must be %within [%, %]', NEW.key, NEW.value,
            CASE WHEN NEW.key = 'open_thread_days' THEN '' ELSE 'a whole number ' END,
            CASE NEW.key WHEN 'working_memory_capacity' THEN 1 ELSE 0 END,
            CASE NEW.key WHEN 'procedure_match_max' THEN 10 WHEN 'open_thread_days' THEN 3650 ELSE 200 END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.heartbeat_config_check() IS 'Trigger: heartbeat_config values must be finite numbers >= 0 (carry_over, the working-memory decay and floor and procedure_match_similarity within [0, 1]; working_memory_capacity a whole number within [1, 200], procedure_match_max within [0, 10]).';
CREATE TRIGGER heartbeat_config_check BEFORE INSERT OR UPDATE ON heartbeat_config
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.heartbeat_config_check();

INSERT INTO heartbeat_config (key, value, description) VALUES
    ('base_regeneration', 10, 'energy regained at the start of each heartbeat'),
    ('max_energy', 20, 'energy ceiling'),
    ('min_energy', 0, 'energy floor: no debt'),
    ('carry_over', 1.0, 'share of unused energy kept to the next heartbeat'),
    ('cost_observe', 0, 'free, always performed'),
    ('cost_review_goals', 0, 'free, always performed'),
    ('cost_remember', 0, 'free, always performed'),
    ('cost_recall', 1, 'retrieval'),
    ('cost_connect', 1, 'memory'),
    ('cost_reprioritize', 1, 'goals'),
    ('cost_reflect', 2, 'internal'),
    ('cost_maintain', 2, 'memory'),
    ('cost_brainstorm_goals', 3, 'goals'),
    ('cost_inquire_shallow', 3, 'research'),
    ('cost_synthesize', 4, 'creative'),
    ('cost_reach_out_user', 5, 'communication'),
    ('cost_inquire_deep', 6, 'research'),
    ('cost_reach_out_public', 7, 'communication'),
    ('cost_rest', 0, 'meta: bank the remaining energy'),
    ('max_active_goals', 3, 'active goals at most; overflow is demoted to queued'),
    ('max_queued_goals', 10, 'queued goals at most; overflow is demoted to backburner'),
    ('reach_out_cooldown_hours', 4, 'no reach_out_user this soon after the last one, unless the user spoke since'),
    ('stale_goal_days', 7, 'an active goal untouched this long is stale'),
    ('heartbeat_timeout_minutes', 15, 'an unfinished heartbeat silent this long (its driver stopped touching it) is closed with the fallback'),
    ('work_max_attempts', 3, 'attempts of a queued action before it fails for good'),
    ('work_lease_minutes', 10, 'a claimed action not completed within this goes back to the queue'),
    ('work_retry_seconds', 30, 'first retry delay of a failed action; doubles with each attempt'),
    ('session_idle_minutes', 15, 'a conversation with no message for this long is ended'),
    ('significant_session_turns', 3, 'a session with at least this many messages from the person requests a heartbeat when it ends'),
    ('summary_delay_minutes', 5, 'a closed episode waits this long before it is summarised (§6.4)'),
    ('concept_window_hours', 24, 'memories younger than this get their concepts extracted (§6.5)'),
    ('outbox_lease_seconds', 120, 'a message reserved for sending and not confirmed within this goes back to the outbox'),
    ('retention_days', 90, 'the maintenance pass prunes ledger, heartbeat log, finished work, sent messages, access log and cache older than this (never the message log)');

-- ---------------------------------------------------------------------------------------
-- Heartbeat state (singleton) and the energy ledger.
-- ---------------------------------------------------------------------------------------
CREATE TABLE heartbeat_state (
    id                       integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    current_energy           double precision NOT NULL DEFAULT 10 CHECK (current_energy >= 0),
    heartbeat_count          integer NOT NULL DEFAULT 0,
    last_heartbeat_at        timestamptz,
    next_heartbeat_at        timestamptz,
    in_flight                uuid,
    paused                   boolean NOT NULL DEFAULT false,
    requested_at             timestamptz,
    request_reason           text,
    session_active           boolean NOT NULL DEFAULT false,
    session_started_at       timestamptz,
    last_user_interaction_at timestamptz,
    last_user_contact_at     timestamptz,
    last_notified_at         timestamptz,
    updated_at               timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE heartbeat_state IS 'The single heartbeat state row: energy, count, schedule, session, in-flight heartbeat.';
INSERT INTO heartbeat_state (id) VALUES (1);

-- The scheduler's last tick in this database (errors are followed by back-off).
CREATE TABLE scheduler_status (
    id                   integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    last_tick_at         timestamptz,
    last_error           text,
    last_error_at        timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0
);
INSERT INTO scheduler_status (id) VALUES (1);

-- Every change of energy, with the heartbeat and action it belongs to.
CREATE TABLE energy_ledger (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    heartbeat_id  uuid,
    action        text,
    delta         double precision NOT NULL,
    energy_before double precision NOT NULL,
    energy_after  double precision NOT NULL,
    reason        text
);
COMMENT ON TABLE energy_ledger IS 'Every change of energy, with the heartbeat and action it belongs to.';
CREATE INDEX energy_ledger_heartbeat ON energy_ledger (heartbeat_id);
-- What retention prunes (prune_history, 011), found by index: the maintenance pass asks every 30 s.
CREATE INDEX energy_ledger_at ON energy_ledger (at);

-- ---------------------------------------------------------------------------------------
-- Goals (§4, appendix A).
-- ---------------------------------------------------------------------------------------
CREATE TYPE goal_priority AS ENUM ('active', 'queued', 'backburner', 'completed', 'abandoned');
CREATE TYPE goal_source AS ENUM ('curiosity', 'user_request', 'identity', 'derived', 'external');

CREATE TABLE goals (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    title              text NOT NULL CHECK (length(btrim(title)) > 0),
    description        text,
    priority           goal_priority NOT NULL DEFAULT 'queued',
    source             goal_source NOT NULL DEFAULT 'curiosity',
    parent_goal_id     uuid REFERENCES goals (id) ON DELETE SET NULL,
    progress           jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(progress) = 'array'),
    -- Goal ids (resolved when those goals complete) and/or free-text blockers.
    blocked_by         jsonb CHECK (blocked_by IS NULL OR jsonb_typeof(blocked_by) = 'array'),
    emotional_valence  double precision NOT NULL DEFAULT 0.0
        CONSTRAINT valid_valence CHECK (emotional_valence >= -1 AND emotional_valence <= 1),
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_touched       timestamptz NOT NULL DEFAULT now(),
    completed_at       timestamptz,
    abandoned_at       timestamptz,
    abandonment_reason text,
    -- As memories.private_to: a goal one person asked for is theirs.
    private_to         text[],
    CHECK (parent_goal_id IS NULL OR parent_goal_id <> id)
);
COMMENT ON TABLE goals IS 'The goal backlog: active, queued, backburner, completed, abandoned.';
CREATE INDEX goals_priority ON goals (priority) WHERE priority IN ('active', 'queued');
CREATE INDEX goals_parent ON goals (parent_goal_id);
CREATE INDEX goals_last_touched ON goals (last_touched DESC);

CREATE TABLE goal_memory_links (
    goal_id    uuid NOT NULL REFERENCES goals (id) ON DELETE CASCADE,
    memory_id  uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    link_type  text NOT NULL CHECK (link_type IN ('origin', 'progress', 'completion', 'blocker')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (goal_id, memory_id, link_type)
);
COMMENT ON TABLE goal_memory_links IS 'Goal–memory links: origin, progress, completion, blocker.';
CREATE INDEX goal_memory_links_memory ON goal_memory_links (memory_id);

-- ---------------------------------------------------------------------------------------
-- Identity aspects and worldview beliefs (seeded empty; reflect updates them).
-- ---------------------------------------------------------------------------------------
CREATE TABLE identity_aspects (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    aspect     text NOT NULL CHECK (length(btrim(aspect)) > 0),
    aspect_key text GENERATED ALWAYS AS (lower(btrim(aspect))) STORED UNIQUE,
    confidence double precision NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE identity_aspects IS 'Who the agent takes itself to be, with confidence (written by reflect).';

CREATE TABLE worldview_beliefs (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    belief     text NOT NULL CHECK (length(btrim(belief)) > 0),
    belief_key text GENERATED ALWAYS AS (lower(btrim(belief))) STORED UNIQUE,
    confidence double precision NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE worldview_beliefs IS 'What the agent believes about the world, with confidence (written by reflect).';

-- ---------------------------------------------------------------------------------------
-- What the maintain action changed (§3.2.3): each judgement of a memory, belief or identity
-- aspect with the state before and after, and why.
-- ---------------------------------------------------------------------------------------
CREATE TABLE memory_changes (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    heartbeat_id uuid,
    work_id      uuid,
    target_kind  text NOT NULL CHECK (target_kind IN ('memory', 'belief', 'identity')),
    target_id    uuid NOT NULL,
    verdict      text NOT NULL CHECK (verdict IN ('keep', 'update', 'retire')),
    before       jsonb NOT NULL,
    after        jsonb,
    reason       text
);
COMMENT ON TABLE memory_changes IS 'What the maintain action changed: each judgement with the state before and after, and why.';
CREATE INDEX memory_changes_target ON memory_changes (target_id);

-- ---------------------------------------------------------------------------------------
-- The heartbeat log (§7.3).
-- ---------------------------------------------------------------------------------------
CREATE TYPE heartbeat_status AS ENUM ('in_flight', 'committed', 'finished', 'recovered');

CREATE TABLE heartbeat_log (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    heartbeat_number     integer NOT NULL,
    status               heartbeat_status NOT NULL DEFAULT 'in_flight',
    started_at           timestamptz NOT NULL DEFAULT now(),
    committed_at         timestamptz,
    ended_at             timestamptz,
    energy_start         double precision NOT NULL,
    energy_end           double precision,
    context              jsonb NOT NULL DEFAULT '{}'::jsonb,
    environment_snapshot jsonb,
    goals_snapshot       jsonb,
    decision             jsonb,
    decision_reasoning   text,
    actions_taken        jsonb NOT NULL DEFAULT '[]'::jsonb,
    actions_rejected     jsonb NOT NULL DEFAULT '[]'::jsonb,
    goals_modified       jsonb NOT NULL DEFAULT '[]'::jsonb,
    narrative            text,
    emotional_valence    double precision CHECK (emotional_valence IS NULL OR (emotional_valence >= -1 AND emotional_valence <= 1)),
    memory_id            uuid REFERENCES memories (id) ON DELETE SET NULL,
    -- The people whose private words were in this heartbeat's context: what it decides and
    -- writes is as private as that.
    private_to           text[],
    -- Liveness: the driver touches its heartbeat while it works; only silence is a stall.
    last_alive_at        timestamptz,
    -- Why the scheduler could not close a stalled heartbeat normally (it was closed anyway).
    recovery_error       text
);
COMMENT ON TABLE heartbeat_log IS 'One row per heartbeat (§7.3): energy, snapshots, decision, actions with cost and result, narrative.';
CREATE INDEX heartbeat_log_number ON heartbeat_log (heartbeat_number DESC);
CREATE INDEX heartbeat_log_started ON heartbeat_log (started_at DESC);
-- The open ones (the scheduler looks for stalled ones every few seconds) and the finished ones
-- by age (retention, 011), each by index.
CREATE INDEX heartbeat_log_open ON heartbeat_log (heartbeat_number) WHERE status IN ('in_flight', 'committed');
CREATE INDEX heartbeat_log_done ON heartbeat_log ((coalesce(ended_at, started_at))) WHERE status IN ('finished', 'recovered');
-- Its foreign keys, indexed (001).
CREATE INDEX heartbeat_log_memory_id ON heartbeat_log (memory_id) WHERE memory_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- The driver's work queue: actions that need the LLM or the network.
-- ---------------------------------------------------------------------------------------
CREATE TYPE work_status AS ENUM ('pending', 'claimed', 'done', 'failed');

CREATE TABLE work_queue (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    idempotency_key text NOT NULL UNIQUE,
    heartbeat_id    uuid REFERENCES heartbeat_log (id) ON DELETE SET NULL,
    action          text NOT NULL,
    params          jsonb NOT NULL DEFAULT '{}'::jsonb,
    status          work_status NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL DEFAULT 3,
    claimed_by      text,
    claimed_at      timestamptz,
    lease_until     timestamptz,
    result          jsonb,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Not claimable before this: retry back-off, and the grace the conversation gives itself
    -- to extract right after its reply before the queue's other workers may.
    available_at    timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    -- Fencing: each claim gets a new token; only its holder may settle the item.
    lease_token     uuid,
    -- The energy the heartbeat spent on it, refunded if it fails for good.
    energy_cost     double precision NOT NULL DEFAULT 0 CHECK (energy_cost >= 0),
    -- Claimed highest first, then oldest: background work (an import's, -1) waits for the rest.
    priority        smallint NOT NULL DEFAULT 0
);
COMMENT ON TABLE work_queue IS 'Actions for the driver (LLM or network), claimed with SKIP LOCKED, each with an idempotency key.';
CREATE INDEX work_queue_pending ON work_queue (priority DESC, created_at, id) WHERE status IN ('pending', 'claimed');
CREATE INDEX work_queue_heartbeat ON work_queue (heartbeat_id) WHERE heartbeat_id IS NOT NULL;
-- Finished work by age (retention, 011).
CREATE INDEX work_queue_done ON work_queue ((coalesce(completed_at, created_at))) WHERE status IN ('done', 'failed');

-- ---------------------------------------------------------------------------------------
-- The outbox: messages for the person (or the public) that the driver delivers.
-- ---------------------------------------------------------------------------------------
CREATE TYPE outbox_status AS ENUM ('pending', 'sent', 'failed');

CREATE TABLE outbox (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    work_id             uuid UNIQUE REFERENCES work_queue (id) ON DELETE SET NULL,
    audience            text NOT NULL CHECK (audience IN ('user', 'public')),
    content             text NOT NULL CHECK (length(btrim(content)) > 0),
    status              outbox_status NOT NULL DEFAULT 'pending',
    -- Public messages wait for a human's approval.
    requires_approval   boolean NOT NULL DEFAULT false,
    approved_at         timestamptz,
    attempts            integer NOT NULL DEFAULT 0,
    platform_message_id text,
    last_error          text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    -- Whom it is for and where it goes: the person's key, and the platform and channel (NULL
    -- channel: the person's direct messages, which the driver opens).
    person              text,
    platform            text,
    channel_id          text,
    -- A reply to this message (one reply per message: a redelivery never composes a second;
    -- the foreign key to messages is added with that table, in 012).
    reply_to            uuid UNIQUE,
    -- Delivery is reserve → send → confirm: who reserved it, until when, and the platform ids
    -- of the parts already delivered (a resend skips them; each part's nonce is stable).
    reserved_by         text,
    reserved_until      timestamptz,
    sent_parts          jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(sent_parts) = 'array'),
    -- The proactive mind's contact evaluation that made it (014, which adds the foreign key to
    -- contact_evaluations; the two refer to each other).
    contact_id          uuid UNIQUE
);
COMMENT ON TABLE outbox IS 'Messages for the person (or public, after approval) that the driver delivers: pending → sent/failed.';
CREATE INDEX outbox_pending ON outbox (created_at) WHERE status = 'pending';
-- Delivered or failed messages by age (retention, 011).
CREATE INDEX outbox_done ON outbox ((coalesce(sent_at, created_at))) WHERE status IN ('sent', 'failed');

