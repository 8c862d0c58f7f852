-- Backups: every table that holds data is in a pg_dump (issue #33 §1).
--
-- Every table here is a member of the extension, and pg_dump dumps a member table's rows only
-- when the extension marks it with pg_extension_config_dump: until 0.19.0 none was marked, so
-- a dump restored an empty mind. mark_for_dump() (called last by the install script and by the
-- update to 0.19.0) marks every member table and sequence but the few below, enumerating the
-- catalog, so a table added later is dumped without anyone remembering to say so.
--
-- Left out, on purpose: the unlogged access log (recalls since the last fold; a crash loses
-- them too), the embedding cache (a query's vector, made again on demand), the two status rows
-- of the workers (what the last pass did on that server) and shipped_rows below (the install's
-- own record, made again by CREATE EXTENSION).
--
-- Shipped rows (configuration, templates, rules, budgets, the singletons of state) are the
-- install's; a restore runs CREATE EXTENSION first, which writes them again. Every row is
-- dumped all the same (an untouched one carries its own install's timestamps), and on restore
-- restore_over_shipped lets a restored row that collides with a shipped row still as the fresh
-- install wrote it (its hash is in shipped_rows) replace that row in place: a tuned setting
-- comes back tuned, nothing is doubled. A shipped row the owner deleted comes back at its
-- install default (disable it instead, where a table has a flag for that).
--
-- How a restore is told apart: pg_dump's scripts and pg_restore set check_function_bodies off
-- (as the extension scripts themselves do), and a restore runs as a superuser (CREATE EXTENSION
-- dionysus needs one). The triggers that derive rows from others (decay's mentions, heartbeat
-- lessons) or stamp them (a re-index run's model, an archetype's centroid) then let a restored
-- row in as it was dumped: what they would derive is in the dump already. Nobody else can pass
-- for a restore: a role that sets check_function_bodies off is still not a superuser.

-- The rows an install shipped, by table and hash of the whole row (to_jsonb), as they were
-- written: what a restored row may replace. (A database updated from before 0.19.0 has none
-- recorded; it needs none, as a restore goes into a fresh install.)
CREATE TABLE dionysus_internal.shipped_rows (
    tbl      regclass NOT NULL,
    row_hash text NOT NULL,
    PRIMARY KEY (tbl, row_hash)
);

-- Whether a row (as to_jsonb) is one of its table's shipped rows, untouched.
CREATE FUNCTION dionysus_internal.is_shipped(tbl regclass, r jsonb) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM dionysus_internal.shipped_rows s
                    WHERE s.tbl = is_shipped.tbl AND s.row_hash = md5(is_shipped.r::text))
$$;
COMMENT ON FUNCTION dionysus_internal.is_shipped(regclass, jsonb) IS
    'Whether a row (to_jsonb) is one of its table''s shipped rows, still exactly as the install wrote it (dionysus_internal.shipped_rows).';

-- BEFORE INSERT on a table with shipped rows, during a restore only: a restored row that
-- collides (on the primary key or a unique constraint) with a shipped row still as installed
-- replaces it in place (an UPDATE: whatever refers to it keeps referring). A collision with a
-- row that is not pristine is left to fail as any duplicate would. Runs as its caller.
CREATE FUNCTION dionysus_internal.restore_over_shipped() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ix record;
    cond text;
    found_row jsonb;
    cols text;
BEGIN
    IF NOT dionysus_internal.restoring() THEN
        RETURN NEW;
    END IF;
    FOR ix IN SELECT i.indexrelid, array_agg(a.attname ORDER BY k.ord) AS names, i.indnullsnotdistinct AS nnd
                FROM pg_catalog.pg_index i
                CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
                JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
               WHERE i.indrelid = TG_RELID AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
                 AND i.indexprs IS NULL
               GROUP BY i.indexrelid, i.indisprimary, i.indnullsnotdistinct
               ORDER BY i.indisprimary DESC, i.indexrelid LOOP
        -- (NULLS NOT DISTINCT: a NULL collides with a NULL, as context_archetypes' (name, person).)
        SELECT string_agg(format(CASE WHEN ix.nnd THEN 't.%1$I IS NOT DISTINCT FROM ($1).%1$I' ELSE 't.%1$I = ($1).%1$I' END, n), ' AND ')
          INTO cond FROM unnest(ix.names) n;
        EXECUTE format('SELECT to_jsonb(t) FROM %I.%I t WHERE %s', TG_TABLE_SCHEMA, TG_TABLE_NAME, cond)
            INTO found_row USING NEW;
        CONTINUE WHEN found_row IS NULL;
        IF NOT dionysus_internal.is_shipped(TG_RELID, found_row) THEN
            RETURN NEW;   -- a real duplicate: the insert fails as it would have
        END IF;
        SELECT string_agg(format('%1$I = ($1).%1$I', a.attname), ', ' ORDER BY a.attnum) INTO cols
          FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = TG_RELID AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
           AND NOT (a.attidentity = 'a' AND a.attname = ANY (ix.names));   -- equal, and not to be set
        EXECUTE format('UPDATE %I.%I t SET %s WHERE %s', TG_TABLE_SCHEMA, TG_TABLE_NAME, cols, cond) USING NEW;
        RETURN NULL;
    END LOOP;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION dionysus_internal.restore_over_shipped() IS
    'BEFORE INSERT on a table with shipped rows, during a restore only: a restored row that collides with a still-pristine shipped row replaces it in place.';

-- The extension's member tables and sequences pg_dump leaves out, with why (the header).
CREATE FUNCTION dionysus_internal.left_out_of_dumps() RETURNS TABLE (rel regclass, why text)
    LANGUAGE sql STABLE AS $$
    VALUES ('dionysus.memory_access_log'::regclass, 'unlogged: the recalls since the last fold'),
           ('dionysus.embedding_cache'::regclass, 'a cache: made again on demand'),
           ('dionysus.worker_status'::regclass, 'what the last maintenance pass on that server did'),
           ('dionysus.scheduler_status'::regclass, 'what the last scheduler tick on that server did'),
           ('dionysus_internal.shipped_rows'::regclass, 'the install''s own record, written again by CREATE EXTENSION')
$$;
COMMENT ON FUNCTION dionysus_internal.left_out_of_dumps() IS
    'The extension''s member tables pg_dump leaves out on purpose, each with why (unlogged, cache, per-server status, the install''s own record).';

-- Marks every member table and sequence for pg_dump (only inside an extension script, as
-- pg_extension_config_dump requires). shipped: the tables that have shipped rows; NULL on a
-- fresh install, where they are the tables that hold rows now (their rows are recorded as
-- shipped). Idempotent: a table marked again gets the same condition.
CREATE FUNCTION dionysus_internal.mark_for_dump(shipped regclass[] DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    r record;
    has_rows boolean;
    order_by text;
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, format('%I.%I', n.nspname, c.relname) AS qname, c.relname, c.relkind
               FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_class c ON c.oid = d.objid AND d.classid = 'pg_catalog.pg_class'::regclass
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'dionysus')
                AND c.relkind IN ('r', 'S')
                AND c.oid NOT IN (SELECT l.rel FROM dionysus_internal.left_out_of_dumps() l)
              ORDER BY c.oid LOOP
        IF r.relkind = 'S' THEN
            PERFORM pg_catalog.pg_extension_config_dump(r.rel, '');
            CONTINUE;
        END IF;
        IF shipped IS NULL THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', r.qname) INTO has_rows;
        ELSE
            has_rows := r.rel = ANY (shipped);
        END IF;
        IF NOT has_rows THEN
            PERFORM pg_catalog.pg_extension_config_dump(r.rel, '');
            CONTINUE;
        END IF;
        IF shipped IS NULL THEN
            EXECUTE format('INSERT INTO dionysus_internal.shipped_rows (tbl, row_hash)
                            SELECT %L::regclass, md5(to_jsonb(t)::text) FROM %s t ON CONFLICT DO NOTHING', r.qname, r.qname);
        END IF;
        -- Rows outside a partial unique index's predicate first (a template version no longer
        -- active before the one that is): each lands without colliding with a fresh shipped
        -- row that the dump replaces only later.
        SELECT 'ORDER BY ' || string_agg(format('(%s) IS TRUE', pg_catalog.pg_get_expr(i.indpred, i.indrelid)), ', ')
          INTO order_by
          FROM pg_catalog.pg_index i WHERE i.indrelid = r.rel AND i.indisunique AND i.indpred IS NOT NULL;
        -- pg_dump reads the table as COPY (SELECT ... FROM ONLY schema.table <condition>).
        PERFORM pg_catalog.pg_extension_config_dump(r.rel, coalesce(order_by, ''));
        EXECUTE format('DROP TRIGGER IF EXISTS restore_over_shipped ON %s', r.qname);
        EXECUTE format('CREATE TRIGGER restore_over_shipped BEFORE INSERT ON %s
                        FOR EACH ROW EXECUTE FUNCTION dionysus_internal.restore_over_shipped()', r.qname);
    END LOOP;
END $$;
COMMENT ON FUNCTION dionysus_internal.mark_for_dump(regclass[]) IS
    'Marks every member table and sequence but those left out for pg_dump (pg_extension_config_dump; extension scripts only); records a fresh install''s shipped rows and gives their tables restore_over_shipped.';
