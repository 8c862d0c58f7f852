-- dionysus 0.19.0 -> 0.20.0: one schema, one history (#34). Unreleased: may change until 0.20.0 is released.
-- Each section names its change; every catalog change a fresh 0.20.0 install has is here too.

-- H2: one current schema (sql/ defines each object once, its COMMENT beside it, the shipped
-- prompts' texts as files of their own under sql/prompts/). A fresh install's rows of
-- prompt_templates now come from the library's copy of those files; an updated database has
-- the same rows already. The loader is the one catalog change.
CREATE FUNCTION dionysus_internal."shipped_prompt"(
	"key" TEXT, /* & str */
	"version" INT /* i32 */
) RETURNS TEXT /* & '_ str */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'shipped_prompt_wrapper';
COMMENT ON FUNCTION dionysus_internal.shipped_prompt(text, integer) IS
    'The text of a shipped version of a prompt template (sql/prompts/<key>.txt, older versions sql/prompts/superseded/<key>.v<N>.txt), compiled into the library: the rows of prompt_templates a fresh install inserts. 22023 for a version never shipped.';
GRANT EXECUTE ON FUNCTION dionysus_internal.shipped_prompt(text, integer) TO dionysus_driver;

-- H2: comments state the rule instead of citing design documents not in the repository
-- ('seed 00x §y'): eleven COMMENTs, and two functions whose bodies had such a comment.

COMMENT ON TABLE memory_neighborhoods IS 'Precomputed top-20 associations of each memory.';
COMMENT ON TABLE heartbeat_config IS
    'Energy parameters, action costs (cost_<action>), goal limits, cooldown and timeouts. '
    'Values must be finite and >= 0.';
COMMENT ON TABLE goals IS 'The goal backlog: active, queued, backburner, completed, abandoned.';
COMMENT ON TABLE messages IS
    'The immutable message log: every turn once per (platform, platform_message_id), chained to the '
    'previous turn of its channel, with the episodic memory it became.';
COMMENT ON FUNCTION enqueue_language_work() IS
    'Queues the worker''s language jobs for the driver: summaries of closed episodes, concepts of young memories, '
    'the summary and micro levels of long fresh memories (027). '
    'Closes episodes left open past the gap first. Returns how many were queued.';
COMMENT ON TABLE objectives IS 'The person''s objectives: what they are working toward, extracted from their turns; theirs, not Dionysus''s goals.';
COMMENT ON TABLE decay_config IS
    'How memories fade: the stage thresholds in effective days, what slows fading (recall, importance, feeling), the mention similarity that resets a memory''s clock, the types that decay, the pass interval and batch, and the off switch (enabled). UPDATE to tune.';
COMMENT ON TABLE censors IS
    'Things not to do: a trigger (embedded, with the model that made it) and optional pattern, a scope (person, kinds, local hours from_hour to to_hour, any_content), a reason, a severity (warn, block, absolute), where it was learned, its activations and false positives, and its escalation threshold.';
COMMENT ON TABLE procedures IS 'How-to knowledge (K-lines): name, domain, goals (upper fringe), core patterns, tools and concepts, implementation notes (lower fringe), for everyone or one person; activation, success and failure counts and effectiveness ((successes + 1) / (successes + failures + 2)).';
COMMENT ON TABLE context_budgets IS 'Token budgets by task (3K casual chat, 6K a deep conversation, 8K a heartbeat decision, 12K reflection or synthesis), each with the order its sections are served in; a context archetype names its task (budget_task).';
COMMENT ON FUNCTION action_schema() IS
    'The action taxonomy as jsonb: for each action its performer (database or driver) and its parameters '
    '(kind, required). heartbeat_commit validates against it; the driver builds its prompt from it.';

CREATE OR REPLACE FUNCTION dionysus_internal.note_person_message(who text, message_id uuid, words text) RETURNS jsonb
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
BEGIN
    -- Lock order: agent_state (push_event, feedback) before the person's row.
    PERFORM dionysus.push_event('communication', 'message_received', 1, jsonb_build_object('message_id', message_id), who);
    IF EXISTS (SELECT 1 FROM dionysus.people x WHERE x.person = who AND x.awaiting_reply) THEN
        answered := true;
        UPDATE dionysus.agent_state SET vitality = least(1, vitality + dionysus_internal.proactive_setting('vitality_feedback'))
         WHERE id = 1;
    END IF;
    p := dionysus_internal.person_row(who);
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

CREATE OR REPLACE FUNCTION proactive_tick() RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := dionysus.clock_now();
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
    FOR who IN SELECT x.person FROM dionysus.people x WHERE x.last_message_at IS NOT NULL ORDER BY x.person LOOP
        n_fired := n_fired + dionysus_internal.run_rules('tick', who, hours);
    END LOOP;
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
           tick_interval_seconds = interval_s, last_tick_at = t, last_tick_real_at = now(),
           next_tick_at = t + make_interval(secs => interval_s),
           ticks = ticks + 1, updated_at = now()
     WHERE id = 1;
    RETURN jsonb_build_object('at', t, 'mode', new_mode, 'previous_mode', a.mode, 'woke', woke, 'vitality', round(a.vitality::numeric, 3),
                              'pressure', round(top_pressure::numeric, 3), 'interval_seconds', round(interval_s::numeric, 1),
                              'events_processed', n_processed, 'events_filtered', n_filtered, 'events_dropped', n_dropped,
                              'evaluated', evaluated, 'opportunities', opportunities, 'rules_fired', n_fired);
END $$;
