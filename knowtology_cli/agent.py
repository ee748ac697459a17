"""``kt ask``: a small tool-calling agent loop over the four tools, answering with cited chunk ids."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import KnowtologyError
from .llm.base import ChatMessage, ToolSpec
from .models import ReadResult, SearchResult
from .tokens import count_tokens
from .tool_specs import TOOLS, error_text

if TYPE_CHECKING:
    from .llm.base import LLMClient
    from .tools import KnowledgeMapTools

SYSTEM_PROMPT = """You answer questions from a knowledge base that you explore with four tools.
The knowledge base is a map: up to three levels of categories, each chunk filed under one leaf with a one-line snippet.

How to work:
1. Find candidates: km_browse_tree('root') shows the map; km_search_chunks finds chunks by meaning; km_search_keyword finds exact terms, names and numbers. These return snippets only.
2. Read before answering: call km_read_chunks with the few most relevant chunk ids. Snippets are not enough to answer.
3. Answer only from chunks you have read. Cite every fact with its chunk id in square brackets, e.g. [abc-123].
   A chunk marked '(already read — skip)' was read earlier: use the text you already have.
4. If the knowledge base does not contain the answer, say so plainly.
Keep the answer short."""

_CITATION = re.compile(r"\[([^\[\]\s]+)\]")
#: ``kt ask``'s exit code for an answer that cites no chunk it read (after one re-ask).
EXIT_UNCITED = 3
#: Turns allowed after the re-ask (to search and read before answering again).
REASK_TURNS = 4


#: How many of the ids seen in search results a hint lists.
SEEN_IN_HINT = 8


def reask_prompt(read_ids: Sequence[str], seen_ids: Sequence[str] = ()) -> str:
    """What the model is told when its answer cites no chunk it read."""
    example = f"[{read_ids[0]}]" if read_ids else "[the chunk id]"
    have = (f"You have read these chunks: {', '.join(read_ids)}." if read_ids else
            "You have not read any chunk yet: call km_read_chunks on the most relevant ids first"
            + (f" (ids from your searches: {', '.join(list(seen_ids)[-SEEN_IN_HINT:])})." if seen_ids else "."))
    return ("Your answer does not cite a chunk you read. " + have + " Answer again from chunks you have read, "
            f"citing each fact with its chunk id in square brackets, e.g. {example}. If the chunks you read do not "
            "contain the answer, say so and cite the chunks you read.")


@dataclass(frozen=True)
class AskStep:
    """One tool call the agent made, with what it cost and returned.

    ``input_tokens``/``output_tokens``/``cost_usd`` are the model turn that asked for the call
    (shared by the calls of one turn); ``result_tokens`` is the size of the text sent back.
    """

    step: int
    tool: str
    arguments: dict[str, Any]
    output: str
    summary: str
    error: bool
    input_tokens: int
    output_tokens: int
    cost_usd: float
    result_tokens: int


@dataclass
class AskResult:
    """How a question went: the answer, its citations, every tool call and the totals."""

    question: str
    answer: str = ""
    steps: list[AskStep] = field(default_factory=list)
    steps_taken: int = 0
    read_ids: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)  # chunk ids cited that were read in this run
    cited_unread: list[str] = field(default_factory=list)  # cited but never read (they don't count)
    reasked: bool = False  # the first answer cited no chunk it read, so the model was asked again
    uncited: bool = False  # the final answer still cites no chunk it read
    stopped: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""


def ask(
    question: str,
    tools: KnowledgeMapTools,
    llm: LLMClient,
    *,
    max_steps: int = 8,
    on_step: Callable[[AskStep], None] = lambda _step: None,
    system: str = SYSTEM_PROMPT,
    max_output_tokens: int = 1024,
) -> AskResult:
    """Let ``llm`` explore with the four tools until it answers ``question`` (or ``max_steps`` turns).

    The model sees the same four tool specs as MCP and LangChain through ``LLMClient.chat``; each
    call runs in the shared tool layer and its compact text goes back as the tool result. The loop
    ends at a text answer or after ``max_steps`` model turns.

    An answer counts as cited only when it names, in square brackets, a chunk the agent *read* in
    this run (``km_read_chunks``, a repeat read included); ids merely seen in search results or the
    map don't count. An uncited answer is asked for once more, saying why; if the second is still
    uncited, ``AskResult.uncited`` is True (``kt ask`` then warns and exits with ``EXIT_UNCITED``).

    Tool errors (a bad path, an unknown id) go back to the model as ``Error: ...`` results so it
    can correct itself; provider failures raise ``LLMError``.
    """
    specs = [ToolSpec(name=t.name, description=t.description, parameters=t.parameters()) for t in TOOLS]
    messages: list[ChatMessage] = [ChatMessage.user(question)]
    result = AskResult(question=question)
    seen: dict[str, None] = {}
    turn_no = 0
    budget = max_steps
    while True:
        answered = False
        while turn_no < budget:
            turn_no += 1
            turn = llm.chat(messages, specs, system=system, max_output_tokens=max_output_tokens)
            result.steps_taken = turn_no
            result.input_tokens += turn.input_tokens
            result.output_tokens += turn.output_tokens
            result.cost_usd += turn.cost_usd
            result.model = turn.model or result.model
            messages.append(turn.message)
            if not turn.tool_calls:
                result.answer = turn.text.strip()
                answered = True
                break
            for call in turn.tool_calls:
                step = _run_call(tools, call.name, call.arguments, turn_no, turn, seen, result)
                messages.append(ChatMessage.tool_result(call.id, step.output))
                result.steps.append(step)
                on_step(step)
        if not answered:
            result.stopped = True
            break
        cited = _citations(result.answer)
        result.cited = [c for c in cited if c in result.read_ids]
        result.cited_unread = [c for c in cited if c not in result.read_ids]
        if result.cited or result.reasked:
            break
        result.reasked = True  # once: say why and let it read before answering again
        messages.append(ChatMessage.user(reask_prompt(result.read_ids, list(seen))))
        budget = turn_no + REASK_TURNS
    result.uncited = not result.stopped and not result.cited
    return result


def _citations(answer: str) -> list[str]:
    return list(dict.fromkeys(_CITATION.findall(answer)))


def _run_call(tools: KnowledgeMapTools, name: str, arguments: dict[str, Any], turn_no: int, turn: Any,
              seen: dict[str, None], result: AskResult) -> AskStep:
    try:
        out = tools.run(name, arguments)
        text, error = out.text, False
        summary = _summarise(out.result)
        if isinstance(out.result, ReadResult):
            for chunk in out.result.chunks:
                if chunk.chunk_id not in result.read_ids:
                    result.read_ids.append(chunk.chunk_id)
        elif isinstance(out.result, SearchResult):
            seen.update((h.chunk_id, None) for h in out.result.hits)
        else:
            seen.update((lead.chunk_id, None) for lead in out.result.chunks)
    except KnowtologyError as exc:
        text, error, summary = error_text(exc), True, f"error: {exc.message}"
        if name == "km_read_chunks" and seen:  # small models invent ids: show the real ones to copy
            text += f" — ids from your searches, to copy exactly: {', '.join(list(seen)[-SEEN_IN_HINT:])}"
    return AskStep(step=turn_no, tool=name, arguments=dict(arguments), output=text, summary=summary, error=error,
                   input_tokens=turn.input_tokens, output_tokens=turn.output_tokens, cost_usd=turn.cost_usd,
                   result_tokens=count_tokens(text))


def _summarise(record: Any) -> str:
    if isinstance(record, SearchResult):
        return f"{len(record.hits)} hit{'s' if len(record.hits) != 1 else ''}"
    if isinstance(record, ReadResult):
        fresh = sum(1 for c in record.chunks if not c.already_read)
        repeats = len(record.chunks) - fresh
        return f"read {fresh}" + (f", {repeats} already read" if repeats else "")
    return f"{len(record.children)} categories, {len(record.chunks)} chunks"
