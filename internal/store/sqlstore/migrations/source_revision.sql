-- +goose Up
-- A revision that changes with every change to a source, its settings or
-- its webhook secrets, whatever made it (the API, a statement typed in the
-- sqlite3 shell while the orchestrator runs): the orchestrator keeps the
-- sources its webhooks are checked against in memory and reads this one
-- row on every look-up to learn whether they are still current (package
-- sourcecache). SQLite announces no change to another process, so the
-- triggers set the revision in the changing transaction itself;
-- PostgreSQL sends NOTIFY instead (migration source_change_notify). Each
-- change draws a new random 64-bit value rather than adding one, so that
-- a value names one committed state of the three tables: a count could
-- come back to a value already seen with other rows behind it (set back by
-- hand, or the table created again by a migration run down and up). The
-- cache compares values for equality only. SQLite triggers run for each
-- row: a change touches a handful of rows at most.
CREATE TABLE source_revision (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    rev INTEGER NOT NULL
);
INSERT INTO source_revision (id, rev) VALUES (1, random());
-- +goose StatementBegin
CREATE TRIGGER sources_insert_revision AFTER INSERT ON sources
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sources_update_revision AFTER UPDATE ON sources
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER sources_delete_revision AFTER DELETE ON sources
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER source_settings_insert_revision AFTER INSERT ON source_settings
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER source_settings_update_revision AFTER UPDATE ON source_settings
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER source_settings_delete_revision AFTER DELETE ON source_settings
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER source_secrets_insert_revision AFTER INSERT ON source_secrets
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER source_secrets_update_revision AFTER UPDATE ON source_secrets
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER source_secrets_delete_revision AFTER DELETE ON source_secrets
BEGIN UPDATE source_revision SET rev = random(); END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER source_secrets_delete_revision;
DROP TRIGGER source_secrets_update_revision;
DROP TRIGGER source_secrets_insert_revision;
DROP TRIGGER source_settings_delete_revision;
DROP TRIGGER source_settings_update_revision;
DROP TRIGGER source_settings_insert_revision;
DROP TRIGGER sources_delete_revision;
DROP TRIGGER sources_update_revision;
DROP TRIGGER sources_insert_revision;
DROP TABLE source_revision;
