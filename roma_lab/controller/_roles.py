"""Default ROMA roles: DSPy modules with typed signatures, run through ``dspy.JSONAdapter``.

Small local models rarely follow DSPy's ChatAdapter field markers, so every role asks for JSON.
Lists carry ``maxItems`` in the schema. Strings carry no ``maxLength``: llama-cpp-python expands it
into nested grammar rules that llama.cpp rejects, so the local engine (``roma_lab.lm``) bounds every
string itself with llama.cpp's native repetition; API models are bounded by ``max_tokens``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from os import PathLike
from typing import Annotated, Any

import dspy
from pydantic import BaseModel, Field
from typing_extensions import TypeAliasType

from roma_lab.lm import JSONRole
from roma_lab.tools import (
    check_sandbox,
    read_artifact,
    run_python,
    run_tools,
    tool_result_limit,
    traced_call,
)
from roma_lab.trace import NO_EVIDENCE, TASK_TYPES

MAX_PLAN_ITEMS = 8  # schema bound; Roma(max_subtasks=...) may cut plans further

# Bounds and the task-type enum live in the JSON schema only: the grammar keeps a small model inside
# them, while parsing accepts any size or type name, so an oversized plan or an unknown type reaches
# validate_plan (repaired, with a warning) instead of failing the call.
TaskType = TypeAliasType("TaskType", Annotated[str, Field(json_schema_extra={"enum": list(TASK_TYPES)})])


class PlannedSubtask(BaseModel):
    goal: str = Field(description="one self-contained subtask, phrased as an instruction")
    task_type: TaskType
    depends_on: Annotated[list[int], Field(json_schema_extra={"maxItems": MAX_PLAN_ITEMS})] = Field(
        description="0-based indices of EARLIER subtasks in this list whose results this one needs")


# A named alias because DSPy keeps only a top-level field's bare type when it builds the JSON
# schema: a plain Annotated[...] bound would be dropped, an alias keeps it (as a $defs entry).
Plan = TypeAliasType("Plan", Annotated[list[PlannedSubtask],
                                       Field(json_schema_extra={"minItems": 1, "maxItems": MAX_PLAN_ITEMS})])


class SubtaskResult(BaseModel):
    goal: str
    task_type: str
    status: str
    output: str  # for an artifact: its summary
    artifact: str | None = Field(default=None, description="id of the full result (sha256:...), when "
                                                           "the output is only its summary")


class _AliasedSignature(dspy.Signature):
    """Base of signatures whose output types are named aliases (`TaskType`, `Plan`)."""

    @classmethod
    def with_instructions(cls, instructions: str) -> type[dspy.Signature]:
        # DSPy rebuilds the signature from its fields, and its type check rejects type aliases, so
        # optimizers (GEPA, MIPRO) could not edit these roles. A subclass keeps the field types,
        # hence the bounded schema and the prompt, exactly.
        return type(cls)(cls.__name__, (cls,), {"__doc__": instructions, "__module__": cls.__module__})


class AtomizerSignature(_AliasedSignature):
    """Decide whether the goal can be answered in one step by a single specialist (atomic) or must be
    split into subtasks. Also name the kind of work: search (look facts up), think (reason),
    write (compose text) or code (compute with Python)."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    is_atomic: bool = dspy.OutputField()
    task_type: TaskType = dspy.OutputField()


class PlannerSignature(_AliasedSignature):
    """Split the goal into a few mutually exclusive, collectively exhaustive subtasks. Use depends_on
    only when a subtask needs the result of an earlier one; independent subtasks run in parallel."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    subtasks: Plan = dspy.OutputField()


class ExecutorSignature(dspy.Signature):
    """Carry out the goal directly, using the context. Answer concisely."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    output: str = dspy.OutputField()


class ThinkSignature(dspy.Signature):
    """Reason step by step about the goal, using the context, then state the result concisely."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    reasoning: str = dspy.OutputField()
    output: str = dspy.OutputField()


class SearchSignature(dspy.Signature):
    """Answer the goal from the retrieved passages; say so when they do not contain the answer."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    passages: list[str] = dspy.InputField(desc="retrieved passages, best first")
    output: str = dspy.OutputField()


class CodeSignature(dspy.Signature):
    """Write a short self-contained Python script that prints the answer to the goal. Standard
    library only; no network, no files outside the working directory."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    code: str = dspy.OutputField()


class AggregatorSignature(dspy.Signature):
    """Combine the subtask results into the answer to the goal. Keep what matters for the goal,
    drop the rest; if some subtasks are MISSING, answer with what exists and say what is missing."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    subtask_results: list[SubtaskResult] = dspy.InputField()
    output: str = dspy.OutputField()


class VerifierSignature(dspy.Signature):
    """Check whether the candidate correctly and completely achieves the goal."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    candidate: str = dspy.InputField()
    verdict: bool = dspy.OutputField(desc="true if the candidate is acceptable")
    feedback: str = dspy.OutputField(desc="what to fix, if anything")


class Atomizer(JSONRole):
    def __init__(self):
        super().__init__(AtomizerSignature)


class Planner(JSONRole):
    def __init__(self):
        super().__init__(PlannerSignature)


class Aggregator(JSONRole):
    def __init__(self):
        super().__init__(AggregatorSignature)

    def forward(self, *, goal, context, subtask_results):
        # the controller's role contract passes plain dicts; the signature's typed field wants models
        results = [r if isinstance(r, SubtaskResult) else SubtaskResult(**r) for r in subtask_results]
        return super().forward(goal=goal, context=context, subtask_results=results)


class Verifier(JSONRole):
    def __init__(self):
        super().__init__(VerifierSignature)


class ThinkExecutor(JSONRole):
    """Chain of thought with a bounded ``reasoning`` field (dspy.ChainOfThought's is unbounded)."""

    def __init__(self):
        super().__init__(ThinkSignature)


class WriteExecutor(JSONRole):
    """Direct composition."""

    def __init__(self):
        super().__init__(ExecutorSignature)


class SearchExecutor(dspy.Module):
    """Retrieve passages for the goal, then answer from them. Without a retriever: closed-book,
    and the passages say so, so the model (and the trace) can see it."""

    def __init__(self, retriever=None, k: int = 5):
        super().__init__()
        self.retriever = retriever
        self.k = k
        self.answer = JSONRole(SearchSignature)

    def forward(self, goal: str, context: str):
        if self.retriever is None:
            passages = [f"{NO_EVIDENCE[1]}: answer from general knowledge and say so)"]
        else:
            passages = [p.text for p in self.retriever.search(goal, k=self.k)] or [NO_EVIDENCE[0]]
        pred = self.answer(goal=goal, context=context, passages=passages)
        return dspy.Prediction(output=pred.output, passages=passages)


class ToolSignature(dspy.Signature):
    """Carry out the goal. Call the tools when they help: look facts up, compute, or read an artifact
    that the context names by its sha256 id. Then state the result concisely."""

    goal: str = dspy.InputField()
    context: str = dspy.InputField(desc="larger goals this is part of, and results it can use")
    output: str = dspy.OutputField()


class ToolExecutor:
    """A ReAct executor (``dspy.ReAct`` with the JSON adapter) over the built-in tools and the run's
    MCP tools; async, so its tools are awaited on the run's loop, where its MCP sessions live.

    Built-in tools: ``search`` (BM25 over ``retriever``, when given), ``run_python`` (the sandbox,
    as ``CodeExecutor`` uses it) and ``read_artifact`` (when the run has an artifact store). The
    MCP tools are the run's (``run_tools()``), so the agent is assembled per call.
    """

    def __init__(self, retriever=None, *, k: int = 5, max_iters: int = 5, code_timeout_s: float = 10.0,
                 memory_mb: int = 512, isolation: str | None = None):
        self.retriever = retriever
        self.k = k
        self.max_iters = max_iters
        self.code_timeout_s = code_timeout_s
        self.memory_mb = memory_mb
        self.isolation = isolation

    def tools(self) -> list[dspy.Tool]:
        """The tools of one call: the built-in ones, then the run's MCP tools."""
        from roma_lab.tools import RUN_STORE

        builtin = [dspy.Tool(self.run_python, name="run_python")]
        if self.retriever is not None:
            builtin.insert(0, dspy.Tool(self.search, name="search"))
            if hasattr(self.retriever, "read"):  # the web: its pages can be read whole
                builtin.insert(1, dspy.Tool(self.read_page, name="read_page"))
        if RUN_STORE.get() is not None:
            builtin.append(dspy.Tool(self.read_artifact, name="read_artifact"))
        tools = [*builtin, *run_tools()]
        names = [t.name for t in tools]
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:  # ReAct keys tools by name: one would silently replace the other
            raise ValueError(f"two tools are named {clashes}; rename one (an MCP tool may not reuse a built-in "
                             f"tool's name: {[t.name for t in builtin]})")
        return tools

    async def search(self, query: str) -> list[str]:
        """Search for passages about the query (the local corpus, or the web: title, address and text of
        each hit); best first."""
        def find() -> list[str]:
            return [p.text for p in self.retriever.search(query, k=self.k)]

        if hasattr(self.retriever, "read"):  # the web records each of its calls itself, with its price
            return await asyncio.to_thread(find)
        return await traced_call("search", None, {"query": query}, lambda: asyncio.to_thread(find))

    async def read_page(self, url: str) -> str:
        """Read the web page at the URL (one a search gave); returns its text."""
        return await asyncio.to_thread(self.retriever.read, url)

    async def run_python(self, code: str) -> str:
        """Run a short self-contained Python script (standard library only, no network); returns what it printed."""
        def run() -> str:
            result = run_python(code, timeout_s=self.code_timeout_s, memory_mb=self.memory_mb, isolation=self.isolation)
            if result.error is not None:
                raise CodeExecutionError(f"{result.error}\n{result.stderr[-1000:]}".strip())
            return result.stdout.strip()

        return await traced_call("run_python", None, {"code": code}, lambda: asyncio.to_thread(run))

    async def read_artifact(self, ref: str, offset: int = 0) -> str:
        """The text of an artifact the context names by its id (sha256:...), from character
        ``offset``; a long one comes in parts, each saying where the next one starts."""

        text = await asyncio.to_thread(read_artifact, ref)  # read_artifact records itself in the trace
        # A tool result is bounded (max_tool_result_chars) even when it is an artifact asked for by
        # name: a cut 30 MB result must not come back whole through this tool.
        limit = tool_result_limit()
        offset = max(int(offset), 0)
        if limit is None or (offset == 0 and len(text) <= limit):
            return text
        part = text[offset:offset + limit]
        end = offset + len(part)
        more = f"; the rest: read_artifact(ref={ref!r}, offset={end})" if end < len(text) else ""
        return f"{part}\n[characters {offset:,}-{end:,} of {len(text):,}{more}]"

    async def __call__(self, goal: str, context: str):
        react = dspy.ReAct(ToolSignature, tools=self.tools(), max_iters=self.max_iters)
        with dspy.context(adapter=dspy.JSONAdapter()):
            pred = await react.acall(goal=goal, context=context)
        return dspy.Prediction(output=pred.output, reasoning=pred.reasoning)


class CodeExecutionError(RuntimeError):
    """Model-written code failed in the sandbox; the message holds the sandbox's diagnosis."""


class CodeExecutor(dspy.Module):
    """The model writes a script; it runs in the sandbox (an OS jail, time/memory limits); its
    stdout is the result. A failing script fails the node with the sandbox's error. ``isolation``
    names the sandbox mode (see ``run_python``); where it cannot run, the node fails with
    ``SandboxUnavailableError`` before the model is asked for code."""

    def __init__(self, timeout_s: float = 10.0, memory_mb: int = 512, isolation: str | None = None):
        super().__init__()
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.isolation = isolation
        self.write = JSONRole(CodeSignature)

    def forward(self, goal: str, context: str):
        check_sandbox(self.isolation)
        code = _strip_fences(self.write(goal=goal, context=context).code)
        result = run_python(code, timeout_s=self.timeout_s, memory_mb=self.memory_mb, isolation=self.isolation)
        if result.error is not None:
            raise CodeExecutionError(f"{result.error}\n{result.stderr[-1000:]}".strip())
        return dspy.Prediction(output=result.stdout.strip(), code=code)


def _strip_fences(code: str) -> str:
    """Models often wrap code in markdown fences even inside JSON."""
    lines = code.strip().splitlines()
    if lines and lines[0].startswith("```"):
        lines = lines[1:]
        if lines and lines[-1].strip() == "```":
            lines = lines[:-1]
    return "\n".join(lines)


def default_executors(corpus: Sequence[str] | str | PathLike[str] | None = None, *, web: Any = None,
                      tools: bool = False) -> dict[str, dspy.Module | ToolExecutor]:
    """One executor per task type; search uses BM25 over ``corpus`` when one is given, or the web
    (a ``roma_lab.web.Web``: a search, then its first hits read). With ``tools``, search, think and
    code share one :class:`ToolExecutor` (which also reaches the run's MCP tools, and reads a page
    of the web when it searches the web) and write stays direct composition."""
    retriever = None
    if corpus is not None:
        from roma_lab.tools import BM25Retriever

        retriever = BM25Retriever(corpus)
    elif web is not None:
        from roma_lab.web import WebPassages

        retriever = WebPassages(web)
    if tools:
        agent = ToolExecutor(retriever)
        return {"search": agent, "think": agent, "write": WriteExecutor(), "code": agent}
    return {"search": SearchExecutor(retriever), "think": ThinkExecutor(), "write": WriteExecutor(),
            "code": CodeExecutor()}
