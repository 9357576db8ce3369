-- Change log of the endpoints table, read by the in-process endpoint cache
-- (store/endpoint_cache.go). The triggers append the id of every row that an
-- insert, update or delete touches, whoever writes it: this process, the
-- admin CLI, or sqlite3 by hand. A reader brings its cached copy up to date
-- by re-reading only the rows logged since it last looked. AUTOINCREMENT
-- keeps seq increasing and never reused, also after old rows are pruned, so
-- sqlite_sequence tells how far the log has ever gone.
--
-- A later migration that rebuilds the endpoints table must create these
-- triggers again; the cache refuses to run without them
-- (TestEndpointChangeTriggersInstalled).
CREATE TABLE endpoint_changes (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id TEXT NOT NULL
) STRICT;

CREATE TRIGGER endpoints_log_insert AFTER INSERT ON endpoints BEGIN
    INSERT INTO endpoint_changes (endpoint_id) VALUES (NEW.id);
END;

CREATE TRIGGER endpoints_log_update AFTER UPDATE ON endpoints BEGIN
    INSERT INTO endpoint_changes (endpoint_id) VALUES (NEW.id);
    INSERT INTO endpoint_changes (endpoint_id) SELECT OLD.id WHERE OLD.id <> NEW.id;
END;

CREATE TRIGGER endpoints_log_delete AFTER DELETE ON endpoints BEGIN
    INSERT INTO endpoint_changes (endpoint_id) VALUES (OLD.id);
END;
