-- Floodgate's PostgresStore: its table and write function (createTable: false).
CREATE TABLE IF NOT EXISTS "floodgate_state" (
  key text COLLATE "C" PRIMARY KEY,
  value text NOT NULL,
  version bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS "floodgate_state_expires_at" ON "floodgate_state" (expires_at);
-- writes: a JSON array of [key, version read (0: no row), new value (null: delete), ms to keep it, new version].
CREATE OR REPLACE FUNCTION "floodgate_state_write1"(writes text) RETURNS void LANGUAGE plpgsql AS $fg$
DECLARE
  now_ms bigint := floor(extract(epoch from clock_timestamp()) * 1000);
  w jsonb;
  n integer;
BEGIN
  FOR w IN SELECT * FROM jsonb_array_elements(writes::jsonb) LOOP
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
      RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'floodgate: a state changed since it was read';
    END IF;
  END LOOP;
END
$fg$;
