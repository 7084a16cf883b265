"""The agent's memory within one attempt: what the actor is shown of its earlier steps.

``current``: the last ``window`` steps in full (older ones are only counted). ``summary``: plus a
model summary of every older step. ``retrieval``: instead of all older summaries, the ``k`` that
BM25 (the controller's bm25s retriever) ranks highest for the task and the latest step.
``long_term``: plus a long-term memory fused every step (and carried across tasks by the runner).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from roma_lab.tools import BM25Retriever, EmptyCorpusError

__all__ = ["Memory"]


@dataclass(slots=True)
class _Entry:
    text: str                    # the step in full
    summary: str | None = None


@dataclass(slots=True)
class Memory:
    mode: str
    window: int
    k: int
    long_term: str = ""
    show_long_term: bool = True
    entries: list[_Entry] = field(default_factory=list)

    def add(self, text: str, summary: str | None = None) -> None:
        self.entries.append(_Entry(text, summary))

    def render(self, task: str) -> str:
        """The memory text for the next actor call."""
        parts = []
        if self.mode == "long_term" and self.show_long_term and self.long_term.strip():
            parts.append(f"Long-term memory (earlier steps and tasks):\n{self.long_term.strip()}")
        older, recent = self.entries[: -self.window], self.entries[-self.window:]
        if older:
            if self.mode == "current":
                parts.append(f"({len(older)} earlier step(s) not shown.)")
            else:
                shown = self._older_summaries(older, task, recent)
                heading = "Relevant earlier steps" if self.mode in ("retrieval", "long_term") else "Earlier steps"
                parts.append(f"{heading} (summaries):\n" + "\n".join(f"- {s}" for s in shown))
        parts.append(("Recent steps:\n" + "\n\n".join(e.text for e in recent)) if recent else "No steps yet.")
        return "\n\n".join(parts)

    def _older_summaries(self, older: list[_Entry], task: str, recent: list[_Entry]) -> list[str]:
        summaries = [e.summary or e.text for e in older]  # a failed summary call leaves the full text
        if self.mode == "summary" or len(summaries) <= self.k:
            return summaries
        query = " ".join([task] + [e.text for e in recent[-1:]])
        try:
            hits = BM25Retriever(summaries).search(query, k=self.k)
        except EmptyCorpusError:
            return summaries[-self.k:]
        chosen = sorted(int(p.doc_id) for p in hits) or list(range(len(summaries) - self.k, len(summaries)))
        return [summaries[i] for i in chosen]  # in step order, so the actor reads a timeline
