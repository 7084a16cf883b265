"""What the agent acts on: tools, a per-attempt environment, and a task bundling them with a grader.

An :class:`Environment` is made fresh for every attempt (``AgentTask.environment(context)``), so one
rollout's tool state never reaches another. Tools take string arguments and return text.
A failing tool raises :class:`ToolError` (the agent sees the message and goes on); a component out
of service raises :class:`ToolUnavailable` (the attempt stops, as the suite's executor stops).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from roma_lab.bench import Grader, Item

__all__ = ["AgentTask", "Environment", "Tool", "ToolContext", "ToolError", "ToolUnavailable", "describe_tools"]


class ToolError(RuntimeError):
    """A tool call failed; the message becomes the observation and the attempt goes on."""


class ToolUnavailable(ToolError):
    """The tool's component is out of service; the attempt stops here."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: tuple[str, ...] = ()  # required string arguments; extra ones are ignored
    # The same arguments always give the same result and change no state (a search over a fixed
    # collection, reading a fixed file): the agent's repeat guard never runs such a call twice.
    idempotent: bool = False


def describe_tools(tools: Sequence[Tool]) -> str:
    """The tool list as the actor reads it."""
    if not tools:
        return "(no tools: answer from what you know)"
    return "\n".join(f"- {t.name}({', '.join(t.parameters)}): {t.description}" for t in tools)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What the agent's configuration gives an environment when it is made: how many search
    sources and passages to use, the REFLECT query rewrite (a model call; None = off) and whether
    to EXPAND queries into synonym variants. Environments without search ignore it."""

    search_sources: int
    search_k: int
    rewrite_query: Callable[[str], str] | None
    expand_query: bool


class Environment(Protocol):
    tools: tuple[Tool, ...]

    def call(self, name: str, arguments: Mapping[str, str]) -> str:
        """Run one tool; raises ToolError / ToolUnavailable."""
        ...


@dataclass(frozen=True, slots=True)
class AgentTask:
    """A task the agent can run: the benchmark item (its gold answer is never shown to the agent),
    the breakdown key, a factory of fresh environments, and the benchmark's grader.

    ``private`` marks items whose text must not be written to disk in the clear (BrowseComp):
    saved trajectories replace the question with a placeholder.
    """

    item: Item
    split: str
    stratum: str
    environment: Callable[[ToolContext], Environment]
    grader: Grader
    private: bool = False
