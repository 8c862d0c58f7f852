-- The outbox: what Dionysus says, delivered exactly once (reserve → send → confirm), with
-- public messages held for the person's approval.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- The outbox: pending → sent | failed. Public messages need approve_outbox() first.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION pending_outbox(max_items integer DEFAULT 10) RETURNS SETOF outbox
    LANGUAGE sql STABLE AS $$
    SELECT * FROM dionysus.outbox
     WHERE status = 'pending' AND (NOT requires_approval OR approved_at IS NOT NULL)
     ORDER BY created_at, id LIMIT max_items
$$;
COMMENT ON FUNCTION pending_outbox(integer) IS 'Messages ready to deliver (public ones only once approved).';

CREATE FUNCTION dionysus_internal.require_outbox(outbox_id uuid) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    SELECT * INTO o FROM dionysus.outbox WHERE id = outbox_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN o;
END $$;
COMMENT ON FUNCTION dionysus_internal.require_outbox(uuid) IS 'Internal: the outbox message, locked, or an error naming outbox_id.';

-- Marks a message sent exactly once: a second call for the same message is an error.
CREATE FUNCTION mark_outbox_sent(outbox_id uuid, platform_message_id text DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE; -- lock order: state before rows
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF o.requires_approval AND o.approved_at IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": public message % is not approved', outbox_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET status = 'sent', sent_at = now(), attempts = attempts + 1, reserved_until = NULL,
           platform_message_id = mark_outbox_sent.platform_message_id WHERE id = outbox_id;
    IF o.audience = 'user' AND o.work_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
END $$;
COMMENT ON FUNCTION mark_outbox_sent(uuid, text) IS
    'Marks a message delivered, exactly once (by hand; the driver uses reserve_outbox / confirm_outbox).';

-- ---------------------------------------------------------------------------------------
-- Delivery, exactly once: reserve → send → confirm. A driver reserves a message (a lease,
-- committed at once, so nothing is locked while the platform is called), sends it part by
-- part — each part with a stable nonce (the message id and the part number) that the
-- platform uses to return the original message instead of posting it twice — records each
-- part as it goes, and confirms: the bot's turn is logged and the message marked sent in
-- one transaction. A driver that dies anywhere leaves a reservation that lapses; the next
-- one skips the parts already recorded and resends the one in flight under the same nonce.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION dionysus_internal.outbox_lease() RETURNS interval
    LANGUAGE sql STABLE AS $$ SELECT make_interval(secs => dionysus_internal.heartbeat_setting('outbox_lease_seconds')) $$;
COMMENT ON FUNCTION dionysus_internal.outbox_lease() IS 'How long a reservation of an outbox message lasts (heartbeat_config.outbox_lease_seconds).';

-- A message Dionysus starts (not a reply) that a censor with hours blocks now, in the person's
-- own time: it waits for the hour to pass (022's hours are judged when the message is sent, not
-- only when it was written). Cheap unless the person has a censor with hours.
CREATE FUNCTION dionysus_internal.held_at_this_hour(content text, person text) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    IF person IS NULL OR NOT EXISTS (SELECT 1 FROM dionysus.censors c
                                      WHERE c.status = 'active' AND c.from_hour IS NOT NULL
                                        AND (c.person IS NULL OR c.person = held_at_this_hour.person)
                                        AND (c.kinds IS NULL OR 'reach_out' = ANY (c.kinds))) THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM dionysus.check_censors(content, 'reach_out', person) h
                     JOIN dionysus.censors c ON c.id = h.censor_id
                    WHERE h.action = 'block' AND c.from_hour IS NOT NULL);
END $$;
COMMENT ON FUNCTION dionysus_internal.held_at_this_hour(text, text) IS
    'Whether a censor with hours (the person''s or everyone''s, watching reach-outs) blocks these words for this person now, in their own time; false at once when they have none.';

CREATE FUNCTION reserve_outbox(worker text, platform text, max_items integer DEFAULT 1) RETURNS SETOF outbox
    LANGUAGE plpgsql AS $$
DECLARE
    x dionysus.outbox;
    n integer := 0;
    waiting constant text := 'waiting: a censor holds at this hour';
BEGIN
    IF worker IS NULL OR btrim(worker) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "worker": must name the sender' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF platform IS NULL OR btrim(platform) = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform": must name the platform' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_items IS NULL OR max_items < 1 OR max_items > 100 THEN
        RAISE EXCEPTION 'dionysus: invalid argument "max_items": % is outside [1, 100]', max_items USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Oldest first; rows are locked as they are read, so a message held by its hour does not
    -- keep the ones behind it waiting.
    FOR x IN SELECT * FROM dionysus.outbox o
              WHERE o.status = 'pending' AND o.audience = 'user' AND (NOT o.requires_approval OR o.approved_at IS NOT NULL)
                AND (o.platform IS NULL OR o.platform = reserve_outbox.platform)
                AND (o.reserved_until IS NULL OR o.reserved_until < now())
              ORDER BY o.created_at, o.id FOR UPDATE SKIP LOCKED LOOP
        IF x.reply_to IS NULL AND dionysus_internal.held_at_this_hour(x.content, x.person) THEN
            -- Written down once, with what held it; sent when the hour has passed.
            IF x.last_error IS DISTINCT FROM waiting THEN
                UPDATE dionysus.outbox o SET last_error = waiting WHERE o.id = x.id;
            END IF;
            CONTINUE;
        END IF;
        -- A message for nobody in particular (the home channel) takes the platform that sends it.
        RETURN QUERY
        UPDATE dionysus.outbox o SET reserved_by = reserve_outbox.worker, reserved_until = now() + dionysus_internal.outbox_lease(),
               platform = coalesce(o.platform, reserve_outbox.platform),
               last_error = CASE WHEN o.last_error = waiting THEN NULL ELSE o.last_error END
         WHERE o.id = x.id
        RETURNING o.*;
        n := n + 1;
        EXIT WHEN n >= max_items;
    END LOOP;
END $$;
COMMENT ON FUNCTION reserve_outbox(text, text, integer) IS
    'Reserves up to max_items deliverable messages of a platform for a worker (a lease, committed at once; nothing stays locked '
    'while the platform is called). Reservations that lapsed are taken again. A message Dionysus starts that a censor with hours '
    'blocks now waits (last_error says so) and goes once the hours have passed.';

-- The outbox row, locked, still reserved by this worker and unsent (or an error naming why not).
CREATE FUNCTION dionysus_internal.require_reserved_outbox(outbox_id uuid, worker text) RETURNS dionysus.outbox
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.reserved_by IS DISTINCT FROM worker THEN
        RAISE EXCEPTION 'dionysus: argument "worker": message % is reserved by %, not %', outbox_id, coalesce(o.reserved_by, 'nobody'), worker
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN o;
END $$;
COMMENT ON FUNCTION dionysus_internal.require_reserved_outbox(uuid, text) IS 'The outbox row, locked, unsent and still reserved by this worker; otherwise 55000 saying why.';

-- One part delivered (parts are numbered from 0, in order); a repeat is a no-op. Renews the lease.
CREATE FUNCTION outbox_part_sent(outbox_id uuid, worker text, part integer, platform_message_id text) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    IF coalesce(btrim(platform_message_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "platform_message_id": must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    IF part IS NULL OR part < 0 OR part > jsonb_array_length(o.sent_parts) THEN
        RAISE EXCEPTION 'dionysus: invalid argument "part": % is not the next part (% recorded)', part, jsonb_array_length(o.sent_parts)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox x SET reserved_until = now() + dionysus_internal.outbox_lease(),
           sent_parts = CASE WHEN outbox_part_sent.part = jsonb_array_length(x.sent_parts)
                             THEN x.sent_parts || to_jsonb(outbox_part_sent.platform_message_id)
                             ELSE x.sent_parts END
     WHERE x.id = outbox_part_sent.outbox_id;
END $$;
COMMENT ON FUNCTION outbox_part_sent(uuid, text, integer, text) IS
    'Records that part N (from 0, in order) of a message was delivered, with its platform id; a repeat is a no-op. Renews the lease.';

-- Every part is out: the bot's turn is logged (in the channel it went to) and the message
-- marked sent, in one transaction. A reach-out starts the contact cooldown only now.
CREATE FUNCTION confirm_outbox(outbox_id uuid, worker text, channel_id text, bot_author_id text) RETURNS uuid
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    logged jsonb;
    last_part text;
BEGIN
    IF coalesce(btrim(channel_id), '') = '' OR coalesce(btrim(bot_author_id), '') = '' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "%": must not be empty', CASE WHEN coalesce(btrim(channel_id), '') = '' THEN 'channel_id' ELSE 'bot_author_id' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO o FROM dionysus.outbox x WHERE x.id = outbox_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dionysus: argument "outbox_id": no outbox message with id %', outbox_id USING ERRCODE = 'no_data_found';
    END IF;
    -- Lock order: the channel (log_message takes it again), the state row, then the row.
    PERFORM pg_advisory_xact_lock(hashtextextended('dionysus.channel:' || coalesce(o.platform, '') || ':' || channel_id, 0));
    PERFORM 1 FROM dionysus.heartbeat_state WHERE id = 1 FOR UPDATE;
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    last_part := o.sent_parts ->> -1;
    IF last_part IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": no part of message % was recorded as sent', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF o.platform IS NULL THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % names no platform', outbox_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- A contact Dionysus started: the person's row (before log_message's episode lock).
    IF (o.work_id IS NOT NULL OR o.contact_id IS NOT NULL) AND o.person IS NOT NULL THEN
        PERFORM dionysus_internal.note_contact_delivered(o.person);
    END IF;
    logged := dionysus.log_message(o.platform, last_part, channel_id, bot_author_id, o.content, true,
                                   o.work_id IS NOT NULL OR o.contact_id IS NOT NULL,
                                   o.reply_to, o.person);
    UPDATE dionysus.outbox x SET status = 'sent', sent_at = now(), attempts = x.attempts + 1, reserved_until = NULL,
           platform_message_id = last_part, channel_id = confirm_outbox.channel_id
     WHERE x.id = outbox_id;
    IF o.work_id IS NOT NULL OR o.contact_id IS NOT NULL THEN
        UPDATE dionysus.heartbeat_state SET last_user_contact_at = now() WHERE id = 1;
    END IF;
    RETURN (logged ->> 'message_id')::uuid;
END $$;
COMMENT ON FUNCTION confirm_outbox(uuid, text, text, text) IS
    'Every part is out: logs the bot''s turn in the channel it went to and marks the message sent, in one transaction; a reach-out '
    'starts the contact cooldown now. Returns the logged message''s id.';

-- The channel could not take it: back to the outbox. `rejected`: the platform refused this
-- message (an attempt is spent; the fifth fails it); otherwise the channel was unavailable
-- and no attempt is spent.
CREATE FUNCTION release_outbox(outbox_id uuid, worker text, error text, rejected boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE
    o dionysus.outbox;
    st text;
BEGIN
    o := dionysus_internal.require_reserved_outbox(outbox_id, worker);
    UPDATE dionysus.outbox x SET reserved_until = NULL, last_error = release_outbox.error,
           attempts = x.attempts + CASE WHEN rejected THEN 1 ELSE 0 END,
           status = CASE WHEN rejected AND x.attempts + 1 >= 5 THEN 'failed'::dionysus.outbox_status ELSE 'pending' END
     WHERE x.id = outbox_id
    RETURNING x.status::text INTO st;
    RETURN st;
END $$;
COMMENT ON FUNCTION release_outbox(uuid, text, text, boolean) IS
    'Hands a reserved message back: unavailable channel, no attempt spent; rejected by the platform, an attempt spent (the fifth fails it).';

CREATE FUNCTION mark_outbox_failed(outbox_id uuid, error text, retry boolean DEFAULT true) RETURNS text
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET attempts = attempts + 1, last_error = error,
           status = CASE WHEN retry AND attempts + 1 < 5 THEN 'pending'::dionysus.outbox_status ELSE 'failed' END
     WHERE id = outbox_id;
    RETURN (SELECT status::text FROM dionysus.outbox WHERE id = outbox_id);
END $$;
COMMENT ON FUNCTION mark_outbox_failed(uuid, text, boolean) IS 'Records a failed delivery; the message stays pending until 5 attempts.';

CREATE FUNCTION approve_outbox(outbox_id uuid) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE o dionysus.outbox;
BEGIN
    o := dionysus_internal.require_outbox(outbox_id);
    IF o.status <> 'pending' THEN
        RAISE EXCEPTION 'dionysus: invalid argument "outbox_id": message % is already %', outbox_id, o.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE dionysus.outbox SET approved_at = coalesce(approved_at, now()) WHERE id = outbox_id;
    PERFORM pg_notify('dionysus_outbox', outbox_id::text);
END $$;
COMMENT ON FUNCTION approve_outbox(uuid) IS 'A human''s approval of a public message.';
