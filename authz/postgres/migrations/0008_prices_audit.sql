-- Prices set through the admin (the config file's are not stored): one
-- per model and From (Unix milliseconds, 0 for always), as JSON.
CREATE TABLE prices (
  model   text   NOT NULL,
  from_ms bigint NOT NULL,
  price   text   NOT NULL,
  PRIMARY KEY (model, from_ms)
);

-- Every change an admin made, with the target's JSON before and after.
CREATE TABLE audit (
  id     bigserial   PRIMARY KEY,
  at     timestamptz NOT NULL,
  actor  text        NOT NULL,
  action text        NOT NULL,
  target text        NOT NULL,
  before text,
  after  text
);
CREATE INDEX audit_target ON audit (target, id);
