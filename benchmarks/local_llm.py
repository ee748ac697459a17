"""`make test-local-llm`: the LLM path end to end against a real local model (opt-in; not in `make test`).

Sets up the shared local model (../shared/tools/local-llm: Qwen2.5-Coder-0.5B-Instruct on llama.cpp,
OpenAI-compatible), serves it on a free loopback port, ingests sample_corpus/ into a scratch store and
runs the real `kt` executable:

1. ``kt build --builder hybrid --llm openai:qwen2.5-coder-0.5b-instruct`` — must end with 0 unmapped
   chunks and no category name of the kinds validation rejects (checked here independently);
2. ``kt ask`` — must exit 0 only with an answer citing a chunk id it read (exit 3 = it could not
   cite one after a re-ask: reported, allowed);
3. with ``--with-seed`` also the seed's builder (``--builder llm``; hours on two shared cores).

Prints calls, tokens, wall time, names by origin and name routing accuracy, then stops the server.
Exit status 1 when a check fails. ``python -m benchmarks.local_llm --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT.parent / "shared" / "tools" / "local-llm"
MODEL = "openai:qwen2.5-coder-0.5b-instruct"
KT = str(Path(sys.executable).parent / "kt")
QUESTION = "How long does a customer have to report a problem with a perishable item to get a refund?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(["bash", str(TOOLS / "serve.sh"), str(port)], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the local model server stopped: see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(1)
    proc.terminate()
    raise SystemExit(f"the local model server did not start within 300 s: see {log}")


def kt(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([KT, *args], capture_output=True, text=True, env=env, timeout=timeout)


def junk_names(store: Path, env: dict[str, str]) -> list[str]:
    """Names an independent check refuses: chunk ids, file names, markers, no letters, the prompt's example."""
    browse = json.loads(kt("browse", "--depth", "3", "--store", str(store), "--json", env=env, timeout=120).stdout)
    names = [c["name"] for c in browse["children"]]
    bad = []
    for name in names:
        if (re.search(r"[#|›<>`]|\.(md|rst|txt|jsonl)\b|https?://", name) or not re.search(r"[^\W\d_]", name)
                or name.casefold() in {"one line", "...", "returns/refunds/perishables"}):
            bad.append(name)
    return bad


def build(builder: str, store: Path, env: dict[str, str], timeout: float) -> dict:
    started = time.monotonic()
    done = kt("build", "--builder", builder, "--llm", MODEL, "--timeout", str(timeout), "--store", str(store),
              "--json", env=env, timeout=timeout * 40)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return {"builder": builder, "exit": done.returncode, "seconds": round(seconds)}
    report = json.loads(done.stdout)
    from knowtology_cli.bench.build import routing_accuracy
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store)
    routing = {r["level"]: r for r in routing_accuracy(kb, "default")}
    kb.close()
    return {"builder": builder, "exit": 0, "seconds": round(seconds), "calls": report["llm_calls"],
            "tokens_in": report["input_tokens"], "tokens_out": report["output_tokens"], "nodes": report["nodes"],
            "unmapped": report["unmapped"], "names": report["name_origins"], "refused": report["rejected_names"],
            "routing": {lv: (r["routing_accuracy"], r["majority_baseline"]) for lv, r in routing.items()},
            "junk": junk_names(store, env)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.local_llm", description=__doc__.split("\n")[0])
    ap.add_argument("--with-seed", action="store_true", help="also build with the seed's LLM builder (hours)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per LLM call attempt")
    ap.add_argument("--keep", type=Path, default=None, help="keep the stores under this directory")
    args = ap.parse_args(argv)
    if not (TOOLS / "setup.sh").is_file():
        print(f"no local model tools at {TOOLS}: this target needs the shared tools next to the repository",
              file=sys.stderr)
        return 1
    subprocess.run(["bash", str(TOOLS / "setup.sh")], check=True)
    work = Path(args.keep or tempfile.mkdtemp(prefix="kt-local-llm-"))
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = serve(port, work / "server.log")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWTOLOGY_", "OPENAI_", "ANTHROPIC_"))}
    env.update(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", OPENAI_API_KEY="local", LANCEDB_LOG="error",
               LANCE_LOG="error")
    failures: list[str] = []
    try:
        base = work / "base"
        if not base.exists():
            done = kt("ingest", str(ROOT / "sample_corpus"), "--store", str(base), env=env, timeout=3600)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return 1
        rows = []
        for builder in ["hybrid"] + (["llm"] if args.with_seed else []):
            store = work / builder
            shutil.rmtree(store, ignore_errors=True)
            shutil.copytree(base, store)
            print(f"building with {builder} (a minute or more per call on 2 cores)…", file=sys.stderr, flush=True)
            row = build(builder, store, env, args.timeout)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if row["exit"] != 0 or row["unmapped"] or row["junk"]:
                failures.append(f"{builder}: exit {row['exit']}, unmapped {row.get('unmapped')}, "
                                f"junk {row.get('junk')}")
        asked = kt("ask", QUESTION, "--llm", MODEL, "--store", str(work / "hybrid"), "--json", env=env,
                   timeout=args.timeout * 20)
        result = json.loads(asked.stdout) if asked.stdout.strip().startswith("{") else {}
        print(json.dumps({"ask_exit": asked.returncode, "cited": result.get("cited"), "read": result.get("read_ids"),
                          "reasked": result.get("reasked"), "answer": (result.get("answer") or "")[:300]}), flush=True)
        if asked.returncode == 0 and not (result.get("cited") and set(result["cited"]) <= set(result["read_ids"])):
            failures.append("kt ask exited 0 without citing a chunk it read")
        if asked.returncode not in (0, 3):
            failures.append(f"kt ask exited {asked.returncode}: {asked.stderr[-500:]}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
