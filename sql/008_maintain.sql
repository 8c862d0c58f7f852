-- The maintain action: what is known about a belief, identity aspect or
-- memory, and the model's verdict on it applied and recorded in memory_changes.
--
-- Conventions: every rejection raises an SQLSTATE with a message naming the argument; every
-- function is one statement in the caller's transaction, so nothing is ever half-written.
-- Helpers nobody calls directly live in dionysus_internal (see 001_schema.sql).

-- ---------------------------------------------------------------------------------------
-- Maintain: a belief, identity aspect or memory is loaded with what else is
-- known about it; the model judges whether it still holds (keep, update, retire);
-- complete_work applies the verdict and records it in memory_changes.
-- ---------------------------------------------------------------------------------------
-- The target: memory_id, else a belief or identity aspect named by target, else the memory
-- recall finds for target; with neither, the least confident belief, else the oldest fact not
-- confirmed for 30 days. With the memories most related to it (the evidence). NULL: nothing.
CREATE FUNCTION maintain_target(target text DEFAULT NULL, memory_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    t jsonb;
    key text := lower(btrim(target));
BEGIN
    IF memory_id IS NOT NULL THEN
        SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                  'status', m.status, 'created_at', m.created_at)
          INTO t FROM dionysus.memories m WHERE m.id = maintain_target.memory_id;
        IF t IS NULL THEN
            RAISE EXCEPTION 'dionysus: argument "memory_id": no memory with id %', memory_id USING ERRCODE = 'no_data_found';
        END IF;
    ELSIF key IS NOT NULL AND key <> '' THEN
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b WHERE b.belief_key = key;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'identity', 'id', a.id, 'content', a.aspect, 'confidence', a.confidence)
              INTO t FROM dionysus.identity_aspects a WHERE a.aspect_key = key;
        END IF;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.recall(target, 1) r JOIN dionysus.memories m ON m.id = r.memory_id
             WHERE NOT (m.metadata ? 'north_star'); -- a north star is the person's to change
        END IF;
    ELSE
        SELECT jsonb_build_object('kind', 'belief', 'id', b.id, 'content', b.belief, 'confidence', b.confidence)
          INTO t FROM dionysus.worldview_beliefs b ORDER BY b.confidence, b.updated_at LIMIT 1;
        IF t IS NULL THEN
            SELECT jsonb_build_object('kind', 'memory', 'id', m.id, 'content', m.content, 'confidence', m.confidence,
                                      'status', m.status, 'created_at', m.created_at)
              INTO t FROM dionysus.facts f JOIN dionysus.memories m ON m.id = f.memory_id
             WHERE f.state IN ('learned', 'confirmed') AND m.status = 'active' AND NOT (m.metadata ? 'north_star')
               AND coalesce(f.last_confirmed, f.learned_at) < now() - interval '30 days'
             ORDER BY coalesce(f.last_confirmed, f.learned_at) LIMIT 1;
        END IF;
    END IF;
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN t || jsonb_build_object('evidence', coalesce((
        SELECT jsonb_agg(jsonb_build_object('id', r.memory_id, 'content', r.content, 'created_at', r.created_at,
                                            'source', m.source) ORDER BY r.score DESC)
          FROM dionysus.recall(t ->> 'content', 7) r JOIN dionysus.memories m ON m.id = r.memory_id
         WHERE r.memory_id::text IS DISTINCT FROM t ->> 'id'), '[]'::jsonb));
END $$;
COMMENT ON FUNCTION maintain_target(text, uuid) IS
    'The maintain action''s target (§3.2.3) with its evidence: memory_id, else the belief or identity aspect named by target, else the '
    'memory recall finds for it; with neither, the least confident belief or the oldest unconfirmed fact. NULL when there is nothing.';

-- Applies a maintain verdict {kind, id, verdict: keep|update|retire, confidence, content,
-- reason} and records it. A memory's new content supersedes it; a belief or aspect that is
-- retired is removed; a new text resting on the web alone is refused. Returns the change.
CREATE FUNCTION dionysus_internal.apply_maintenance(m jsonb, heartbeat_id uuid DEFAULT NULL, work_id uuid DEFAULT NULL) RETURNS jsonb
    LANGUAGE plpgsql AS $$
DECLARE
    kind text := m ->> 'kind';
    target uuid;
    verdict text := lower(coalesce(m ->> 'verdict', ''));
    conf double precision;
    content text := nullif(btrim(m ->> 'content'), '');
    before jsonb;
    after jsonb;
    new_id uuid;
BEGIN
    IF jsonb_typeof(m) IS DISTINCT FROM 'object' OR kind IS NULL OR kind NOT IN ('memory', 'belief', 'identity') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance": needs a kind (memory, belief or identity)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF verdict NOT IN ('keep', 'update', 'retire') THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.verdict": % is not keep, update or retire', quote_nullable(m ->> 'verdict')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (m ->> 'id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": must be the target''s id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    target := (m ->> 'id')::uuid;
    IF m ? 'confidence' AND jsonb_typeof(m -> 'confidence') = 'number' THEN
        conf := (m ->> 'confidence')::float8;
        IF conf < 0 OR conf > 1 THEN
            RAISE EXCEPTION 'dionysus: argument "result.maintenance.confidence": % is outside [0, 1]', conf USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF content IS NOT NULL AND kind <> 'memory' AND dionysus_internal.web_only_basis(content) THEN
        RAISE EXCEPTION 'dionysus: maintenance refused: the new text rests on web content alone' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF kind = 'memory' THEN
        SELECT jsonb_build_object('content', x.content, 'confidence', x.confidence, 'status', x.status) INTO before
          FROM dionysus.memories x WHERE x.id = target;
    ELSIF kind = 'belief' THEN
        SELECT jsonb_build_object('content', x.belief, 'confidence', x.confidence) INTO before FROM dionysus.worldview_beliefs x WHERE x.id = target;
    ELSE
        SELECT jsonb_build_object('content', x.aspect, 'confidence', x.confidence) INTO before FROM dionysus.identity_aspects x WHERE x.id = target;
    END IF;
    IF before IS NULL THEN
        RAISE EXCEPTION 'dionysus: argument "result.maintenance.id": no % with id %', kind, target USING ERRCODE = 'no_data_found';
    END IF;
    IF verdict = 'update' AND kind = 'memory' THEN
        IF content IS NOT NULL AND content <> before ->> 'content' THEN
            new_id := dionysus.supersede(target, content, confidence => conf);
            after := jsonb_build_object('superseded_by', new_id, 'content', content, 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
        ELSIF conf IS NOT NULL THEN
            UPDATE dionysus.memories SET confidence = conf, updated_at = now() WHERE id = target;
            after := jsonb_build_object('confidence', conf);
        END IF;
    ELSIF verdict = 'update' THEN
        IF kind = 'belief' THEN
            UPDATE dionysus.worldview_beliefs SET confidence = coalesce(conf, confidence), belief = coalesce(content, belief), updated_at = now()
             WHERE id = target;
        ELSE
            UPDATE dionysus.identity_aspects SET confidence = coalesce(conf, confidence), aspect = coalesce(content, aspect), updated_at = now()
             WHERE id = target;
        END IF;
        after := jsonb_build_object('content', coalesce(content, before ->> 'content'), 'confidence', coalesce(conf, (before ->> 'confidence')::float8));
    ELSIF verdict = 'retire' THEN
        IF kind = 'memory' THEN
            PERFORM dionysus.archive(target);
            after := jsonb_build_object('status', 'archived');
        ELSIF kind = 'belief' THEN
            DELETE FROM dionysus.worldview_beliefs WHERE id = target;
            after := jsonb_build_object('removed', true);
        ELSE
            DELETE FROM dionysus.identity_aspects WHERE id = target;
            after := jsonb_build_object('removed', true);
        END IF;
    END IF;
    INSERT INTO dionysus.memory_changes (heartbeat_id, work_id, target_kind, target_id, verdict, before, after, reason)
    VALUES (apply_maintenance.heartbeat_id, apply_maintenance.work_id, kind, target, verdict, before, after, m ->> 'reason');
    RETURN jsonb_build_object('kind', kind, 'id', target, 'verdict', verdict, 'before', before, 'after', after);
END $$;
COMMENT ON FUNCTION dionysus_internal.apply_maintenance(jsonb, uuid, uuid) IS
    'Applies a maintain verdict {kind, id, verdict keep|update|retire, confidence, content, reason} and records it in memory_changes: '
    'a memory''s new wording supersedes it, a retired belief or aspect is removed, a new text resting on the web alone is refused.';
