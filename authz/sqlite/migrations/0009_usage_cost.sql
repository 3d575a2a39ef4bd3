-- What each request cost at the price in effect when it was recorded, in
-- billionths of the configured currency (NULL: no price was in effect),
-- and the audio it transcribed and the images it generated.
ALTER TABLE usage ADD COLUMN cost_nanos INTEGER;
ALTER TABLE usage ADD COLUMN audio_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN images INTEGER NOT NULL DEFAULT 0;
