"""Python's sqlite3 module, run plainly and under `pagepilot run`: builds a
~24 MB database from nothing in WAL mode with memory-mapped reads (the
-shm index is a small shared mapping too), joins, aggregates, checks it.

    python3 sqlite_module.py DATABASE
"""
import hashlib
import sqlite3
import sys

ROWS = 60000

con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA page_size = 4096")
print("journal", con.execute("PRAGMA journal_mode = WAL").fetchone()[0])
print("mmap", con.execute("PRAGMA mmap_size = 268435456").fetchone()[0])


def pad(i, n):
    return (format(i * 2654435761 % 1000000007, "x") * 40)[:n]


con.execute("BEGIN")
con.execute("CREATE TABLE a(k INTEGER, grp INTEGER, pad TEXT)")
con.execute("CREATE TABLE b(k INTEGER, v INTEGER, note TEXT)")
con.executemany("INSERT INTO a VALUES (?, ?, ?)", ((i, i * 7919 % 1000, pad(i, 180)) for i in range(1, ROWS + 1)))
con.executemany(
    "INSERT INTO b VALUES (?, ?, ?)",
    ((i * 48271 % ROWS + 1, i % 977, pad(i * 31, 180).upper()) for i in range(1, ROWS + 1)),
)
con.execute("COMMIT")
con.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def show(label, sql):
    for row in con.execute(sql):
        print(label, *row)


# A join with no index, an aggregate, a full scan hashed, then changes.
show("join", "SELECT count(*), sum(a.grp * b.v), sum(length(a.pad) + length(b.note)) FROM a JOIN b ON a.k = b.k")
show("top", "SELECT grp, count(*), avg(k), max(pad) FROM a GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 5")
h = hashlib.sha256()
for row in con.execute("SELECT rowid, * FROM b ORDER BY rowid"):
    h.update(repr(row).encode())
print("scan b", h.hexdigest())
con.execute("BEGIN")
con.execute("UPDATE a SET pad = upper(pad) WHERE k % 11 = 0")
con.execute("DELETE FROM b WHERE v % 7 = 0")
con.execute("COMMIT")
show("check", "PRAGMA integrity_check")
show("after", "SELECT count(*), sum(length(pad)), (SELECT count(*) FROM b), (SELECT sum(v) FROM b) FROM a")
con.close()
