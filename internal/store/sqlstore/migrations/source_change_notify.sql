-- +goose Up
-- Every change to a source, its settings or its webhook secrets sends
-- NOTIFY kici_sources at commit, whatever made it (the API, another node,
-- a hand-written statement): each node keeps the sources its webhooks
-- look up in memory only while it listens, and drops them on this
-- notification (package sourcecache), so a revoked secret or a disabled
-- source is refused as soon as the change is committed and heard.
-- PostgreSQL folds the notifications of one transaction into one.
-- +goose StatementBegin
CREATE FUNCTION kici_sources_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kici_sources', '');
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER sources_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sources
    FOR EACH STATEMENT EXECUTE FUNCTION kici_sources_changed();
CREATE TRIGGER source_settings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON source_settings
    FOR EACH STATEMENT EXECUTE FUNCTION kici_sources_changed();
CREATE TRIGGER source_secrets_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON source_secrets
    FOR EACH STATEMENT EXECUTE FUNCTION kici_sources_changed();

-- +goose Down
DROP TRIGGER source_secrets_changed ON source_secrets;
DROP TRIGGER source_settings_changed ON source_settings;
DROP TRIGGER sources_changed ON sources;
DROP FUNCTION kici_sources_changed();
