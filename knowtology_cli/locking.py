"""The store's write lock: one writer at a time, others wait with a message, then time out."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from .errors import LockedError


class StoreLock:
    """An exclusive ``flock`` on ``<store>/.write.lock``; the holder's pid is written inside.

    The kernel releases the lock when its process dies, so a killed writer never leaves the store
    locked.
    """

    def __init__(self, store_dir: str | Path, *, timeout: float = 60.0,
                 on_wait: Callable[[str], None] | None = None) -> None:
        self.path = Path(store_dir) / ".write.lock"
        self.timeout = timeout
        self.on_wait = on_wait
        self._handle: TextIO | None = None
        self._depth = 0

    @property
    def held(self) -> bool:
        """True while this object holds the lock (``acquire`` nests)."""
        return self._depth > 0

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        deadline = time.monotonic() + self.timeout
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = self._holder()
                if not told and self.on_wait is not None:
                    self.on_wait(f"store is busy (locked by pid {holder}), waiting up to {self.timeout:.0f}s…")
                    told = True
                if time.monotonic() >= deadline:
                    handle.close()
                    raise LockedError(
                        f"store {self.path.parent} is locked by pid {holder}",
                        hint="wait for that command to finish, or raise KNOWTOLOGY_LOCK_TIMEOUT",
                    ) from None
                time.sleep(0.1)
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        self._depth = 1

    def _holder(self) -> str:
        try:
            return self.path.read_text().strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth == 0 and self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
