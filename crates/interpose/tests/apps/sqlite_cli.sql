-- Run by the sqlite3 shell, plainly and under `pagepilot run`, on a copy of
-- the seed database: reads go through a shared mapping of the whole file
-- (mmap_size), writes through write(2) and the rollback journal.
PRAGMA mmap_size = 268435456;
SELECT 'before', count(*), sum(grp), sum(length(pad)) FROM a;
-- The second table, ~12 MB, in one transaction: the file doubles while mapped.
BEGIN;
CREATE TABLE b(k INTEGER, v INTEGER, note TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO b SELECT (i * 48271) % 60000 + 1, i % 977, substr(replace(printf('%.*c', 60, 'x'), 'x', lower(hex((i * 40503) % 999999937))), 1, 180) FROM n;
COMMIT;
-- A join with no index (SQLite builds a transient one from a full scan of b).
SELECT 'join', count(*), sum(a.grp * b.v), sum(length(a.pad) + length(b.note)) FROM a JOIN b ON a.k = b.k;
SELECT 'by-group', a.grp % 10, count(*), sum(b.v), min(b.note), max(a.pad)
  FROM a JOIN b ON a.k = b.k GROUP BY 2 ORDER BY 2;
-- An aggregate over every row of a.
SELECT 'top', grp, count(*), avg(k), total(length(pad)) FROM a GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 8;
-- Changes in place, then a check of every page.
BEGIN;
UPDATE a SET pad = upper(substr(pad, 1, 90)) || 'x' || substr(pad, 91) WHERE k % 13 = 0;
DELETE FROM b WHERE v % 5 = 0;
COMMIT;
PRAGMA integrity_check;
SELECT 'after', count(*), sum(length(pad)), (SELECT count(*) FROM b), (SELECT sum(v) FROM b) FROM a;
