-- What each request cost at the price in effect when it was recorded, in
-- billionths of the configured currency (NULL: no price was in effect),
-- and the audio it transcribed and the images it generated.
ALTER TABLE usage ADD COLUMN cost_nanos bigint;
ALTER TABLE usage ADD COLUMN audio_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN images bigint NOT NULL DEFAULT 0;
