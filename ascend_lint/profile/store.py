"""A disk-backed event store (SQLite in a temporary directory) so memory stays bounded.

The trace links a device task to the operator that launched it through flow events that can sit
anywhere in the file, so the join cannot be done while streaming. The reader writes the few columns
each event needs here and lets SQLite join and sort them with a fixed page cache.
"""
from __future__ import annotations

import os
import sqlite3
import tempfile
from typing import Dict, Iterator, List, Sequence, Tuple

BATCH = 10_000
CACHE_KIB = 16 * 1024  # SQLite page cache (and sorter memory) per connection

_SCHEMA = """
CREATE TABLE host (id INTEGER PRIMARY KEY, pid INTEGER, tid INTEGER, ts INTEGER, dur INTEGER,
                   kind INTEGER, stack INTEGER, name INTEGER, shape INTEGER);
CREATE TABLE flow_s (cat INTEGER, fid INTEGER, pid INTEGER, tid INTEGER, ts INTEGER);
CREATE TABLE flow_f (cat INTEGER, fid INTEGER, pid INTEGER, tid INTEGER, ts INTEGER);
CREATE TABLE task (pid INTEGER, tid INTEGER, ts INTEGER, dur INTEGER, kind INTEGER, name INTEGER);
CREATE TABLE kernel_info (ts INTEGER, name INTEGER, type TEXT, dtypes TEXT);
"""
_INSERT = {
    "host": "INSERT INTO host (pid, tid, ts, dur, kind, stack, name, shape) VALUES (?,?,?,?,?,?,?,?)",
    "flow_s": "INSERT INTO flow_s VALUES (?,?,?,?,?)",
    "flow_f": "INSERT INTO flow_f VALUES (?,?,?,?,?)",
    "task": "INSERT INTO task VALUES (?,?,?,?,?,?)",
    "kernel_info": "INSERT INTO kernel_info VALUES (?,?,?,?)",
}
FLOW_DEVICE = 0
FLOW_HOST = 1


class EventStore:
    """Buffered inserts, then the joins the reader needs. Use as a context manager."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="ascend-lint-profile-")
        self.db = sqlite3.connect(os.path.join(self._dir.name, "events.db"))
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "temp_store=FILE", f"cache_size=-{CACHE_KIB}",
                       "locking_mode=EXCLUSIVE"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.executescript(_SCHEMA)
        self._pending: Dict[str, List[tuple]] = {table: [] for table in _INSERT}
        self.counts: Dict[str, int] = {table: 0 for table in _INSERT}
        self.rejected = 0  # rows with numbers SQLite cannot hold

    def __enter__(self) -> "EventStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            self._dir.cleanup()

    def add(self, table: str, row: tuple) -> None:
        pending = self._pending[table]
        pending.append(row)
        if len(pending) >= BATCH:
            self._flush(table)

    def rows(self, table: str) -> List[tuple]:
        """The pending-row list of `table`, for callers that append in a tight loop (then `spill()`)."""
        return self._pending[table]

    def spill(self) -> None:
        """Write the tables whose pending rows reached the batch size."""
        for table, pending in self._pending.items():
            if len(pending) >= BATCH:
                self._flush(table)

    def flush(self) -> None:
        for table in self._pending:
            self._flush(table)

    def _flush(self, table: str) -> None:
        pending = self._pending[table]
        if pending:
            try:
                self.db.executemany(_INSERT[table], pending)
                self.counts[table] += len(pending)
            except OverflowError:  # a number beyond 64 bits in a malformed event: insert the others
                for row in pending:
                    try:
                        self.db.execute(_INSERT[table], row)
                        self.counts[table] += 1
                    except OverflowError:
                        self.rejected += 1
            pending.clear()

    # -- joins ---------------------------------------------------------------------------------------
    def link(self) -> None:
        """Index the tables and build `op_device` (device time per launching operator) and `op_parent`."""
        self.flush()
        self.db.executescript("""
            CREATE INDEX host_key ON host (pid, tid, ts, dur);
            CREATE INDEX flow_s_id ON flow_s (cat, fid);
            CREATE INDEX flow_f_key ON flow_f (cat, pid, tid, ts);
            CREATE INDEX flow_f_id ON flow_f (cat, fid);
            CREATE INDEX kernel_info_key ON kernel_info (ts, name);
            CREATE TABLE task_op (task INTEGER, op INTEGER);
            CREATE TABLE reused_id (cat INTEGER, fid INTEGER, PRIMARY KEY (cat, fid));
            INSERT INTO reused_id SELECT cat, fid FROM flow_s GROUP BY cat, fid HAVING COUNT(*) > 1;
            INSERT INTO reused_id SELECT cat, fid FROM flow_f GROUP BY cat, fid HAVING COUNT(*) > 1
                ON CONFLICT DO NOTHING;
            INSERT INTO task_op
                SELECT t.rowid,
                       (SELECT h.id FROM host h WHERE h.pid = s.pid AND h.tid = s.tid AND h.ts = s.ts
                        ORDER BY h.dur LIMIT 1)
                FROM task t
                JOIN flow_f f ON f.cat = 0 AND f.pid = t.pid AND f.tid = t.tid AND f.ts = t.ts
                JOIN flow_s s ON s.cat = 0 AND s.fid = f.fid
                WHERE NOT EXISTS (SELECT 1 FROM reused_id r WHERE r.cat = 0 AND r.fid = f.fid);
            CREATE TABLE op_device (op INTEGER PRIMARY KEY, dev INTEGER, tasks INTEGER, cpu_n INTEGER,
                                    cpu_dur INTEGER, cpu_name INTEGER, cpu_type TEXT, cpu_dtypes TEXT,
                                    d2h_n INTEGER, d2h_dur INTEGER, h2d_n INTEGER, h2d_dur INTEGER);
            INSERT INTO op_device
                SELECT o.op, SUM(t.dur), COUNT(*),
                       SUM(t.kind = 1), SUM(CASE WHEN t.kind = 1 THEN t.dur ELSE 0 END),
                       MAX(CASE WHEN t.kind = 1 THEN t.name END),
                       MAX(CASE WHEN t.kind = 1 THEN k.type END),
                       MAX(CASE WHEN t.kind = 1 THEN k.dtypes END),
                       SUM(t.kind = 2), SUM(CASE WHEN t.kind = 2 THEN t.dur ELSE 0 END),
                       SUM(t.kind = 3), SUM(CASE WHEN t.kind = 3 THEN t.dur ELSE 0 END)
                FROM (SELECT DISTINCT task, op FROM task_op WHERE op IS NOT NULL) o
                JOIN task t ON t.rowid = o.task
                LEFT JOIN kernel_info k ON t.kind = 1 AND k.ts = t.ts AND k.name = t.name
                GROUP BY o.op;
            CREATE TABLE op_parent (child INTEGER PRIMARY KEY, parent INTEGER);
            INSERT INTO op_parent
                SELECT child.id, MIN(parent.id)
                FROM flow_s s
                JOIN flow_f f ON f.cat = 1 AND f.fid = s.fid
                JOIN host parent ON parent.pid = s.pid AND parent.tid = s.tid AND parent.ts = s.ts
                JOIN host child ON child.pid = f.pid AND child.tid = f.tid AND child.ts = f.ts
                WHERE s.cat = 1 AND child.id != parent.id
                  AND NOT EXISTS (SELECT 1 FROM reused_id r WHERE r.cat = 1 AND r.fid = s.fid)
                GROUP BY child.id;
            CREATE TABLE flow_parent (id INTEGER PRIMARY KEY);
            INSERT OR IGNORE INTO flow_parent SELECT parent FROM op_parent;
        """)

    def task_totals(self) -> Tuple[int, int, int, int]:
        """(tasks, tasks linked to an operator, device ns, linked device ns)."""
        row = self.db.execute("""
            SELECT COUNT(*), COALESCE(SUM(t.dur), 0),
                   COALESCE(SUM(l.linked), 0), COALESCE(SUM(CASE WHEN l.linked THEN t.dur ELSE 0 END), 0)
            FROM task t LEFT JOIN (SELECT DISTINCT task, 1 AS linked FROM task_op WHERE op IS NOT NULL) l
                 ON l.task = t.rowid""").fetchone()
        return int(row[0]), int(row[2]), int(row[1]), int(row[3])

    def host_rows(self) -> Iterator[Sequence]:
        """Host events in time order (outer before inner), with their device totals and flow parent.

        Columns: id, tid, ts, dur, kind, stack, name, shape, dev, cpu_n, cpu_dur, cpu_name, cpu_type,
        cpu_dtypes, d2h_n, d2h_dur, h2d_n, h2d_dur, parent, is_parent.
        """
        return self.db.execute("""
            SELECT h.id, h.tid, h.ts, h.dur, h.kind, h.stack, h.name, h.shape,
                   d.dev, d.cpu_n, d.cpu_dur, d.cpu_name, d.cpu_type, d.cpu_dtypes,
                   d.d2h_n, d.d2h_dur, d.h2d_n, d.h2d_dur,
                   p.parent, q.id IS NOT NULL
            FROM host h
            LEFT JOIN op_device d ON d.op = h.id
            LEFT JOIN op_parent p ON p.child = h.id
            LEFT JOIN flow_parent q ON q.id = h.id
            ORDER BY h.ts, h.dur DESC""")
