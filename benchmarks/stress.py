"""Crash and concurrency harness: SIGKILL ``kt ingest`` / ``kt build`` / ``kt rm`` at random moments, then audit.

``python -m benchmarks.stress [--trials 20] [--seed 1] [--only ingest,build,...]`` (also
``make stress``). Every trial runs the real ``kt`` in a subprocess on a scratch store (hash
embedder; the fake LLM server for LLM builds), kills it at a random moment, and then checks:

* the store opens and ``kt status --json`` answers;
* LanceDB rows == distinct chunk ids (no duplicates) == status chunks == mapped + unmapped;
* every mapping points at a stored chunk and a leaf, every category's chunk_count equals the
  mappings under it, no empty categories;
* every stored row carries the content hash of some version of its input (no torn rows);
* after a killed ``kt rm``, the chunks readers see (rows, mappings, ``kt status``) are exactly the
  old set or exactly the new one, never a mix.

Then it re-runs the command to completion and checks that nothing was lost (every expected chunk
present with its current content hash, nothing extra after ``--prune``), that keyword search works
(full-text index present), that a build maps every chunk, and that no LLM batch answered before the
kill was paid for again. The figures table ends with trials, failures, rows lost, duplicate ids and
repeated LLM calls, all expected to be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KT = [sys.executable, "-m", "knowtology_cli"]
WORDS = ("refund shipping warehouse invoice pallet courier return damaged parcel tracking customer "
         "supplier contract payroll holiday laptop password incident outage database replica backup "
         "deploy rollback pricing discount coupon loyalty freezer perishable allergen audit").split()


# ---------------------------------------------------------------------------------------------
# corpus
# ---------------------------------------------------------------------------------------------
def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_corpus(root: Path, *, rows: int = 2400, docs: int = 24, files: int = 6, version: int = 1,
                 seed: int = 0) -> None:
    """JSONL chunk files plus Markdown documents; ``version`` 2 changes, drops and adds some."""
    rng = random.Random(seed)
    if root.exists():
        shutil.rmtree(root)
    (root / "docs").mkdir(parents=True)
    per_file = rows // files
    for f in range(files):
        lines = []
        for i in range(per_file):
            n = f * per_file + i
            if version == 2 and n % 10 == 3:
                continue  # dropped in v2 (pruned)
            text = f"Row {n}. " + " ".join(_sentence(rng, 12) for _ in range(3))
            if version == 2 and n % 10 == 7:
                text += " Revised in version two."
            lines.append(json.dumps({"id": f"r-{n}", "text": text, "doc_id": f"doc-{n // 8}",
                                     "metadata": {"file": f, "n": n}}))
        if version == 2:
            lines += [json.dumps({"id": f"v2-{f}-{i}", "text": "New in v2. " + _sentence(rng, 20)}) for i in range(40)]
        (root / f"part-{f}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for d in range(docs):
        body = [f"# Handbook page {d}"]
        for s in range(6):
            body.append(f"## Section {s}\n\n" + " ".join(_sentence(rng, 15) for _ in range(8)))
        if version == 2 and d % 4 == 1:
            body.append("## Added in v2\n\n" + _sentence(rng, 30))
        (root / "docs" / f"page-{d}.md").write_text("\n\n".join(body) + "\n", encoding="utf-8")


def expected_rows(root: Path, only: Iterable[str] = ()) -> dict[str, str]:
    """chunk_id -> content hash that a complete ingest of ``root`` (or of ``only`` its parts) must hold."""
    from knowtology_cli.ingest import Source, read_inputs

    parts = [str(root / p) for p in only] or [str(root)]
    batch = read_inputs(parts, sources={root.name: Source(root.name, str(root.resolve()))})
    if batch.problems:
        raise RuntimeError(f"stress corpus is invalid: {batch.problems[0]}")
    return {c.chunk_id: c.content_hash for c in batch.chunks}


# ---------------------------------------------------------------------------------------------
# running and killing kt
# ---------------------------------------------------------------------------------------------
def kt_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
    env.update(LANCEDB_LOG="error", LANCE_LOG="error", PYTHONUNBUFFERED="1", KNOWTOLOGY_LOCK_TIMEOUT="120")
    env.update(extra or {})
    return env


def run_kt(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*KT, *args], capture_output=True, text=True, env=env or kt_env(), timeout=timeout)


@dataclass
class Killed:
    """What happened to a command we tried to kill."""

    returncode: int
    killed: bool
    seconds: float
    stderr: str
    stdout: str = ""


def run_and_kill(args: list[str], kill_at: float, *, sig: int = signal.SIGKILL,
                 env: dict[str, str] | None = None, timeout: float = 600,
                 when: Callable[[], bool] | None = None) -> Killed:
    """Start ``kt args`` and send ``sig`` after ``kill_at`` seconds (unless it finished first).

    With ``when``, the signal goes as soon as ``when()`` is true instead (polled every 5 ms;
    ``kill_at`` is then the longest wait), e.g. once the command has visibly started writing.
    """
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as err, tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([*KT, *args], stdout=out, stderr=err, env=env or kt_env(), start_new_session=True)
        killed = False
        try:
            if when is None:
                proc.wait(timeout=kill_at)
            else:
                while proc.poll() is None:
                    if when() or time.monotonic() - started > kill_at:
                        raise subprocess.TimeoutExpired(proc.args, kill_at)
                    time.sleep(0.005)
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)
            killed = True
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"kt {' '.join(args)} ignored signal {sig}") from None
        err.seek(0)
        out.seek(0)
        return Killed(proc.returncode, killed, time.monotonic() - started, err.read(), out.read())


# ---------------------------------------------------------------------------------------------
# auditing a store
# ---------------------------------------------------------------------------------------------
@dataclass
class Audit:
    """Invariant violations and counts found in one store."""

    problems: list[str] = field(default_factory=list)
    rows: int = 0
    duplicate_ids: int = 0
    rows_lost: int = 0
    extra_rows: int = 0
    unmapped: int = 0
    orphan_mappings: int = 0


def audit_store(store: Path, collection: str = "default", *, expected: dict[str, str] | None = None,
                versions: Iterable[dict[str, str]] = (), complete_tree: bool = False,
                keyword: str | None = None, cli_status: bool = True,
                states: list[set[str]] | None = None) -> Audit:
    """Check the invariants listed in the module docstring; ``expected`` also checks nothing was lost.

    ``cli_status=False`` asks the library for the status instead of a ``kt status`` subprocess;
    ``states`` are the id sets the store may hold (old or new), rows and mappings alike.
    """
    from knowtology_cli.kb import KnowledgeBase
    from knowtology_cli.stores.lance import LanceVectorStore

    out = Audit()
    if cli_status:
        status = run_kt(["status", "--store", str(store), "--json"])
        if status.returncode != 0:
            out.problems.append(f"kt status failed: {status.stderr.strip()[-300:]}")
            return out
        report = {c["name"]: c for c in json.loads(status.stdout)["collections"]}
    kb = KnowledgeBase.open(store)
    try:
        if not cli_status:
            report = {c.name: c.model_dump() for c in kb.status().collections}
        if kb.tree.get_collection(collection) is None:
            if expected:
                out.rows_lost = len(expected)
                out.problems.append("collection missing")
            return out
        backend = kb.vectors.backend_for(collection)
        ds = backend.dataset(collection) if isinstance(backend, LanceVectorStore) else None
        if ds is not None:
            table = ds.to_table(columns=["chunk_id", "content_hash"])
            ids = table.column("chunk_id").to_pylist()
            hashes = dict(zip(ids, table.column("content_hash").to_pylist()))
        else:
            fp = kb.vectors.fingerprints(collection)
            ids, hashes = list(fp), {i: h for i, (h, _) in fp.items()}
        out.rows = len(ids)
        counts = Counter(ids)
        out.duplicate_ids = sum(n - 1 for n in counts.values() if n > 1)
        if out.duplicate_ids:
            out.problems.append(f"{out.duplicate_ids} duplicate chunk ids, e.g. {next(i for i, n in counts.items() if n > 1)!r}")
        row = report.get(collection)
        if row is None:
            out.problems.append("status does not list the collection")
        else:
            if row["chunks"] != len(counts) or row["chunks"] != out.rows:
                out.problems.append(f"status chunks {row['chunks']} != Lance rows {out.rows} / ids {len(counts)}")
            if row["mapped"] + row["unmapped"] != row["chunks"]:
                out.problems.append(f"mapped {row['mapped']} + unmapped {row['unmapped']} != chunks {row['chunks']}")
            out.unmapped = row["unmapped"]
        known = [*versions, *([expected] if expected else [])]
        if known:
            torn = [i for i, h in hashes.items() if not any(v.get(i) == h for v in known)]
            if torn:
                out.problems.append(f"{len(torn)} rows hold content no input version had, e.g. {torn[0]!r}")
        # tree ↔ mappings
        mappings = kb.tree.mappings(collection)
        nodes = kb.tree.nodes(collection)
        orphans = [m.chunk_id for m in mappings if m.chunk_id not in counts]
        out.orphan_mappings = len(orphans)
        if orphans:
            out.problems.append(f"{len(orphans)} mappings point at missing chunks, e.g. {orphans[0]!r}")
        paths = {n.path: n for n in nodes}
        parents = {n.path.rsplit("/", 1)[0] for n in nodes if "/" in n.path}
        under: Counter[str] = Counter()
        for m in mappings:
            if m.path not in paths:
                out.problems.append(f"mapping {m.chunk_id!r} points at unknown path {m.path!r}")
                continue
            if m.path in parents:
                out.problems.append(f"mapping {m.chunk_id!r} points at non-leaf {m.path!r}")
            segments = m.path.split("/")
            for depth in range(1, len(segments) + 1):
                under["/".join(segments[:depth])] += 1
        bad_counts = [n.path for n in nodes if n.chunk_count != under.get(n.path, 0)]
        if bad_counts:
            out.problems.append(f"{len(bad_counts)} categories have wrong chunk_count, e.g. {bad_counts[0]!r}")
        if any(n.chunk_count == 0 for n in nodes):
            out.problems.append("empty categories left in the tree")
        if expected is not None:
            lost = [i for i, h in expected.items() if hashes.get(i) != h]
            out.rows_lost = len(lost)
            if lost:
                out.problems.append(f"{len(lost)} expected chunks missing or stale, e.g. {lost[0]!r}")
            extra = [i for i in counts if i not in expected]
            out.extra_rows = len(extra)
            if extra:
                out.problems.append(f"{len(extra)} chunks that should have been pruned, e.g. {extra[0]!r}")
        if complete_tree and row is not None and (row["unmapped"] or row["mapped"] != row["chunks"] or row["stale"]):
            out.problems.append(f"tree incomplete after re-run: {row['mapped']} mapped, {row['unmapped']} unmapped")
        if states:
            mapped_ids = {m.chunk_id for m in mappings}
            if set(counts) not in states:
                sizes = " or ".join(str(len(st)) for st in states)
                out.problems.append(f"a mix of old and new: {len(counts)} rows, expected {sizes}")
            elif mapped_ids and mapped_ids != set(counts):
                out.problems.append(f"mappings ({len(mapped_ids)}) and rows ({len(counts)}) disagree")
            if row is not None and row["chunks"] != len(counts):
                out.problems.append(f"status shows {row['chunks']} chunks, the table holds {len(counts)}")
        if keyword and not kb.grep(keyword, collection=collection).hits:
            out.problems.append(f"keyword search for {keyword!r} finds nothing (full-text index missing?)")
    finally:
        kb.close()
    return out


def llm_repeats(store: Path) -> int:
    """Logged LLM calls answered OK whose prompt had already been answered OK (a batch paid twice)."""
    import sqlite3

    path = store / "tree.db"
    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT prompt_hash, COUNT(*) FROM llm_calls WHERE status = 'ok' AND prompt_hash IS NOT NULL"
                            " GROUP BY prompt_hash HAVING COUNT(*) > 1").fetchall()
    except sqlite3.DatabaseError:
        return 0
    finally:
        conn.close()
    return sum(n - 1 for _, n in rows)


# ---------------------------------------------------------------------------------------------
# trials
# ---------------------------------------------------------------------------------------------
@dataclass
class Trial:
    scenario: str
    number: int
    kill_at: float
    killed: bool
    returncode: int
    problems: list[str] = field(default_factory=list)
    rows_lost: int = 0
    duplicate_ids: int = 0
    repeated_llm_calls: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.problems)


@dataclass
class Workspace:
    """Corpora and template stores shared by the trials of one run."""

    root: Path
    v1: Path
    v2: Path
    expected_v1: dict[str, str]
    expected_v2: dict[str, str]
    expected_rm: dict[str, str] = field(default_factory=dict)  # v1 without docs/ and part-0.jsonl
    templates: dict[str, Path] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    llm_url: str | None = None
    notes: list[str] = field(default_factory=list)

    def fresh_store(self, name: str, template: str | None = None) -> Path:
        store = self.root / "stores" / name
        if store.exists():
            shutil.rmtree(store)
        store.parent.mkdir(parents=True, exist_ok=True)
        if template:
            shutil.copytree(self.template(template), store)
        return store

    def template(self, name: str) -> Path:
        """A finished store to start trials from (built on first use): v1, v1-built, v2-old-tree."""
        if name in self.templates:
            return self.templates[name]
        base, step = {
            "v1": (None, ["ingest", str(self.v1), "--embedder", "hash"]),
            "v1-built": ("v1", ["build", "--builder", "cluster"]),
            # v2 is the same corpus moved to another folder: --replace points the source at it
            "v2-old-tree": ("v1-built", ["ingest", str(self.v2), "--prune", "--replace"]),
        }[name]
        store = self.root / "templates" / name
        if base:
            shutil.copytree(self.template(base), store)
        done = run_kt([*step, "--store", str(store)])
        if done.returncode != 0:
            raise RuntimeError(f"preparing {name}: kt {' '.join(step)} failed: {done.stderr[-500:]}")
        self.templates[name] = store
        return store


def prepare(root: Path, *, rows: int = 1600, docs: int = 24, say: Callable[[str], None] = print) -> Workspace:
    """Write both corpus versions; template stores are built when a scenario first needs them."""
    v1, v2 = root / "v1" / "corpus", root / "v2" / "corpus"  # same directory name: file names match
    write_corpus(v1, rows=rows, docs=docs, version=1)
    write_corpus(v2, rows=rows, docs=docs, version=2)
    ws = Workspace(root, v1, v2, expected_rows(v1), expected_rows(v2))
    gone = expected_rows(v1, only=["docs", "part-0.jsonl"])
    ws.expected_rm = {i: h for i, h in ws.expected_v1.items() if i not in gone}
    say(f"corpus: v1 {len(ws.expected_v1)} chunks, v2 {len(ws.expected_v2)} chunks")
    return ws


def _measure(ws: Workspace, key: str, args: list[str], template: str | None, env: dict[str, str] | None = None) -> float:
    if key not in ws.durations:
        store = ws.fresh_store("measure", template)
        started = time.monotonic()
        done = run_kt([*args, "--store", str(store)], env=env)
        if done.returncode != 0:
            raise RuntimeError(f"kt {' '.join(args)} failed: {done.stderr[-500:]}")
        ws.durations[key] = time.monotonic() - started
    return ws.durations[key]


def _trial(ws: Workspace, scenario: str, number: int, rng: random.Random, *, args: list[str], rerun: list[list[str]],
           template: str | None, expected: dict[str, str] | None, versions: list[dict[str, str]],
           complete_tree: bool, env: dict[str, str] | None = None, sig: int = signal.SIGKILL,
           count_llm: bool = False, states: list[set[str]] | None = None) -> Trial:
    duration = _measure(ws, scenario, args, template, env)
    kill_at = round(rng.uniform(0.4, duration * 0.95), 2)  # the last 5% is mostly interpreter exit
    store = ws.fresh_store(f"{scenario}-{number}", template)
    before_calls = llm_ok_hashes(store) if count_llm else set()
    outcome = run_and_kill([*args, "--store", str(store)], kill_at, sig=sig, env=env)
    trial = Trial(scenario, number, kill_at, outcome.killed, outcome.returncode)
    if not outcome.killed:  # the measurement ran slow (a loaded machine): aim earlier from now on
        ws.durations[scenario] = min(duration, outcome.seconds)
    if sig == signal.SIGINT and outcome.killed:
        # -2 (died of SIGINT after printing the message) is what a shell also reports as 130
        if outcome.returncode not in (0, 130, -signal.SIGINT):
            trial.problems.append(f"SIGINT exit code {outcome.returncode}: {outcome.stderr.strip()[-300:]}")
        finished = bool(outcome.stdout.strip())  # the summary was printed: Ctrl-C hit the exit itself
        if outcome.returncode != 0 and "Interrupted" not in outcome.stderr and not finished:
            trial.problems.append(f"SIGINT (exit {outcome.returncode}) without the 'Interrupted' message")
        if "Traceback" in outcome.stderr:
            trial.problems.append("SIGINT printed a traceback")
    elif not outcome.killed and outcome.returncode != 0:
        trial.problems.append(f"command failed on its own: {outcome.stderr.strip()[-300:]}")
    after_kill = audit_store(store, versions=versions, states=states)
    trial.problems += [f"after kill: {p}" for p in after_kill.problems]
    trial.duplicate_ids = after_kill.duplicate_ids
    paid_before_rerun = llm_ok_hashes(store) - before_calls if count_llm else set()
    for step in rerun:
        done = run_kt([*step, "--store", str(store)], env=env)
        if done.returncode != 0:
            trial.problems.append(f"re-run kt {step[0]} failed: {done.stderr.strip()[-300:]}")
            break
    final = audit_store(store, expected=expected, versions=versions, complete_tree=complete_tree,
                        keyword=rng.choice(WORDS), cli_status=False)
    trial.problems += [f"after re-run: {p}" for p in final.problems]
    trial.rows_lost = final.rows_lost
    trial.duplicate_ids = max(trial.duplicate_ids, final.duplicate_ids)
    if count_llm:
        trial.repeated_llm_calls = llm_repeats(store) + _repaid(store, paid_before_rerun)
        if trial.repeated_llm_calls:
            trial.problems.append(f"{trial.repeated_llm_calls} LLM batches paid twice")
    shutil.rmtree(store, ignore_errors=True)
    return trial


def llm_ok_hashes(store: Path) -> set[str]:
    import sqlite3

    path = store / "tree.db"
    if not path.exists():
        return set()
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT prompt_hash FROM llm_calls WHERE status = 'ok'") if r[0]}
    except sqlite3.DatabaseError:
        return set()
    finally:
        conn.close()


def _repaid(store: Path, paid: set[str]) -> int:
    """Calls after the kill that re-sent a prompt already answered and logged before it."""
    import sqlite3

    if not paid:
        return 0
    conn = sqlite3.connect(store / "tree.db")
    try:
        rows = conn.execute("SELECT prompt_hash, status FROM llm_calls ORDER BY id").fetchall()
    finally:
        conn.close()
    seen: Counter[str] = Counter(h for h, s in rows if h in paid and s == "ok")
    return sum(n - 1 for n in seen.values() if n > 1)


SCENARIOS = ("ingest", "ingest-prune", "build", "build-incremental", "rm", "build-llm", "sigint")


def llm_builder_available() -> bool:
    try:
        import importlib

        importlib.import_module("knowtology_cli.builders.llm_builder")
        return True
    except ImportError:
        return False


def run_crash_trials(ws: Workspace, scenario: str, trials: int, rng: random.Random,
                     say: Callable[[str], None] = print) -> list[Trial]:
    """``trials`` kill trials of one scenario."""
    v1, v2 = ws.expected_v1, ws.expected_v2
    ingest_v1 = ["ingest", str(ws.v1), "--embedder", "hash"]
    ingest_v2 = ["ingest", str(ws.v2), "--prune", "--replace"]
    rm_v1 = ["rm", str(ws.v1 / "docs"), str(ws.v1 / "part-0.jsonl"), "--yes"]
    specs: dict[str, dict[str, Any]] = {
        "ingest": dict(args=ingest_v1, rerun=[ingest_v1], template=None, expected=v1, versions=[v1],
                       complete_tree=False),
        "ingest-prune": dict(args=ingest_v2, rerun=[ingest_v2, ["build", "--builder", "cluster"]], template="v1-built",
                             expected=v2, versions=[v1, v2], complete_tree=True),
        "build": dict(args=["build", "--builder", "cluster", "--rebuild"], rerun=[["build", "--builder", "cluster"]],
                      template="v1", expected=v1, versions=[v1], complete_tree=True),
        "build-incremental": dict(args=["build", "--builder", "cluster"], rerun=[["build", "--builder", "cluster"]],
                                  template="v2-old-tree", expected=v2, versions=[v2], complete_tree=True),
        "rm": dict(args=rm_v1, rerun=[rm_v1, ["build", "--builder", "cluster"]], template="v1-built",
                   expected=ws.expected_rm, versions=[v1], complete_tree=True,
                   states=[set(v1), set(ws.expected_rm)]),
    }
    if scenario == "build-llm":
        if ws.llm_url is None:
            return []
        env = kt_env({"OPENAI_BASE_URL": ws.llm_url + "/v1", "OPENAI_API_KEY": "sk-stress-not-a-real-key"})
        build = ["build", "--builder", "llm", "--llm", "openai:fake-stress"]
        spec = dict(args=build, rerun=[build], template="v1", expected=v1, versions=[v1], complete_tree=True,
                    env=env, count_llm=True)
    elif scenario == "sigint":
        spec = dict(args=ingest_v1, rerun=[ingest_v1], template=None, expected=v1, versions=[v1],
                    complete_tree=False, sig=signal.SIGINT)
    else:
        spec = specs[scenario]
    out = []
    for n in range(trials):
        if scenario == "sigint" and n % 2:
            spec = {**specs["build"], "sig": signal.SIGINT}
        trial = _trial(ws, scenario, n, rng, **spec)
        out.append(trial)
        flag = "FAIL " + "; ".join(trial.problems) if trial.failed else "ok"
        say(f"  {scenario} #{n:<2} kill at {trial.kill_at:5.2f}s {'(finished first)' if not trial.killed else '':17} {flag}")
    return out


# ---------------------------------------------------------------------------------------------
# concurrency
# ---------------------------------------------------------------------------------------------
READER = r"""
import json, sys, time, random
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.errors import KnowtologyError
store, seconds = sys.argv[1], float(sys.argv[2])
WORDS = json.loads(sys.argv[3])
rng = random.Random(0)
ops = errors = 0
bad = []
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    kb = KnowledgeBase.open(store)
    try:
        hits = kb.search(rng.choice(WORDS), k=5).hits
        kw = kb.grep(rng.choice(WORDS), k=5).hits
        ids = [h.chunk_id for h in hits + kw]
        if ids:
            got = kb.read(ids, session="reader", force=True).chunks
            if any(c.text is None or not c.text for c in got):
                bad.append("empty text")
        kb.browse()
        kb.status()
        ops += 1
    except KnowtologyError as exc:  # a clear error is allowed, corruption is not
        errors += 1
        bad.append(f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        errors += 1
        bad.append(f"CRASH {type(exc).__name__}: {exc}")
    finally:
        kb.close()
print(json.dumps({"ops": ops, "errors": errors, "problems": bad[:5]}))
"""


def run_concurrency(ws: Workspace, rounds: int, say: Callable[[str], None] = print) -> list[Trial]:
    """Two ingests at once; builds while readers search and read; a lock that times out."""
    out: list[Trial] = []
    for n in range(rounds):
        # 1. two ingests into one collection at once (disjoint halves of v1) -> union, no duplicates
        store = ws.fresh_store(f"conc-ingest-{n}")
        halves = [ws.root / f"half-{i}" for i in range(2)]
        if not halves[0].exists():
            files = sorted(p for p in ws.v1.rglob("*") if p.is_file())
            for i, half in enumerate(halves):
                for p in files[i::2]:
                    target = half / p.relative_to(ws.v1)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(p, target)
        procs = [subprocess.Popen([*KT, "ingest", str(h), "--embedder", "hash", "--store", str(store), "--json"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kt_env())
                 for h in halves]
        results = [p.communicate(timeout=600) for p in procs]
        trial = Trial("concurrent-ingest", n, 0.0, False, max(p.returncode for p in procs))
        for p, (_, stderr) in zip(procs, results):
            if p.returncode != 0:
                trial.problems.append(f"an ingest failed: {stderr.strip()[-300:]}")
        expected = {k: v for h in halves for k, v in expected_rows(h).items()}
        audit = audit_store(store, expected=expected, keyword="refund")
        trial.problems += audit.problems
        trial.rows_lost, trial.duplicate_ids = audit.rows_lost, audit.duplicate_ids
        waited = sum("busy" in stderr for _, stderr in results)
        say(f"  concurrent ingest #{n}: {'ok' if not trial.failed else 'FAIL ' + '; '.join(trial.problems)}"
            f" ({waited} waited on the lock)")
        out.append(trial)

        # 2. builds (full and incremental) while two readers search / grep / read / browse
        store = ws.fresh_store(f"conc-build-{n}", "v1-built")
        readers = [subprocess.Popen([sys.executable, "-c", READER, str(store), "12", json.dumps(WORDS)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=kt_env()) for _ in range(2)]
        trial = Trial("build-while-reading", n, 0.0, False, 0)
        deadline = time.monotonic() + 10
        builds = 0
        while time.monotonic() < deadline:
            args = ["build", "--builder", "cluster"] + (["--rebuild"] if builds % 2 == 0 else [])
            done = run_kt([*args, "--store", str(store)])
            builds += 1
            if done.returncode != 0:
                trial.problems.append(f"build failed: {done.stderr.strip()[-300:]}")
                break
        for r in readers:
            stdout, stderr = r.communicate(timeout=120)
            try:
                stats = json.loads(stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                trial.problems.append(f"reader crashed: {stderr.strip()[-300:]}")
                continue
            if stats["errors"] or not stats["ops"]:
                trial.problems.append(f"reader: {stats['ops']} ops, {stats['errors']} errors {stats['problems']}")
        audit = audit_store(store, expected=ws.expected_v1, complete_tree=True)
        trial.problems += audit.problems
        trial.rows_lost, trial.duplicate_ids = audit.rows_lost, audit.duplicate_ids
        say(f"  build while reading #{n}: {builds} builds, "
            + ("ok" if not trial.failed else "FAIL " + "; ".join(trial.problems)))
        out.append(trial)

    # 3. a held lock: the waiter says who holds it, then times out with exit 1
    store = ws.fresh_store("conc-lock", "v1")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom knowtology_cli.locking import StoreLock\n"
                               "lock = StoreLock(sys.argv[1]); lock.acquire(); print('held', flush=True);"
                               " time.sleep(30)", str(store)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    holder.stdout.readline()
    done = run_kt(["ingest", str(ws.v1), "--store", str(store)], env=kt_env({"KNOWTOLOGY_LOCK_TIMEOUT": "1.5"}))
    holder.kill()
    holder.wait()
    trial = Trial("lock-timeout", 0, 0.0, False, done.returncode)
    if done.returncode != 1:
        trial.problems.append(f"expected exit 1, got {done.returncode}")
    if f"locked by pid {holder.pid}" not in done.stderr or "waiting" not in done.stderr:
        trial.problems.append(f"unclear lock message: {done.stderr.strip()[-300:]}")
    say(f"  lock timeout: {'ok' if not trial.failed else 'FAIL ' + '; '.join(trial.problems)}")
    out.append(trial)
    return out


# ---------------------------------------------------------------------------------------------
# the front door
# ---------------------------------------------------------------------------------------------
def start_fake_llm(fail_rate: float = 0.3, latency: float = 0.05) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "knowtology_cli.testing.fake_llm", "--port", "0",
                             "--fail-rate", str(fail_rate), "--latency", str(latency), "--retry-after", "0.05",
                             "--fail-kinds", "rate_limit,server_error,malformed,drop_ids,unknown_ids"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise RuntimeError("fake LLM server did not start")
    return proc, url


def summarize(trials: list[Trial]) -> dict[str, Any]:
    return {
        "trials": len(trials),
        "killed": sum(t.killed for t in trials),
        "failures": sum(t.failed for t in trials),
        "rows_lost": sum(t.rows_lost for t in trials),
        "duplicate_ids": sum(t.duplicate_ids for t in trials),
        "repeated_llm_calls": sum(t.repeated_llm_calls for t in trials),
    }


def table(rows: dict[str, dict[str, Any]]) -> str:
    cols = ["trials", "killed", "failures", "rows_lost", "duplicate_ids", "repeated_llm_calls"]
    head = f"{'scenario':<22}" + "".join(f"{c:>20}" for c in cols)
    lines = [head, "-" * len(head)]
    for name, row in rows.items():
        lines.append(f"{name:<22}" + "".join(f"{row.get(c, '-')!s:>20}" for c in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stress", description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20, help="kill trials per scenario (default 20)")
    ap.add_argument("--rounds", type=int, default=2, help="concurrency rounds (default 2)")
    ap.add_argument("--rows", type=int, default=1000, help="JSONL rows in the stress corpus")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default=",".join((*SCENARIOS, "concurrency")), help="comma-separated scenarios")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else print
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kt-stress-"))
    fake: subprocess.Popen | None = None
    rows: dict[str, dict[str, Any]] = {}
    every: list[Trial] = []
    try:
        ws = prepare(root, rows=args.rows, say=say)
        if "build-llm" in wanted:
            if llm_builder_available():
                fake, ws.llm_url = start_fake_llm()
            else:
                ws.notes.append("build-llm: PENDING — knowtology_cli.builders.llm_builder is not there yet")
        for scenario in [s for s in wanted if s in SCENARIOS]:
            say(f"{scenario}: {args.trials} trials")
            trials = run_crash_trials(ws, scenario, args.trials, rng, say)
            if trials:
                rows[scenario] = summarize(trials)
                every += trials
            else:
                rows[scenario] = {"trials": "pending"}
        if "concurrency" in wanted:
            say(f"concurrency: {args.rounds} rounds")
            trials = run_concurrency(ws, args.rounds, say)
            rows["concurrency"] = summarize(trials)
            every += trials
    finally:
        if fake is not None:
            fake.terminate()
            fake.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"scratch kept in {root}")
    rows["TOTAL"] = summarize(every)
    if args.json:
        print(json.dumps({"scenarios": rows, "notes": ws.notes}, indent=2))
    else:
        print()
        print(table(rows))
        for note in ws.notes:
            print(note)
    total = rows["TOTAL"]
    bad = total["failures"] or total["rows_lost"] or total["duplicate_ids"] or total["repeated_llm_calls"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
