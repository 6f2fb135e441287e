-- +goose Up
-- Step log chunks are compressed with lz4 instead of PostgreSQL's default
-- pglz: a million lines of a step cost about 0.06 s of server CPU to
-- compress instead of 0.5-0.9 s (measured on PostgreSQL 15, docs/
-- performance.md), for about a fifth more stored bytes. Only values
-- written from now on use it; rows already stored keep pglz and read as
-- before. A server older than 14, or built without lz4, keeps pglz.
-- +goose StatementBegin
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE step_log_chunks ALTER COLUMN body SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL server was built without lz4: step log chunks keep pglz';
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE step_log_chunks ALTER COLUMN body SET COMPRESSION default';
    END IF;
END
$$;
-- +goose StatementEnd
