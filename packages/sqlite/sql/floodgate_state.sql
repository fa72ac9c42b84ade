-- Floodgate's SqliteStore: its table (createTable: false).
CREATE TABLE IF NOT EXISTS "floodgate_state" (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS "floodgate_state_expires_at" ON "floodgate_state" (expires_at);
