"""A training loop in its own process: calls belvedere_client.log() every iteration and times each call.

Usage: training_loop.py ITERATIONS PAUSE_AT WORK_S; settings from the environment (BELVEDERE_*) and
TEST_TIMEOUT_S, TEST_INTERVAL_S, TEST_BATCH_ROWS, TEST_FLUSH_S. At iteration PAUSE_AT it prints "paused" and
waits for a line on stdin (the test changes the portal then); at the end it prints one JSON line with the
timings and the helper's counters, then exits (the helper's atexit flush runs after that line)."""
import json
import os
import sys
import time

import belvedere_client as bv

iterations, pause_at, work_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
bv.configure(timeout_s=float(os.environ["TEST_TIMEOUT_S"]), interval_s=float(os.environ["TEST_INTERVAL_S"]),
             batch_rows=int(os.environ["TEST_BATCH_ROWS"]), flush_deadline_s=float(os.environ["TEST_FLUSH_S"]),
             backoff_s=0.05, backoff_max_s=0.5)
log_seconds = []
done = 0
for step in range(iterations):
    if step == pause_at:
        print("paused", json.dumps(bv.stats()), flush=True)
        sys.stdin.readline()
    time.sleep(work_s)  # the iteration's work
    started = time.perf_counter()
    bv.log(step=step, tokens_per_s=1000.0 + step, iteration_s=work_s, loss=2.0 / (1 + step))
    log_seconds.append(time.perf_counter() - started)
    done += 1
after = log_seconds[pause_at:]
print(json.dumps({"done": done, "max_log_s": max(log_seconds), "sum_log_s_after": sum(after),
                  "stats": bv.stats(), "end": time.time()}), flush=True)
