"""Meta-routing speed, measured in one run and printed as ratios.

Paper (Apple M5, 10 cores): training all five heads ~.12 s; routing + execution ~.17 ms per task.
Targets here (issue 12, 2 shared cores): lexical training <= 30 ms and routing <= .05 ms per task
(batch routing over sparse features); with a sentence encoder, routing < 1 ms per task from cached
embeddings; the whole reproduction (every table, 2,000 bootstrap resamples) under 60 s with the
embeddings cached. Encoding itself is printed separately: it is a per-prompt forward pass, done
once per suite and cached. Run: `python speed/bench_router.py [--encoders minilm smollm2-135m]`.
"""

import argparse
import statistics
import tempfile
import time

from roma_lab import router
from roma_lab.papers import routing

PAPER_TRAIN_S = 0.12
PAPER_ROUTE_MS = 0.17
TARGET_TRAIN_S = 0.030
TARGET_ROUTE_MS = 0.05
TARGET_SEMANTIC_ROUTE_MS = 1.0
TARGET_REPRODUCE_S = 60.0


def best_of(fn, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)   # the least-disturbed run on a shared machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--encoders", nargs="+", default=list(router.ENCODERS), choices=list(router.ENCODERS))
    args = parser.parse_args()

    tasks = router.generate_suite()
    train = router.split_tasks(tasks, "train")
    texts, labels = [t.prompt for t in train], router.labels_matrix(train)
    X = router.Featurizer.fit(texts).transform(texts)
    train_s = best_of(lambda: router.train_heads(X, labels, router.TrainingConfig()))
    fit_s = best_of(lambda: router.OperationModel.fit(texts, labels))
    study = routing.RouterStudy.build()
    test = router.split_tasks(tasks, "test")
    test_texts = [t.prompt for t in test]
    learned = router.Learned(study.model)
    route_s = best_of(lambda: [learned(t) for t in test]) / len(test)
    batch_s = best_of(lambda: study.model.routes(test_texts)) / len(test)
    route_exec_s = best_of(lambda: [router.execute(t, learned(t)) for t in test]) / len(test)
    per_task = router.evaluate([learned], test, repeats=5)["latency_ms"]

    print(f"features: {study.model.featurizer.n_features}")
    print(f"train five heads (500 steps):      {train_s * 1000:8.1f} ms   paper/ours = {PAPER_TRAIN_S / train_s:5.2f}x"
          f"   target/ours = {TARGET_TRAIN_S / train_s:5.2f}x")
    print(f"fit incl. featurising:             {fit_s * 1000:8.1f} ms   paper/ours = {PAPER_TRAIN_S / fit_s:5.2f}x"
          f"   target/ours = {TARGET_TRAIN_S / fit_s:5.2f}x")
    print(f"route one task (per-task path):    {route_s * 1000:8.4f} ms")
    print(f"route a batch, per task:           {batch_s * 1000:8.4f} ms   paper/ours = {PAPER_ROUTE_MS / (batch_s * 1000):5.2f}x"
          f"   target/ours = {TARGET_ROUTE_MS / (batch_s * 1000):5.2f}x")
    print(f"route + execute one task:          {route_exec_s * 1000:8.4f} ms   paper/ours = "
          f"{PAPER_ROUTE_MS / (route_exec_s * 1000):5.2f}x")
    print(f"  as measured by evaluate (median of task means, 5 repeats): {statistics.median(per_task):.4f} ms")

    sem = router.SemanticStudy.build(study, encoders=args.encoders)
    fresh = list(router.natural_prompts()["prompt"][:16])
    for name in args.encoders:
        encoder = router.ENCODERS[name]
        encode_s = best_of(lambda: encoder.encode(fresh), repeats=2) / len(fresh)   # uncached forward passes
        print(f"encode one prompt, {name:<14}  {encode_s * 1000:8.1f} ms   (once per prompt; cached per suite)")
    print(f"encoder chosen on dev: {sem.encoder}")
    for variant in ("semantic", "lexical+semantic"):
        model = sem.models[variant]
        model.prepare(test_texts)   # embeddings cached, as in every table
        semantic_s = best_of(lambda: model.routes(test_texts)) / len(test)
        print(f"route a batch, {variant:<17} {semantic_s * 1000:8.4f} ms per task   target/ours = "
              f"{TARGET_SEMANTIC_ROUTE_MS / (semantic_s * 1000):5.1f}x")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        routing.reproduce_tables(out, encoders=args.encoders)
        reproduce_s = time.perf_counter() - start
    print(f"whole reproduction (all tables, embeddings cached): {reproduce_s:6.1f} s   "
          f"target/ours = {TARGET_REPRODUCE_S / reproduce_s:5.1f}x")


if __name__ == "__main__":
    main()
