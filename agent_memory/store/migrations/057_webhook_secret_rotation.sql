-- Webhook signing secrets follow the Standard Webhooks specification (whsec_ + base64 of random
-- bytes; agent_memory/security/webhook_signing.py). `secret_format` says which form an endpoint's
-- current secret has: every endpoint registered so far holds a legacy one (whsec_ + a URL-safe
-- token, signed with the legacy scheme) until its secret is rotated; new endpoints get the
-- standard form.
--
-- A rotation keeps the replaced secret, encrypted like the current one, until
-- `previous_secret_expires_at`: until then each delivery carries a signature under both, so a
-- receiver switches to the new secret at a time of its choosing.
ALTER TABLE public.webhook_endpoints
    ADD COLUMN secret_format text NOT NULL DEFAULT 'legacy' CHECK (secret_format IN ('standard', 'legacy')),
    ADD COLUMN secret_rotated_at timestamptz,
    ADD COLUMN previous_secret_ciphertext bytea,
    ADD COLUMN previous_secret_nonce bytea,
    ADD COLUMN previous_secret_expires_at timestamptz,
    ADD CONSTRAINT webhook_endpoints_previous_secret_whole CHECK (
        (previous_secret_ciphertext IS NULL) = (previous_secret_nonce IS NULL)
        AND (previous_secret_ciphertext IS NULL) = (previous_secret_expires_at IS NULL));
ALTER TABLE public.webhook_endpoints ALTER COLUMN secret_format SET DEFAULT 'standard';
