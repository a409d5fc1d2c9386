"""dbkit.sqlite.checkpointer: WAL checkpoints on a thread and connection of their own, the writer's automatic
checkpoint kept only as a backstop, and the log rewound while writes go on."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from dbkit.sqlite.bridge import SqliteBridge
from dbkit.sqlite.checkpointer import BACKSTOP_PAGES
from dbkit.sqlite.connection import WAL_AUTOCHECKPOINT_PAGES
from dbkit.sqlite.migrations import Migration, in_transaction, migrate

STEPS = (Migration(1, "items", ("CREATE TABLE items (k INTEGER PRIMARY KEY, v TEXT NOT NULL)",)),)
PAGE = 4096
BACKSTOP = 2000


def _bridge(path: Path, checkpoint_every_s: float = 0.0, backstop: int = BACKSTOP_PAGES) -> SqliteBridge:
    return SqliteBridge(
        path,
        name="ckpt",
        read_connections=1,
        max_pending_writes=4,
        busy_timeout_ms=1000,
        page_size=PAGE,
        checkpoint_every_s=checkpoint_every_s,
        checkpoint_backstop_pages=backstop,
    )


async def _insert(bridge: SqliteBridge, k: int) -> None:
    def job(conn: object) -> None:
        import sqlite3

        assert isinstance(conn, sqlite3.Connection)
        in_transaction(conn, lambda: conn.execute("INSERT INTO items VALUES (?, ?)", (k, "x" * 3000)))

    await bridge.write(job, "insert")


async def _autocheckpoint(bridge: SqliteBridge) -> int:
    return int(await bridge.write(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0], "read"))


async def test_without_a_checkpointer_the_writer_checkpoints_as_usual(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path / "plain.db")
    await bridge.open(lambda conn: migrate(conn, STEPS, now=0))
    try:
        assert bridge.checkpointer is None
        assert await _autocheckpoint(bridge) == WAL_AUTOCHECKPOINT_PAGES
    finally:
        await bridge.close()


async def test_the_checkpointer_copies_the_log_on_its_own_thread(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path / "bg.db", checkpoint_every_s=0.01)
    await bridge.open(lambda conn: migrate(conn, STEPS, now=0))
    try:
        assert await _autocheckpoint(bridge) == BACKSTOP_PAGES  # the writer's own: a backstop only
        assert any(t.name.startswith("ckpt-sqlite-checkpoint") for t in threading.enumerate())
        for k in range(20):
            await _insert(bridge, k)
        checkpointer = bridge.checkpointer
        assert checkpointer is not None
        async with asyncio.timeout(30):
            while True:  # the background checkpoints catch up with everything written (bounded)
                last = checkpointer.last
                if last is not None and last[1] >= 20 and last[2] == last[1]:
                    break
                await asyncio.sleep(0.01)  # polling the checkpointer's last result
    finally:
        await bridge.close()
    assert bridge.checkpointer is None
    assert not any(t.name.startswith("ckpt-sqlite-checkpoint") for t in threading.enumerate())


async def test_under_writes_without_a_pause_the_log_stays_under_the_backstop(tmp_path: Path) -> None:
    # Each insert is one transaction of a 3,000-byte row: about three 4 KiB frames. 3,000 back to back make
    # ~9,000 frames, past a backstop of 2,000; back to back, a write nearly always finds frames the last
    # background checkpoint did not copy, so it is the backstop that rewinds the log (whose file keeps its
    # largest size): it never holds more.
    path = tmp_path / "busy.db"
    bridge = _bridge(path, checkpoint_every_s=0.005, backstop=BACKSTOP)
    await bridge.open(lambda conn: migrate(conn, STEPS, now=0))
    try:
        for k in range(3000):
            await _insert(bridge, k)
        frames = (os.path.getsize(f"{path}-wal") - 32) // (PAGE + 24)  # WAL header, then (header + page)s
        assert frames <= BACKSTOP + 10, frames  # ~9,000 written: rewound (a pause may rewind it sooner)
        checkpointer = bridge.checkpointer
        assert checkpointer is not None and checkpointer.runs > 0
        count = await bridge.read(lambda c: c.execute("SELECT count(*) FROM items").fetchone()[0], "count")
        assert count == 3000
    finally:
        await bridge.close()
