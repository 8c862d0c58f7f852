-- The proactive mind's rules and its learning: what the base layer does
-- is data, and what it learns from the person is written down with its cause.
--
--   mind_rules        trigger (an event type, or 'tick') → condition (a small declarative JSON
--                     expression over named state values: no SQL, no code) → intents (adjust a
--                     state value, create an objective, schedule an event, request a contact).
--                     Built-in rules carry the base dynamics (social debt grows with silence,
--                     task pressure from open requests, night suppression); a person adds their
--                     own in plain words ("remind me to call mom on Sundays": the fast model
--                     proposes, add_rule validates). Learned rules strengthen with use, decay
--                     unused, and are forgotten below a threshold.
--   rule_firings      every pass that fired a rule: the values it saw and what each rule changed
--   learning_log      every change learned from how a person answered (or did not answer) a
--                     contact: timing fast, topic weights moderately, personality very slowly
--   person_contact_weights  the per-person factor on each contact input (their "topics")
--
-- Rules run inside proactive_tick (lock order: agent_state → a person's row, as the tick has).

-- ---------------------------------------------------------------------------------------
-- Rules
-- ---------------------------------------------------------------------------------------
CREATE TABLE mind_rules (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL CHECK (length(btrim(name)) BETWEEN 1 AND 80),
    -- NULL: every person (a built-in); otherwise only this person's state and events.
    person       text,
    trigger      text NOT NULL CHECK (trigger ~ '^[a-z][a-z0-9_.]{0,62}$'),
    condition    jsonb NOT NULL DEFAULT '{}'::jsonb,
    intents      jsonb NOT NULL CHECK (jsonb_typeof(intents) = 'array'),
    weight       double precision NOT NULL DEFAULT 1 CHECK (weight >= 0 AND weight <= 1),
    origin       text NOT NULL CHECK (origin IN ('built_in', 'person', 'learned')),
    -- Built-in rules are the bootstrap; the others are learned.
    learned      boolean GENERATED ALWAYS AS (origin <> 'built_in') STORED,
    -- done: a one-off that fired; ended: its last day passed (ends_at).
    status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'forgotten', 'removed', 'done', 'ended')),
    description  text NOT NULL,
    -- The person's words the rule came from.
    words        text,
    use_count    bigint NOT NULL DEFAULT 0,
    last_used_at timestamptz,
    decayed_at   timestamptz,
    created_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    CHECK (origin = 'built_in' OR person IS NOT NULL),
    -- "on Sunday": fires once, then retires itself (done); "every Sunday" repeats.
    once         boolean NOT NULL DEFAULT false,
    -- "until May": from this instant (the start of the day they named, their time) it no longer fires.
    ends_at      timestamptz
);
COMMENT ON TABLE mind_rules IS 'Rules as data: trigger (event type or tick), a declarative condition over named values, intents (adjust, create_objective, schedule_event, request_contact), weight and use; built-in, the person''s own, or learned (those strengthen with use, decay unused, are forgotten); once (a one-off retires itself when it fires) and ends_at (it stops then).';
CREATE UNIQUE INDEX mind_rules_name ON mind_rules (coalesce(person, ''), name) WHERE status = 'active';
CREATE INDEX mind_rules_trigger ON mind_rules (trigger) WHERE status = 'active';

CREATE TABLE rule_firings (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL,
    person   text,
    trigger  text NOT NULL,
    event_id bigint,
    -- The values the conditions were read against.
    inputs   jsonb NOT NULL,
    -- Per rule: its id, name, and each intent as applied (before → after, or what it made).
    fired    jsonb NOT NULL
);
COMMENT ON TABLE rule_firings IS 'Every rule pass that fired: the values the conditions read, and what each rule changed or made.';
CREATE INDEX rule_firings_person ON rule_firings (person, at DESC);
CREATE INDEX rule_firings_at ON rule_firings (at); -- (retention, 011)

CREATE TABLE learning_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    person     text,
    contact_id uuid,
    -- 'timing', 'topic' or 'personality', and what moved ('hour 34', 'social_debt', 'shyness').
    kind       text NOT NULL CHECK (kind IN ('timing', 'topic', 'personality')),
    target     text NOT NULL,
    before     double precision,
    after      double precision,
    signal     double precision NOT NULL,
    cause      text NOT NULL
);
COMMENT ON TABLE learning_log IS 'Every change learned from how a person answered or ignored a contact (timing, topic weight, personality), with before, after and cause.';
CREATE INDEX learning_log_person ON learning_log (person, at DESC);

-- What the person's answers taught about each reason to write to them ("topics"): a factor on
-- the global weight, in [0.5, 1.5].
CREATE TABLE person_contact_weights (
    person text NOT NULL REFERENCES people (person) ON DELETE CASCADE,
    input  text NOT NULL CHECK (input IN ('social_debt', 'acquaintance', 'task_pressure', 'curiosity')),
    factor double precision NOT NULL DEFAULT 1 CHECK (factor >= 0.5 AND factor <= 1.5),
    PRIMARY KEY (person, input)
);
COMMENT ON TABLE person_contact_weights IS 'What a person''s answers taught about each reason to write to them: a factor in [0.5, 1.5] on the global contact weight.';

INSERT INTO proactive_config (key, value, description) VALUES
    ('rule_strengthen', 0.1, 'a learned rule that fires moves this share of the way to weight 1'),
    ('rule_decay_per_day', 0.01, 'a learned rule unused for a day loses this share of its weight per day'),
    ('rule_forget_below', 0.1, 'a learned rule whose weight falls below this is forgotten'),
    ('rules_per_person', 50, 'how many active rules one person may have'),
    ('solicited_per_day', 12, 'contacts a person''s own rules may ask for in a day'),
    ('contact_request_hours', 12, 'a contact a rule asked for that could not go out within this long lapses'),
    ('learn_timing_rate', 0.5, 'how much one answered or ignored contact moves the belief about its hour (fast)'),
    ('learn_topic_rate', 0.1, 'how much one answer moves the weight of the reason the contact was for (moderate)'),
    ('mood_memory', 0.7, 'the share of the believed mood kept when they write again (the rest is this message''s tone)');

-- The names a condition may read and an intent may move: the whole vocabulary, so the fast
-- model is told exactly what exists and add_rule refuses anything else.
CREATE FUNCTION rule_vocabulary() RETURNS jsonb
    LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'triggers', jsonb_build_object(
            'tick', 'every tick of the base layer (minutes apart; up to an hour while asleep)',
            'time.hour', 'each full hour of the person''s day',
            'time.morning', '07:00 their time', 'time.midday', '12:00 their time',
            'time.evening', '18:00 their time', 'time.night', '23:00 their time',
            'message_received', 'the person wrote', 'contact_answered', 'they answered a contact',
            'contact_ignored', 'a contact went unanswered', 'reaction', 'they reacted to a message',
            'goal_changed', 'a goal or request was created or changed', 'heartbeat', 'a heartbeat finished'),
        'values', jsonb_build_object(
            'person.social_debt', '0–1: how long since we talked, felt',
            'person.curiosity', '0–1: new things they might care about',
            'person.task_pressure', '0–1: what they asked for that is still open, felt',
            'person.restraint', '0–1: holds contact back (raises the threshold)',
            'person.mood', '-1–1: their tone lately',
            'person.hours_since_message', 'hours since they last wrote',
            'person.hours_since_contact', 'hours since the last contact Dionysus started',
            'person.ignored_in_row', 'contacts in a row they did not answer',
            'person.turns', 'messages they have written',
            'person.open_requests', 'their open requests',
            'person.open_objectives', 'their pending objectives that matter (saliency at least 0.5)',
            'person.local_hour', '0–23, their time', 'person.local_dow', '1 Monday … 7 Sunday, their time',
            'person.local_day', 'day of the month, their time',
            'agent.vitality', '0–1', 'agent.asleep', '1 while the agent sleeps, else 0',
            'rule.hours_since_fired', 'hours since this rule last fired (a large number if never)',
            'rule.times_fired', 'how often this rule fired',
            'event.priority', '0 CRITICAL … 4 IDLE', 'event.merged', 'how many events were merged into this one'),
        'operators', jsonb_build_array('<', '<=', '>', '>=', '=', '!='),
        'condition', '{} (always), {"var": NAME, "op": OP, "value": NUMBER}, {"all": [...]}, {"any": [...]}, {"not": {...}}',
        'intents', jsonb_build_object(
            'adjust', '{"adjust": "person.social_debt|person.curiosity|person.task_pressure|person.restraint|agent.vitality", and one of "by": -1…1, "to": 0…1, or "toward": 0…1 with "per_hour": rate}',
            'create_objective', '{"create_objective": "what they want done"}',
            'schedule_event', '{"schedule_event": "type", "in_minutes": N, "priority": 0…4}',
            'request_contact', '{"request_contact": "what to write to them about"} (a contact they asked for: no cooldown)'))
$$;
COMMENT ON FUNCTION rule_vocabulary() IS 'Everything a rule may use: triggers, values a condition reads, operators, the condition grammar and the intents. The fast model is given this; add_rule accepts nothing else.';

-- A condition is a tree of at most 32 nodes, 6 deep, over the vocabulary's values only.
CREATE FUNCTION dionysus_internal.check_rule_condition(cond jsonb, at_path text DEFAULT 'condition', depth integer DEFAULT 0)
    RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    nodes integer := 1;
    c jsonb;
    i integer := 0;
    key text;
BEGIN
    IF depth > 6 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % is nested more than 6 deep', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cond IS NULL OR jsonb_typeof(cond) <> 'object' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % must be a JSON object', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cond = '{}'::jsonb THEN
        RETURN 1;
    END IF;
    SELECT k INTO key FROM jsonb_object_keys(cond) k WHERE k IN ('all', 'any', 'not', 'var') LIMIT 1;
    IF key IN ('all', 'any') THEN
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 1 OR jsonb_typeof(cond -> key) <> 'array' OR jsonb_array_length(cond -> key) = 0 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.% must be the only key, with a non-empty list', at_path, key USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR c IN SELECT * FROM jsonb_array_elements(cond -> key) LOOP
            nodes := nodes + dionysus_internal.check_rule_condition(c, format('%s.%s[%s]', at_path, key, i), depth + 1);
            i := i + 1;
        END LOOP;
    ELSIF key = 'not' THEN
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 1 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.not must be the only key', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        nodes := nodes + dionysus_internal.check_rule_condition(cond -> 'not', at_path || '.not', depth + 1);
    ELSIF key = 'var' THEN
        IF NOT (dionysus.rule_vocabulary() -> 'values') ? (cond ->> 'var') THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.var % is not a value a rule can read (see rule_vocabulary())', at_path, dionysus_internal.input_prefix(cond ->> 'var')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF coalesce(cond ->> 'op', '') NOT IN ('<', '<=', '>', '>=', '=', '!=') THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.op % is not one of < <= > >= = !=', at_path, dionysus_internal.input_prefix(cond ->> 'op') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF jsonb_typeof(cond -> 'value') IS DISTINCT FROM 'number' THEN
            RAISE EXCEPTION 'dionysus: invalid rule: %.value must be a number', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(cond)) <> 3 THEN
            RAISE EXCEPTION 'dionysus: invalid rule: % has keys other than var, op and value', at_path USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        RAISE EXCEPTION 'dionysus: invalid rule: % must be {}, or have one of all, any, not, var', at_path USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF depth = 0 AND nodes > 32 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: % has % parts (at most 32)', at_path, nodes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN nodes;
END $$;
COMMENT ON FUNCTION dionysus_internal.check_rule_condition(jsonb, text, integer) IS 'Checks a rule condition against the grammar and vocabulary (at most 32 parts, 6 deep); errors name the path.';

CREATE FUNCTION dionysus_internal.check_rule_intents(intents jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    it jsonb;
    i integer := 0;
    n integer;
    path text;
BEGIN
    IF intents IS NULL OR jsonb_typeof(intents) <> 'array' OR jsonb_array_length(intents) NOT BETWEEN 1 AND 8 THEN
        RAISE EXCEPTION 'dionysus: invalid rule: intents must be a list of 1 to 8 intents' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR it IN SELECT * FROM jsonb_array_elements(intents) LOOP
        path := format('intents[%s]', i);
        IF jsonb_typeof(it) <> 'object' THEN
            RAISE EXCEPTION 'dionysus: invalid rule: % must be an object', path USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF it ? 'adjust' THEN
            IF coalesce(it ->> 'adjust', '') NOT IN ('person.social_debt', 'person.curiosity', 'person.task_pressure', 'person.restraint', 'agent.vitality') THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.adjust % is not a value a rule can move', path, dionysus_internal.input_prefix(it ->> 'adjust') USING ERRCODE = 'invalid_parameter_value';
            END IF;
            n := (it ? 'by')::int + (it ? 'to')::int + (it ? 'toward')::int;
            IF n <> 1 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: % needs exactly one of by, to, toward', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'by' AND (jsonb_typeof(it -> 'by') <> 'number' OR abs((it ->> 'by')::float8) > 1) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.by must be a number in [-1, 1]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'to' AND (jsonb_typeof(it -> 'to') <> 'number' OR (it ->> 'to')::float8 NOT BETWEEN 0 AND 1) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.to must be a number in [0, 1]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'toward' AND (jsonb_typeof(it -> 'toward') <> 'number' OR (it ->> 'toward')::float8 NOT BETWEEN 0 AND 1
                                  OR jsonb_typeof(it -> 'per_hour') IS DISTINCT FROM 'number' OR (it ->> 'per_hour')::float8 <= 0
                                  OR (it ->> 'per_hour')::float8 > 10) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.toward must be in [0, 1], with per_hour in (0, 10]', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'create_objective' THEN
            IF jsonb_typeof(it -> 'create_objective') <> 'string' OR length(btrim(it ->> 'create_objective')) NOT BETWEEN 1 AND 200 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.create_objective must be a text of 1 to 200 characters', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'schedule_event' THEN
            IF jsonb_typeof(it -> 'schedule_event') <> 'string' OR (it ->> 'schedule_event') !~ '^[a-z][a-z0-9_.]{0,62}$'
               OR (it ->> 'schedule_event') LIKE 'time.%' THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.schedule_event must be an event type (lower-case words joined by _ or ., not time.*)', path
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(it -> 'in_minutes') IS DISTINCT FROM 'number' OR (it ->> 'in_minutes')::float8 NOT BETWEEN 0 AND 527040 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.in_minutes must be a number of minutes up to a year', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF it ? 'priority' AND (jsonb_typeof(it -> 'priority') <> 'number' OR (it ->> 'priority')::float8 NOT IN (0, 1, 2, 3, 4)) THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.priority must be 0 … 4', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSIF it ? 'request_contact' THEN
            IF jsonb_typeof(it -> 'request_contact') <> 'string' OR length(btrim(it ->> 'request_contact')) NOT BETWEEN 1 AND 300 THEN
                RAISE EXCEPTION 'dionysus: invalid rule: %.request_contact must be a text of 1 to 300 characters', path USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSE
            RAISE EXCEPTION 'dionysus: invalid rule: % must be one of adjust, create_objective, schedule_event, request_contact', path
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        i := i + 1;
    END LOOP;
END $$;
COMMENT ON FUNCTION dionysus_internal.check_rule_intents(jsonb) IS 'Checks a rule''s intents (1 to 8, each adjust, create_objective, schedule_event or request_contact with its bounds); errors name the intent.';

-- The values rules read, for each of several people (a NULL one: nobody in particular) at one
-- instant, in their order; the event's if one triggered the pass. One statement for a tick's
-- people (the rules' pass reads them all at once); rule_values is one person's.
CREATE FUNCTION dionysus_internal.rule_values_of(persons text[], t timestamptz, has_event boolean DEFAULT false,
                                                 event_priority smallint DEFAULT NULL, event_merged integer DEFAULT NULL)
    RETURNS TABLE (person text, vals jsonb) LANGUAGE plpgsql STABLE
    -- (One plan kept: the planner preferred a custom plan for each array of people, 0.25 ms a
    -- tick spent planning; a SQL function in FROM was planned again at every call too.)
    SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    SELECT u.who,
           jsonb_build_object('agent.vitality', a.vitality, 'agent.asleep', CASE WHEN a.mode = 'asleep' THEN 1 ELSE 0 END)
           || CASE WHEN has_event THEN jsonb_build_object('event.priority', event_priority, 'event.merged', event_merged) ELSE '{}' END
           || CASE WHEN p.person IS NULL THEN '{}' ELSE jsonb_strip_nulls(jsonb_build_object(
                  'person.social_debt', round(p.social_debt::numeric, 4), 'person.curiosity', round(p.curiosity::numeric, 4),
                  'person.task_pressure', round(p.task_pressure::numeric, 4), 'person.restraint', round(p.restraint::numeric, 4),
                  'person.mood', round(p.mood::numeric, 3),
                  'person.hours_since_message', round((extract(epoch FROM t - p.last_message_at) / 3600)::numeric, 2),
                  'person.hours_since_contact', round((extract(epoch FROM t - p.last_contact_at) / 3600)::numeric, 2),
                  'person.ignored_in_row', p.ignored_in_row, 'person.turns', p.turns,
                  'person.open_requests', (SELECT count(*) FROM dionysus.goals g
                                            WHERE g.source = 'user_request' AND g.priority IN ('active', 'queued') AND g.private_to = ARRAY[u.who]),
                  'person.open_objectives', (SELECT count(*) FROM dionysus.objectives o
                                              WHERE o.person = u.who AND o.status = 'pending' AND o.saliency >= 0.5),
                  'person.local_hour', extract(hour FROM t AT TIME ZONE p.time_zone)::int,
                  'person.local_dow', extract(isodow FROM t AT TIME ZONE p.time_zone)::int,
                  'person.local_day', extract(day FROM t AT TIME ZONE p.time_zone)::int)) END
      FROM unnest(persons) WITH ORDINALITY u(who, o)
      LEFT JOIN dionysus.agent_state a ON a.id = 1
      LEFT JOIN dionysus.people p ON p.person = u.who
     ORDER BY u.o;
END $$;
COMMENT ON FUNCTION dionysus_internal.rule_values_of(text[], timestamptz, boolean, smallint, integer) IS 'The values rules read for each of several people (a NULL one: nobody in particular) at an instant, in their order: the agent''s, the event''s, the person''s.';

-- The values a rule reads, for one person (or none) at one instant.
CREATE FUNCTION dionysus_internal.rule_values(who text, t timestamptz, ev dionysus.events DEFAULT NULL) RETURNS jsonb
    LANGUAGE sql STABLE AS $$
    SELECT v.vals FROM dionysus_internal.rule_values_of(ARRAY[who], t, ev.id IS NOT NULL, ev.priority, ev.merged) v
$$;
COMMENT ON FUNCTION dionysus_internal.rule_values(text, timestamptz, dionysus.events) IS 'The values rules read for one person (or none) at an instant.';

-- Run the active rules of one trigger for each of several people in turn (a tick: everyone who
-- has written), or for nobody in particular: for each, read the values once, check every
-- condition against them, then apply the intents in a fixed order (adjust, create_objective,
-- schedule_event, request_contact) and write the pass down. One person after another exactly:
-- a rule everyone shares (a built-in) has counted its firing before the next person's
-- conditions read it. What the passes change is written once for all of them, a statement per
-- table (write_rule_passes), and before a rule makes something, so that what it makes sees
-- everything before it. The walk is the library's (rule_passes: in PL/pgSQL it was half of a
-- tick); its statements are these tables'. The caller holds agent_state.
CREATE FUNCTION dionysus_internal.run_rules_for(on_trigger text, persons text[], hours double precision DEFAULT 0,
                                                ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    -- (rule_passes refuses a NULL trigger or people, 22004, and a person given twice, 22023.)
    RETURN dionysus_internal.rule_passes(on_trigger, persons, hours, ev.id, ev.priority, ev.merged);
END $$;
COMMENT ON FUNCTION dionysus_internal.run_rules_for(text, text[], double precision, dionysus.events) IS
    'Runs the active rules of a trigger for each person in turn (a NULL person: nobody in particular): conditions read once, intents applied in a fixed order (adjust, create_objective, schedule_event, request_contact), each pass logged, rules counted and learned ones strengthened; a shared rule''s use counts before the next person; written a statement per table.';

-- What run_rules_for's passes changed, a statement per table: each person's moved values,
-- each used rule's count of firings (added to the row as it is then: a rule another session
-- removed or retuned meanwhile keeps that), the log in the order the passes ran.
CREATE FUNCTION dionysus_internal.write_rule_passes(t timestamptz, on_trigger text, event_id bigint, rule_ids bigint[],
                                                    fired_n integer[], moved_people text[], moved_values jsonb[],
                                                    log_people text[], log_inputs jsonb[], log_fired jsonb[])
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(moved_people) > 0 THEN
        UPDATE dionysus.people x SET social_debt = (u.st ->> 'person.social_debt')::float8, curiosity = (u.st ->> 'person.curiosity')::float8,
               task_pressure = (u.st ->> 'person.task_pressure')::float8, restraint = (u.st ->> 'person.restraint')::float8
          FROM unnest(moved_people, moved_values) u(person, st)
         WHERE x.person = u.person;
    END IF;
    IF cardinality(rule_ids) > 0 THEN
        -- (A learned rule is one person's: it fires at most once a pass, so it strengthens once.)
        UPDATE dionysus.mind_rules m SET use_count = m.use_count + u.n, last_used_at = t,
               status = CASE WHEN m.once THEN 'done' ELSE m.status END, ended_at = CASE WHEN m.once THEN t ELSE m.ended_at END,
               weight = CASE WHEN m.learned THEN least(1, m.weight + dionysus_internal.proactive_setting('rule_strengthen') * (1 - m.weight)) ELSE m.weight END
          FROM unnest(rule_ids, fired_n) u(id, n)
         WHERE m.id = u.id;
    END IF;
    IF cardinality(log_people) > 0 THEN
        INSERT INTO dionysus.rule_firings (at, person, trigger, event_id, inputs, fired)
        SELECT t, u.person, on_trigger, event_id, u.inputs, u.fired
          FROM unnest(log_people, log_inputs, log_fired) WITH ORDINALITY u(person, inputs, fired, o)
         ORDER BY u.o;
    END IF;
END $$;
COMMENT ON FUNCTION dionysus_internal.write_rule_passes(timestamptz, text, bigint, bigint[], integer[], text[], jsonb[], text[], jsonb[], jsonb[]) IS
    'run_rules_for''s writes: the people''s moved values, the used rules (their firings added to the row as it is), the log; a statement each.';

-- Run the active rules of one trigger for one person (or for nobody in particular): run_rules_for.
CREATE FUNCTION dionysus_internal.run_rules(on_trigger text, who text, hours double precision DEFAULT 0, ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE sql AS $$
    SELECT dionysus_internal.run_rules_for(on_trigger, ARRAY[who], hours, ev)
$$;
COMMENT ON FUNCTION dionysus_internal.run_rules(text, text, double precision, dionysus.events) IS
    'Runs the active rules of a trigger for one person (NULL: nobody in particular), as run_rules_for does.';

-- Learned rules unused for a day lose weight, and are forgotten below the threshold.
CREATE FUNCTION dionysus_internal.decay_rules() RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    n integer;
BEGIN
    UPDATE dionysus.mind_rules m
       SET weight = m.weight * CASE WHEN dionysus_internal.proactive_setting('rule_decay_per_day') >= 1 THEN 0
                                    -- (power() raises an error where it underflows: bounded.)
                                    ELSE exp(greatest(-700, ln(1 - dionysus_internal.proactive_setting('rule_decay_per_day'))
                                                            * extract(epoch FROM t - coalesce(m.decayed_at, m.last_used_at, m.created_at)) / 86400)) END,
           decayed_at = t
     WHERE m.status = 'active' AND m.learned AND coalesce(m.last_used_at, m.created_at) < t - interval '1 day'
       AND coalesce(m.decayed_at, m.last_used_at, m.created_at) < t - interval '1 day';
    UPDATE dionysus.mind_rules m SET status = 'forgotten', ended_at = t
     WHERE m.status = 'active' AND m.learned AND m.weight < dionysus_internal.proactive_setting('rule_forget_below');
    GET DIAGNOSTICS n = ROW_COUNT;
    -- "until May": past its end a rule is over (run_rules already skips it).
    UPDATE dionysus.mind_rules m SET status = 'ended', ended_at = m.ends_at WHERE m.status = 'active' AND m.ends_at <= t;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.decay_rules() IS 'Learned rules unused for a day lose weight; below rule_forget_below they are forgotten; a rule past its ends_at is ended.';

-- A rule in the person's words, as the fast model proposed it: checked against the vocabulary,
-- stored as theirs. Returns the rule as stored. SECURITY DEFINER: the driver's role inserts no
-- rules itself, so what it adds is always one person's own, never a built-in.
CREATE FUNCTION add_rule(person text, words text, rule jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    who text := btrim(add_rule.person);
    r dionysus.mind_rules;
    nm text;
    ends timestamptz;
BEGIN
    IF who IS NULL OR who = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "person": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF words IS NULL OR btrim(words) = '' OR length(words) > 2000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "words": the person''s words, 1 to 2,000 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rule IS NULL OR jsonb_typeof(rule) <> 'object' OR octet_length(rule::text) > 4096 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": must be a JSON object of at most 4 kB' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(rule) k WHERE k NOT IN ('name', 'trigger', 'condition', 'intents', 'description', 'once', 'ends_on')) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "rule": only name, trigger, condition, intents, description, once and ends_on'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF rule ? 'once' AND jsonb_typeof(rule -> 'once') NOT IN ('boolean', 'null') THEN
        RAISE EXCEPTION 'dionysus: invalid rule: once must be true (fires once) or false (repeats)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(rule -> 'ends_on') = 'string' AND rule ->> 'ends_on' ~ '^\d{4}-\d{2}-\d{2}$' THEN
        BEGIN
            ends := (rule ->> 'ends_on')::date::timestamp
                    AT TIME ZONE coalesce((SELECT x.time_zone FROM dionysus.people x WHERE x.person = who), 'UTC');
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
            ends := NULL;
        END;
    END IF;
    IF rule ? 'ends_on' AND jsonb_typeof(rule -> 'ends_on') <> 'null' AND (ends IS NULL OR ends <= dionysus.clock_now()) THEN
        RAISE EXCEPTION 'dionysus: invalid rule: ends_on must be a date to come, YYYY-MM-DD (the first day, their time, it no longer fires), not %',
            dionysus_internal.input_prefix(rule ->> 'ends_on') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(rule -> 'trigger') IS DISTINCT FROM 'string' OR NOT (dionysus.rule_vocabulary() -> 'triggers') ? (rule ->> 'trigger') THEN
        RAISE EXCEPTION 'dionysus: invalid rule: trigger "%" is not one of rule_vocabulary()''s triggers', rule ->> 'trigger'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.check_rule_condition(coalesce(rule -> 'condition', '{}'::jsonb));
    PERFORM dionysus_internal.check_rule_intents(rule -> 'intents');
    nm := left(btrim(coalesce(rule ->> 'name', rule ->> 'description', words)), 80);
    IF nm = '' THEN
        RAISE EXCEPTION 'dionysus: invalid rule: name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM dionysus_internal.person_row(who);
    IF (SELECT count(*) FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active')
       >= dionysus_internal.proactive_setting('rules_per_person') THEN
        RAISE EXCEPTION 'dionysus: % has % rules already (rules_per_person); remove one first', who,
                        dionysus_internal.proactive_setting('rules_per_person') USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF EXISTS (SELECT 1 FROM dionysus.mind_rules m WHERE m.person = who AND m.status = 'active' AND m.name = nm) THEN
        RAISE EXCEPTION 'dionysus: % already has a rule named "%"', who, nm USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO dionysus.mind_rules (name, person, trigger, condition, intents, origin, description, words, created_at, once, ends_at)
    VALUES (nm, who, rule ->> 'trigger', coalesce(rule -> 'condition', '{}'::jsonb), rule -> 'intents', 'person',
            left(coalesce(nullif(btrim(rule ->> 'description'), ''), nm), 300), left(words, 2000), dionysus.clock_now(),
            coalesce((rule ->> 'once')::boolean, false), ends)
    RETURNING * INTO r;
    RETURN jsonb_build_object('rule_id', r.id, 'name', r.name, 'trigger', r.trigger, 'condition', r.condition, 'intents', r.intents,
                              'description', r.description, 'once', r.once, 'ends_at', r.ends_at);
END $$;
COMMENT ON FUNCTION add_rule(text, text, jsonb) IS
    'A rule in the person''s words (as the fast model proposed it: name, trigger, condition, intents, and once or ends_on): checked against rule_vocabulary(), stored as theirs, acting only on them. Errors name the part that is wrong.';
REVOKE EXECUTE ON FUNCTION add_rule(text, text, jsonb) FROM PUBLIC;

-- A person's rules (active first), and the built-ins that apply to everyone.
CREATE FUNCTION person_rules(for_person text)
    RETURNS TABLE (rule_id bigint, name text, origin text, status text, trigger text, condition jsonb, intents jsonb,
                   weight double precision, use_count bigint, last_used_at timestamptz, description text, words text,
                   repeats text)
    LANGUAGE sql STABLE AS $$
    SELECT m.id, m.name, m.origin, m.status, m.trigger, m.condition, m.intents, m.weight, m.use_count, m.last_used_at, m.description, m.words,
           CASE WHEN m.once THEN 'once'
                WHEN m.ends_at IS NOT NULL THEN 'until ' || to_char(m.ends_at AT TIME ZONE coalesce((SELECT x.time_zone FROM dionysus.people x WHERE x.person = m.person), 'UTC'), 'YYYY-MM-DD')
                ELSE 'repeats' END
      FROM dionysus.mind_rules m
     WHERE (m.person = for_person AND m.status <> 'removed') OR (m.person IS NULL AND m.status = 'active')
     ORDER BY m.person NULLS LAST, m.status, m.id
$$;
COMMENT ON FUNCTION person_rules(text) IS 'A person''s rules (active, done, ended, forgotten) and the built-ins that apply to everyone, with weight, use and whether each repeats (once, repeats, until YYYY-MM-DD: the first day it no longer fires, their time).';

-- The person takes one of their rules back. Only their own: built-ins and other people's
-- rules are not theirs to remove.
CREATE FUNCTION remove_rule(person text, rule_id bigint) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR rule_id IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be NULL', CASE WHEN person IS NULL THEN 'person' ELSE 'rule_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.mind_rules m SET status = 'removed', ended_at = dionysus.clock_now()
     WHERE m.id = remove_rule.rule_id AND m.person = remove_rule.person AND m.status = 'active';
    RETURN FOUND;
END $$;
COMMENT ON FUNCTION remove_rule(text, bigint) IS 'The person takes one of their own rules back; false if it is not theirs or not active.';

-- The bootstrap: the base dynamics, as rules a person can read (and an owner retune).
INSERT INTO mind_rules (name, trigger, condition, intents, origin, description, created_at) VALUES
    ('silence grows social debt', 'tick', '{"var": "person.hours_since_message", "op": ">", "value": 0}',
     '[{"adjust": "person.social_debt", "toward": 1, "per_hour": 0.0278}]', 'built_in',
     'in silence social debt rises toward 1, 63 % of the way in 36 hours', now()),
    ('curiosity fades', 'tick', '{}', '[{"adjust": "person.curiosity", "toward": 0, "per_hour": 0.03}]', 'built_in',
     'what was new stops being new: curiosity loses 3 % an hour', now()),
    ('open requests press', 'tick', '{"var": "person.open_requests", "op": ">", "value": 0}',
     '[{"adjust": "person.task_pressure", "toward": 1, "per_hour": 0.08}]', 'built_in',
     'something they asked for is still open: task pressure builds (half way in about 9 hours)', now()),
    ('a new request is felt at once', 'tick', '{"all": [{"var": "person.open_requests", "op": ">", "value": 0}, {"var": "person.task_pressure", "op": "<", "value": 0.25}]}',
     '[{"adjust": "person.task_pressure", "to": 0.25}]', 'built_in',
     'an open request weighs at least 0.25 from the start', now()),
    ('done requests ease', 'tick', '{"all": [{"var": "person.open_requests", "op": "=", "value": 0}, {"var": "person.open_objectives", "op": "=", "value": 0}]}',
     '[{"adjust": "person.task_pressure", "toward": 0, "per_hour": 0.5}]', 'built_in',
     'nothing of theirs is open: task pressure eases within hours', now()),
    ('their objectives press', 'tick', '{"all": [{"var": "person.open_objectives", "op": ">", "value": 0}, {"var": "person.open_requests", "op": "=", "value": 0}]}',
     '[{"adjust": "person.task_pressure", "toward": 0.4, "per_hour": 0.02}]', 'built_in',
     'what they are working toward weighs gently: task pressure drifts toward 0.4 over days', now()),
    ('night suppression', 'tick', '{"any": [{"var": "person.local_hour", "op": ">=", "value": 22}, {"var": "person.local_hour", "op": "<", "value": 7}]}',
     '[{"adjust": "person.restraint", "to": 1}]', 'built_in',
     'at night (their time) contact is held back: restraint raises the threshold', now()),
    ('restraint lifts', 'tick', '{"all": [{"var": "person.local_hour", "op": ">=", "value": 7}, {"var": "person.local_hour", "op": "<", "value": 22}]}',
     '[{"adjust": "person.restraint", "toward": 0, "per_hour": 1.5}]', 'built_in',
     'in their day restraint lifts within the hour', now());

-- ---------------------------------------------------------------------------------------
-- Learning from how they answered: no "rate this" buttons
-- ---------------------------------------------------------------------------------------
-- The tone of a message in [-1, 1], from cheap cues: warm words, exclamation, emoji; cold ones.
CREATE FUNCTION dionysus_internal.message_tone(words text) RETURNS double precision
    LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(-1, least(1,
          0.35 * (lower(words) ~ '\m(thanks?|thank you|love|loved|great|awesome|glad|haha|lol|wonderful|amazing|nice|yay|sweet|happy|perfect)\M')::int
        + 0.25 * (words ~ '(😊|🙂|😄|😁|❤️|🥰|😂|🙏|🎉|:\)|:D)')::int
        + 0.15 * (words ~ '!')::int
        + 0.4 * (lower(words) ~ '(thanks for (reminding|asking|checking|the reminder)|good timing|glad you (asked|wrote|reached)|was just thinking of you)')::int
        - 0.5 * (lower(words) ~ '(\mnot now\M|\mbusy\M|\mlater\M|leave me alone|\mstop\M|annoying|\mugh\M|go away|too many messages)')::int
        - 0.3 * (lower(words) ~ '\m(tired|sad|stressed|awful|terrible|bad day|exhausted|upset|angry)\M')::int))
$$;
COMMENT ON FUNCTION dionysus_internal.message_tone(text) IS 'The tone of a message in [-1, 1] from cheap cues (warm or cold words, emoji, exclamation).';

-- How good a reply to a contact was, in [-1, 1], and whether the cues were too weak to tell.
CREATE FUNCTION dionysus_internal.reply_signal(words text, latency_seconds double precision, usual_seconds double precision)
    RETURNS TABLE (signal double precision, unsure boolean, latency double precision, length double precision, tone double precision)
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    latency := greatest(-1, least(1, 1 - latency_seconds / greatest(600, coalesce(usual_seconds, 1800))));
    length := CASE WHEN dionysus.is_acknowledgement(words) THEN -0.3 WHEN char_length(words) < 15 THEN -0.1
                   WHEN char_length(words) < 60 THEN 0.2 ELSE 0.6 END;
    tone := dionysus_internal.message_tone(words);
    signal := greatest(-1, least(1, 0.35 * latency + 0.25 * length + 0.6 * tone));
    -- Mixed cues on a real message: the fast model is asked (contact_feedback).
    unsure := abs(signal) < 0.15 AND char_length(words) >= 20;
    RETURN NEXT;
END $$;
COMMENT ON FUNCTION dionysus_internal.reply_signal(text, double precision, double precision) IS 'How good a reply to a contact was (latency, length, tone) in [-1, 1], and whether the cues were too mixed to tell.';

-- Apply what one answered (or ignored) contact taught: its hour (fast), the reason it was
-- sent (moderate), the personality (very slow). Every change is logged with its cause.
CREATE FUNCTION dionysus_internal.learn_from_contact(who text, contact uuid, contact_at timestamptz, signal double precision, cause text)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    h smallint;
    rate double precision;
    before double precision;
    after double precision;
    top text;
    tr record;
    delta double precision;
    n integer := 0;
BEGIN
    IF signal IS NULL OR signal = 0 OR contact_at IS NULL THEN
        RETURN 0;
    END IF;
    -- Timing, fast: a warm, quick answer marks the hour as a good one; a cold or missing one as poor.
    h := dionysus_internal.hour_of_week(contact_at, (SELECT time_zone FROM dionysus.people WHERE person = who));
    rate := dionysus_internal.proactive_setting('learn_timing_rate');
    INSERT INTO dionysus.person_rhythm (person, hour_of_week) VALUES (who, h) ON CONFLICT DO NOTHING;
    IF signal > 0 THEN
        SELECT activity INTO before FROM dionysus.person_rhythm WHERE person = who AND hour_of_week = h;
        UPDATE dionysus.person_rhythm SET activity = activity + rate * signal WHERE person = who AND hour_of_week = h RETURNING activity INTO after;
        INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
        VALUES (t, who, contact, 'timing', 'activity at hour ' || h, before, after, signal, cause);
    ELSE
        SELECT misses INTO before FROM dionysus.person_rhythm WHERE person = who AND hour_of_week = h;
        UPDATE dionysus.person_rhythm SET misses = misses + rate * abs(signal) WHERE person = who AND hour_of_week = h RETURNING misses INTO after;
        INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
        VALUES (t, who, contact, 'timing', 'misses at hour ' || h, before, after, signal, cause);
    END IF;
    n := n + 1;
    -- Topic, moderate: the reason that weighed most in the contact gains or loses for this person.
    SELECT x ->> 'input' INTO top FROM dionysus.contact_evaluations c, jsonb_array_elements(c.inputs) x
     WHERE c.id = contact AND x ->> 'input' IN ('social_debt', 'acquaintance', 'task_pressure', 'curiosity')
     ORDER BY (x ->> 'contribution')::float8 DESC LIMIT 1;
    IF top IS NOT NULL THEN
        INSERT INTO dionysus.person_contact_weights (person, input) VALUES (who, top) ON CONFLICT DO NOTHING;
        SELECT factor INTO before FROM dionysus.person_contact_weights WHERE person = who AND input = top FOR UPDATE;
        after := least(1.5, greatest(0.5, before * (1 + dionysus_internal.proactive_setting('learn_topic_rate') * signal)));
        UPDATE dionysus.person_contact_weights SET factor = after WHERE person = who AND input = top;
        INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
        VALUES (t, who, contact, 'topic', top, before, after, signal, cause);
        n := n + 1;
    END IF;
    -- Personality, very slowly (each trait's own learning rate): a cold welcome makes it shyer
    -- and less forward, a warm one bolder; silence teaches patience.
    FOR tr IN SELECT * FROM dionysus.personality WHERE trait IN ('shyness', 'independence', 'patience') ORDER BY trait FOR UPDATE LOOP
        delta := tr.learning_rate * CASE tr.trait WHEN 'shyness' THEN -signal WHEN 'independence' THEN signal
                                                  ELSE CASE WHEN signal < 0 THEN -signal ELSE 0 END END;
        IF delta <> 0 THEN
            after := least(1, greatest(0, tr.value + delta));
            UPDATE dionysus.personality SET value = after WHERE trait = tr.trait;
            INSERT INTO dionysus.learning_log (at, person, contact_id, kind, target, before, after, signal, cause)
            VALUES (t, who, contact, 'personality', tr.trait, tr.value, after, signal, cause);
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION dionysus_internal.learn_from_contact(text, uuid, timestamptz, double precision, text) IS
    'Learns from one answered or ignored contact: its hour (fast), the reason it was sent for (moderate), shyness, independence and patience (very slow); every change logged.';

-- The fast model's reading of a reply the cues could not judge (positive, neutral, negative).
CREATE FUNCTION contact_feedback(evaluation_id uuid, sentiment text, reason text DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql AS $$
DECLARE
    c dionysus.contact_evaluations;
    s double precision;
BEGIN
    IF sentiment IS NULL OR sentiment NOT IN ('positive', 'neutral', 'negative') THEN
        RAISE EXCEPTION 'dionysus: invalid argument "sentiment": % (positive, neutral or negative)', dionysus_internal.input_prefix(sentiment) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Lock order, as everywhere learning happens: agent_state, the evaluation, the personality rows.
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    SELECT * INTO c FROM dionysus.contact_evaluations x WHERE x.id = evaluation_id AND x.decision = 'message' FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "evaluation_id": no contact that was sent has id %', evaluation_id USING ERRCODE = 'no_data_found';
    END IF;
    IF c.feedback_at IS NOT NULL THEN
        RETURN 0; -- judged once already
    END IF;
    s := CASE sentiment WHEN 'positive' THEN 0.6 WHEN 'negative' THEN -0.6 ELSE 0 END;
    UPDATE dionysus.contact_evaluations x
       SET feedback = jsonb_build_object('signal', s, 'by', 'model', 'sentiment', sentiment, 'reason', left(contact_feedback.reason, 300)),
           feedback_at = dionysus.clock_now()
     WHERE x.id = c.id;
    RETURN dionysus_internal.learn_from_contact(c.person, c.id, c.decided_at, s,
        'the fast model read their reply as ' || sentiment || coalesce(': ' || left(contact_feedback.reason, 200), ''));
END $$;
COMMENT ON FUNCTION contact_feedback(uuid, text, text) IS 'The fast model''s reading (positive, neutral, negative) of a reply the cues could not judge; learned from once.';

-- The words of the contact an evaluation sent (NULL when it sent none): what the person's
-- reply answers, for the fast model's reading of it.
CREATE FUNCTION contact_message(evaluation_id uuid) RETURNS text
    LANGUAGE sql STABLE AS $$
    SELECT o.content FROM dionysus.contact_evaluations c JOIN dionysus.outbox o ON o.id = c.outbox_id WHERE c.id = evaluation_id
$$;
COMMENT ON FUNCTION contact_message(uuid) IS 'The message a contact evaluation sent (its outbox row''s content), NULL when it sent none.';

-- What was learned, newest first.
CREATE FUNCTION explain_learning(for_person text DEFAULT NULL, max_items integer DEFAULT 20)
    RETURNS TABLE (at timestamptz, person text, kind text, target text, before double precision, after double precision,
                   signal double precision, cause text)
    LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF max_items IS NULL OR max_items < 1 OR max_items > 1000 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % (1 to 1000)', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT l.at, l.person, l.kind, l.target, l.before, l.after, l.signal, l.cause FROM dionysus.learning_log l
                  WHERE for_person IS NULL OR l.person = for_person ORDER BY l.at DESC, l.id DESC LIMIT max_items;
END $$;
COMMENT ON FUNCTION explain_learning(text, integer) IS 'What the proactive mind learned from answers and silences, newest first: what moved, from what to what, and why.';

-- The fast model's prompt for a rule in the person's words (the vocabulary is filled in by the
-- driver from rule_vocabulary(), so the prompt and the checks never disagree).
-- Texts: sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt; the newest
-- version of each is the active one.
INSERT INTO prompt_templates (key, version, temperature, note, active, template)
SELECT key, version, temperature, note, version = max(version) OVER (PARTITION BY key),
       dionysus_internal.shipped_prompt(key, version)
  FROM (VALUES
    ('rule_from_words', 1, 0.0, 'proactive mind: a rule the person asked for in plain words, as data'),
    ('rule_from_words', 2, 0.0, 'proactive mind: a rule the person asked for in plain words, as data; once, repeating or until a date, as they said'),
    ('contact_feedback', 1, 0.0, 'proactive mind: how a reply to a contact landed, when the cheap cues could not tell')
  ) AS shipped (key, version, temperature, note);

-- ---------------------------------------------------------------------------------------
-- A contact the person asked for (their rule's request_contact)
-- ---------------------------------------------------------------------------------------
-- Not pressure-born, so no threshold: they chose the time. Its gates are contact_gates' for a
-- contact they asked for (their word, one at a time, at most solicited_per_day a day). A request
-- that cannot go out within contact_request_hours lapses, written down.
CREATE FUNCTION dionysus_internal.evaluate_requested_contact(p dionysus.people) RETURNS dionysus.contact_evaluations
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    req jsonb := p.contact_request;
    e dionysus.contact_evaluations;
    gates jsonb;
    blocked text[];
    words text;
BEGIN
    IF (req ->> 'at')::timestamptz < t - make_interval(secs => dionysus_internal.proactive_setting('contact_request_hours') * 3600) THEN
        UPDATE dionysus.people x SET contact_request = NULL WHERE x.person = p.person;
        INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation, solicited, request)
        VALUES (p.person, t, '[]'::jsonb, 0, 1, '[]'::jsonb, 'gated',
                format('a contact their rule "%s" asked for (%s) could not go out within %s hours and lapsed', req ->> 'rule_name', req ->> 'about',
                       dionysus_internal.proactive_setting('contact_request_hours')), true, req)
        RETURNING * INTO e;
        RETURN e;
    END IF;
    gates := dionysus_internal.contact_gates(p, t, true);
    SELECT array_agg(g ->> 'gate') INTO blocked FROM jsonb_array_elements(gates) g WHERE NOT (g ->> 'passed')::boolean;
    words := format('they asked for this: %s (their rule "%s")', req ->> 'about', req ->> 'rule_name')
             || CASE WHEN blocked IS NULL THEN '' ELSE '; held back by ' || array_to_string(blocked, ', ') END;
    INSERT INTO dionysus.contact_evaluations (person, at, inputs, pressure, threshold, gates, outcome, explanation, solicited, request)
    VALUES (p.person, t, jsonb_build_array(jsonb_build_object('input', 'request', 'value', 1, 'weight', 1, 'contribution', 1,
                                                              'why', req ->> 'about', 'rule', req -> 'rule')),
            1, 1, gates, CASE WHEN blocked IS NULL THEN 'opportunity' ELSE 'gated' END, words, true, req)
    RETURNING * INTO e;
    UPDATE dionysus.people x SET last_evaluated_at = t,
           next_check_at = t + make_interval(secs => dionysus_internal.proactive_setting('check_interval_minutes') * 60)
     WHERE x.person = p.person;
    IF e.outcome = 'opportunity' THEN
        UPDATE dionysus.contact_evaluations c SET notified_at = now() WHERE c.id = e.id;
        -- Which evaluation, nothing more: any role that may connect can LISTEN (the driver reads the rest).
        PERFORM pg_notify('dionysus_contact', jsonb_build_object('evaluation_id', e.id)::text);
    END IF;
    RETURN e;
END $$;
COMMENT ON FUNCTION dionysus_internal.evaluate_requested_contact(dionysus.people) IS 'Weighs a contact the person''s own rule asked for: their word, one at a time, a daily limit; lapses when it cannot go out in time.';

-- Rules are checked however they arrive (add_rule, or an owner's INSERT/UPDATE).
CREATE FUNCTION dionysus_internal.mind_rules_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM dionysus_internal.check_rule_condition(NEW.condition);
    PERFORM dionysus_internal.check_rule_intents(NEW.intents);
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.mind_rules_check() IS 'Trigger: a rule''s condition and intents are checked however they arrive.';
CREATE TRIGGER mind_rules_check BEFORE INSERT OR UPDATE OF condition, intents ON mind_rules
    FOR EACH ROW EXECUTE FUNCTION dionysus_internal.mind_rules_check();

-- The built-in rules (person NULL) are the owner's: a role that may not write rules outright
-- (the driver's, which only moves a rule's use, weight and status) counts a built-in's use and
-- changes nothing else of it.
CREATE FUNCTION dionysus_internal.protect_built_in_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.weight, NEW.status, NEW.ended_at, NEW.decayed_at) IS DISTINCT FROM (OLD.weight, OLD.status, OLD.ended_at, OLD.decayed_at)
       AND NOT has_table_privilege('dionysus.mind_rules', 'INSERT') THEN
        RAISE EXCEPTION 'dionysus: rule % is a built-in: only the owner changes it', OLD.id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.protect_built_in_rules() IS 'Trigger: a built-in rule''s weight and status change only by a role that may write rules (the owner), not the driver''s (42501).';
CREATE TRIGGER mind_rules_built_in BEFORE UPDATE ON mind_rules
    FOR EACH ROW WHEN (OLD.person IS NULL) EXECUTE FUNCTION dionysus_internal.protect_built_in_rules();

-- ---------------------------------------------------------------------------------------
-- Reactions: a 👍 on a contact is an answer too
-- ---------------------------------------------------------------------------------------
-- A person reacted to one of Dionysus's messages: an event for the proactive mind and, on a
-- contact still waiting for its answer, the answer itself (no reply needed, no model), learned
-- from like a reply. A reaction to a message sent to someone else is not theirs to give.
CREATE FUNCTION note_reaction(platform text, platform_message_id text, author_id text, emoji text) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    who text;
    t timestamptz := dionysus.clock_now();
    o dionysus.outbox;
    p dionysus.people;
    c dionysus.contact_evaluations;
    tone double precision;
    answered boolean := false;
    arg text;
BEGIN
    arg := CASE WHEN coalesce(btrim(platform), '') = '' THEN 'platform' WHEN coalesce(btrim(platform_message_id), '') = '' THEN 'platform_message_id'
                WHEN coalesce(btrim(author_id), '') = '' THEN 'author_id' WHEN coalesce(emoji, '') = '' OR length(emoji) > 64 THEN 'emoji' END;
    IF arg IS NOT NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must be a non-empty text (an emoji: at most 64 characters)', arg
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    who := dionysus.person_key(platform, author_id);
    SELECT * INTO o FROM dionysus.outbox x
     WHERE x.platform = note_reaction.platform AND x.status = 'sent'
       AND (x.platform_message_id = note_reaction.platform_message_id OR x.sent_parts ? note_reaction.platform_message_id)
     ORDER BY x.sent_at DESC LIMIT 1;
    IF NOT FOUND OR o.person IS DISTINCT FROM who THEN
        RETURN jsonb_build_object('noted', false, 'reason', 'not a message Dionysus sent to them');
    END IF;
    tone := CASE WHEN emoji ~ '(👍|❤|😊|🙏|😂|🥰|✅|👌|🎉|😄|🫶|💯|😍|🤗|☺)' THEN 0.5
                 WHEN emoji ~ '(👎|😠|😡|🙄|😒|😤|💢)' THEN -0.5 ELSE 0.2 END;
    -- Lock order: agent_state (vitality), the evaluation, then the person's row.
    PERFORM 1 FROM dionysus.agent_state WHERE id = 1 FOR UPDATE;
    PERFORM dionysus.push_event('communication', 'reaction', 3, jsonb_build_object('emoji', left(emoji, 64), 'outbox_id', o.id), who);
    IF o.contact_id IS NOT NULL THEN
        SELECT * INTO c FROM dionysus.contact_evaluations x WHERE x.id = o.contact_id FOR UPDATE;
        p := dionysus_internal.person_row(who);
        IF p.awaiting_reply AND c.feedback_at IS NULL AND NOT c.solicited THEN
            answered := true;
            UPDATE dionysus.people x SET awaiting_reply = false, ignored_in_row = 0,
                   social_debt = x.social_debt * (1 - 0.5 * dionysus_internal.proactive_setting('debt_relief_on_message'))
             WHERE x.person = who;
            UPDATE dionysus.contact_evaluations x SET feedback = jsonb_build_object('by', 'reaction', 'emoji', left(emoji, 64), 'signal', tone), feedback_at = t
             WHERE x.id = c.id;
            IF tone > 0 THEN
                UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback')) WHERE id = 1;
            END IF;
            PERFORM dionysus_internal.learn_from_contact(who, c.id, p.last_contact_at, tone, 'they reacted ' || left(emoji, 64));
        END IF;
    END IF;
    RETURN jsonb_build_object('noted', true, 'answered_contact', answered);
END $$;
COMMENT ON FUNCTION note_reaction(text, text, text, text) IS
    'A person reacted to a message Dionysus sent them: an event, and on a contact still waiting, its answer (learned from by the emoji''s tone, no reply, no model). Reactions to messages sent to others are ignored.';
