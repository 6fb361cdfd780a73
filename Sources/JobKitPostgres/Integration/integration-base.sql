-- The static part of `pushctl integrate postgres`: the tables of rejects and backfill progress and the helper
-- functions every mapping uses. IntegrationSQL (IntegrationSQL.swift) puts the push schema's quoted name where
-- @push_schema@ stands, and writes the rest, which depends on the mapping, after it.
-- diary-push: the app's own tables mirrored into the push schema @push_schema@ (pushctl integrate postgres).
-- Idempotent: apply it again after changing the mapping; pushctl integrate postgres --drop removes it.
BEGIN;
CREATE TABLE IF NOT EXISTS @push_schema@.integration_rejects (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    app_table  text NOT NULL,
    operation  text NOT NULL,
    error      text NOT NULL
);
-- Which row: the user's id, for a device also its token, masked (a reject of an older version has none).
ALTER TABLE @push_schema@.integration_rejects ADD COLUMN IF NOT EXISTS row_key text;
CREATE TABLE IF NOT EXISTS @push_schema@.integration_progress (
    kind       text PRIMARY KEY,
    next_block bigint NOT NULL DEFAULT 0,
    rows       bigint NOT NULL DEFAULT 0,
    done       boolean NOT NULL DEFAULT false
);
-- Reading any row, the bad ones too: a JSON column that holds no JSON, a flag that is no boolean, read as
-- NULL; a token masked as the logs mask it (the first 8 characters at most, a third of a short one).
CREATE OR REPLACE FUNCTION @push_schema@.integration_jsonb(v text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN RETURN v::jsonb; EXCEPTION WHEN OTHERS THEN RETURN NULL; END
$fn$;
CREATE OR REPLACE FUNCTION @push_schema@.integration_flag(v text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN RETURN v::boolean; EXCEPTION WHEN OTHERS THEN RETURN NULL; END
$fn$;
CREATE OR REPLACE FUNCTION @push_schema@.integration_mask(v text) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $fn$
SELECT left(v, least(8, length(v) / 3)) || '…(' || length(v) || ')'
$fn$;
