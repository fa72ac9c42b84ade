-- Floodgate's PostgresStore: its table and write function (createTable: false).
CREATE TABLE IF NOT EXISTS "floodgate_state" (
  key text COLLATE "C" PRIMARY KEY,
  value text NOT NULL,
  version bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS "floodgate_state_expires_at" ON "floodgate_state" (expires_at);
-- calls: a JSON array of calls, each a JSON array of its rows to write: [key, version read (0: no row), new value
-- (null: delete), ms to keep it, new version]. Each call is written whole if every row of it still holds the
-- version read (and no call before it in the array writes that row), else not at all; the answer, a row per call
-- in order: whether it was written, or null where another transaction holds a row of it (not tried, not waited for).
CREATE OR REPLACE FUNCTION "floodgate_state_write2"(calls text) RETURNS TABLE (written boolean) LANGUAGE plpgsql AS $fg$
-- A table may have any name, that of a variable below too (a whole-row reference): the names below are the variables.
#variable_conflict use_variable
DECLARE
  now_ms bigint := floor(extract(epoch from clock_timestamp()) * 1000);
  batch jsonb := calls::jsonb;
  held boolean[] := '{}';
  claimed text[] := '{}';
  locked text[];
  one jsonb;
  w jsonb;
  ok boolean;
  n integer;
BEGIN
  IF jsonb_array_length(batch) = 1 THEN
    -- One call: written as it goes; a row that changed undoes it (below). The cheaper way when nothing waits.
    held := '{true}';
  ELSE
    -- The rows the calls write, locked in key order (two statements never wait for each other in a circle), but
    -- those another transaction holds: a call with one of those is not tried (null), the store sends it alone.
    locked := ARRAY(SELECT key FROM "floodgate_state"
      WHERE key = ANY (ARRAY(SELECT r->>0 FROM jsonb_array_elements(batch) b(rows), jsonb_array_elements(b.rows) r))
      ORDER BY key FOR UPDATE SKIP LOCKED);
    FOR one IN SELECT * FROM jsonb_array_elements(batch) LOOP
      SELECT CASE WHEN bool_or(s.version IS NOT NULL AND r->>0 <> ALL (locked)) THEN NULL
        ELSE bool_and(COALESCE(s.version, 0) = (r->>1)::bigint AND r->>0 <> ALL (claimed)) END INTO ok
        FROM jsonb_array_elements(one) r LEFT JOIN LATERAL (SELECT version FROM "floodgate_state" WHERE key = r->>0 LIMIT 1) s ON true;
      held := held || ok;
      IF ok THEN
        claimed := claimed || ARRAY(SELECT r->>0 FROM jsonb_array_elements(one) r);
      END IF;
    END LOOP;
  END IF;
  FOR w IN SELECT r FROM jsonb_array_elements(batch) WITH ORDINALITY b(rows, i), jsonb_array_elements(b.rows) r
      WHERE held[b.i] ORDER BY (r->>0) COLLATE "C" LOOP
    IF (w->>1)::bigint = 0 THEN
      CONTINUE WHEN w->2 = 'null'::jsonb;
      INSERT INTO "floodgate_state" (key, value, version, expires_at)
        VALUES (w->>0, w->>2, (w->>4)::bigint, now_ms + (w->>3)::bigint)
        ON CONFLICT (key) DO NOTHING;
    ELSIF w->2 = 'null'::jsonb THEN
      DELETE FROM "floodgate_state" WHERE key = w->>0 AND version = (w->>1)::bigint;
    ELSE
      UPDATE "floodgate_state" SET value = w->>2, version = (w->>4)::bigint, expires_at = now_ms + (w->>3)::bigint
        WHERE key = w->>0 AND version = (w->>1)::bigint;
    END IF;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
      -- One call whose row changed, or in a batch a row another writer made since the check (where a call read
      -- none): all undone, every call of the statement reads again.
      RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'floodgate: a state changed since it was read';
    END IF;
  END LOOP;
  RETURN QUERY SELECT unnest(held);
END
$fg$;
