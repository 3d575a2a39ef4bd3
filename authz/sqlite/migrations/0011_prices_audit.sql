-- Prices set through the admin (the config file's are not stored): one
-- per model and From (Unix milliseconds, 0 for always), as JSON.
CREATE TABLE prices (
  model   TEXT    NOT NULL,
  from_ms INTEGER NOT NULL,
  price   TEXT    NOT NULL,
  PRIMARY KEY (model, from_ms)
);

-- Every change an admin made, with the target's JSON before and after.
CREATE TABLE audit (
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  at     INTEGER NOT NULL,
  actor  TEXT    NOT NULL,
  action TEXT    NOT NULL,
  target TEXT    NOT NULL,
  before TEXT,
  after  TEXT
);
CREATE INDEX audit_target ON audit (target, id);
