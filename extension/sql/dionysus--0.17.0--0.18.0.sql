-- Dionysus 0.17.0 → 0.18.0: the proactive mind survives a long silence of its own clock.
-- exp() and power() raise an error where the result underflows. The rules' "toward" step
-- computed exp(-weight × per_hour × hours since the last tick): after about two months without
-- a tick (the server down, or the test clock driven ahead), "done requests ease" (0.5 an hour)
-- underflowed, the tick failed, and since a failed tick moves nothing, every tick after it
-- failed too: the proactive mind stopped for good. The exponents are bounded (where the factor
-- is below 1e-300 anyway); the rhythm's confidence and the learned rules' decay had the same
-- flaw over longer gaps. Nothing else changes.

CREATE OR REPLACE FUNCTION dionysus_internal.availability(who text, at timestamptz)
    RETURNS TABLE (belief double precision, confidence double precision, learned double precision, prior double precision)
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    p dionysus.people;
    h smallint;
    hod int;
    local_hour int;
    week_here double precision;
    week_peak double precision;
    day_here double precision;
    day_peak double precision;
    total double precision;
    missed double precision;
    qs int := dionysus_internal.proactive_setting('quiet_start_hour')::int;
    qe int := dionysus_internal.proactive_setting('quiet_end_hour')::int;
    ws int := dionysus_internal.proactive_setting('workday_start_hour')::int;
    we int := dionysus_internal.proactive_setting('workday_end_hour')::int;
BEGIN
    SELECT * INTO p FROM dionysus.people x WHERE x.person = who;
    local_hour := extract(hour FROM at AT TIME ZONE coalesce(p.time_zone, 'UTC'))::int;
    prior := CASE WHEN (qs > qe AND (local_hour >= qs OR local_hour < qe)) OR (qs < qe AND local_hour >= qs AND local_hour < qe)
                       THEN dionysus_internal.proactive_setting('prior_quiet')
                  WHEN extract(isodow FROM at AT TIME ZONE coalesce(p.time_zone, 'UTC')) <= 5 AND local_hour >= ws AND local_hour < we
                       THEN dionysus_internal.proactive_setting('prior_workday')
                  ELSE dionysus_internal.proactive_setting('prior_free') END;
    h := dionysus_internal.hour_of_week(at, coalesce(p.time_zone, 'UTC'));
    hod := h % 24;
    SELECT max(activity), sum(activity) INTO week_peak, total FROM dionysus.person_rhythm r WHERE r.person = who;
    SELECT coalesce(sum(r.activity * CASE WHEN r.hour_of_week = h THEN 1.0 ELSE 0.5 END), 0) INTO week_here
      FROM dionysus.person_rhythm r
     WHERE r.person = who AND r.hour_of_week IN (h, (h + 167) % 168, (h + 1) % 168);
    SELECT max(d.n) INTO day_peak
      FROM (SELECT r.hour_of_week % 24 AS hr, sum(r.activity) AS n FROM dionysus.person_rhythm r WHERE r.person = who GROUP BY 1) d;
    SELECT coalesce(sum(r.activity * CASE WHEN r.hour_of_week % 24 = hod THEN 1.0 ELSE 0.5 END), 0),
           coalesce(sum(r.misses) FILTER (WHERE r.hour_of_week = h), 0)
           + 0.25 * coalesce(sum(r.misses) FILTER (WHERE r.hour_of_week % 24 = hod AND r.hour_of_week <> h), 0)
      INTO day_here, missed
      FROM dionysus.person_rhythm r
     WHERE r.person = who AND r.hour_of_week % 24 IN (hod, (hod + 23) % 24, (hod + 1) % 24);
    learned := (0.5 * CASE WHEN coalesce(week_peak, 0) > 0 THEN least(1.0, week_here / week_peak) ELSE 0 END
                + 0.5 * CASE WHEN coalesce(day_peak, 0) > 0 THEN least(1.0, day_here / day_peak) ELSE 0 END)
               * (1 - least(0.8, dionysus_internal.proactive_setting('miss_weight') * missed));
    confidence := least(1.0, coalesce(total, 0) / dionysus_internal.proactive_setting('rhythm_confident_after'))
                  * power(0.5, least(1000, greatest(0, extract(epoch FROM at - coalesce(p.last_message_at, at)) / 86400.0)
                                           / dionysus_internal.proactive_setting('rhythm_confidence_days')));
    belief := confidence * learned + (1 - confidence) * prior;
    RETURN NEXT;
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.run_rules(on_trigger text, who text, hours double precision DEFAULT 0, ev dionysus.events DEFAULT NULL)
    RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
    vals jsonb := dionysus_internal.rule_values(who, t, ev);
    r dionysus.mind_rules;
    rv jsonb;
    fired_rules dionysus.mind_rules[] := '{}';
    it jsonb;
    fired jsonb := '[]'::jsonb;
    effects jsonb;
    target text;
    before double precision;
    after double precision;
    w double precision;
    made uuid;
    requested boolean := false;
    has_person boolean := who IS NOT NULL AND vals ? 'person.turns';
    -- The values adjustments move, kept here and written back once.
    st jsonb;
    i integer;
BEGIN
    FOR r IN SELECT * FROM dionysus.mind_rules m
              WHERE m.status = 'active' AND m.trigger = on_trigger
                AND (m.person IS NULL OR m.person = who)
              ORDER BY m.weight DESC, m.id LOOP
        rv := vals || jsonb_build_object('rule.hours_since_fired', coalesce(round((extract(epoch FROM t - r.last_used_at) / 3600)::numeric, 2), 1000000),
                                         'rule.times_fired', r.use_count);
        IF dionysus_internal.rule_holds(r.condition, rv) THEN
            fired_rules := fired_rules || r;
        END IF;
    END LOOP;
    IF cardinality(fired_rules) = 0 THEN
        RETURN 0;
    END IF;
    -- Lock order: the goals lock (4) before the person's row (6), if a rule will make an objective.
    IF EXISTS (SELECT 1 FROM unnest(fired_rules) f, jsonb_array_elements(f.intents) x WHERE x ? 'create_objective') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.goals', 0));
    END IF;
    -- Adjustments first, each scaled by the rule's weight, in weight order, on the values as
    -- the previous adjustment left them; written back in one statement.
    SELECT jsonb_build_object('person.social_debt', x.social_debt, 'person.curiosity', x.curiosity, 'person.task_pressure', x.task_pressure,
                              'person.restraint', x.restraint)
      INTO st FROM dionysus.people x WHERE x.person = who;
    st := coalesce(st, '{}'::jsonb) || jsonb_build_object('agent.vitality', (SELECT vitality FROM dionysus.agent_state WHERE id = 1));
    FOREACH r IN ARRAY fired_rules LOOP
        effects := '[]'::jsonb;
        w := r.weight;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'adjust' LOOP
            target := it ->> 'adjust';
            IF NOT st ? target THEN
                CONTINUE; -- a person's value, and no person
            END IF;
            before := (st ->> target)::float8;
            after := least(1, greatest(0, CASE
                WHEN it ? 'by' THEN before + w * (it ->> 'by')::float8
                WHEN it ? 'to' THEN before + w * ((it ->> 'to')::float8 - before)
                -- (The exponent bounded: exp() raises an error where it underflows, so a tick after
                -- two months without one, the server down, failed, and failed again every tick.)
                ELSE (it ->> 'toward')::float8 + (before - (it ->> 'toward')::float8)
                     * exp(-least(700, greatest(-700, w * (it ->> 'per_hour')::float8 * hours))) END));
            st := jsonb_set(st, ARRAY[target], to_jsonb(after));
            effects := effects || jsonb_build_object('adjust', target, 'before', round(before::numeric, 4), 'after', round(after::numeric, 4));
        END LOOP;
        fired := fired || jsonb_build_object('rule', r.id, 'name', r.name, 'weight', round(r.weight::numeric, 3), 'effects', effects);
    END LOOP;
    IF has_person THEN
        UPDATE dionysus.people x SET social_debt = (st ->> 'person.social_debt')::float8, curiosity = (st ->> 'person.curiosity')::float8,
               task_pressure = (st ->> 'person.task_pressure')::float8, restraint = (st ->> 'person.restraint')::float8
         WHERE x.person = who;
    END IF;
    UPDATE dionysus.agent_state SET vitality = (st ->> 'agent.vitality')::float8 WHERE id = 1 AND vitality <> (st ->> 'agent.vitality')::float8;
    -- Then what the rules make: objectives, scheduled events, a contact the person asked for.
    FOR i IN 1 .. cardinality(fired_rules) LOOP
        r := fired_rules[i];
        effects := fired[i - 1] -> 'effects';
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'create_objective' LOOP
            IF has_person THEN
                SELECT g.id INTO made FROM dionysus.goals g
                 WHERE g.title = btrim(it ->> 'create_objective') AND g.private_to = ARRAY[who] AND g.priority IN ('active', 'queued');
                IF made IS NULL THEN
                    made := dionysus.create_goal(btrim(it ->> 'create_objective'), 'set up by the rule "' || r.name || '"', 'user_request',
                                                 private_to => ARRAY[who]);
                END IF;
                effects := effects || jsonb_build_object('create_objective', it ->> 'create_objective', 'goal_id', made);
            END IF;
        END LOOP;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'schedule_event' LOOP
            INSERT INTO dionysus.events (source, type, priority, person, payload, at, status)
            VALUES ('internal', it ->> 'schedule_event', coalesce((it ->> 'priority')::int, 2), who,
                    jsonb_build_object('rule', r.id), t + make_interval(secs => (it ->> 'in_minutes')::float8 * 60), 'scheduled');
            effects := effects || jsonb_build_object('schedule_event', it ->> 'schedule_event', 'in_minutes', (it ->> 'in_minutes')::float8);
        END LOOP;
        FOR it IN SELECT * FROM jsonb_array_elements(r.intents) x WHERE x ? 'request_contact' LOOP
            IF has_person AND NOT requested THEN
                requested := true;
                UPDATE dionysus.people x SET contact_request = jsonb_build_object('about', it ->> 'request_contact', 'rule', r.id, 'rule_name', r.name, 'at', t),
                       next_check_at = t
                 WHERE x.person = who;
                effects := effects || jsonb_build_object('request_contact', it ->> 'request_contact');
            END IF;
        END LOOP;
        fired := jsonb_set(fired, ARRAY[(i - 1)::text, 'effects'], effects);
    END LOOP;
    -- Used: learned rules strengthen; every rule counts its use.
    UPDATE dionysus.mind_rules m SET use_count = m.use_count + 1, last_used_at = t,
           weight = CASE WHEN m.learned THEN least(1, m.weight + dionysus_internal.proactive_setting('rule_strengthen') * (1 - m.weight)) ELSE m.weight END
     WHERE m.id IN (SELECT f.id FROM unnest(fired_rules) f);
    INSERT INTO dionysus.rule_firings (at, person, trigger, event_id, inputs, fired)
    VALUES (t, who, on_trigger, ev.id, vals, fired);
    RETURN cardinality(fired_rules);
END $$;

CREATE OR REPLACE FUNCTION dionysus_internal.decay_rules() RETURNS integer
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
    RETURN n;
END $$;
