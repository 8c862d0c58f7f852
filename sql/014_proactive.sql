-- The proactive mind, base layer: Dionysus writes to a person when
-- pressure built from its own state crosses a threshold and the social gates allow it — never
-- because a timer asked "should I message?". Everything here is arithmetic in the database;
-- the driver is woken (NOTIFY dionysus_contact) only at a crossing, and calls a model only then.
--
--   the clock         one time source a test can drive (clock_now, set_clock, advance_clock:
--                     002_heartbeat.sql, since the heartbeat's schedule runs on it too)
--   events            a priority queue (CRITICAL 0 … IDLE 4): merged, dropped under load,
--                     filtered while relaxed or asleep, hoisted when a pattern accumulates
--   agent_state       vitality (0–1, distinct from the heartbeat's 0–20 action energy), mode,
--                     disturbance, and the tick interval computed from them
--   people            per person: social debt, task pressure, curiosity, contact history,
--                     the check-in cadence; person_rhythm and person_signals are the beliefs
--                     about their availability (learned, with a confidence) and their own word
--   contact_weights   the neuron: pressure = Σ weight × input; every evaluation is written to
--                     contact_evaluations with each input, weight, contribution, threshold and
--                     gate, so explain_contact() says why
--   personality       traits in [0, 1] that move thresholds and delays, not only tone
--
-- Lock order (see 002_heartbeat.sql): heartbeat_state → agent_state → a person's row.
-- Everything that can evolve is data: proactive_config, contact_weights, personality,
-- event_patterns.

-- ---------------------------------------------------------------------------------------
-- Configuration, weights, personality (data, so they can evolve)
-- ---------------------------------------------------------------------------------------
CREATE TABLE proactive_config (
    key         text PRIMARY KEY,
    value       double precision NOT NULL CHECK (value >= 0 AND value < 'Infinity'::float8),
    description text NOT NULL
);
COMMENT ON TABLE proactive_config IS 'Every rate, threshold and limit of the proactive mind, as data (UPDATE to tune).';
INSERT INTO proactive_config (key, value, description) VALUES
    ('base_tick_seconds', 300, 'the tick interval at pressure 1 and full vitality, before the time of day'),
    ('min_tick_seconds', 10, 'the shortest tick (alert)'),
    ('max_tick_seconds', 7200, 'the longest tick (asleep)'),
    ('check_interval_minutes', 15, 'contact is evaluated at most this often per person (seed 004 §4.1)'),
    ('check_backoff_max_minutes', 1440, 'after "wait" the interval doubles, up to this'),
    ('contact_threshold', 0.35, 'pressure at which the thinking layer is woken (before personality and vitality)'),
    ('signal_threshold', 0.2, 'pressure at which an urge is noted (an internal event), without waking a model'),
    ('debt_relief_on_message', 0.8, 'share of social debt a message from the person relieves'),
    ('debt_relief_on_contact', 0.5, 'share of social debt a delivered contact relieves'),
    ('curiosity_per_new_memory', 0.05, 'curiosity added per new memory private to nobody (× the curiosity trait × 2), at most five a tick'),
    ('acquaintance_turns', 20, 'acquaintance = 1 / (1 + turns / this): a new relationship wants to be known'),
    ('quiet_start_hour', 22, 'default quiet hours start (the person''s local time) until their rhythm is learned'),
    ('quiet_end_hour', 8, 'default quiet hours end'),
    ('min_availability', 0.3, 'below this availability belief, unsolicited contact waits'),
    ('workday_start_hour', 9, 'before anything is learned: weekday working hours start (their local time)'),
    ('workday_end_hour', 17, 'before anything is learned: weekday working hours end'),
    ('prior_free', 0.6, 'availability believed, before anything is learned, outside quiet and working hours'),
    ('prior_workday', 0.35, 'availability believed, before anything is learned, in weekday working hours (reachable, but likely busy)'),
    ('prior_quiet', 0.05, 'availability believed, before anything is learned, in quiet hours'),
    ('better_moment_hours', 10, 'a contact waits when one of the next this many hours (a working day) is clearly better for them'),
    ('better_moment_margin', 0.25, 'how much more available an hour ahead must be believed to wait for it (a trusted rhythm needs less: half at full confidence)'),
    ('rhythm_confident_after', 8, 'messages after which the learned rhythm is fully trusted (with rhythm_confident_days: both must be reached)'),
    ('rhythm_confident_days', 3, 'days since their first message after which the learned rhythm is fully trusted: a routine shows in days, not in a count of messages'),
    ('miss_weight', 0.3, 'each missed contact at an hour of their week takes this share off the availability believed there, prior included (at most 0.8)'),
    ('rhythm_confidence_days', 14, 'without messages, confidence in the rhythm halves every this many days'),
    ('ignored_after_hours', 6, 'a contact unanswered this long (or 3 × the usual reply time, if longer) counts as ignored'),
    ('ignores_before_pause', 3, 'after this many ignored contacts in a row, time alone no longer adds pressure'),
    ('signal_busy_hours', 2, 'how long "busy" holds when the person names no time'),
    ('event_merge_seconds', 5, 'events of one type (same person and source) within this are merged'),
    ('event_drop_low_seconds', 60, 'queued LOW and IDLE events older than this are dropped'),
    ('event_drop_idle_seconds', 30, 'queued IDLE events older than this are dropped'),
    ('event_queue_limit', 1000, 'above this many queued events the lowest priority goes first (CRITICAL never)'),
    ('disturbance_decay', 0.95, 'disturbance kept per tick'),
    ('vitality_drain_tick', 0.001, 'vitality spent per tick'),
    ('vitality_drain_event', 0.002, 'vitality spent per event processed'),
    ('vitality_drain_model', 0.02, 'vitality spent per model call at a crossing'),
    ('vitality_recharge_hour', 0.04, 'vitality regained per hour (twice that in the agent''s night)'),
    ('vitality_feedback', 0.05, 'vitality regained when a person answers a contact');

-- Shares stay in [0, 1], time constants and counts above 0, hours of the day in [0, 23]: a
-- bad value is refused with its key named, before it can stop every tick.
CREATE FUNCTION dionysus_internal.proactive_config_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key IN ('debt_relief_on_message', 'debt_relief_on_contact', 'curiosity_per_new_memory',
                   'disturbance_decay', 'miss_weight', 'better_moment_margin', 'min_availability', 'contact_threshold',
                   'signal_threshold', 'vitality_drain_tick', 'vitality_drain_event', 'vitality_drain_model',
                   'vitality_recharge_hour', 'vitality_feedback', 'rule_strengthen', 'rule_decay_per_day', 'rule_forget_below',
                   'learn_timing_rate', 'learn_topic_rate', 'mood_memory', 'prior_free', 'prior_workday', 'prior_quiet')
       AND NEW.value > 1 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be within [0, 1], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('acquaintance_turns', 'rhythm_confident_after', 'rhythm_confident_days', 'rhythm_confidence_days', 'base_tick_seconds',
                   'min_tick_seconds', 'max_tick_seconds', 'check_interval_minutes', 'check_backoff_max_minutes', 'ignored_after_hours',
                   'ignores_before_pause', 'better_moment_hours', 'event_queue_limit', 'signal_busy_hours', 'rules_per_person',
                   'solicited_per_day', 'contact_request_hours')
       AND NEW.value <= 0 THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be above 0, not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NEW.key IN ('quiet_start_hour', 'quiet_end_hour', 'workday_start_hour', 'workday_end_hour') AND (NEW.value > 23 OR NEW.value <> trunc(NEW.value)) THEN
        RAISE EXCEPTION 'dionysus: proactive_config "%" must be a whole hour in [0, 23], not %', NEW.key, NEW.value USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.proactive_config_check() IS 'Trigger: proactive_config values within their ranges (shares in [0, 1], time constants above 0, whole hours).';
CREATE TRIGGER proactive_config_check BEFORE INSERT OR UPDATE ON proactive_config
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.proactive_config_check();

-- proactive_setting reads the table once a transaction (a tick asks it some two hundred times);
-- what the transaction itself changes is read again at once.
-- (Its own definer's: a role allowed to tune the table need not be allowed the library's functions.)
CREATE FUNCTION dionysus_internal.proactive_config_changed() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM dionysus_internal.forget_proactive_settings();
    RETURN NULL;
END $$;
COMMENT ON FUNCTION dionysus_internal.proactive_config_changed() IS 'Trigger: proactive_config changed, so this transaction reads its values again (proactive_setting).';
CREATE TRIGGER proactive_config_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON proactive_config
    FOR EACH STATEMENT EXECUTE FUNCTION dionysus_internal.proactive_config_changed();

CREATE TABLE contact_weights (
    input       text PRIMARY KEY CHECK (input IN ('social_debt', 'acquaintance', 'task_pressure', 'curiosity')),
    weight      double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),
    description text NOT NULL
);
COMMENT ON TABLE contact_weights IS 'The neuron of contact: pressure = sum of weight × input (social debt, acquaintance, task pressure, curiosity).';
INSERT INTO contact_weights (input, weight, description) VALUES
    ('social_debt', 0.4, 'we have not talked in a while'),
    ('acquaintance', 0.3, 'the relationship is new: there is much to learn about them'),
    ('task_pressure', 0.2, 'they asked for something that is still open'),
    ('curiosity', 0.1, 'something new came up that they might care about');

CREATE TABLE personality (
    trait         text PRIMARY KEY CHECK (trait IN ('humor', 'formality', 'curiosity', 'patience', 'empathy', 'shyness', 'independence')),
    value         double precision NOT NULL CHECK (value >= 0 AND value <= 1),
    -- Months, not days: the share of a feedback signal a trait moves by.
    learning_rate double precision NOT NULL DEFAULT 0.002 CHECK (learning_rate >= 0 AND learning_rate <= 0.1),
    description   text NOT NULL
);
COMMENT ON TABLE personality IS 'Traits in [0, 1] that change behaviour (thresholds, back-off, curiosity) and the composer''s voice; they move very slowly.';
INSERT INTO personality (trait, value, description) VALUES
    ('humor', 0.5, '0 serious, 1 playful (the composer''s voice)'),
    ('formality', 0.3, '0 casual, 1 formal (the composer''s voice)'),
    ('curiosity', 0.6, 'how fast curiosity builds from new information'),
    ('patience', 0.5, 'how long before following up: the check-in back-off grows with it'),
    ('empathy', 0.7, 'how much a cold or ignored contact holds back the next'),
    ('shyness', 0.4, 'raises the contact threshold; the composer hints rather than asks'),
    ('independence', 0.5, 'lowers the contact threshold: reaches out when it has something to say');

-- ---------------------------------------------------------------------------------------
-- State: the agent's, and each person's
-- ---------------------------------------------------------------------------------------
CREATE TABLE agent_state (
    id                    integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    vitality              double precision NOT NULL DEFAULT 0.8 CHECK (vitality >= 0 AND vitality <= 1),
    mode                  text NOT NULL DEFAULT 'normal' CHECK (mode IN ('alert', 'normal', 'relaxed', 'asleep')),
    disturbance           double precision NOT NULL DEFAULT 0 CHECK (disturbance >= 0),
    pressure              double precision NOT NULL DEFAULT 0,
    tick_interval_seconds double precision NOT NULL DEFAULT 300,
    last_tick_at          timestamptz,
    -- The real time of the last tick: memories are stamped in real time, not by the clock.
    last_tick_real_at     timestamptz,
    next_tick_at          timestamptz,
    ticks                 bigint NOT NULL DEFAULT 0,
    model_calls           bigint NOT NULL DEFAULT 0,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE agent_state IS 'The agent''s own state: vitality (0–1, not the heartbeat''s energy), mode, disturbance, and its dynamic tick.';
INSERT INTO agent_state DEFAULT VALUES;

CREATE TABLE people (
    person                 text PRIMARY KEY CHECK (length(btrim(person)) > 0),
    time_zone              text NOT NULL DEFAULT 'UTC',
    social_debt            double precision NOT NULL DEFAULT 0 CHECK (social_debt >= 0 AND social_debt <= 1),
    curiosity              double precision NOT NULL DEFAULT 0 CHECK (curiosity >= 0 AND curiosity <= 1),
    -- Moved by the rules (015): what they asked for that is still open, felt; what holds
    -- contact back (night); their tone lately, from their messages.
    task_pressure          double precision NOT NULL DEFAULT 0 CHECK (task_pressure >= 0 AND task_pressure <= 1),
    restraint              double precision NOT NULL DEFAULT 0 CHECK (restraint >= 0 AND restraint <= 1),
    mood                   double precision NOT NULL DEFAULT 0 CHECK (mood >= -1 AND mood <= 1),
    -- A contact one of their rules asked for (a reminder), until it goes out or lapses.
    contact_request        jsonb,
    turns                  bigint NOT NULL DEFAULT 0,
    first_message_at       timestamptz,
    last_message_at        timestamptz,
    -- The last contact Dionysus started (delivered), whether it is still unanswered, and how
    -- many in a row went unanswered.
    last_contact_at        timestamptz,
    awaiting_reply         boolean NOT NULL DEFAULT false,
    ignored_in_row         integer NOT NULL DEFAULT 0,
    -- Task pressure and curiosity when the last contact went out: after repeated ignores a
    -- new contact needs a new cause, not just time.
    cause_at_last_contact  jsonb,
    reply_seconds          double precision,
    -- The check-in cadence: when contact may next be evaluated, and the current interval.
    next_check_at          timestamptz,
    check_interval_minutes double precision,
    last_pressure          double precision NOT NULL DEFAULT 0,
    last_evaluated_at      timestamptz,
    updated_at             timestamptz NOT NULL DEFAULT now(),
    -- Where time_zone came from: nothing yet (UTC), the configuration, their words, or inferred
    -- from when they write. A weaker source never overrides a stronger one (set_person_time_zone).
    time_zone_source       text NOT NULL DEFAULT 'default' CHECK (time_zone_source IN ('default', 'inferred', 'words', 'config')),
    -- Their own availability prior, key by key over proactive_config's (a night shift:
    -- {"quiet_start_hour": 9, "quiet_end_hour": 16}); see prior_setting.
    prior                  jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(prior) = 'object')
);
COMMENT ON TABLE people IS 'Each person as the proactive mind sees them: social debt, curiosity, task pressure, restraint, mood, contact history, a contact their rule asked for, the check-in cadence.';

-- When they write, by hour of their week (0 = Monday 00:00 local): the belief about when they
-- are available. A decayed count, so old habits fade; `misses` counts contacts at that hour
-- they ignored (1) or answered only after an hour (0.5).
CREATE TABLE person_rhythm (
    person       text NOT NULL REFERENCES people (person) ON DELETE CASCADE,
    hour_of_week smallint NOT NULL CHECK (hour_of_week BETWEEN 0 AND 167),
    activity     double precision NOT NULL DEFAULT 0 CHECK (activity >= 0),
    misses       double precision NOT NULL DEFAULT 0 CHECK (misses >= 0),
    PRIMARY KEY (person, hour_of_week)
);
COMMENT ON TABLE person_rhythm IS 'When a person writes, by hour of their week (decayed counts): the belief about when they are available.';

-- What they said about themselves: busy, asleep, away, "stop checking in". Holds until it
-- expires or they write again.
CREATE TABLE person_signals (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    person     text NOT NULL REFERENCES people (person) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('busy', 'asleep', 'away', 'stop_checkins')),
    said_at    timestamptz NOT NULL,
    until      timestamptz,
    ended_at   timestamptz,
    message_id uuid,
    words      text NOT NULL
);
COMMENT ON TABLE person_signals IS 'What a person said about contact (busy, asleep, away, stop checking in), held until it expires or they write again.';
CREATE INDEX person_signals_open ON person_signals (person) WHERE ended_at IS NULL;
-- Its foreign keys, indexed (001).
CREATE INDEX person_signals_person ON person_signals (person);

-- ---------------------------------------------------------------------------------------
-- Events
-- ---------------------------------------------------------------------------------------
CREATE TABLE events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text NOT NULL CHECK (source IN ('communication', 'thoughts', 'internal', 'time')),
    channel      text,
    type         text NOT NULL CHECK (type ~ '^[a-z][a-z0-9_.]{0,62}$'),
    priority     smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    person       text,
    payload      jsonb NOT NULL DEFAULT '{}'::jsonb,
    at           timestamptz NOT NULL,
    merged       integer NOT NULL DEFAULT 1,
    -- 'scheduled': not yet due (a rule's schedule_event); `at` is when it becomes queued.
    status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('scheduled', 'queued', 'processed', 'filtered', 'dropped')),
    handled_at   timestamptz,
    reason       text
);
COMMENT ON TABLE events IS 'The event queue (CRITICAL 0 … IDLE 4): merged, dropped under load, filtered while the agent rests, processed by the tick.';
CREATE INDEX events_queued ON events (priority, at) WHERE status = 'queued';
CREATE INDEX events_type_at ON events (type, at);
CREATE INDEX events_scheduled ON events (at) WHERE status = 'scheduled';
-- Handled events by age (retention, 011).
CREATE INDEX events_handled ON events (at) WHERE status NOT IN ('queued', 'scheduled');

-- Every event that did not reach processing, by why and priority.
CREATE TABLE event_counters (
    reason   text NOT NULL CHECK (reason IN ('merged', 'dropped_age', 'dropped_overload', 'filtered')),
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 4),
    count    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (reason, priority)
);
COMMENT ON TABLE event_counters IS 'Events that never reached processing, by why (merged, dropped by age, dropped by overload, filtered) and priority.';

-- Pattern accumulation: `threshold` events of a type within `window_seconds` become one HIGH
-- event for the thinking layer (one car horn is ignored, ten are noticed).
CREATE TABLE event_patterns (
    event_type      text PRIMARY KEY,
    window_seconds  integer NOT NULL CHECK (window_seconds > 0),
    threshold       integer NOT NULL CHECK (threshold > 1),
    hoisted_type    text NOT NULL CHECK (hoisted_type ~ '^[a-z][a-z0-9_.]{0,62}$'),
    last_hoisted_at timestamptz
);
COMMENT ON TABLE event_patterns IS 'Pattern accumulation: this many events of a type within the window become one HIGH event.';
INSERT INTO event_patterns (event_type, window_seconds, threshold, hoisted_type) VALUES
    ('contact_urge', 3600, 6, 'restless'),
    ('reaction', 600, 10, 'reaction_storm'),
    ('message_received', 120, 8, 'message_burst');

-- ---------------------------------------------------------------------------------------
-- Contact evaluations: every decision written down with its inputs
-- ---------------------------------------------------------------------------------------
CREATE TABLE contact_evaluations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    person      text NOT NULL,
    at          timestamptz NOT NULL,
    inputs      jsonb NOT NULL,
    pressure    double precision NOT NULL,
    threshold   double precision NOT NULL,
    -- What the threshold was made of: the base, personality, vitality, restraint, their mood.
    threshold_parts jsonb,
    gates       jsonb NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('below', 'signal', 'gated', 'opportunity')),
    explanation text NOT NULL,
    notified_at timestamptz,
    decision    text CHECK (decision IN ('message', 'wait')),
    decided_by  text CHECK (decided_by IN ('model', 'default', 'skipped')),
    decided_at  timestamptz,
    reason      text,
    -- (This and outbox.contact_id refer to each other: both are checked at commit, so a
    -- restore, which writes one table and then the other in one transaction, can.)
    outbox_id   uuid REFERENCES outbox (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED,
    -- A contact the person asked for (one of their rules): no cooldown, no pressure needed.
    solicited   boolean NOT NULL DEFAULT false,
    request     jsonb,
    -- How the answer landed (the cues, or the fast model's reading) and when it was judged.
    feedback    jsonb,
    feedback_at timestamptz,
    -- Real time of the record: orders evaluations made at one instant of a frozen clock.
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE contact_evaluations IS 'Every evaluation of contact with its inputs, weights, contributions, threshold, gates, outcome and decision: why Dionysus wrote, or did not.';
CREATE INDEX contact_evaluations_person ON contact_evaluations (person, at DESC);
CREATE INDEX contact_evaluations_open ON contact_evaluations (at) WHERE outcome = 'opportunity' AND decision IS NULL;
-- The contacts sent to a person, newest first: their next message answers the last one, and
-- silence counts against it. Without it each read visits every evaluation of theirs kept (one
-- each quarter hour, for retention_days).
CREATE INDEX contact_evaluations_messages ON contact_evaluations (person, decided_at DESC, recorded_at DESC) WHERE decision = 'message';
CREATE INDEX contact_evaluations_at ON contact_evaluations (at); -- (retention, 011)
-- outbox.contact_id (002) names the evaluation that made a message; checked at commit, as the two
-- refer to each other.
ALTER TABLE outbox ADD CONSTRAINT outbox_contact_id_fkey
    FOREIGN KEY (contact_id) REFERENCES contact_evaluations (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
-- Its foreign keys, indexed (001).
CREATE INDEX contact_evaluations_outbox_id ON contact_evaluations (outbox_id) WHERE outbox_id IS NOT NULL;

-- ---------------------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------------------
-- (dionysus_internal.proactive_setting(key), one value of proactive_config, is the library's:
-- proactive/mod.rs.)

CREATE FUNCTION dionysus_internal.trait(name text) RETURNS double precision
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept, where an SQL function with a subquery is planned on every call.)
    RETURN coalesce((SELECT p.value FROM dionysus.personality p WHERE p.trait = name), 0.5);
END $$;
COMMENT ON FUNCTION dionysus_internal.trait(text) IS 'A personality trait''s value (0.5 if unknown).';

CREATE FUNCTION dionysus_internal.priority_name(p smallint) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT (ARRAY['CRITICAL', 'HIGH', 'NORMAL', 'LOW', 'IDLE'])[p + 1]
$$;
COMMENT ON FUNCTION dionysus_internal.priority_name(smallint) IS 'CRITICAL, HIGH, NORMAL, LOW or IDLE.';

CREATE FUNCTION dionysus_internal.count_event(why text, p smallint, n bigint DEFAULT 1) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO dionysus.event_counters (reason, priority, count) VALUES (why, p, n)
    ON CONFLICT (reason, priority) DO UPDATE SET count = dionysus.event_counters.count + EXCLUDED.count
$$;
COMMENT ON FUNCTION dionysus_internal.count_event(text, smallint, bigint) IS 'Counts events that did not reach processing.';

-- The person's row, created on first sight.
CREATE FUNCTION dionysus_internal.person_row(who text) RETURNS dionysus.people
    LANGUAGE plpgsql AS $$
DECLARE p dionysus.people;
BEGIN
    -- Known people are the common case: one statement for them.
    SELECT * INTO p FROM dionysus.people WHERE person = who FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO dionysus.people (person) VALUES (who) ON CONFLICT (person) DO NOTHING;
        SELECT * INTO p FROM dionysus.people WHERE person = who FOR UPDATE;
    END IF;
    RETURN p;
END $$;
COMMENT ON FUNCTION dionysus_internal.person_row(text) IS 'The person''s row, created on first sight, locked.';

-- Hour of the week (Monday 00:00 = 0) of an instant in a time zone.
CREATE FUNCTION dionysus_internal.hour_of_week(at timestamptz, tz text) RETURNS smallint
    LANGUAGE sql STABLE AS $$
    SELECT ((extract(isodow FROM at AT TIME ZONE tz)::int - 1) * 24 + extract(hour FROM at AT TIME ZONE tz)::int)::smallint
$$;
COMMENT ON FUNCTION dionysus_internal.hour_of_week(timestamptz, text) IS 'Hour of the week (Monday 00:00 = 0) of an instant in a time zone.';

-- The prior a considerate stranger would hold about someone at an hour of their day (asleep at
-- night, likely busy in weekday working hours, free otherwise): data, the deployment's in
-- proactive_config, a person's own in people.prior (their night shift), key by key.
CREATE FUNCTION dionysus_internal.prior_setting(p dionysus.people, setting_key text) RETURNS double precision
    LANGUAGE sql STABLE AS $$
    SELECT coalesce((p.prior ->> setting_key)::float8, dionysus_internal.proactive_setting(setting_key))
$$;
COMMENT ON FUNCTION dionysus_internal.prior_setting(dionysus.people, text) IS 'One setting of the availability prior for a person: theirs (people.prior) or the deployment''s (proactive_config).';

-- Whether a local hour falls in the person's quiet hours (their prior's, or the deployment's).
CREATE FUNCTION dionysus_internal.in_quiet_hours(p dionysus.people, local_hour int) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    -- (No FROM: a body of one expression is inlined into its caller, a tenth of the cost.)
    SELECT CASE WHEN dionysus_internal.prior_setting(p, 'quiet_start_hour')::int > dionysus_internal.prior_setting(p, 'quiet_end_hour')::int
                THEN local_hour >= dionysus_internal.prior_setting(p, 'quiet_start_hour')::int OR local_hour < dionysus_internal.prior_setting(p, 'quiet_end_hour')::int
                ELSE local_hour >= dionysus_internal.prior_setting(p, 'quiet_start_hour')::int AND local_hour < dionysus_internal.prior_setting(p, 'quiet_end_hour')::int END
$$;
COMMENT ON FUNCTION dionysus_internal.in_quiet_hours(dionysus.people, integer) IS 'Whether an hour of the person''s day is in their quiet hours (their prior''s, else the deployment''s).';

-- What the person is believed to be able to do at an instant: availability in [0, 1] from
-- their learned rhythm, blended by the confidence in it with the prior (prior_setting).
-- The rhythm is read three ways (the library's rhythm_at), each relative to its busiest hour,
-- neighbouring hours counting half: this hour on days of the same kind (weekday or weekend; all days while that kind has
-- no messages yet), this hour of this weekday (weekly habits, which take weeks), and this hour
-- on any day (a daily routine shows in days). Confidence comes from days known and messages.
-- A contact they missed at this hour (ignored, answered late, "not now") lowers the belief
-- itself, prior included: evidence against an hour beats what a stranger would guess.
CREATE FUNCTION dionysus_internal.availability(who text, at timestamptz)
    RETURNS TABLE (belief double precision, confidence double precision, learned double precision, prior double precision)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    weekend boolean;
    local_hour int;
    hours smallint[];
    activity double precision[];
    misses double precision[];
    total double precision;
    -- What their rhythm says of this hour (the library's rhythm_at): {learned, missed}.
    here double precision[];
    days_known double precision;
BEGIN
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    p.time_zone := coalesce(p.time_zone, 'UTC');
    local_hour := extract(hour FROM at AT TIME ZONE p.time_zone)::int;
    weekend := extract(isodow FROM at AT TIME ZONE p.time_zone) > 5;
    prior := CASE WHEN dionysus_internal.in_quiet_hours(p, local_hour) THEN dionysus_internal.prior_setting(p, 'prior_quiet')
                  WHEN NOT weekend AND local_hour >= dionysus_internal.prior_setting(p, 'workday_start_hour')
                       AND local_hour < dionysus_internal.prior_setting(p, 'workday_end_hour')
                       THEN dionysus_internal.prior_setting(p, 'prior_workday')
                  ELSE dionysus_internal.prior_setting(p, 'prior_free') END;
    -- Their (at most 168) hours in one read; the three arrays in one order (one aggregation).
    SELECT array_agg(x.hour_of_week), array_agg(x.activity), array_agg(x.misses), sum(x.activity)
      INTO hours, activity, misses, total
      FROM dionysus.person_rhythm x WHERE x.person = who;
    here := dionysus_internal.rhythm_at(hours, activity, misses, dionysus_internal.hour_of_week(at, p.time_zone), weekend);
    learned := coalesce(here[1], 0); -- (NULL: no rows, nothing learned)
    days_known := greatest(0, extract(epoch FROM at - coalesce(p.first_message_at, at)) / 86400.0);
    confidence := least(1.0, coalesce(total, 0) / dionysus_internal.proactive_setting('rhythm_confident_after'))
                  * least(1.0, days_known / dionysus_internal.proactive_setting('rhythm_confident_days'))
                  * power(0.5, least(1000, greatest(0, extract(epoch FROM at - coalesce(p.last_message_at, at)) / 86400.0)
                                           / dionysus_internal.proactive_setting('rhythm_confidence_days')));
    belief := (confidence * learned + (1 - confidence) * prior)
              * (1 - least(0.8, dionysus_internal.proactive_setting('miss_weight') * coalesce(here[2], 0)));
    RETURN NEXT;
END $$;
COMMENT ON FUNCTION dionysus_internal.availability(text, timestamptz) IS
    'The belief that a person is available at an instant: their learned rhythm (same kind of day, same weekday, any day) blended with their prior by the confidence in it (days known and messages), lowered where contacts were missed.';

-- A contact at this hour of their week went unanswered (1) or was answered late (0.5).
CREATE FUNCTION dionysus_internal.note_miss(who text, contact_at timestamptz, weight double precision) RETURNS void
    LANGUAGE sql AS $$
    INSERT INTO dionysus.person_rhythm (person, hour_of_week, misses)
    VALUES (who, dionysus_internal.hour_of_week(contact_at, (SELECT time_zone FROM dionysus.people WHERE person = who)), weight)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET misses = dionysus.person_rhythm.misses + EXCLUDED.misses
$$;
COMMENT ON FUNCTION dionysus_internal.note_miss(text, timestamptz, double precision) IS 'A contact at that hour of the person''s week went unanswered (1) or was answered late (0.5): less availability believed there.';

-- "busy", "going to sleep", "back tomorrow", "not until Monday", "stop checking in": the
-- person's own word about contact, with when it ends (their local time). NULL: none said.
CREATE FUNCTION dionysus_internal.contact_signal(words text, at timestamptz, tz text)
    RETURNS TABLE (kind text, until timestamptz)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w text := lower(words);
    local timestamp := at AT TIME ZONE tz;
    day text;
    dow int;
BEGIN
    IF w ~ '(stop|quit|no more) (checking in|check-ins|messaging me|writing to me|texting me)|(don''t|do not) (message|text|write to|check in on) me' THEN
        kind := 'stop_checkins'; until := NULL; RETURN NEXT; RETURN;
    END IF;
    day := substring(w FROM '(?:not|back|talk|see you|until|till) (?:until |till |on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)');
    IF day IS NOT NULL THEN
        dow := array_position(ARRAY['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'], day);
        kind := 'away';
        until := ((date_trunc('day', local) + make_interval(days => ((dow - extract(isodow FROM local)::int + 6) % 7) + 1))
                  + interval '9 hours') AT TIME ZONE tz;
        RETURN NEXT; RETURN;
    END IF;
    IF w ~ '(back|talk|see you|speak) tomorrow|until tomorrow|till tomorrow' THEN
        kind := 'away'; until := (date_trunc('day', local) + interval '1 day 9 hours') AT TIME ZONE tz; RETURN NEXT; RETURN;
    END IF;
    IF w ~ '(going to|off to|heading to|time for) (sleep|bed)|good ?night|\mgn\M|nighty night' THEN
        kind := 'asleep';
        until := (date_trunc('day', local - interval '4 hours') + interval '1 day 8 hours') AT TIME ZONE tz;
        RETURN NEXT; RETURN;
    END IF;
    IF w ~ '\m(i''m|i am|im) (busy|swamped|slammed|in a meeting|at work|driving)|\mbusy right now\M|\mcan''t talk\M|\mtalk later\M|\mnot now\M' THEN
        kind := 'busy'; until := at + make_interval(secs => dionysus_internal.proactive_setting('signal_busy_hours') * 3600);
        RETURN NEXT; RETURN;
    END IF;
END $$;
COMMENT ON FUNCTION dionysus_internal.contact_signal(text, timestamptz, text) IS 'The person''s own word about contact in a message (busy, asleep, away, stop checking in) and when it ends.';

-- An answer that only acknowledges ("ok", "thanks", "👍"): it updates beliefs and relieves
-- social debt with no model call and needs no reply (the base layer's own reading).
CREATE FUNCTION is_acknowledgement(words text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(btrim(lower(words)) ~ '^((ok(ay)?|k+|sure|thanks?( you)?|thx|ty|cool|nice|great|got it|will do|noted|yep|yes|yeah|sounds good|alright|👍|🙏|❤️|😊|🙂|✅|👌)[.!, ]*)+$', false)
$$;
COMMENT ON FUNCTION is_acknowledgement(text) IS 'True for a message that only acknowledges ("ok", "thanks", "👍"): it needs no reply and no model.';

-- ---------------------------------------------------------------------------------------
-- Events: push, merge, hoist
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION push_event(source text, type text, priority integer DEFAULT 2, payload jsonb DEFAULT '{}',
                           person text DEFAULT NULL, channel text DEFAULT NULL) RETURNS bigint
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    merged_into bigint;
    new_id bigint;
    pat dionysus.event_patterns;
    seen bigint;
BEGIN
    IF source IS NULL OR source NOT IN ('communication', 'thoughts', 'internal', 'time') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": % (communication, thoughts, internal or time)', dionysus_internal.input_prefix(source)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF type IS NULL OR type !~ '^[a-z][a-z0-9_.]{0,62}$' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "type": % (lower-case words joined by _ or .)', dionysus_internal.input_prefix(type)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF priority IS NULL OR priority NOT BETWEEN 0 AND 4 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "priority": % (0 CRITICAL … 4 IDLE)', priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' OR octet_length(payload::text) > 8192 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "payload": must be a JSON object of at most 8 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: agent_state (which a HIGH or CRITICAL event updates below) before any event row.
    IF priority <= 1 THEN
        PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    END IF;
    -- Layer 1 of overload: the same thing again within seconds is one event, counted.
    UPDATE dionysus.events e SET merged = e.merged + 1, payload = push_event.payload
     WHERE e.id = (SELECT x.id FROM dionysus.events x
                    WHERE x.status = 'queued' AND x.type = push_event.type AND x.source = push_event.source
                      AND x.priority = push_event.priority
                      AND x.person IS NOT DISTINCT FROM push_event.person
                      AND x.at >= t - make_interval(secs => dionysus_internal.proactive_setting('event_merge_seconds'))
                    ORDER BY x.at DESC LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING e.id INTO merged_into;
    IF merged_into IS NOT NULL THEN
        PERFORM dionysus_internal.count_event('merged', priority::smallint);
        RETURN merged_into;
    END IF;
    INSERT INTO dionysus.events (source, channel, type, priority, person, payload, at)
    VALUES (source, channel, type, priority, person, payload, t) RETURNING id INTO new_id;
    -- Pattern accumulation: many of a kind in a window become one event worth thinking about.
    SELECT * INTO pat FROM dionysus.event_patterns p WHERE p.event_type = push_event.type FOR UPDATE;
    IF FOUND AND (pat.last_hoisted_at IS NULL OR pat.last_hoisted_at < t - make_interval(secs => pat.window_seconds)) THEN
        SELECT coalesce(sum(merged), 0) INTO seen FROM dionysus.events e
         WHERE e.type = push_event.type AND e.at > t - make_interval(secs => pat.window_seconds);
        IF seen >= pat.threshold THEN
            UPDATE dionysus.event_patterns p SET last_hoisted_at = t WHERE p.event_type = pat.event_type;
            INSERT INTO dionysus.events (source, type, priority, person, payload, at)
            VALUES ('internal', pat.hoisted_type, 1, push_event.person,
                    jsonb_build_object('pattern', pat.event_type, 'count', seen, 'window_seconds', pat.window_seconds), t);
        END IF;
    END IF;
    -- What matters now shortens the wait for the next tick (lock order: agent_state before people).
    IF priority <= 1 THEN
        UPDATE dionysus.agent_state
           SET next_tick_at = least(coalesce(next_tick_at, t), t + make_interval(secs => dionysus_internal.proactive_setting('min_tick_seconds')))
         WHERE id = 1 AND (mode <> 'asleep' OR push_event.priority = 0);
    END IF;
    RETURN new_id;
END $$;
COMMENT ON FUNCTION push_event(text, text, integer, jsonb, text, text) IS
    'Queues an event (source communication/thoughts/internal/time, a type, priority 0 CRITICAL … 4 IDLE): the same again within 5 s is merged; patterns are hoisted; HIGH and CRITICAL bring the next tick forward.';

-- ---------------------------------------------------------------------------------------
-- A person wrote: beliefs, debt, signals, cadence (called by log_message, in its transaction)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.note_person_message(who text, message_id uuid, words text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    sig record;
    answered boolean := false;
    ack boolean := dionysus.is_acknowledgement(words);
    contact uuid;
    cue record;
    unsure uuid;
    said_zone text;
    guessed_zone text;
BEGIN
    -- Lock order: agent_state (push_event, feedback) before the person's row.
    PERFORM dionysus.push_event('communication', 'message_received', 1, jsonb_build_object('message_id', message_id), who);
    IF EXISTS (SELECT 1 FROM dionysus.people x WHERE x.person = who AND x.awaiting_reply) THEN
        answered := true;
        UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback'))
         WHERE id = 1;
    END IF;
    p := dionysus_internal.person_row(who);
    -- Their words may say where they are ("I'm in Berlin", "it's 3 am here").
    said_zone := dionysus_internal.time_zone_from_words(words, t);
    IF said_zone IS NOT NULL AND said_zone <> p.time_zone AND dionysus.set_person_time_zone(who, said_zone, 'words') THEN
        p := dionysus_internal.person_row(who);
    END IF;
    -- Nothing said or configured: when they write may show where their night is.
    IF p.time_zone_source IN ('default', 'inferred') THEN
        guessed_zone := dionysus_internal.infer_time_zone(p);
        IF guessed_zone IS NOT NULL AND dionysus.set_person_time_zone(who, guessed_zone, 'inferred') THEN
            p := dionysus_internal.person_row(who);
        END IF;
    END IF;
    SELECT * INTO sig FROM dionysus_internal.contact_signal(words, t, p.time_zone);
    -- Their rhythm: this hour of their week gained one message, unless the message says they
    -- are busy (then it is evidence against the hour: a miss); the rest fades a little.
    UPDATE dionysus.person_rhythm r SET activity = r.activity * 0.998, misses = r.misses * 0.998 WHERE r.person = who;
    INSERT INTO dionysus.person_rhythm AS r (person, hour_of_week, activity, misses)
    VALUES (who, dionysus_internal.hour_of_week(t, p.time_zone), CASE WHEN sig.kind = 'busy' THEN 0 ELSE 1 END,
            CASE WHEN sig.kind = 'busy' THEN 1 ELSE 0 END)
    ON CONFLICT (person, hour_of_week) DO UPDATE SET activity = r.activity + EXCLUDED.activity, misses = r.misses + EXCLUDED.misses;
    -- They wrote: a crossing still undecided is moot (the conversation is on).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t, reason = 'they wrote first'
     WHERE c.person = who AND c.outcome = 'opportunity' AND c.decision IS NULL;
    -- Whatever they said before about not being available ends when they write again.
    UPDATE dionysus.person_signals s SET ended_at = t WHERE s.person = who AND s.ended_at IS NULL;
    IF sig.kind IS NOT NULL THEN
        INSERT INTO dionysus.person_signals (person, kind, said_at, until, message_id, words)
        VALUES (who, sig.kind, t, sig.until, message_id, left(words, 200));
    END IF;
    -- A contact answered only after an hour: that hour of their week is a poor one.
    IF answered AND t - p.last_contact_at > interval '1 hour' THEN
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 0.5);
    END IF;
    -- How the contact landed, from cheap cues (latency, length, tone); the fast model is asked
    -- only when they disagree (contact_feedback). Learning is logged with its cause (015).
    IF answered THEN
        SELECT c.id INTO contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        SELECT * INTO cue FROM dionysus_internal.reply_signal(words, extract(epoch FROM t - p.last_contact_at), p.reply_seconds);
        IF contact IS NOT NULL AND cue.unsure THEN
            unsure := contact;
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'unsure', true, 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)) WHERE c.id = contact;
        ELSIF contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'cues', 'latency', round(cue.latency::numeric, 2),
                   'length', cue.length, 'tone', round(cue.tone::numeric, 2), 'signal', round(cue.signal::numeric, 3)), feedback_at = t
             WHERE c.id = contact;
            PERFORM dionysus_internal.learn_from_contact(who, contact, p.last_contact_at, cue.signal,
                format('they answered after %s (latency %s, length %s, tone %s)', date_trunc('minute', t - p.last_contact_at),
                       round(cue.latency::numeric, 2), cue.length, round(cue.tone::numeric, 2)));
        END IF;
        PERFORM dionysus.push_event('communication', 'contact_answered', 2, jsonb_build_object('message_id', message_id), who);
    END IF;
    UPDATE dionysus.people x SET
        turns = x.turns + 1,
        first_message_at = coalesce(x.first_message_at, t),
        last_message_at = t,
        social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_message')),
        mood = dionysus_internal.proactive_setting('mood_memory') * x.mood
               + (1 - dionysus_internal.proactive_setting('mood_memory')) * dionysus_internal.message_tone(words),
        awaiting_reply = false,
        ignored_in_row = 0,
        reply_seconds = CASE WHEN answered THEN coalesce(0.7 * x.reply_seconds, 0)
                                                + CASE WHEN x.reply_seconds IS NULL THEN 1 ELSE 0.3 END
                                                  * extract(epoch FROM t - x.last_contact_at)
                             ELSE x.reply_seconds END,
        -- A message resets the check-in cadence (check_interval_minutes).
        check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
        next_check_at = t + make_interval(mins => dionysus_internal.proactive_setting('check_interval_minutes')::int),
        updated_at = now()
     WHERE x.person = who;
    RETURN jsonb_build_object('acknowledgement', ack, 'answered_contact', answered, 'signal', sig.kind, 'signal_until', sig.until,
                              'feedback_unsure', unsure);
END $$;
COMMENT ON FUNCTION dionysus_internal.note_person_message(text, uuid, text) IS 'A person wrote: rhythm, signals, social debt, an answered contact, the check-in cadence reset.';

-- ---------------------------------------------------------------------------------------
-- The contact gates, in one place: evaluate_contact and evaluate_requested_contact (015)
-- write them down, decide_contact checks again those that time spent thinking can close
-- ---------------------------------------------------------------------------------------
-- A contact nobody answered within this long counts as ignored: ignored_after_hours, or three
-- times the person's usual reply time when that is longer.
CREATE FUNCTION dionysus_internal.ignored_after(p dionysus.people) RETURNS interval
    LANGUAGE sql STABLE AS $$
    SELECT make_interval(secs => greatest(dionysus_internal.proactive_setting('ignored_after_hours') * 3600,
                                          3 * coalesce(p.reply_seconds, 0)))
$$;
COMMENT ON FUNCTION dionysus_internal.ignored_after(dionysus.people) IS 'How long an unanswered contact with this person waits before it counts as ignored.';

-- The requests a person made that are still open (their goals from their own words).
CREATE FUNCTION dionysus_internal.open_requests(who text) RETURNS bigint
    LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM dionysus.goals g
     WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[who]
$$;
COMMENT ON FUNCTION dionysus_internal.open_requests(text) IS 'How many of the person''s own requests (goals from their words) are still open.';

-- Every gate a contact with person p at time t must pass, as [{gate, passed, detail}], each
-- written down whether it passed or not. A contact born of pressure: their word, quiet hours,
-- availability, cooldown, waiting on them, in flight, energy, ignored, and (over_threshold and
-- every other gate open: it costs a few lookups) a better moment soon. A contact they asked
-- for (solicited: their rule's reminder) is not pressure-born: only their word ("stop checking
-- in" is about check-ins, not what they asked for), in flight and the daily limit. One contact
-- at a time: nothing on its way (a crossing undecided, other than `deciding`, or a message not
-- yet delivered).
CREATE FUNCTION dionysus_internal.contact_gates(p dionysus.people, t timestamptz, solicited boolean,
                                                deciding uuid DEFAULT NULL, over_threshold boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    gates jsonb := '[]'::jsonb;
    sig dionysus.person_signals;
    av record;
    local_hour int;
    quiet boolean;
    -- Each contact they left unanswered doubles the wait before the next: silence is an answer.
    cooldown interval := make_interval(secs => dionysus_internal.heartbeat_setting('reach_out_cooldown_hours') * 3600
                                              * power(2, least(p.ignored_in_row, 6)));
    since_contact interval := t - p.last_contact_at;
    on_its_way boolean;
    energy double precision;
    cost double precision;
    muted boolean;
    new_cause boolean;
    today bigint;
    later record;
    better boolean;
    margin double precision;
BEGIN
    SELECT * INTO sig FROM dionysus.person_signals s
     WHERE s.person = p.person AND s.ended_at IS NULL AND (s.until IS NULL OR s.until > t) AND (NOT solicited OR s.kind <> 'stop_checkins')
     ORDER BY s.said_at DESC LIMIT 1;
    on_its_way := EXISTS (SELECT 1 FROM dionysus.contact_evaluations c
                           WHERE c.person = p.person AND c.outcome = 'opportunity' AND c.decision IS NULL AND c.id IS DISTINCT FROM deciding)
               OR EXISTS (SELECT 1 FROM dionysus.outbox o WHERE o.person = p.person AND o.contact_id IS NOT NULL AND o.status = 'pending');
    IF solicited THEN
        gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
            'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against it' ELSE format('they said "%s" (%s)', sig.words, sig.kind) END);
        gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', NOT on_its_way,
            'detail', CASE WHEN NOT on_its_way THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
        SELECT count(*) INTO today FROM dionysus.contact_evaluations c
         WHERE c.person = p.person AND c.solicited AND c.decision = 'message' AND c.decided_at > t - interval '1 day';
        gates := gates || jsonb_build_object('gate', 'daily_limit', 'passed', today < dionysus_internal.proactive_setting('solicited_per_day'),
            'detail', format('%s asked-for contacts in the last day (at most %s)', today, dionysus_internal.proactive_setting('solicited_per_day')));
        RETURN gates;
    END IF;
    gates := gates || jsonb_build_object('gate', 'their_word', 'passed', sig.id IS NULL,
        'detail', CASE WHEN sig.id IS NULL THEN 'nothing said against contact'
                       ELSE format('they said "%s" (%s%s)', sig.words, sig.kind,
                                   coalesce(' until ' || to_char(sig.until AT TIME ZONE p.time_zone, 'Dy HH24:MI'), ', until they write again')) END);
    SELECT * INTO av FROM dionysus_internal.availability(p.person, t);
    local_hour := extract(hour FROM t AT TIME ZONE p.time_zone)::int;
    -- Their quiet hours (their prior's) hold unless their learned rhythm, trusted enough, says they are up.
    quiet := dionysus_internal.in_quiet_hours(p, local_hour);
    gates := gates || jsonb_build_object('gate', 'quiet_hours', 'passed', NOT (quiet AND (av.learned < 0.15 OR av.confidence < 0.5)),
        'detail', format('%s:00 their time (%s, %s); quiet %s–%s, learned activity %s (confidence %s)', local_hour, p.time_zone,
                         dionysus_internal.time_zone_source_said(p.time_zone_source),
                         dionysus_internal.prior_setting(p, 'quiet_start_hour'), dionysus_internal.prior_setting(p, 'quiet_end_hour'),
                         round(av.learned::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'availability', 'passed', av.belief >= dionysus_internal.proactive_setting('min_availability'),
        'detail', format('likely available %s (confidence %s)', round(av.belief::numeric, 2), round(av.confidence::numeric, 2)));
    gates := gates || jsonb_build_object('gate', 'cooldown', 'passed', p.last_contact_at IS NULL OR since_contact >= cooldown,
        'detail', CASE WHEN p.last_contact_at IS NULL THEN 'no contact started yet'
                       ELSE format('last contact %s ago (cooldown %s%s)', date_trunc('minute', since_contact), cooldown,
                                   CASE WHEN p.ignored_in_row > 0 THEN format(', doubled for each of %s unanswered', p.ignored_in_row) ELSE '' END) END);
    -- One contact at a time: the last one is answered or counted as ignored before the next.
    gates := gates || jsonb_build_object('gate', 'waiting_on_them', 'passed', NOT p.awaiting_reply,
        'detail', CASE WHEN p.awaiting_reply THEN format('the last contact (%s ago) is not answered yet; it counts as ignored after %s',
                                                         date_trunc('minute', since_contact), date_trunc('minute', dionysus_internal.ignored_after(p)))
                       ELSE 'no contact waiting for an answer' END);
    gates := gates || jsonb_build_object('gate', 'in_flight', 'passed', NOT on_its_way,
        'detail', CASE WHEN NOT on_its_way THEN 'nothing on its way to them' ELSE 'a contact is already being decided or delivered' END);
    SELECT current_energy INTO energy FROM dionysus.heartbeat_state WHERE id = 1;
    cost := dionysus.get_action_cost('reach_out_user');
    gates := gates || jsonb_build_object('gate', 'energy', 'passed', energy >= cost,
        'detail', format('energy %s, a contact costs %s', round(energy::numeric, 1), cost));
    -- After repeated ignores, time alone (social debt) no longer opens the way: a new cause must
    -- (a request they made since, or something new to tell; not pressure grown by time).
    muted := p.ignored_in_row >= dionysus_internal.proactive_setting('ignores_before_pause');
    new_cause := NOT muted OR dionysus_internal.open_requests(p.person) > coalesce((p.cause_at_last_contact ->> 'open_requests')::int, 0)
                 OR p.curiosity > coalesce((p.cause_at_last_contact ->> 'curiosity')::float8, 0) + 0.05;
    gates := gates || jsonb_build_object('gate', 'ignored', 'passed', new_cause,
        'detail', CASE WHEN NOT muted THEN format('%s unanswered in a row', p.ignored_in_row)
                       ELSE format('%s contacts in a row went unanswered: only a new cause counts (%s)', p.ignored_in_row,
                                   CASE WHEN new_cause THEN 'there is one' ELSE 'there is none' END) END);
    -- A considerate friend who knows you are busy now and free tonight waits for tonight: when
    -- the rhythm says a clearly better hour comes within the look-ahead, the contact waits for it.
    IF over_threshold AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean) THEN
        SELECT k, f.belief, f.confidence INTO later
          FROM generate_series(1, dionysus_internal.proactive_setting('better_moment_hours')::int) k,
               LATERAL dionysus_internal.availability(p.person, t + make_interval(hours => k)) f
         ORDER BY f.belief DESC, k LIMIT 1;
        -- The beliefs carry their confidence already (a prior, or what was learned); a rhythm
        -- that is trusted needs less of a difference to be waited for (down to half the margin),
        -- a prior alone all of it.
        margin := dionysus_internal.proactive_setting('better_moment_margin') * (1 - 0.5 * av.confidence);
        better := later.belief >= av.belief + margin;
        gates := gates || jsonb_build_object('gate', 'better_moment', 'passed', NOT better,
            'detail', CASE WHEN better THEN format('likely more available around %s:00 their time (%s against %s now)',
                                                   extract(hour FROM (t + make_interval(hours => later.k)) AT TIME ZONE p.time_zone),
                                                   round(later.belief::numeric, 2), round(av.belief::numeric, 2))
                           ELSE format('no clearly better hour in the next %s (at best %s more, %s needed)',
                                       dionysus_internal.proactive_setting('better_moment_hours'),
                                       round((later.belief - av.belief)::numeric, 2), round(margin::numeric, 2)) END);
    END IF;
    RETURN gates;
END $$;
COMMENT ON FUNCTION dionysus_internal.contact_gates(dionysus.people, timestamptz, boolean, uuid, boolean) IS 'Every gate a contact with this person must pass now, as [{gate, passed, detail}]: the one home of the contact gates (evaluate_contact, evaluate_requested_contact, decide_contact).';

-- ---------------------------------------------------------------------------------------
-- The neuron: one evaluation of whether to contact one person, written down
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.evaluate_contact(who text) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    p dionysus.people;
    a dionysus.agent_state;
    av_belief double precision;
    av_confidence double precision;
    e dionysus.contact_evaluations;
    ins jsonb := '[]'::jsonb;
    gates jsonb;
    w record;
    v double precision;
    total double precision := 0;
    threshold double precision;
    task double precision;
    ignore_after interval;
    blocked text[];
    top record;
    words text;
    factor double precision;
    last_contact uuid;
    shyness double precision;
    independence double precision;
    empathy double precision;
BEGIN
    p := dionysus_internal.person_row(who);
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1;
    -- A contact nobody answered within their usual window counts as ignored.
    ignore_after := dionysus_internal.ignored_after(p);
    IF p.awaiting_reply AND t - p.last_contact_at > ignore_after THEN
        UPDATE dionysus.people x SET awaiting_reply = false, ignored_in_row = x.ignored_in_row + 1 WHERE x.person = who
        RETURNING * INTO p;
        PERFORM dionysus_internal.note_miss(who, p.last_contact_at, 1);
        -- Silence is feedback too: the reason it was sent for and the personality learn from it.
        SELECT c.id INTO last_contact FROM dionysus.contact_evaluations c
         WHERE c.person = who AND c.decision = 'message' AND c.feedback_at IS NULL AND NOT c.solicited
         ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1;
        IF last_contact IS NOT NULL THEN
            UPDATE dionysus.contact_evaluations c SET feedback = jsonb_build_object('by', 'silence', 'signal', -0.5), feedback_at = t
             WHERE c.id = last_contact;
            PERFORM dionysus_internal.learn_from_contact(who, last_contact, p.last_contact_at, -0.5,
                format('no answer within %s', date_trunc('minute', ignore_after)));
        END IF;
        PERFORM dionysus.push_event('internal', 'contact_ignored', 2, jsonb_build_object('ignored_in_row', p.ignored_in_row), who);
    END IF;
    -- A contact one of their own rules asked for (a reminder) is weighed on its own terms.
    IF p.contact_request IS NOT NULL THEN
        RETURN dionysus_internal.evaluate_requested_contact(p);
    END IF;
    -- Task pressure is state the rules move (015): open requests make it build over hours.
    task := p.task_pressure;
    -- Each weight with what their answers taught about it (015's person_contact_weights), in one read.
    FOR w IN SELECT cw.input, cw.weight, cw.description, coalesce(f.factor, 1) AS learned
               FROM dionysus.contact_weights cw
               LEFT JOIN dionysus.person_contact_weights f ON f.person = who AND f.input = cw.input
              ORDER BY cw.input LOOP
        v := CASE w.input
                 WHEN 'social_debt' THEN p.social_debt
                 WHEN 'acquaintance' THEN 1.0 / (1 + p.turns / dionysus_internal.proactive_setting('acquaintance_turns'))
                 WHEN 'task_pressure' THEN task
                 WHEN 'curiosity' THEN p.curiosity END;
        factor := w.learned;
        ins := ins || jsonb_build_object('input', w.input, 'value', round(v::numeric, 3), 'weight', round((w.weight * factor)::numeric, 3),
                                         'learned_factor', round(factor::numeric, 3),
                                         'contribution', round((v * w.weight * factor)::numeric, 3), 'why', w.description);
        total := total + v * w.weight * factor;
    END LOOP;
    -- Personality, vitality and their state move the threshold: shy waits longer, independent
    -- less; a tired agent needs more to act; restraint (the night rule) holds back; an
    -- empathetic one holds back after cold replies.
    SELECT dionysus_internal.trait('shyness'), dionysus_internal.trait('independence'), dionysus_internal.trait('empathy')
      INTO shyness, independence, empathy;
    threshold := dionysus_internal.proactive_setting('contact_threshold')
                 * (1 + 0.5 * (shyness - 0.5))
                 * (1 - 0.5 * (independence - 0.5))
                 * (1 + 0.3 * (1 - a.vitality))
                 * (1 + p.restraint)
                 * (1 + 0.5 * empathy * greatest(0, -p.mood));

    -- The gates (contact_gates), each written down whether it passed or not.
    gates := dionysus_internal.contact_gates(p, t, false, over_threshold => total >= threshold);
    SELECT coalesce(array_agg(g ->> 'gate'), '{}') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;

    SELECT x ->> 'input' AS input, (x ->> 'value')::float8 AS value, (x ->> 'weight')::float8 AS weight,
           (x ->> 'contribution')::float8 AS contribution INTO top
      FROM jsonb_array_elements(ins) x ORDER BY (x ->> 'contribution')::float8 DESC LIMIT 1;
    words := format('pressure %s against threshold %s; %s was %s (weight %s, contributing %s)', round(total::numeric, 2),
                    round(threshold::numeric, 2), top.input, top.value, top.weight, top.contribution)
             || CASE WHEN p.restraint >= 0.05 THEN format('; restraint %s raised the threshold', round(p.restraint::numeric, 2)) ELSE '' END;
    e.outcome := CASE WHEN total < dionysus_internal.proactive_setting('signal_threshold') THEN 'below'
                      WHEN total < threshold THEN 'signal'
                      WHEN cardinality(blocked) > 0 THEN 'gated'
                      ELSE 'opportunity' END;
    IF e.outcome = 'opportunity' THEN
        SELECT f.belief, f.confidence INTO av_belief, av_confidence FROM dionysus_internal.availability(who, t) f;
    END IF;
    words := words || CASE e.outcome
        WHEN 'below' THEN '; nothing to say yet'
        WHEN 'signal' THEN '; an urge, not yet enough to write'
        WHEN 'gated' THEN '; enough to write, held back by ' || array_to_string(blocked, ', ')
        ELSE format('; %s — the person was likely available (%s, confidence %s)',
                    'over the threshold', round(av_belief::numeric, 2), round(av_confidence::numeric, 2)) END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, threshold_parts, gates, outcome, explanation)
    VALUES (who, t, ins, total, threshold,
            jsonb_build_object('base', dionysus_internal.proactive_setting('contact_threshold'), 'shyness', shyness,
                               'independence', independence, 'vitality', round(a.vitality::numeric, 3),
                               'restraint', round(p.restraint::numeric, 3), 'mood', round(p.mood::numeric, 3),
                               'empathy', empathy),
            gates, e.outcome, words)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_pressure = total, last_evaluated_at = t,
           next_check_at = t + make_interval(secs => coalesce(x.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes')) * 60)
     WHERE x.person = who;
    IF e.outcome = 'signal' THEN
        PERFORM dionysus.push_event('internal', 'contact_urge', 3, jsonb_build_object('pressure', round(total::numeric, 3)), who);
    END IF;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id)::text);
    END IF;
    RETURN e;
END $$;
COMMENT ON FUNCTION dionysus_internal.evaluate_contact(text) IS 'One evaluation of contact with one person, written to contact_evaluations; NOTIFY dionysus_contact at a crossing.';

CREATE FUNCTION explain_contact(for_person text DEFAULT NULL, max_items integer DEFAULT 1)
    RETURNS TABLE (evaluation_id uuid, at timestamptz, person text, outcome text, pressure double precision,
                   threshold double precision, explanation text, inputs jsonb, gates jsonb, decision text, reason text)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % (1 to 1000)', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.id, c.at, c.person, c.outcome, c.pressure, c.threshold, c.explanation, c.inputs, c.gates, c.decision, c.reason
      FROM dionysus.contact_evaluations c
     WHERE for_person IS NULL OR c.person = for_person
     ORDER BY c.at DESC, c.recorded_at DESC LIMIT max_items;
END $$;
COMMENT ON FUNCTION explain_contact(text, integer) IS
    'Why Dionysus wrote or did not: the latest evaluations (of one person, or anyone), each with its inputs, weights, contributions, threshold, gates and decision.';

-- ---------------------------------------------------------------------------------------
-- The tick: events, state, evaluations, the next interval
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION proactive_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz;
    a dionysus.agent_state;
    hours double precision;
    n_dropped bigint := 0;
    n_filtered bigint := 0;
    n_processed bigint := 0;
    over bigint;
    wake double precision;
    woke boolean := false;
    ev dionysus.events;
    gone record;
    who text;
    evaluated integer := 0;
    opportunities integer := 0;
    verdict dionysus.contact_evaluations;
    top_pressure double precision;
    tod double precision;
    interval_s double precision;
    new_mode text;
    local_hour int;
    new_memories bigint;
    agent_tz text;
    n_fired integer := 0;
BEGIN
    SELECT * INTO a FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    -- The clock is read once the state is ours: a tick that waited on another never writes an
    -- older time over the one it committed (the next would count those hours twice). On real
    -- time now() is when this transaction began, which may be before that tick committed.
    t := dionysus.clock_now();
    IF NOT EXISTS (SELECT 1 FROM dionysus.clock c WHERE c.id = 1 AND c.frozen_at IS NOT NULL) THEN
        t := greatest(t, a.last_tick_at);
    END IF;
    hours := greatest(0, extract(epoch FROM t - coalesce(a.last_tick_at, t)) / 3600.0);
    -- The agent keeps the day of the person it talked with last: it sleeps when they sleep.
    agent_tz := coalesce((SELECT x.time_zone FROM dionysus.people x ORDER BY x.last_message_at DESC NULLS LAST LIMIT 1), 'UTC');
    local_hour := extract(hour FROM t AT TIME ZONE agent_tz)::int;

    -- What a rule scheduled is queued when its time comes.
    UPDATE dionysus.events e SET status = 'queued', payload = e.payload || jsonb_build_object('scheduled_for', e.at), at = t
     WHERE e.status = 'scheduled' AND e.at <= t;
    -- Time-of-day boundaries arrive as events, in each person's own time: every full hour
    -- (time.hour) and morning, midday, evening, night (at most the last day's worth).
    IF a.last_tick_at IS NOT NULL AND t > a.last_tick_at THEN
        INSERT INTO dionysus.events (source, type, priority, person, payload, at)
        SELECT 'time', b.type, 2, x.person, jsonb_build_object('local_hour', extract(hour FROM h.local)::int), h.local AT TIME ZONE x.time_zone
          FROM dionysus.people x,
               LATERAL generate_series(date_trunc('hour', t AT TIME ZONE x.time_zone),
                                       greatest(date_trunc('hour', a.last_tick_at AT TIME ZONE x.time_zone),
                                                date_trunc('hour', t AT TIME ZONE x.time_zone) - interval '23 hours'),
                                       interval '-1 hour') AS h(local),
               LATERAL (VALUES ('time.hour'),
                               (CASE extract(hour FROM h.local)::int WHEN 7 THEN 'time.morning' WHEN 12 THEN 'time.midday'
                                                                     WHEN 18 THEN 'time.evening' WHEN 23 THEN 'time.night' END)) AS b(type)
         WHERE x.last_message_at IS NOT NULL AND b.type IS NOT NULL AND h.local > a.last_tick_at AT TIME ZONE x.time_zone;
    END IF;

    -- Overload, layer 2: old LOW and IDLE events are dropped; layer 3: above the limit the
    -- lowest priority goes first. CRITICAL is never dropped.
    FOR gone IN
        WITH d AS (
            UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'too old for its priority'
             WHERE e.status = 'queued'
               AND ((e.priority >= 3 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_low_seconds')))
                 OR (e.priority = 4 AND e.at < t - make_interval(secs => dionysus_internal.proactive_setting('event_drop_idle_seconds'))))
            RETURNING e.priority)
        SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
    LOOP
        PERFORM dionysus_internal.count_event('dropped_age', gone.priority, gone.n);
        n_dropped := n_dropped + gone.n;
    END LOOP;
    SELECT count(*) - dionysus_internal.proactive_setting('event_queue_limit') INTO over FROM dionysus.events WHERE status = 'queued';
    IF over > 0 THEN
        FOR gone IN
            WITH d AS (
                UPDATE dionysus.events e SET status = 'dropped', handled_at = t, reason = 'queue over its limit'
                 WHERE e.id IN (SELECT x.id FROM dionysus.events x WHERE x.status = 'queued' AND x.priority > 0
                                 ORDER BY x.priority DESC, x.at LIMIT over)
                RETURNING e.priority)
            SELECT d.priority, count(*) AS n FROM d GROUP BY d.priority
        LOOP
            PERFORM dionysus_internal.count_event('dropped_overload', gone.priority, gone.n);
            n_dropped := n_dropped + gone.n;
        END LOOP;
    END IF;

    -- Relaxed filters LOW and IDLE, asleep everything but CRITICAL; what is filtered disturbs.
    -- The clock's own hours are not stimuli: never filtered (they carry the person's rules, a
    -- reminder at 07:00), they disturb nothing.
    FOR ev IN SELECT * FROM dionysus.events WHERE status = 'queued' ORDER BY priority, at, id LOOP
        IF ev.source <> 'time' AND ((a.mode = 'relaxed' AND ev.priority >= 3) OR (a.mode = 'asleep' AND ev.priority >= 1)) THEN
            UPDATE dionysus.events SET status = 'filtered', handled_at = t, reason = 'agent ' || a.mode WHERE id = ev.id;
            PERFORM dionysus_internal.count_event('filtered', ev.priority, 1);
            a.disturbance := a.disturbance + ev.merged * (ARRAY[1.0, 0.3, 0.1, 0.05, 0.01])[ev.priority + 1];
            n_filtered := n_filtered + 1;
            CONTINUE;
        END IF;
        IF ev.type IN ('reaction') AND ev.person IS NOT NULL THEN
            UPDATE dionysus.people SET social_debt = social_debt * 0.8 WHERE person = ev.person;
        END IF;
        UPDATE dionysus.events SET status = 'processed', handled_at = t WHERE id = ev.id;
        a.vitality := greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_event'));
        n_processed := n_processed + 1;
        -- The rules this event triggers (015); they may move vitality, so it is handed over.
        IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.status = 'active' AND m.trigger = ev.type
                                                         AND (m.person IS NULL OR m.person = ev.person)) THEN
            UPDATE dionysus.agent_state SET vitality = a.vitality WHERE id = 1;
            n_fired := n_fired + dionysus_internal.run_rules(ev.type, ev.person, 0, ev);
            SELECT vitality INTO a.vitality FROM dionysus.agent_state WHERE id = 1;
        END IF;
    END LOOP;
    a.disturbance := a.disturbance * dionysus_internal.proactive_setting('disturbance_decay');
    wake := 0.5 * (1 + (1 - a.vitality));
    IF a.mode IN ('asleep', 'relaxed') AND a.disturbance > wake THEN
        woke := true;
        a.disturbance := 0;
    END IF;

    -- Vitality: spent by ticking, regained with time, twice as fast in the agent's night.
    a.vitality := least(1, greatest(0, a.vitality - dionysus_internal.proactive_setting('vitality_drain_tick')
        + hours * dionysus_internal.proactive_setting('vitality_recharge_hour')
                * CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 2 ELSE 1 END));

    -- Each person's pressures move with time; contact is evaluated when their cadence is due.
    SELECT count(*) INTO new_memories FROM dionysus.memories m
     WHERE m.created_at > coalesce(a.last_tick_real_at, now()) AND m.type = 'semantic' AND m.status = 'active'
       AND m.private_to IS NULL; -- what anyone may hear of (nobody's private words)
    IF new_memories > 0 THEN
        UPDATE dionysus.people x SET
            curiosity = least(1, x.curiosity + least(5, new_memories) * dionysus_internal.proactive_setting('curiosity_per_new_memory')
                                               * 2 * dionysus_internal.trait('curiosity')),
            updated_at = now()
         WHERE x.last_message_at IS NOT NULL;
    END IF;
    -- The 'tick' rules move each person's state with the time that passed (social debt in
    -- silence, curiosity fading, task pressure, the night's restraint: 015's built-ins).
    UPDATE dionysus.agent_state SET vitality = a.vitality WHERE id = 1;
    n_fired := n_fired + dionysus_internal.run_rules_for('tick', ARRAY(SELECT x.person FROM dionysus.people x
                                                                       WHERE x.last_message_at IS NOT NULL ORDER BY x.person), hours);
    SELECT vitality INTO a.vitality FROM dionysus.agent_state WHERE id = 1;
    -- Learned rules decay by the day: looked at once an hour.
    IF a.last_tick_at IS NULL OR date_trunc('hour', a.last_tick_at) <> date_trunc('hour', t) THEN
        PERFORM dionysus_internal.decay_rules();
    END IF;
    -- A crossing nobody decided on (no driver running) does not wait forever
    -- (nor hold back the evaluations below).
    UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = 'skipped', decided_at = t,
           reason = 'no mind decided within 30 minutes'
     WHERE c.outcome = 'opportunity' AND c.decision IS NULL AND c.at < t - interval '30 minutes';
    FOR who IN SELECT x.person FROM dionysus.people x
                WHERE x.last_message_at IS NOT NULL AND (x.next_check_at IS NULL OR x.next_check_at <= t)
                ORDER BY x.person LOOP
        verdict := dionysus_internal.evaluate_contact(who);
        evaluated := evaluated + 1;
        IF verdict.outcome = 'opportunity' THEN
            opportunities := opportunities + 1;
        END IF;
    END LOOP;


    -- The next tick: interval = base × 1/pressure × time of day × vitality.
    SELECT greatest(0.05, coalesce(max(x.last_pressure), 0)) INTO top_pressure FROM dionysus.people x;
    tod := CASE WHEN local_hour >= 23 OR local_hour < 7 THEN 4 ELSE 1 END;
    interval_s := dionysus_internal.proactive_setting('base_tick_seconds') / top_pressure * tod * (1 + (1 - a.vitality));
    IF woke THEN
        interval_s := dionysus_internal.proactive_setting('min_tick_seconds');
    END IF;
    interval_s := least(dionysus_internal.proactive_setting('max_tick_seconds'),
                        greatest(dionysus_internal.proactive_setting('min_tick_seconds'), interval_s));
    new_mode := CASE WHEN interval_s < 60 THEN 'alert' WHEN interval_s < 900 THEN 'normal'
                     WHEN interval_s < 3600 THEN 'relaxed' ELSE 'asleep' END;
    -- The mode comes from the interval the state asks for; the tick itself never sleeps through
    -- a full hour, so the hour's rules (a reminder at 15:00) run on time.
    interval_s := least(interval_s, 1 + extract(epoch FROM ((date_trunc('hour', t AT TIME ZONE agent_tz) + interval '1 hour') AT TIME ZONE agent_tz) - t));
    UPDATE dionysus.agent_state SET vitality = a.vitality, disturbance = a.disturbance, mode = new_mode, pressure = top_pressure,
           tick_interval_seconds = interval_s, last_tick_at = t, last_tick_real_at = greatest(a.last_tick_real_at, now()),
           next_tick_at = t + make_interval(secs => interval_s),
           ticks = ticks + 1, updated_at = now()
     WHERE id = 1;
    RETURN jsonb_build_object('at', t, 'mode', new_mode, 'previous_mode', a.mode, 'woke', woke, 'vitality', round(a.vitality::numeric, 3),
                              'pressure', round(top_pressure::numeric, 3), 'interval_seconds', round(interval_s::numeric, 1),
                              'events_processed', n_processed, 'events_filtered', n_filtered, 'events_dropped', n_dropped,
                              'evaluated', evaluated, 'opportunities', opportunities, 'rules_fired', n_fired);
END $$;
COMMENT ON FUNCTION proactive_tick() IS
    'One tick of the proactive mind: scheduled events released, the hour''s time events, events dropped, filtered or processed (with their rules), vitality and disturbance, the tick rules moving each person''s state, contact evaluated where the cadence is due, the next interval computed. The scheduler calls it when due.';

-- Whether the proactive tick is due (the scheduler calls proactive_tick then).
CREATE FUNCTION dionysus_internal.proactive_tick_due() RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT coalesce(next_tick_at <= dionysus.clock_now(), true) FROM dionysus.agent_state WHERE id = 1
$$;
COMMENT ON FUNCTION dionysus_internal.proactive_tick_due() IS 'Whether the proactive tick''s interval is up.';

-- ---------------------------------------------------------------------------------------
-- The smart layer's side: what the driver needs at a crossing, and its decision
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION contact_opportunity(evaluation_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    e dionysus.contact_evaluations;
BEGIN
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN jsonb_build_object(
        'evaluation_id', e.id, 'person', e.person, 'outcome', e.outcome, 'decided', e.decision IS NOT NULL,
        'solicited', e.solicited, 'request', e.request -> 'about',
        'explanation', e.explanation, 'inputs', e.inputs, 'gates', e.gates,
        -- Only this person's own turns and what they may see: nobody else's words reach them.
        'recent_turns', coalesce((SELECT jsonb_agg(jsonb_build_object('role', CASE WHEN m.is_bot THEN 'assistant' ELSE 'user' END,
                                                                       'content', left(m.content, 500), 'at', m.created_at) ORDER BY m.created_at)
                                    FROM (SELECT * FROM dionysus.messages x WHERE x.person = e.person AND x.import_id IS NULL
                                           ORDER BY x.created_at DESC LIMIT 12) m), '[]'::jsonb),
        'their_requests', coalesce((SELECT jsonb_agg(g.title ORDER BY g.created_at) FROM dionysus.goals g
                                     WHERE g.priority IN ('active', 'queued') AND g.private_to = ARRAY[e.person]), '[]'::jsonb),
        'personality', (SELECT jsonb_object_agg(trait, value) FROM dionysus.personality),
        -- What matters most to them and what they are working toward (017).
        'north_stars', coalesce((SELECT jsonb_agg(n.content ORDER BY n.created_at) FROM dionysus.person_north_stars(e.person) n), '[]'::jsonb),
        'objectives', coalesce((SELECT jsonb_agg(o.description) FROM (SELECT * FROM dionysus.person_objectives(e.person) LIMIT 5) o), '[]'::jsonb));
END $$;
COMMENT ON FUNCTION contact_opportunity(uuid) IS 'What the thinking layer needs at a crossing: the explanation, the person''s own recent turns, their open requests, the personality.';

-- The crossings still waiting for the thinking layer's decision, oldest first (the driver
-- decides them; a wake-up may stand for several, or for none).
CREATE FUNCTION open_contact_opportunities(max_items integer DEFAULT 5) RETURNS SETOF uuid
    LANGUAGE sql STABLE AS $$
    SELECT c.id FROM dionysus.contact_evaluations c
     WHERE c.outcome = 'opportunity' AND c.decision IS NULL ORDER BY c.at LIMIT greatest(max_items, 0)
$$;
COMMENT ON FUNCTION open_contact_opportunities(integer) IS 'The ids of the contact opportunities not yet decided, oldest first, at most max_items: what decide_contact waits for.';

CREATE FUNCTION decide_contact(evaluation_id uuid, decision text, message text DEFAULT NULL, reason text DEFAULT NULL,
                               decided_by text DEFAULT 'model') RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    e dionysus.contact_evaluations;
    p dionysus.people;
    t timestamptz := dionysus.clock_now();
    target jsonb;
    msg_id uuid;
    cost double precision;
    backoff double precision;
    censored jsonb;
    held jsonb := '{}'::jsonb;
    gates jsonb;
    gate text;
BEGIN
    IF decision IS NULL OR decision NOT IN ('message', 'wait') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decision": % (message or wait)', dionysus_internal.input_prefix(decision) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decided_by IS NULL OR decided_by NOT IN ('model', 'default', 'skipped') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "decided_by": % (model, default or skipped)', dionysus_internal.input_prefix(decided_by) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF decision = 'message' AND (coalesce(btrim(message), '') = '' OR length(message) > 4000) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "message": a contact needs the message to send, at most 4,000 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order: the state row (energy), agent_state, then the evaluation and the person.
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO e FROM dionysus.contact_evaluations c WHERE c.id = evaluation_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact evaluation with id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF e.outcome <> 'opportunity' THEN
        RAISE EXCEPTION 'dionysus: evaluation % was %, not an opportunity to contact', evaluation_id, e.outcome
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF e.decision IS NOT NULL THEN
        -- Decided already (a redelivered NOTIFY): the first decision stands.
        RETURN jsonb_build_object('decision', e.decision, 'outbox_id', e.outbox_id, 'duplicate', true);
    END IF;
    SELECT * INTO p FROM dionysus.people x WHERE x.person = e.person FOR UPDATE;
    -- Censors (022) read the words: a blocked message is decided as a wait (its activation
    -- counted), and takes the wait's path below.
    IF decision = 'message' THEN
        censored := dionysus.censor_gate('reach_out', message, e.person, jsonb_build_object('evaluation_id', e.id));
        IF censored ->> 'verdict' = 'block' THEN
            decision := 'wait';
            reason := left('censored: ' || (SELECT string_agg(r, '; ') FROM jsonb_array_elements_text(censored -> 'reasons') r), 1000);
            held := jsonb_build_object('censored', censored -> 'censors');
        END IF;
    END IF;
    IF decision = 'wait' AND e.solicited THEN
        -- A contact they asked for is not dropped for a "wait": it is weighed again at the next
        -- check, until it goes out or lapses.
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', p.next_check_at, 'duplicate', false) || held;
    ELSIF decision = 'wait' THEN
        -- Exponential back-off of the check-in cadence, longer for a patient personality.
        backoff := least(dionysus_internal.proactive_setting('check_backoff_max_minutes'),
                         coalesce(p.check_interval_minutes, dionysus_internal.proactive_setting('check_interval_minutes'))
                         * (1.5 + dionysus_internal.trait('patience')));
        UPDATE dionysus.people x SET check_interval_minutes = backoff, next_check_at = t + make_interval(secs => backoff * 60)
         WHERE x.person = e.person;
        UPDATE dionysus.contact_evaluations c SET decision = 'wait', decided_by = decide_contact.decided_by, decided_at = t,
               reason = decide_contact.reason WHERE c.id = e.id;
        UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by = 'model' THEN 1 ELSE 0 END,
               vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by = 'model' THEN dionysus_internal.proactive_setting('vitality_drain_model') ELSE 0 END)
         WHERE id = 1;
        RETURN jsonb_build_object('decision', 'wait', 'next_check_at', t + make_interval(secs => backoff * 60), 'duplicate', false) || held;
    END IF;
    -- The gates time spent thinking can close are checked again (contact_gates; a contact they
    -- asked for has no cooldown and is not held back by energy: it spends what there is).
    gates := dionysus_internal.contact_gates(p, t, e.solicited, deciding => e.id);
    FOREACH gate IN ARRAY ARRAY['in_flight', 'their_word', 'cooldown', 'energy'] LOOP
        IF EXISTS (SELECT 1 FROM jsonb_array_elements(gates) g WHERE g ->> 'gate' = gate AND NOT (g ->> 'passed')::boolean) THEN
            RAISE EXCEPTION 'dionysus: contact refused: %', CASE gate
                WHEN 'in_flight' THEN format('a message to %s is already on its way', e.person)
                WHEN 'their_word' THEN format('%s asked not to be contacted now', e.person)
                WHEN 'cooldown' THEN format('%s was contacted less than the cooldown ago', e.person)
                ELSE format('energy below the %s a contact costs', dionysus.get_action_cost('reach_out_user')) END
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
    END LOOP;
    cost := dionysus.get_action_cost('reach_out_user');
    IF e.solicited THEN
        cost := least(cost, greatest(0, (SELECT current_energy FROM dionysus.heartbeat_state WHERE id = 1)));
    END IF;
    IF dionysus_internal.web_only_basis(message) THEN
        RAISE EXCEPTION 'dionysus: contact refused: it rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    target := dionysus.reach_out_target(e.person);
    PERFORM dionysus.update_energy(-cost, NULL, 'reach_out_user',
                                   CASE WHEN e.solicited THEN 'contact they asked for: ' ELSE 'contact born of pressure: ' END || left(e.explanation, 200));
    INSERT INTO dionysus.outbox (audience, content, person, platform, contact_id)
    VALUES ('user', message, target ->> 'person', target ->> 'platform', e.id)
    RETURNING id INTO msg_id;
    UPDATE dionysus.contact_evaluations c SET decision = 'message', decided_by = decide_contact.decided_by, decided_at = t,
           reason = decide_contact.reason, outbox_id = msg_id WHERE c.id = e.id;
    IF e.solicited THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = e.person;
    ELSE
        UPDATE dionysus.people x SET
            check_interval_minutes = dionysus_internal.proactive_setting('check_interval_minutes'),
            cause_at_last_contact = jsonb_build_object(
                'open_requests', dionysus_internal.open_requests(e.person),
                'task_pressure', x.task_pressure, 'curiosity', x.curiosity)
         WHERE x.person = e.person;
    END IF;
    -- Two model calls (decide, compose); one for a contact they asked for (compose only).
    UPDATE dionysus.agent_state SET model_calls = model_calls + CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END,
           vitality = greatest(0, vitality - CASE WHEN decide_contact.decided_by <> 'model' THEN 0 WHEN e.solicited THEN 1 ELSE 2 END
                                             * dionysus_internal.proactive_setting('vitality_drain_model'))
     WHERE id = 1;
    PERFORM pg_notify('dionysus_outbox', msg_id::text);
    RETURN jsonb_build_object('decision', 'message', 'outbox_id', msg_id, 'duplicate', false);
END $$;
COMMENT ON FUNCTION decide_contact(uuid, text, text, text, text) IS
    'The thinking layer''s answer to a crossing: wait (the check-in interval backs off) or message (gates checked again, energy spent, the message queued for the person exactly once). Idempotent.';

-- A contact Dionysus started was delivered (confirm_outbox calls this in its transaction). One
-- they asked for (a reminder) waits for no answer and starts no cooldown: it is not unsolicited.
CREATE FUNCTION dionysus_internal.note_contact_delivered(who text) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce((SELECT c.solicited FROM dionysus.contact_evaluations c WHERE c.person = who AND c.decision = 'message'
                  ORDER BY c.decided_at DESC, c.recorded_at DESC LIMIT 1), false) THEN
        UPDATE dionysus.people x SET social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_contact')),
               updated_at = now()
         WHERE x.person = who;
        RETURN;
    END IF;
    UPDATE dionysus.people x SET last_contact_at = dionysus.clock_now(), awaiting_reply = true,
           social_debt = x.social_debt * (1 - dionysus_internal.proactive_setting('debt_relief_on_contact')), updated_at = now()
     WHERE x.person = who;
END $$;
COMMENT ON FUNCTION dionysus_internal.note_contact_delivered(text) IS 'A contact Dionysus started reached the person: awaiting their reply (unless they asked for it), social debt relieved.';

-- Where a person's time zone came from, as `dionysus why` and `dionysus status` say it.
CREATE FUNCTION dionysus_internal.time_zone_source_said(source text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE source WHEN 'config' THEN 'configured' WHEN 'words' THEN 'from their words'
                       WHEN 'inferred' THEN 'inferred from when they write' ELSE 'not known yet: UTC' END
$$;
COMMENT ON FUNCTION dionysus_internal.time_zone_source_said(text) IS
    'Where a person''s time zone came from (people.time_zone_source), in words: the one phrasing of why and status.';

-- The person's time zone, and where it came from. A source never gives way to a weaker one
-- (config > words > inferred > default): the configuration is the owner's word, what they
-- said beats a guess. What was learned of their rhythm moves with the zone, so the hours they
-- wrote stay the hours they wrote. Returns whether the zone was taken.
CREATE FUNCTION set_person_time_zone(person text, time_zone text, source text DEFAULT 'config') RETURNS boolean
    LANGUAGE plpgsql AS $$
DECLARE
    p dionysus.people;
    rank_of constant text[] := ARRAY['default', 'inferred', 'words', 'config'];
    shift int;
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF time_zone IS NULL OR NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = time_zone) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "time_zone": % is not a time zone name (e.g. Europe/Lisbon)', dionysus_internal.input_prefix(time_zone)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF source IS NULL OR source NOT IN ('inferred', 'words', 'config') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "source": % (config, words or inferred)', dionysus_internal.input_prefix(source)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p := dionysus_internal.person_row(person);
    IF array_position(rank_of, source) < array_position(rank_of, p.time_zone_source) THEN
        RETURN false;
    END IF;
    -- Hours between their old local time and the new one, now: the rhythm's hours move by it.
    shift := round(extract(epoch FROM (dionysus.clock_now() AT TIME ZONE set_person_time_zone.time_zone)
                                      - (dionysus.clock_now() AT TIME ZONE p.time_zone)) / 3600)::int;
    IF shift <> 0 THEN
        WITH old AS (DELETE FROM dionysus.person_rhythm r WHERE r.person = set_person_time_zone.person RETURNING r.*)
        INSERT INTO dionysus.person_rhythm (person, hour_of_week, activity, misses)
        SELECT o.person, ((o.hour_of_week + shift) % 168 + 168) % 168, sum(o.activity), sum(o.misses) FROM old o GROUP BY 1, 2;
    END IF;
    UPDATE dionysus.people x SET time_zone = set_person_time_zone.time_zone, time_zone_source = set_person_time_zone.source, updated_at = now()
     WHERE x.person = set_person_time_zone.person;
    RETURN true;
END $$;
COMMENT ON FUNCTION set_person_time_zone(text, text, text) IS
    'The person''s time zone (an IANA name) and its source (config, words, inferred; a weaker source never overrides a stronger one): their quiet hours, rhythm and rules are in their local time. Returns whether it was taken.';

-- A time zone in a person's words: a place ("I'm in Berlin", "I live in New York") named by a
-- zone, or their clock ("it's 3 am here": the whole-hour offset from the clock, as Etc/GMT±N).
-- NULL when they said neither.
CREATE FUNCTION dionysus_internal.time_zone_from_words(words text, at timestamptz) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    w text := lower(words);
    place text;
    zone text;
    hh int;
    offset_hours int;
BEGIN
    -- The place: one or two words after "I'm in", "I live in", "based in" (a city a zone is named by).
    place := substring(w FROM '\m(?:i''m|i am|im|i live|we live|we''re|we are|living|based|here) (?:now |currently )?in ([a-z]+(?: [a-z]+)?)');
    IF place IS NOT NULL THEN
        SELECT z.name INTO zone FROM pg_timezone_names z
         WHERE lower(z.name) LIKE '%/' || replace(place, ' ', '\_')
            OR lower(z.name) LIKE '%/' || split_part(place, ' ', 1)
         ORDER BY z.name !~ '^(Africa|America|Asia|Atlantic|Australia|Europe|Indian|Pacific)/', lower(z.name) NOT LIKE '%/' || replace(place, ' ', '\_'), z.name LIMIT 1;
        IF zone IS NOT NULL THEN
            RETURN zone;
        END IF;
    END IF;
    hh := substring(w FROM '\mit''?s (?:already |now |almost |just )?(\d{1,2})(?::\d\d)? ?(?:am|pm|h|o''clock)? (?:here|where i am|for me)')::int;
    IF hh IS NULL OR hh > 23 THEN
        RETURN NULL;
    END IF;
    IF w ~ ('\m' || hh || '(:\d\d)? ?pm') AND hh < 12 THEN
        hh := hh + 12;
    ELSIF w ~ ('\m' || hh || '(:\d\d)? ?am') AND hh = 12 THEN
        hh := 0;
    END IF;
    offset_hours := ((hh - extract(hour FROM at AT TIME ZONE 'UTC')::int + 36) % 24) - 12;
    -- POSIX's sign is the other way round: Etc/GMT-1 is an hour ahead of UTC.
    RETURN CASE WHEN offset_hours = 0 THEN 'Etc/UTC' WHEN offset_hours > 0 THEN 'Etc/GMT-' || offset_hours ELSE 'Etc/GMT+' || -offset_hours END;
END $$;
COMMENT ON FUNCTION dionysus_internal.time_zone_from_words(text, timestamptz) IS
    'The time zone a person''s words give: a place named by a zone ("I''m in Berlin"), or their clock ("it''s 3 am here") as Etc/GMT±N; NULL if neither.';

-- A time zone inferred from when they write, for someone who never said theirs: their
-- longest silence in the day is taken as their night, and the zone is the one that puts its
-- middle at the middle of their quiet hours (their prior's). It is the phase of their day, not
-- a place (a night owl in UTC gets a zone where their night is night), and the weakest source:
-- their words or the configuration replace it. NULL until the rhythm shows a night (the
-- rhythm's confidence: rhythm_confident_after messages over rhythm_confident_days days; a
-- silence of at least five hours), or when the zone it gives is within an hour of theirs.
CREATE FUNCTION dionysus_internal.infer_time_zone(p dionysus.people) RETURNS text
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    a double precision[] := array_fill(0::float8, ARRAY[24]);
    total double precision := 0;
    r record;
    quiet_len int;
    quiet_mid double precision;
    run int := 0;
    best_len int := 0;
    best_end int;
    night_mid double precision;
    shift int;
    now_offset int;
    new_offset int;
    qs int := dionysus_internal.prior_setting(p, 'quiet_start_hour')::int;
    qe int := dionysus_internal.prior_setting(p, 'quiet_end_hour')::int;
BEGIN
    IF p.time_zone_source NOT IN ('default', 'inferred') OR p.first_message_at IS NULL
       OR dionysus.clock_now() - p.first_message_at < make_interval(days => dionysus_internal.proactive_setting('rhythm_confident_days')::int) THEN
        RETURN NULL;
    END IF;
    FOR r IN SELECT x.hour_of_week % 24 AS hr, sum(x.activity) AS n FROM dionysus.person_rhythm x
              WHERE x.person = p.person GROUP BY 1 LOOP
        a[r.hr + 1] := r.n;
        total := total + r.n;
    END LOOP;
    IF total < dionysus_internal.proactive_setting('rhythm_confident_after') THEN
        RETURN NULL;
    END IF;
    -- The longest run of silent hours (at most 2 % of what they wrote), around the clock.
    FOR i IN 0 .. 47 LOOP
        IF a[i % 24 + 1] <= 0.02 * total THEN
            run := run + 1;
            IF run > best_len AND run <= 24 THEN
                best_len := run;
                best_end := i;
            END IF;
        ELSE
            run := 0;
        END IF;
    END LOOP;
    IF best_len < 5 OR best_len >= 24 THEN
        RETURN NULL;
    END IF;
    night_mid := best_end - (best_len - 1) / 2.0;
    quiet_len := ((qe - qs) % 24 + 24) % 24;
    quiet_mid := qs + quiet_len / 2.0;
    shift := round(quiet_mid - night_mid)::int;
    shift := ((shift % 24) + 36) % 24 - 12;
    IF abs(shift) <= 1 THEN
        RETURN NULL;
    END IF;
    now_offset := round(extract(epoch FROM (dionysus.clock_now() AT TIME ZONE p.time_zone) - (dionysus.clock_now() AT TIME ZONE 'UTC')) / 3600)::int;
    new_offset := ((now_offset + shift) % 24 + 35) % 24 - 11;   -- in [-11, 12]: the Etc zones there are
    -- POSIX's sign is the other way round: Etc/GMT-1 is an hour ahead of UTC.
    RETURN CASE WHEN new_offset = 0 THEN 'Etc/UTC' WHEN new_offset > 0 THEN 'Etc/GMT-' || new_offset ELSE 'Etc/GMT+' || -new_offset END;
END $$;
COMMENT ON FUNCTION dionysus_internal.infer_time_zone(dionysus.people) IS
    'The time zone when they write suggests (for a person whose zone is the default or was inferred): the one that puts the middle of their longest daily silence at the middle of their quiet hours, as Etc/GMT±N; NULL while the rhythm shows no night yet or it is within an hour of theirs.';

-- A person's own availability prior, key by key (the deployment's in proactive_config holds
-- for every key they have not got): quiet and working hours, and what is believed in each.
CREATE FUNCTION set_person_prior(person text, prior jsonb) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    k text;
    v jsonb;
BEGIN
    IF person IS NULL OR btrim(person) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF prior IS NULL OR jsonb_typeof(prior) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "prior": a JSON object of proactive_config''s prior keys' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(prior) LOOP
        IF k NOT IN ('quiet_start_hour', 'quiet_end_hour', 'workday_start_hour', 'workday_end_hour', 'prior_free', 'prior_workday', 'prior_quiet') THEN
            RAISE EXCEPTION 'dionysus: invalid argument "prior": % is not a prior key (quiet_start_hour, quiet_end_hour, workday_start_hour, workday_end_hour, prior_free, prior_workday, prior_quiet)',
                dionysus_internal.input_prefix(k) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(v) <> 'number' OR (k LIKE '%hour' AND ((v::text)::numeric NOT BETWEEN 0 AND 23 OR (v::text)::numeric <> trunc((v::text)::numeric)))
           OR (k LIKE 'prior%' AND (v::text)::numeric NOT BETWEEN 0 AND 1) THEN
            RAISE EXCEPTION 'dionysus: invalid argument "prior": "%" must be %', k,
                CASE WHEN k LIKE '%hour' THEN 'a whole hour in [0, 23]' ELSE 'within [0, 1]' END USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    PERFORM dionysus_internal.person_row(person);
    UPDATE dionysus.people x SET prior = set_person_prior.prior, updated_at = now() WHERE x.person = set_person_prior.person;
    RETURN prior;
END $$;
COMMENT ON FUNCTION set_person_prior(text, jsonb) IS
    'A person''s own availability prior (quiet and working hours, the belief in each), over the deployment''s proactive_config key by key; {} returns them to it.';

-- The person's local time, as a rule from their words reads it ("Sunday 2026-11-29 09:30"):
-- their time zone's (UTC while none is known).
CREATE FUNCTION person_local_time(person text) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT to_char(dionysus.clock_now() AT TIME ZONE coalesce((SELECT p.time_zone FROM dionysus.people p WHERE p.person = person_local_time.person), 'UTC'),
                   'FMDay YYYY-MM-DD HH24:MI')
$$;
COMMENT ON FUNCTION person_local_time(text) IS 'The person''s local time now (the clock, in their time zone; UTC while none is known) as "Day YYYY-MM-DD HH24:MI".';

-- The thinking layer's two prompts: decide at a crossing (fast model), then compose (smart).
-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('proactive_decision', 1, 0.2, 'proactive mind: message or wait, at a crossing of contact pressure'),
    ('proactive_compose', 1, 0.7, 'proactive mind: the message itself, in the personality''s voice')
  ) AS shipped (key, version, temperature, note);

CREATE VIEW proactive_health AS
SELECT a.mode, round(a.vitality::numeric, 3) AS vitality, round(a.disturbance::numeric, 3) AS disturbance,
       round(a.pressure::numeric, 3) AS pressure, a.tick_interval_seconds, a.last_tick_at, a.next_tick_at, a.ticks, a.model_calls,
       (SELECT count(*) FROM events WHERE status = 'queued') AS events_queued,
       (SELECT coalesce(jsonb_object_agg(reason, n), '{}'::jsonb) FROM (SELECT reason, sum(count) AS n FROM event_counters GROUP BY reason) c) AS events_not_processed,
       (SELECT count(*) FROM contact_evaluations WHERE outcome = 'opportunity' AND decision IS NULL) AS opportunities_waiting,
       (SELECT to_jsonb(x) FROM (SELECT c.person, c.at, c.outcome, c.explanation, c.decision FROM contact_evaluations c
                                  ORDER BY c.at DESC, c.recorded_at DESC LIMIT 1) x) AS last_evaluation
  FROM agent_state a WHERE a.id = 1;
COMMENT ON VIEW proactive_health IS 'The proactive mind at a glance: mode, vitality, pressure, tick, queued and lost events, waiting crossings, the last evaluation.';
