"""DSPy signatures for the GEPA+ judge and merger (drafts use DSPy's own GEPA proposal signature)."""

from __future__ import annotations

from typing import Any

import dspy


class JudgeInstructionEdit(dspy.Signature):
    """You review a proposed rewrite of the instruction given to one module of an LLM program.

    You see the current instruction, the proposed one, the module's interface contract, and
    examples of the module's inputs, its outputs and feedback on them. Rate how likely the proposed
    instruction is to fix the problems the feedback shows without breaking what already works or
    the contract. 0.0 means harmful or useless, 1.0 means clearly better."""

    component: str = dspy.InputField(desc="Name of the module whose instruction is edited.")
    contract: str = dspy.InputField(desc="What every instruction for this module must keep ('' if nothing).")
    current_instruction: str = dspy.InputField()
    proposed_instruction: str = dspy.InputField()
    examples_with_feedback: list[dict[str, Any]] = dspy.InputField(
        desc="The module's inputs, generated outputs and feedback under the current instruction."
    )
    score: float = dspy.OutputField(desc="A number between 0.0 and 1.0.")


class MergeInstructionEdits(dspy.Signature):
    """Merge several proposed rewrites of one module's instruction into a single instruction.

    Split each proposal into atomic edits (one added rule, one replaced example, one rephrased
    sentence). Keep the edits that address the problems, drop exact and near duplicates, and when
    two edits conflict keep the one from the higher-ranked proposal. Keep every requirement of the
    contract. Change the current instruction as little as needed to carry the kept edits, and
    output only the merged instruction."""

    component: str = dspy.InputField(desc="Name of the module whose instruction is edited.")
    contract: str = dspy.InputField(desc="What every instruction for this module must keep ('' if nothing).")
    current_instruction: str = dspy.InputField()
    ranked_proposals: list[str] = dspy.InputField(desc="Proposed instructions, best first.")
    merged_instruction: str = dspy.OutputField()
