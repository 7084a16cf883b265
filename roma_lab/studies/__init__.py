"""The lab's own experiments (notebooks 40-49), built on the mechanism rooms like the paper wings:
``measure_offline_web`` (notebook 42) runs ROMA and the agent through the offline web, recorded and
replayed bit for bit, beside the same systems through BM25; ``replay_web_calls`` makes its recorded web
calls again from a snapshot alone (a committed finding's check); ``measure_evidence_flags`` (notebook 43)
measures how often the "no evidence" flag fires on goals on and off the search corpus;
``compare_repeat_guard`` (notebook 44) runs the agent with its repeat guard on and off, judged by correct
answers per hour."""

from ._evidence import EVIDENCE_GOALS, measure_evidence_flags
from ._guard import ARMS, compare_repeat_guard, guard_decision
from ._web import DEFAULT_PORT, SYSTEMS, measure_offline_web, replay_web_calls

__all__ = ["ARMS", "DEFAULT_PORT", "EVIDENCE_GOALS", "SYSTEMS", "compare_repeat_guard", "guard_decision", "measure_evidence_flags", "measure_offline_web", "replay_web_calls"]
