"""AsciiDoc documents: asciidoc-py in safe mode, read as HTML (parsers.adoc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from knowtology_cli.errors import InputError
from knowtology_cli.parsers import PARSER_VERSIONS, detect_format, parse

KT = str(Path(sys.executable).parent / "kt")

GUIDE = """= Deploy Guide
Jane Doe <jane@example.com>
:toc:

Intro with `inline code` and *bold*.

== Install

[source,python]
----
print("a < b")
----

NOTE: Back up first.

=== Options

CPU:: number of cores

[options="header"]
|===
|Name |Value
|port |8080
|===
"""


def _blocks(doc):
    return [(s.titles, b) for s in doc.sections for b in s.blocks]


def test_extensions_and_version() -> None:
    for name in ("a.adoc", "b.asciidoc", "c.asc", "d.adoc.gz"):
        assert detect_format(name) == "asciidoc"
    assert detect_format("x.tar.gz.asc", head=b"-----BEGIN PGP SIGNATURE-----\n") is None
    assert PARSER_VERSIONS["asciidoc"] == 2


def test_title_sections_and_clean_blocks(tmp_path: Path) -> None:
    (tmp_path / "guide.adoc").write_text(GUIDE)
    doc = parse(tmp_path / "guide.adoc")
    assert (doc.format, doc.title, doc.parser) == ("asciidoc", "Deploy Guide", "asciidoc/2")
    texts = {b.text: (titles, b) for titles, b in _blocks(doc)}
    assert "Intro with `inline code` and bold." in texts
    code = texts['```python\nprint("a < b")\n```']
    assert code[0] == ("Deploy Guide", "Install") and code[1].kind == "code" and code[1].start == 10
    assert "Note: Back up first." in texts
    assert texts["CPU:\n  number of cores"][0] == ("Deploy Guide", "Install", "Options")
    assert "| Name | Value |\n| --- | --- |\n| port | 8080 |" in texts
    everything = "\n".join(texts)
    for junk in ("Jane Doe", "Last updated", "Table of Contents", "{", "font-family", "monospaced"):
        assert junk not in everything


def test_sibling_include_is_read_and_outside_is_not(tmp_path: Path) -> None:
    (tmp_path / "part.adoc").write_text("== Part\n\nIncluded words.\n")
    (tmp_path / "main.adoc").write_text("= Main\n\ninclude::part.adoc[]\n\ninclude::/etc/passwd[]\n\n"
                                        "include::../outside.adoc[]\n")
    (tmp_path.parent / "outside.adoc").write_text("Secret outside.\n")
    doc = parse(tmp_path / "main.adoc", root=tmp_path)
    text = "\n".join(b.text for _, b in _blocks(doc))
    assert "Included words." in text and "root:" not in text and "Secret" not in text
    assert doc.includes == ((tmp_path / "part.adoc").resolve().as_posix(),)
    assert [u.split(" ", 1)[0] for u in doc.unread] == ["/etc/passwd", "../outside.adoc"]


def test_safe_mode_runs_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    marks = [tmp_path / f"pwned{i}" for i in range(5)]
    (tmp_path / "evil.conf").write_text(f"[blockdef-listing]\nfilter=touch {marks[4]}\n")  # a folder's conf
    source = (f"= Evil\n\nsys::[echo PWNED > {marks[0]}]\n\nsys2::[echo PWNED > {marks[1]}]\n\n"
              f"A {{sys:echo PWNED > {marks[2]}}} B {{eval:open('{marks[3]}','w')}} C\n\n"
              "{include:/etc/passwd}\n\ninclude1::/etc/passwd[]\n\n----\nlisting\n----\n\nAfter.\n")
    (tmp_path / "evil.adoc").write_text(source)
    doc = parse(tmp_path / "evil.adoc", root=tmp_path)
    assert not any(mark.exists() for mark in marks)
    text = "\n".join(b.text for _, b in _blocks(doc))
    assert "PWNED" not in text and "root:" not in text and "After." in text
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_unconvertible_document_is_one_input_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError) as caught:
        parse(b"= T\n\nifeval::[1==1]\nx\nendif::[]\n", name="bad.adoc")
    message = caught.value.message
    assert message.startswith("bad.adoc: asciidoc cannot convert it (") and "\n" not in message
    assert "asciidoc --safe" in message
    assert capfd.readouterr() == ("", "")


#: A man page in AsciiDoc saved as .txt, with a project's own macro for man page links.
MANPAGE = """\
tool-sync(1)
============

NAME
----
tool-sync - Copy a tree to a mirror

SYNOPSIS
--------
[verse]
'tool sync' [--dry-run] <source> <mirror>

DESCRIPTION
-----------
Copies every file of <source> to <mirror>, as linkman:tool-config[5] sets it up.

EXAMPLES
--------
* Preview a sync:
+
------------
$ tool sync --dry-run src/ /mnt/mirror
------------
"""


def test_project_macros_read_as_text() -> None:
    doc = parse("= T\n\nSee linkman:tool[1], kbd:[Ctrl+C] and `linkman:x[1]`.\n\n----\nlinkman:y[1]\n----\n",
                name="t.adoc")
    assert [b.text for _, b in _blocks(doc)][1:] == ["See tool(1), Ctrl+C and `linkman:x[1]`.",
                                                      "```\nlinkman:y[1]\n```"]


def test_txt_is_read_as_asciidoc_when_its_markup_says_so(tmp_path: Path) -> None:
    """kt ingests an AsciiDoc .txt as AsciiDoc, and reads one asciidoc-py refuses as the text it is."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tool-sync.txt").write_text(MANPAGE)
    (docs / "odd.txt").write_text("[NOTE]\nKeep it.\n\nifeval::[1==1]\nSecret rule.\nendif::[]\n")
    env = {**os.environ, "KNOWTOLOGY_STORE": str(tmp_path / "store"), "LANCE_LOG": "error"}

    def kt(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KT, *args], capture_output=True, text=True, env=env, timeout=300)

    done = kt("ingest", str(docs), "--embedder", "hash", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["problems"] == []
    read = json.loads(kt("read", "docs/tool-sync.txt#0", "docs/odd.txt#0", "--json").stdout)["chunks"]
    page, odd = read[0], read[1]
    assert page["section"] == "tool-sync(1)" and page["lines"][0] == 1
    assert "as tool-config(5) sets it up" in page["text"]
    assert "- Preview a sync:\n  ```\n  $ tool sync --dry-run src/ /mnt/mirror\n  ```" in page["text"]
    for markup in ("[verse]", "linkman:", "----", "\n+\n", "====="):
        assert markup not in page["text"]
    assert "ifeval::[1==1]\nSecret rule." in odd["text"]  # as written: it is not AsciiDoc to asciidoc-py
    with pytest.raises(InputError, match="asciidoc cannot convert it"):
        parse((docs / "odd.txt").read_bytes(), name="odd.adoc")
