"""Every fault class of tests/controller_faults.py ends in the typed outcome it owes: no hang, no
crash, no silent success, and every returned run (or the partial run attached to a re-raised
interrupt) is saved and read back intact."""

from __future__ import annotations

import pytest
from controller_faults import FAULTS, Fault, classify, execute

from roma_lab.trace import Run


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_fault_ends_typed(fault: Fault):
    outcome = execute(fault, guard_s=20)
    assert not outcome.hung, "the run hung"
    if fault.expect == "ValueError":
        assert isinstance(outcome.raised, ValueError) and outcome.run is None
        return
    if outcome.raised is not None:
        assert type(outcome.raised).__name__ == fault.expect, repr(outcome.raised)
        assert isinstance(outcome.run, Run) and outcome.run.status == "interrupted"
    else:
        assert outcome.run.status == fault.expect
    assert outcome.json_error is None
    node = outcome.run.node(fault.node)
    assert node.status == fault.node_status
    assert fault.text in " ".join([node.error or "", *node.warnings])
    assert classify(fault, outcome) == ("handled" if fault.handled else "typed")


def test_probe_covers_enough_fault_classes():
    assert len({f.name for f in FAULTS}) == len(FAULTS) >= 38
