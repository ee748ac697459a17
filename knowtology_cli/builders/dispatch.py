"""Run the chosen tree builder (offline clustering, LLM or hybrid) over what needs mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .hybrid import run_hybrid_build
from .llm_builder import run_llm_build
from .runner import run_cluster_build, stale_nodes
from .staging import StagedTree

if TYPE_CHECKING:
    from ..llm.base import LLMClient
    from ..models import BuildReport
    from .context import BuildStores


def run_build(
    stores: BuildStores,
    collection: str,
    *,
    builder: str,
    llm: LLMClient | None,
    rebuild: bool,
    dry_run: bool,
    concurrency: int,
    progress: Callable[[str, int, int], None],
    message: Callable[[str], None],
    use_cache: bool = True,
) -> BuildReport:
    """Run the cluster, LLM or hybrid builder over what needs mapping; see ``KnowledgeBase.build``.

    ``use_cache=False`` makes the LLM builder call the model even for prompts the call log has answered.
    """
    if builder != "llm":
        report = _run_other(stores, collection, builder=builder, llm=llm, rebuild=rebuild, dry_run=dry_run,
                            concurrency=concurrency, progress=progress, message=message, use_cache=use_cache)
        if rebuild and not dry_run:  # rebuilt another way: what a stopped LLM rebuild staged is moot
            StagedTree(stores.tree, collection).discard()
        return report
    assert llm is not None
    full = rebuild or not stores.tree.nodes(collection)
    report = run_llm_build(stores, collection, llm=llm, rebuild=rebuild, dry_run=dry_run, concurrency=concurrency,
                           progress=progress, message=message, use_cache=use_cache)
    if full and not dry_run and not report.unmapped:
        stores.tree.mark_named(collection)  # the model named every category for the members it has now
    elif not dry_run:
        left = stale_nodes(stores, collection)
        if left:  # re-describing them is the LLM builder's part (see stale_nodes)
            report = report.model_copy(update={"notes": [*report.notes, (
                f"{len(left)} categories changed materially since they were named (e.g. {left[0].path!r})")]})
    return report


def _run_other(stores: BuildStores, collection: str, *, builder: str, llm: LLMClient | None, dry_run: bool,
               concurrency: int, progress: Callable[[str, int, int], None], message: Callable[[str], None],
               use_cache: bool, rebuild: bool) -> BuildReport:
    """The hybrid or the cluster builder."""
    if builder == "hybrid":
        assert llm is not None
        return run_hybrid_build(stores, collection, llm=llm, rebuild=rebuild, dry_run=dry_run, concurrency=concurrency,
                                progress=progress, message=message, use_cache=use_cache)
    return run_cluster_build(stores, collection, rebuild=rebuild, dry_run=dry_run, progress=progress, message=message)
