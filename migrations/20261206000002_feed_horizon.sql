-- The completion feed's horizon per database (README "Completion feed").
--
-- The feed serves a row only once every transaction that could still
-- commit a row before it has ended, so a reader never skips a row that
-- commits late. Until now the horizon was the snapshot's xmin: the oldest
-- transaction still running on the whole *server*. A long transaction of
-- another application in another database (a report, a migration, a
-- `pg_dump`) held every feed reader and webhook back for as long as it ran.
--
-- Only transactions of this database can write feed rows, so the horizon
-- is the oldest transaction of the calling statement's snapshot (S) that
-- may belong to this database:
--
--   horizon = the smallest xid x in S's in-progress list such that
--               x is running in a session of this database (A), or
--               x is a prepared transaction of this database (P), or
--               x has committed since S was taken;
--             S's xmax when there is none.
--
-- Race analysis. Rows are read with S, so a row is invisible to the reader
-- exactly when its writer is in S's in-progress list (or started after S,
-- hence has an xid >= xmax, above the horizon). Take a writer X of this
-- database in S's list. A is read after S (statistics are cached per
-- transaction, so the cache is dropped first), then P, then each
-- candidate's status, in that order:
--   * X still running as a session when A is read: X is in A.
--   * X prepared (PREPARE TRANSACTION) by then: its session no longer shows
--     it; if it is still prepared when P is read, X is in P; if it ended
--     between A and P, its status (read after P) is committed or aborted.
--   * X ended before A was read: its status is committed or aborted.
-- A committed X caps the horizon (its rows are invisible to S); an aborted
-- one wrote nothing that survives. So every writer of this database whose
-- rows S cannot see is at or above the horizon: no row below it can still
-- appear. A transaction of another database is in none of A and P; while
-- it runs it never caps the horizon, and once it commits it caps only the
-- reads whose snapshot began while it ran (one read, then it is past).
-- The horizon is never below S's xmin (every candidate is in S's list),
-- so it only ever lets the feed move sooner than the old rule did.
--
-- STABLE: the statements inside run with the calling statement's snapshot
-- (pg_current_snapshot() is S). Call it once per statement, as a scalar
-- subquery: `xid < (SELECT txmgr_feed_horizon())`.
CREATE FUNCTION txmgr_feed_horizon() RETURNS xid8
LANGUAGE plpgsql STABLE AS $$
DECLARE
    snap pg_snapshot := pg_current_snapshot();
    ours xid[];
    candidate xid8;
BEGIN
    -- pg_stat_activity is cached for the transaction's life: read it anew,
    -- after S.
    PERFORM pg_stat_clear_snapshot();
    SELECT coalesce(array_agg(a.backend_xid), '{}') INTO ours
      FROM pg_stat_activity a
     WHERE a.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND a.backend_xid IS NOT NULL;
    ours := ours || ARRAY(SELECT p.transaction FROM pg_prepared_xacts p
                           WHERE p.database = current_database());
    FOR candidate IN SELECT x FROM pg_snapshot_xip(snap) AS x ORDER BY x LOOP
        -- xid8 → xid: the low 32 bits (both name the same transaction: a
        -- running one is within 2^31 of every other).
        IF (candidate::text::numeric % 4294967296)::text::xid = ANY (ours)
           OR pg_xact_status(candidate) = 'committed' THEN
            RETURN candidate;
        END IF;
    END LOOP;
    RETURN pg_snapshot_xmax(snap);
END;
$$;
