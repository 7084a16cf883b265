"""How much parallel drafting saves: one GEPA+ round with k drafts, sequential vs parallel.

Models are scripted and sleep LATENCY_S per call to stand in for a remote model (no CPU load).
Prints wall-clock seconds and the ratio; run with
    .venv/bin/python speed/bench_optimizer.py
"""

import itertools
import time

import dspy

from roma_lab.lm import scripted_lm
from roma_lab.optimizer import GepaPlusConfig, GepaPlusProposer, RunLog, contracts_for

LATENCY_S = 0.2
K = 4


def sleepy_lm(name, make):
    """A scripted model answering ``make(call_number)`` after LATENCY_S; distinct drafts so each one gets judged."""
    count = itertools.count()

    def respond(request):
        time.sleep(LATENCY_S)
        return make(next(count))

    return scripted_lm(respond, name=f"scripted/{name}")


def one_round(max_parallel: int) -> float:
    proposer_lm = sleepy_lm("proposer", lambda i: {"new_instruction": f"Answer. Rule {i}."})
    judge_lm = sleepy_lm("judge", lambda i: {"score": 0.5})
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
