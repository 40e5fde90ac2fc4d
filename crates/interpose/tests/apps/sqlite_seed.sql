-- The database the sqlite3 shell test starts from: table a, ~12 MB,
-- built once without pagepilot and copied for each run.
PRAGMA page_size = 4096;
CREATE TABLE a(k INTEGER, grp INTEGER, pad TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO a SELECT i, (i * 7919) % 1000, substr(replace(printf('%.*c', 60, 'x'), 'x', hex((i * 2654435761) % 1000000007)), 1, 180) FROM n;
COMMIT;
