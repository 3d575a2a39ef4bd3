-- Records whose token counts the gateway estimated: the exchange consumed
-- tokens (it broke off, or the provider sent no usage) but the provider
-- never reported them.
ALTER TABLE usage ADD COLUMN estimated boolean NOT NULL DEFAULT false;
