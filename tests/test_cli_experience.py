"""The CLI as a newcomer meets it (issue 16): the real ``kt`` executable in a subprocess, output to a
pipe (no TTY), ``COLUMNS=60`` and ``NO_COLOR=1`` unless a test says otherwise.

The store is built through the library with a hand-made tree whose names and descriptions are
longer than 60 columns, so what the user sees does not depend on how a builder names things.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

KT = str(Path(sys.executable).parent / "kt")
WIDTH = 60
ANSI = re.compile(r"\x1b\[")

#: (category path, description)
CATEGORIES = [
    ("Returns and Refunds for Perishable Groceries",
     "How customers report spoiled or warm deliveries and get their money back as credit or card refunds"),
    ("Returns and Refunds for Perishable Groceries/Refund Windows",
     "Deadlines for reporting problems with fresh, frozen and pantry products after delivery"),
    ("Returns and Refunds for Perishable Groceries/Refund Payments",
     "Where refund money goes: pantry credit, the original card, or the benefit card that paid"),
    ("Database Operations", "Failover of the primary database and replica promotion during incidents"),
]
CHUNKS = [
    ("win-1", "Refund Windows", "Fresh and frozen food can be reported within 48 hours of delivery for a full refund.",
     "Fresh and frozen food: report within 48 hours of delivery to get a full refund or pantry credit"),
    ("win-2", "Refund Windows", "Pantry goods can be returned within 30 days in their original packaging.",
     "Pantry goods: 30 days in the original packaging"),
    ("pay-1", "Refund Payments", "Customers choose pantry credit or a refund to the original payment method.",
     "Refunds are paid as pantry credit at once or to the original payment method within 5 to 7 business days"),
    ("db-1", "Database Operations", "Promote the replica with pgctl promote when replication lag exceeds 30 seconds.",
     "Promote the replica when replication lag exceeds 30 seconds for five minutes"),
]


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("KNOWTOLOGY_") and k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "OPENAI_API_KEY",
                                                              "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                                              "ANTHROPIC_BASE_URL")}
    base.update(LANCEDB_LOG="error", LANCE_LOG="error", COLUMNS=str(WIDTH), NO_COLOR="1")
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def kt(*args: str | Path, input: str | None = None, **extra: str) -> subprocess.CompletedProcess:
    """Run the real ``kt`` with stdout and stderr on pipes."""
    return subprocess.run([KT, *map(str, args)], capture_output=True, text=True, input=input, env=env(**extra),
                          timeout=300)


def cells(line: str) -> int:
    from rich.cells import cell_len

    return cell_len(line)


def _path_of(leaf_name: str) -> str:
    return next(p for p, _ in CATEGORIES if p.endswith(leaf_name))


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chunks ingested through ``kt ingest`` and a tree with long names written through the tree store."""
    from knowtology_cli.kb import KnowledgeBase
    from knowtology_cli.models import Category, ChunkMapping

    root = tmp_path_factory.mktemp("experience")
    source = root / "chunks.jsonl"
    source.write_text("".join(json.dumps({"chunk_id": cid, "text": text, "file_name": "handbook.md"}) + "\n"
                              for cid, _, text, _ in CHUNKS), encoding="utf-8")
    store = root / "store"
    done = kt("ingest", source, "--embedder", "hash", "--store", store)
    assert done.returncode == 0, done.stderr
    kb = KnowledgeBase.open(store)
    hashes = {cid: h for cid, (h, _) in kb.vectors.fingerprints("default").items()}
    kb.tree.apply("default", [Category(path=p, description=d) for p, d in CATEGORIES],
                  [(ChunkMapping(collection="default", chunk_id=cid, tree_node_id=0, snippet=snippet,
                                 file_name="handbook.md", path=_path_of(leaf)), hashes[cid])
                   for cid, leaf, _, snippet in CHUNKS])
    kb.tree.set_chunk_count("default", len(CHUNKS))
    kb.close()
    return store


@pytest.fixture
def store(long_store: Path, tmp_path: Path) -> Path:
    """A private copy (tests write read histories)."""
    import shutil

    shutil.copytree(long_store, tmp_path / "store")
    return tmp_path / "store"


# 1. width-aware truncation ------------------------------------------------------------------------
def _cut_at_word(shown: str, full: str) -> bool:
    kept = shown.removesuffix("…")
    return full.startswith(kept) and (len(kept) == len(full) or not full[len(kept)].isalnum()
                                      or not kept[-1:].isalnum())


def test_browse_fits_columns_and_cuts_descriptions_at_words(store: Path) -> None:
    result = kt("browse", "--depth", "2", "--store", store)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(cells(line) <= WIDTH for line in lines), lines
    top, windows, payments = CATEGORIES[0], CATEGORIES[1], CATEGORIES[2]
    for path, description in (top, windows, payments):
        name = path.rsplit("/", 1)[-1]
        line = next(x for x in lines if name[:20] in x)
        if " — " in line:  # the description gave way first, at a word boundary, with …
            shown = line.split(" — ", 1)[1]
            assert shown.endswith("…") and _cut_at_word(shown, description), line
        else:  # no room left for it: the name itself is fitted, never the count
            assert line.rstrip().endswith(")"), line
    # the long top-level name is cut at a word with …, its count kept whole
    line = next(x for x in lines if x.startswith(("├── Returns", "└── Returns")))
    assert re.search(r"… \(3\)", line) or top[0] in line
    ids = kt("browse", windows[0], "--store", store).stdout.splitlines()
    assert any(line.startswith("├── [win-1] ") for line in ids) and any("[win-2]" in line for line in ids)
    assert all(cells(line) <= WIDTH for line in ids)


def test_browse_into_a_pipe_without_columns_keeps_whole_lines(store: Path) -> None:
    result = kt("browse", "--depth", "2", "--store", store, COLUMNS=None)
    assert "…" not in result.stdout
    for path, description in CATEGORIES:
        assert f"{path.rsplit('/', 1)[-1]} (" in result.stdout and description in result.stdout
    wide = kt("browse", "--depth", "2", "--store", store, COLUMNS="400")
    assert wide.stdout == result.stdout


def test_fit_counts_terminal_cells_and_prefers_word_boundaries() -> None:
    from knowtology_cli.cli.render import fit

    assert fit("short", 10) == "short"
    assert fit("alpha beta gamma delta", 14) == "alpha beta…"
    assert fit("Supercalifragilistic words", 10) == "Supercali…"  # no boundary worth keeping: cut the word
    assert fit("alpha beta", 7, whole_words=True) == "alpha…"
    assert fit("alphabet", 5, whole_words=True) == ""
    wide = fit("東京 大阪 名古屋 札幌", 10)  # two cells per character
    assert wide == "東京 大阪…" and cells(wide) == 10
    assert fit("東京 大阪 名古屋 札幌", 9) == "東京…"


# 2. unmapped chunks after ingest --------------------------------------------------------------------
def test_browse_after_ingest_without_build_says_what_to_run(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(["refunds", "deliveries", "passwords"]):
        (docs / f"{topic}.md").write_text(f"# {topic.title()}\n\nA page about {topic} number {i}.\n", encoding="utf-8")
    store = tmp_path / "my store"
    assert kt("ingest", docs, "--embedder", "hash", "--store", store).returncode == 0
    empty = kt("browse", "--store", store)
    assert empty.returncode == 0
    assert "(no categories yet)" in empty.stdout
    assert f"Hint: 3 chunks not in the map yet; to map them, run: kt --store '{store}' build" in empty.stderr
    assert json.loads(kt("browse", "--store", store, "--json").stdout)["unmapped"] == 3
    assert kt("build", "--store", store).returncode == 0
    built = kt("browse", "--store", store)
    assert built.returncode == 0 and "Hint" not in built.stderr
    (docs / "later.md").write_text("# Later\n\nOne more page, ingested after the build.\n", encoding="utf-8")
    assert kt("ingest", docs / "later.md", "--store", store, "-c", "default").returncode == 0
    again = kt("browse", "--store", store, "-c", "default")
    assert f"Hint: 1 chunk not in the map yet; to map it, run: kt --store '{store}' -c default build" in again.stderr


def test_hints_name_the_store_and_collection_given_before_the_command(tmp_path: Path) -> None:
    """A command a hint or status advice names acts on the store and collection this command line
    named (root options too), so it can be copied as is."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refunds\n\nA page about refunds of damaged goods.\n", encoding="utf-8")
    store = tmp_path / "my store"
    missing = kt("--store", store, "-c", "manuals", "browse")
    assert missing.returncode == 1
    assert f"`kt --store '{store}' -c manuals ingest PATH`" in missing.stderr
    for name in ("manuals", "notes"):
        assert kt("--store", store, "-c", name, "ingest", docs, "--embedder", "hash").returncode == 0
    unbuilt = kt("--store", store, "-c", "manuals", "browse")
    assert f"run: kt --store '{store}' -c manuals build" in unbuilt.stderr
    status = kt("--store", store, "status")
    assert status.returncode == 0
    for name in ("manuals", "notes"):  # two collections: each line's command names its own
        assert f"{name}: no tree yet for 1 chunk: kt --store '{store}' -c {name} build" in status.stdout


# 3. a repeat read names the session and the ways out --------------------------------------------------
def test_repeat_read_names_session_force_and_session(store: Path) -> None:
    first = kt("read", "win-1", "--store", store)
    assert first.returncode == 0 and "48 hours" in first.stdout and "Hint" not in first.stderr
    again = kt("read", "win-1", "--store", store)
    assert again.returncode == 0
    assert again.stdout.strip() == "[win-1] (already read — skip)"
    assert "session 'default' has already read this chunk" in again.stderr
    assert "--force" in again.stderr and "--session NAME" in again.stderr
    named = kt("read", "win-1", "win-2", "--store", store, KNOWTOLOGY_SESSION="agent-7")
    assert "Hint" not in named.stderr
    named = kt("read", "win-1", "win-2", "--store", store, KNOWTOLOGY_SESSION="agent-7")
    assert "session 'agent-7' has already read 2 of these chunks" in named.stderr
    as_json = kt("read", "win-1", "--store", store, "--json")
    assert json.loads(as_json.stdout)["chunks"][0]["already_read"] is True and as_json.stderr == ""


# 4. forgiving paths, honest ingest errors ----------------------------------------------------------------
def test_browse_path_ignores_case_when_unambiguous(store: Path) -> None:
    path = CATEGORIES[1][0]
    exact = kt("browse", path, "--store", store, COLUMNS=None)
    loose = kt("browse", path.lower().replace("/", " / "), "--store", store, COLUMNS=None)
    assert loose.returncode == 0, loose.stderr
    assert loose.stdout == exact.stdout and loose.stdout.startswith(path)
    under = kt("search", "refund", "--under", path.upper(), "--store", store, "--json")
    assert under.returncode == 0, under.stderr
    assert {h["path"] for h in json.loads(under.stdout)["hits"]} == {path}


def test_unknown_path_suggests_real_paths(store: Path) -> None:
    typo = kt("browse", "Database Operatons", "--store", store)
    assert typo.returncode == 1
    assert "Error: no category 'Database Operatons'" in typo.stderr
    assert "did you mean 'Database Operations'?" in typo.stderr
    leaf_only = kt("browse", "refund windows", "--store", store)  # one path ends so: it is taken
    assert leaf_only.returncode == 0 and "/Refund Windows (2 chunks)" in leaf_only.stdout.splitlines()[0]
    leaf_typo = kt("browse", "refund windos", "--store", store)
    assert leaf_typo.returncode == 1 and f"did you mean '{CATEGORIES[1][0]}'" in leaf_typo.stderr


def test_paths_differing_only_in_case_are_not_guessed(store: Path) -> None:
    from knowtology_cli.kb import KnowledgeBase
    from knowtology_cli.models import Category, ChunkMapping

    extra = store.parent / "old.jsonl"
    extra.write_text(json.dumps({"chunk_id": "db-2", "text": "The old runbook used manual failover."}) + "\n")
    assert kt("ingest", extra, "--store", store).returncode == 0
    kb = KnowledgeBase.open(store)
    content_hash = kb.vectors.fingerprints("default")["db-2"][0]
    kb.tree.apply("default", [Category(path="database operations", description="")],
                  [(ChunkMapping(collection="default", chunk_id="db-2", tree_node_id=0, snippet="Old runbook",
                                 path="database operations"), content_hash)])
    kb.close()
    result = kt("browse", "DATABASE OPERATIONS", "--store", store)
    assert result.returncode == 1
    assert "matches several categories" in result.stderr
    assert "'Database Operations'" in result.stderr and "'database operations'" in result.stderr


def test_missing_ingest_path_says_check_the_path_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = kt("ingest", tmp_path / "no-such-dir", "--store", store)
    assert result.returncode == 1
    assert "no-such-dir: no such file or directory" in result.stderr
    assert "--skip-invalid" not in result.stderr and "check the path" in result.stderr
    assert not store.exists()


def test_ingest_problems_are_printed_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine", "chunk_id": "a"}\n{"text": broken}\n{"text": ""}\n', encoding="utf-8")
    store = tmp_path / "store"
    failed = kt("ingest", bad, "--store", store, "--embedder", "hash")
    both = failed.stdout + failed.stderr
    assert failed.returncode == 1
    assert both.count("bad.jsonl:2: invalid JSON") == 1 and both.count("bad.jsonl:3: 'text' is empty") == 1
    assert "--skip-invalid" in failed.stderr  # valid rows exist: skipping them would help
    skipped = kt("ingest", bad, "--store", store, "--embedder", "hash", "--skip-invalid")
    both = skipped.stdout + skipped.stderr
    assert skipped.returncode == 0
    assert both.count("bad.jsonl:2: invalid JSON") == 1 and both.count("bad.jsonl:3: 'text' is empty") == 1


# 5. a dry run needs no key ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
def test_llm_dry_run_needs_no_api_key(store: Path, spec: str) -> None:
    more = store.parent / "more.jsonl"
    more.write_text(json.dumps({"chunk_id": "new-1", "text": "Gift cards never expire."}) + "\n", encoding="utf-8")
    assert kt("ingest", more, "--store", store).returncode == 0
    plan = kt("build", "--llm", spec, "--dry-run", "--store", store)  # auto: the hybrid builder
    assert plan.returncode == 0, plan.stderr
    assert "plan with hybrid" in plan.stdout and "nothing was called" in plan.stdout
    seed = kt("build", "--builder", "llm", "--llm", spec, "--dry-run", "--store", store)
    assert seed.returncode == 0, seed.stderr
    assert "plan with llm" in seed.stdout and "nothing was called" in seed.stdout
    real = kt("build", "--llm", spec, "--store", store)
    assert real.returncode == 1 and "API key" in real.stderr


# 6. kt repl reads a script from a pipe ---------------------------------------------------------------------
SCRIPT = """\
# a scripted session
ls
kt browse "returns and refunds for perishable groceries/refund windows"
cd Returns and Refunds for Perishable Groceries
pwd
grep 48 hours -k 1
read win-1
kt read win-1
history
"""


def test_repl_script_transcript(store: Path) -> None:
    """The whole stdout of a scripted session; hit and read headers (other features' formats) by pattern."""
    result = kt("repl", "--store", store, input=SCRIPT)
    assert result.returncode == 0, result.stderr
    windows = CATEGORIES[1][0]
    expected: list[str | re.Pattern[str]] = [
        "root (4 chunks)",
        "├── Database Operations (1) — Failover of the primary…",
        "└── Returns and Refunds for Perishable Groceries (3)",
        "…Refunds for Perishable Groceries/Refund Windows (2 chunks)",
        "├── [win-1] Fresh and frozen food: report within 48 hours…",
        "└── [win-2] Pantry goods: 30 days in the original packaging",
        f"/{CATEGORIES[0][0]}",
        re.compile(re.escape(windows) + r".*"),  # grep: the hit's category, then the hit
        re.compile(r" ?\[win-1\] .*48.*"),
        re.compile(r"\[win-1\] " + re.escape(windows) + r" .*"),  # read: the header, then the text
        "Fresh and frozen food can be reported within 48 hours of delivery for a full refund.",
        "[win-1] (already read — skip)",
        "win-1",
    ]
    got = result.stdout.splitlines()
    assert len(got) == len(expected), result.stdout
    for line, want in zip(got, expected):
        assert want.fullmatch(line) if isinstance(want, re.Pattern) else line == want, (line, want)
    assert "\r" not in result.stdout and not ANSI.search(result.stdout) and "kt:default" not in result.stdout
    assert "Input is not a terminal" not in result.stderr and "Knowtology shell" not in result.stdout
    assert result.stderr.strip() == ("Hint: session 'default' has already read this chunk; --force prints it "
                                     "again, --session NAME keeps a separate read history "
                                     f"(kt --store {store} session reset forgets this one)")


def test_repl_script_stops_at_the_first_error_unless_keep_going(store: Path) -> None:
    script = "pwd\nbrowse No Such Place\npwd\nkt build\nls\n"
    stopped = kt("repl", "--store", store, input=script)
    assert stopped.returncode == 1
    assert stopped.stdout == "/\n"
    assert "Error: line 2: no category 'No Such Place'" in stopped.stderr
    kept = kt("repl", "--keep-going", "--store", store, input=script)
    assert kept.returncode == 1
    assert kept.stdout.startswith("/\n/\nroot (4 chunks)")
    assert "Error: line 4: `build` is not a shell command" in kept.stderr
    assert "Hint: run it in your terminal: kt build" in kept.stderr
    fine = kt("repl", "--store", store, input="pwd\nexit\nbogus\n")
    assert fine.returncode == 0 and fine.stdout == "/\n"


# 7. the conventions of well-liked CLIs --------------------------------------------------------------------
def test_version_and_short_help() -> None:
    from knowtology_cli import __version__

    version = kt("--version")
    assert version.returncode == 0 and version.stdout == f"kt {__version__}\n"
    assert kt("-V").stdout == version.stdout
    short, long = kt("-h"), kt("--help")
    assert short.returncode == 0 and short.stdout == long.stdout
    sub = kt("browse", "-h")
    assert sub.returncode == 0 and sub.stdout.startswith("Usage: kt browse [OPTIONS] [PATH]")


def test_help_documents_completion_and_shows_no_python_types() -> None:
    top = kt("--help").stdout
    assert "--install-completion" in top and "--show-completion" in top and "Shell completion" in top
    names = re.findall(r"^  ([a-z]+)\s{2,}", top.split("Commands:")[1], flags=re.M)
    assert {"ingest", "build", "browse", "search", "grep", "read", "repl", "session", "bench"} <= set(names)
    for name in names:
        text = kt(name, "--help").stdout
        assert text.startswith(f"Usage: kt {name}"), text
        assert not re.search(r"<[a-z]+(\[[^\]]*\])?>|list\[|\{[a-z_]+\}", text), (name, text)
    ingest = kt("ingest", "--help").stdout
    assert "Usage: kt ingest [OPTIONS] [PATHS...]" in ingest and "--store TEXT" in ingest
    assert "-k, --top-k INTEGER" in kt("search", "--help").stdout
    script = kt("--show-completion", "bash", SHELL="/bin/bash")
    assert script.returncode == 0 and "_KT_COMPLETE" in script.stdout
    # the shell named is the one written for, also under sh -c (a Dockerfile's RUN, a Makefile)
    zsh = subprocess.run(["sh", "-c", f"'{KT}' --show-completion zsh"], capture_output=True, text=True,
                         env=env(), timeout=60)
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef kt"), zsh.stderr
    # what the installed script asks kt for: subcommand names and options, built lazily on demand
    assert kt(_KT_COMPLETE="complete_bash", COMP_WORDS="kt bro", COMP_CWORD="1").stdout.split() == ["browse"]
    assert "--depth" in kt(_KT_COMPLETE="complete_bash", COMP_WORDS="kt browse --de", COMP_CWORD="2").stdout


def test_no_color_drops_bold_and_force_color_styles_pipes(store: Path) -> None:
    forced = kt("browse", "--store", store, NO_COLOR=None, FORCE_COLOR="1")
    assert "\x1b[1m" in forced.stdout  # bold names, into a pipe
    both = kt("browse", "--store", store, NO_COLOR="1", FORCE_COLOR="1")
    assert not ANSI.search(both.stdout) and both.stdout.startswith("root (4 chunks)")
    error = kt("browse", "Nope", "--store", store, NO_COLOR="1", FORCE_COLOR="1")
    assert error.returncode == 1 and not ANSI.search(error.stderr) and error.stderr.startswith("Error: ")


@pytest.mark.parametrize("args", [("grep", "refund", "-k", "4"), ("browse", "--depth", "3"),
                                  ("search", "refund", "--json"), ("--help",)])
def test_closed_pipe_exits_quietly_with_zero(store: Path, args: tuple[str, ...]) -> None:
    """``kt … | head -1``: the reader closes the pipe before kt writes; kt ends with 0 and says nothing."""
    proc = subprocess.Popen([KT, *args, "--store", str(store)] if args != ("--help",) else [KT, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    proc.stdout.close()  # the only reader is gone: kt's first write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


def test_browse_into_a_pipe_loads_no_rich_console_and_builds_no_validators(store: Path) -> None:
    """Guards kt browse's start-up (issue 16, item 8; the time itself is measured by kt bench speed)."""
    code = ("import sys\n"
            f"sys.argv = ['kt', 'browse', '--store', {str(store)!r}]\n"
            "from knowtology_cli.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('LOADED', *sorted(m for m in ('rich.console', 'importlib.metadata', 'lance', 'numpy', "
            "'prompt_toolkit') if m in sys.modules), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), timeout=120)
    assert proc.stdout.startswith("root (4 chunks)")
    assert proc.stderr.strip() == "LOADED", proc.stderr


def test_the_configured_embedder_chooses_a_new_collections_embedder(tmp_path: Path) -> None:
    """``KNOWTOLOGY_EMBEDDER`` and ``embedder`` in config.toml choose the embedder of a new collection
    (flag > env > config.toml); a collection already embedded keeps its embedder and says so."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Refunds\n\nRefunds take seven days.\n")
    by_env = json.loads(kt("ingest", docs, "--store", tmp_path / "env", "--json", KNOWTOLOGY_EMBEDDER="hash").stdout)
    assert by_env["embedder"].startswith("hash")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text('embedder = "hash"\n')
    by_config = json.loads(kt("ingest", docs, "--store", tmp_path / "cfg", "--json").stdout)
    assert by_config["embedder"].startswith("hash")
    (docs / "b.md").write_text("# Shipping\n\nParcels leave daily.\n")
    kept = kt("ingest", docs, "--store", tmp_path / "cfg", "--json", KNOWTOLOGY_EMBEDDER="local")
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["embedder"].startswith("hash") and json.loads(kept.stdout)["added"] == 1
    assert "keeps it; the configured embedder local:all-MiniLM-L6-v2 applies to new collections" in kept.stderr


def test_store_and_collection_may_come_before_the_command(tmp_path: Path) -> None:
    """``kt --store DIR ingest …`` (as git's ``-C``) works as ``kt ingest … --store DIR``; the command's own
    flag still wins."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Refunds\n\nRefunds take seven days.\n")
    done = kt("--store", tmp_path / "s", "-c", "notes", "ingest", docs, "--embedder", "hash", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["collection"] == "notes"
    status = json.loads(kt("status", "--store", tmp_path / "s", "--json").stdout)
    assert [c["name"] for c in status["collections"]] == ["notes"]
    own = json.loads(kt("--store", tmp_path / "elsewhere", "status", "--store", tmp_path / "s", "--json").stdout)
    assert own["store"] == str(tmp_path / "s")


def test_hidden_folders_are_named_when_skipped_and_when_they_hold_the_only_documents(tmp_path: Path) -> None:
    # kt skips hidden folders (.git, a tool's .agents); it says which, and a folder whose documents
    # all lie in one gets an error naming it, not "no files found".
    docs = tmp_path / "docs"
    (docs / "sub" / ".agents").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / "guide.md").write_text("# Guide\n\nFrozen totes go in the back of the van.\n")
    (docs / "sub" / ".agents" / "skill.md").write_text("# Skill\n\nUse the chiller log.\n")
    (docs / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    store = {"KNOWTOLOGY_STORE": str(tmp_path / "store")}
    result = kt("ingest", docs, "--embedder", "hash", **store)
    assert result.returncode == 0, result.stderr
    assert f"note: 2 hidden folder(s) skipped: {docs / '.git'}, {docs / 'sub' / '.agents'}" in result.stdout
    report = json.loads(kt("ingest", docs, "--json", **store).stdout)
    assert report["hidden_folders"] == [str(docs / ".git"), str(docs / "sub" / ".agents")]
    assert report["total"] == 1

    only = docs / "sub"
    result = kt("ingest", only, "--embedder", "hash", **store)
    assert result.returncode != 0
    assert (f"{only}: its only documents are in hidden folders, which kt skips: {only / '.agents'} (1)"
            f" — name one to read it: kt ingest {only / '.agents'}") in result.stderr, result.stderr
    named = kt("ingest", only / ".agents", "--json", **store)
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["added"] == 1
