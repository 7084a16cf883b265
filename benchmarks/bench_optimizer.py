"""How much parallel drafting saves: one GEPA+ round with k drafts, sequential vs parallel.

Models are scripted and sleep LATENCY_S per call to stand in for a remote model (no CPU load).
Prints wall-clock seconds and the ratio; run with
    .venv/bin/python benchmarks/bench_optimizer.py
"""

import itertools
import json
import time

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage

from roma_lab.optimizer import GepaPlusConfig, GepaPlusProposer, RunLog
from roma_lab.optimizer._contracts import contracts_for

LATENCY_S = 0.2
K = 4


class SleepyEngine:
    """Answers ``make(call_number)`` after LATENCY_S; distinct drafts so each one gets judged."""

    def __init__(self, make):
        self.make = make
        self.count = itertools.count()

    def complete(self, request):
        time.sleep(LATENCY_S)
        values = self.make(next(self.count))
        return Response(id=None, model=request.model, message=Message.assistant([TextPart(json.dumps(values))]),
                        finish_reason="stop", usage=Usage(input_tokens=0, output_tokens=0, total_tokens=0))

    def stream(self, request):
        raise NotImplementedError

    def close(self):
        pass


def one_round(max_parallel: int) -> float:
    proposer_lm = dspy.LM("scripted/proposer", engine=SleepyEngine(lambda i: {"new_instruction": f"Answer. Rule {i}."}),
                          cache=False)
    judge_lm = dspy.LM("scripted/judge", engine=SleepyEngine(lambda i: {"score": 0.5}), cache=False)
    config = GepaPlusConfig(proposers=((proposer_lm, 0.7),), k=K, n=1, beta=0.0, judge=judge_lm,
                            max_parallel=max_parallel)
    program = dspy.Predict("question -> answer")
    log = RunLog("gepa+", contracts_for({"self": ("Answer.", ("question", "answer"))}))
    proposer = GepaPlusProposer(config, student=program, metric=lambda *a: 0.0, contracts=log.contracts, log=log)
    examples = {"self": [{"Inputs": {"question": "q"}, "Generated Outputs": {"answer": "a"}, "Feedback": "wrong"}]}
    start = time.perf_counter()
    proposer({"self": "Answer."}, examples, ["self"])
    return time.perf_counter() - start


if __name__ == "__main__":
    sequential, parallel = one_round(1), one_round(K)
    print(f"k={K} drafts (+1 judge call each), {LATENCY_S}s per model call")
    print(f"sequential: {sequential:.2f}s  parallel: {parallel:.2f}s  speed-up: {sequential / parallel:.1f}x")
