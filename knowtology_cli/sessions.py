"""Read histories on disk (one small JSON file per session, written atomically) and in memory."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .config import validate_name
from .errors import NotFoundError, StoreError
from .stores.base import SessionStore as SessionStoreInterface


class FileSessionStore(SessionStoreInterface):
    """Sessions under ``<store>/sessions/<name>.json``: ``{"collections": {name: {"read": [...]}}}``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _path(self, name: str) -> Path:
        return self.directory / f"{validate_name('session', name)}.json"

    def load(self, name: str) -> dict[str, Any]:
        """The session document (empty if the session does not exist yet)."""
        path = self._path(name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"name": name, "collections": {}}
        except (OSError, ValueError) as exc:
            raise StoreError(f"{path}: unreadable session file ({exc})", hint=f"run `kt session reset {name}`") from exc
        if not isinstance(data, dict):
            raise StoreError(f"{path}: unreadable session file (not a JSON object)", hint=f"run `kt session reset {name}`")
        data.setdefault("collections", {})
        return data

    def read_ids(self, name: str, collection: str) -> list[str]:
        """Chunk ids read in this session and collection, oldest first."""
        return list(self.load(name)["collections"].get(collection, {}).get("read", []))

    def mark_read(self, name: str, collection: str, chunk_ids: Iterable[str]) -> None:
        """Append ids to the history (atomically; concurrent writers serialise on a lock)."""
        ids = list(chunk_ids)
        if not ids:
            return
        with self._locked(name):
            data = self.load(name)
            entry = data["collections"].setdefault(collection, {"read": []})
            known = set(entry["read"])
            entry["read"].extend(i for i in dict.fromkeys(ids) if i not in known)
            data["updated_at"] = time.time()
            data.setdefault("created_at", data["updated_at"])
            self._write(name, data)

    def reset(self, name: str, collection: str | None = None) -> bool:
        """Forget a session's history (one collection, or all); False if there was none."""
        path = self._path(name)
        if not path.exists():
            return False
        with self._locked(name):
            if collection is None:
                path.unlink(missing_ok=True)
            else:
                data = self.load(name)
                data["collections"].pop(collection, None)
                self._write(name, data)
        return True

    def forget_chunks(self, collection: str, chunk_ids: Iterable[str] | None = None) -> None:
        """Take removed chunks (every chunk of ``collection`` when None) out of every session's history."""
        gone = None if chunk_ids is None else set(chunk_ids)
        for name in self.names():
            with self._locked(name):
                data = self.load(name)
                entry = data["collections"].get(collection)
                if entry is None:
                    continue
                if gone is None:
                    del data["collections"][collection]
                else:
                    kept = [i for i in entry.get("read", []) if i not in gone]
                    if len(kept) == len(entry.get("read", [])):
                        continue
                    entry["read"] = kept
                self._write(name, data)

    def names(self) -> list[str]:
        """Every stored session name."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json"))

    def require(self, name: str) -> dict[str, Any]:
        """Load a session that must exist."""
        if not self._path(name).exists():
            raise NotFoundError(f"no session named {name!r}", hint="`kt session list` shows the sessions")
        return self.load(name)

    def _write(self, name: str, data: dict[str, Any]) -> None:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, ensure_ascii=False)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f".{validate_name('session', name)}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


class InMemorySessionStore(SessionStoreInterface):
    """Read histories of this process only (a knowledge base built without a session store)."""

    def __init__(self) -> None:
        self._reads: dict[str, dict[str, list[str]]] = {}

    def load(self, name: str) -> dict[str, Any]:
        return {"name": name, "collections": {c: {"read": list(ids)} for c, ids in self._reads.get(name, {}).items()}}

    def read_ids(self, name: str, collection: str) -> list[str]:
        return list(self._reads.get(name, {}).get(collection, []))

    def mark_read(self, name: str, collection: str, chunk_ids: Iterable[str]) -> None:
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return
        read = self._reads.setdefault(name, {}).setdefault(collection, [])
        known = set(read)
        read.extend(i for i in ids if i not in known)

    def reset(self, name: str, collection: str | None = None) -> bool:
        history = self._reads.get(name)
        if not history:
            return False
        if collection is None:
            del self._reads[name]
            return True
        had = history.pop(collection, None) is not None
        if not history:
            del self._reads[name]
        return had

    def forget_chunks(self, collection: str, chunk_ids: Iterable[str] | None = None) -> None:
        gone = None if chunk_ids is None else set(chunk_ids)
        for name in list(self._reads):
            history = self._reads[name]
            if collection not in history:
                continue
            if gone is None:
                del history[collection]
            else:
                history[collection] = [i for i in history[collection] if i not in gone]
            if not history:
                del self._reads[name]

    def names(self) -> list[str]:
        return sorted(self._reads)


#: The file store's name before the ``SessionStore`` interface existed (kept for existing imports);
#: the interface itself is ``knowtology_cli.stores.base.SessionStore``.
SessionStore = FileSessionStore
