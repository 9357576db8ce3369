-- A version counter of the api_keys table, read by the in-process key cache
-- (store/read_cache.go). The triggers count every insert, update and delete,
-- whoever writes (this process, the admin CLI, sqlite3 by hand), in the
-- writer's own transaction. A reader that finds the counter where its
-- cached copy was taken knows the copy is exact; otherwise it reads the
-- (small) table again. Keys need no change log like endpoint_changes: there
-- are few of them and they change rarely (lastUsedAt at most once a minute
-- per key).
--
-- A later migration that rebuilds api_keys must create these triggers
-- again; the cache refuses to run without them.
CREATE TABLE table_versions (
    name    TEXT PRIMARY KEY,
    version INTEGER NOT NULL
) STRICT;

INSERT INTO table_versions (name, version) VALUES ('api_keys', 0);

CREATE TRIGGER api_keys_version_insert AFTER INSERT ON api_keys BEGIN
    UPDATE table_versions SET version = version + 1 WHERE name = 'api_keys';
END;

CREATE TRIGGER api_keys_version_update AFTER UPDATE ON api_keys BEGIN
    UPDATE table_versions SET version = version + 1 WHERE name = 'api_keys';
END;

CREATE TRIGGER api_keys_version_delete AFTER DELETE ON api_keys BEGIN
    UPDATE table_versions SET version = version + 1 WHERE name = 'api_keys';
END;
