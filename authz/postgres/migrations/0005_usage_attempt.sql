-- Failed attempts of requests Envoy retried on another deployment: one
-- record each, numbered from 1; the request's own record is attempt 0.
ALTER TABLE usage ADD COLUMN attempt integer NOT NULL DEFAULT 0;
