-- A budget per group, account and key: JSON as authz.Budget writes it
-- ({"amount": "12.50", "period": "month"}), NULL for none.
ALTER TABLE groups ADD COLUMN budget TEXT;
ALTER TABLE accounts ADD COLUMN budget TEXT;
ALTER TABLE keys ADD COLUMN budget TEXT;

-- A limit of 0 meant "no limit" and let an account escape its group's;
-- it now allows nothing. Stored zeros keep their old meaning as unset.
UPDATE groups SET requests_per_minute = NULL WHERE requests_per_minute = 0;
UPDATE groups SET tokens_per_minute = NULL WHERE tokens_per_minute = 0;
UPDATE groups SET tokens_per_day = NULL WHERE tokens_per_day = 0;
UPDATE groups SET concurrent_requests = NULL WHERE concurrent_requests = 0;
UPDATE accounts SET requests_per_minute = NULL WHERE requests_per_minute = 0;
UPDATE accounts SET tokens_per_minute = NULL WHERE tokens_per_minute = 0;
UPDATE accounts SET tokens_per_day = NULL WHERE tokens_per_day = 0;
UPDATE accounts SET concurrent_requests = NULL WHERE concurrent_requests = 0;
