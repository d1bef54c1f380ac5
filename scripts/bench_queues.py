"""apns-worker serving several queues (`queues`), measured on this machine (issue 47, item 2).

(1) urgent before bulk: BULK (1,000,000) jobs queued on a bulk queue; once they flow, URGENT (100)
    jobs pushed to a strict queue, one every 10 ms: how long each waited from its push to its
    arrival at the mock (the mock's log), p50, p99 and the most, with the bulk's rate meanwhile
(2) fair shares: two queues of equal weight, one with a backlog of BULK jobs, the other fed
    LIGHT_RATE (100) jobs a second for LIGHT_SECONDS (3): the light queue's waits, as in (1)
(3) throughput: JOBS (200,000) jobs on one queue, next to four queues of equal weight with the same
    jobs in one of them (a queue alone) and spread over the four, in PAIRS (3) rounds, each
    in another order: jobs/s and worker CPU us per job, medians, and each against one queue's
    of the same round

Settings are environment variables; CONNECTIONS and STREAMS as in scripts/bench.py. Timings are
noisy on shared machines; nothing here is a pass/fail test.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BULK = int(os.environ.get("BULK", "1000000"))
URGENT = int(os.environ.get("URGENT", "100"))
LIGHT_RATE = int(os.environ.get("LIGHT_RATE", "100"))
LIGHT_SECONDS = float(os.environ.get("LIGHT_SECONDS", "3"))
PAIRS = int(os.environ.get("PAIRS", "3"))
# The measured jobs' tokens start with this; the mock logs only those.
MEASURED = "ff"


def fill_fast(b, queue, n):
    """LPUSHes `n` bulk jobs, a thousand per command."""
    key = "apns:{%s}:jobs" % queue
    body = json.dumps(bench.PAYLOAD, separators=(",", ":"))
    pipe = b.r.pipeline(transaction=False)
    for start in range(0, n, 1000):
        pipe.lpush(key, *['{"id":"b%d","token":"%064x","payload":%s}' % (i, i, body) for i in range(start, min(n, start + 1000))])
        if len(pipe) >= 20:
            pipe.execute()
    pipe.execute()


def measured_job(i):
    """A job whose token the mock logs, with its push time in its payload."""
    payload = dict(bench.PAYLOAD, pushed_ms=int(time.time() * 1000))
    return json.dumps({"id": "m%d" % i, "token": MEASURED + "%062x" % i, "payload": payload}, separators=(",", ":"))


def waits(log_path, offset, expected):
    """From the mock's log past `offset`: each measured job's wait from its push to its arrival
    (ms), sorted."""
    found = []
    with open(log_path) as f:
        f.seek(offset)
        for line in f:
            e = json.loads(line)
            if e.get("status") == 200 and "payload" in e:
                found.append(e["time_ms"] - e["payload"]["pushed_ms"])
    found.sort()
    if len(found) < expected:
        raise SystemExit("the mock logged %d of the %d measured jobs" % (len(found), expected))
    return found


def percentiles(w):
    return "p50 %d ms, p99 %d ms, most %d ms (%d jobs)" % (w[len(w) // 2], w[min(len(w) - 1, int(len(w) * 0.99))], w[-1], len(w))


def beside_a_backlog(b, port, log_path, name, queues, measured_queue, pushes, every_s):
    """Fills the first of `queues` with BULK jobs, starts a worker on all of them, and once the
    bulk flows pushes `pushes` measured jobs to `measured_queue`, one every `every_s` seconds.
    Returns the measured waits and the bulk's jobs/s meanwhile."""
    bulk = queues[0]["name"]
    fill_fast(b, bulk, BULK)
    offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0  # the mock appends to it
    config = b.worker_config(name, port, queues=queues, results_max=BULK + 1000)
    p = b.spawn([bench.BIN + "/apns-worker", "--config", config], "worker-%s.log" % name)
    deadline = time.time() + 120
    while b.finished(bulk) < min(50_000, BULK // 4):
        if time.time() > deadline or p.poll() is not None:
            raise SystemExit("the bulk did not flow; see %s" % b.path("worker-%s.log" % name))
        time.sleep(0.01)
    key = "apns:{%s}:jobs" % measured_queue
    start, bulk_before = time.time(), b.finished(bulk)
    for i in range(pushes):
        due = start + i * every_s
        time.sleep(max(0, due - time.time()))
        b.r.lpush(key, measured_job(i))
    while b.finished(measured_queue) < pushes and time.time() < deadline + 60:
        time.sleep(0.01)
    bulk_rate = (b.finished(bulk) - bulk_before) / (time.time() - start)
    still = b.r.llen("apns:{%s}:jobs" % bulk)
    b.stop(p)
    for q in queues:
        b.drop(q["name"])
    if still == 0:
        print("  note: the bulk ran out before the measured jobs were done", flush=True)
    time.sleep(0.2)  # the mock writes its log once per loop pass
    return waits(log_path, offset, pushes), bulk_rate


def throughput(b, port, pairs):
    """JOBS jobs through one queue; through four queues of equal weight with the jobs in one
    (a queue alone); and spread over the four. Each run's (jobs/s, CPU us per job)."""
    runs = {"one": [], "alone": [], "four": []}
    kinds = list(runs)
    for r in range(pairs):
        bench.log("throughput round %d of %d" % (r + 1, pairs))
        # Each round in another order: a run after another pays for what that one left Redis to free.
        for kind in kinds[r % 3:] + kinds[:r % 3]:
            if kind == "one":
                secs, cpu, _, _, _ = b.end_to_end("one%d" % r, port)
                runs["one"].append((bench.JOBS / secs, cpu / bench.JOBS))
                continue
            names = ["%s%d-%d" % (kind, r, q) for q in range(4)]
            for q in names[:1] if kind == "alone" else names:
                b.fill(q, bench.JOBS if kind == "alone" else bench.JOBS // 4)
            n = bench.JOBS if kind == "alone" else bench.JOBS // 4 * 4
            config = b.worker_config(names[0], port, queues=[{"name": q, "weight": 1} for q in names])
            secs, cpu, _, _, _ = b.run_worker(names[0], config, n, finished=lambda: sum(b.finished(q) for q in names))
            runs[kind].append((n / secs, cpu / n))
            for q in names:
                b.drop(q)
    return runs


def main():
    b = bench.Bench()
    try:
        log_path = b.path("mock-log.jsonl")
        _, port = b.mock("mock", log=log_path, log_token_prefix=MEASURED)
        print("apns-worker with several queues; %d connections x %d streams" % (bench.CONNECTIONS, bench.STREAMS), flush=True)
        bench.log("(1) %d urgent jobs, one every 10 ms, beside %d bulk jobs" % (URGENT, BULK))
        w, rate = beside_a_backlog(
            b, port, log_path, "strict", [{"name": "bulk", "weight": 1}, {"name": "urgent", "strict": True}], "urgent", URGENT, 0.010)
        print("(1) a strict queue's jobs, one every 10 ms, beside a backlog of %d: %s; the bulk meanwhile %d jobs/s"
              % (BULK, percentiles(w), rate), flush=True)
        bench.log("(2) a light queue fed %d/s beside a backlog of %d, equal weights" % (LIGHT_RATE, BULK))
        n = int(LIGHT_RATE * LIGHT_SECONDS)
        w, rate = beside_a_backlog(
            b, port, log_path, "fair", [{"name": "heavy", "weight": 1}, {"name": "light", "weight": 1}], "light", n, 1.0 / LIGHT_RATE)
        print("(2) equal weights, a queue fed %d jobs/s beside a backlog of %d: %s; the backlog meanwhile %d jobs/s"
              % (LIGHT_RATE, BULK, percentiles(w), rate), flush=True)
        if PAIRS > 0:
            runs = throughput(b, port, PAIRS)
            rate = {k: bench.median([x[0] for x in v]) for k, v in runs.items()}
            cpu = {k: bench.median([x[1] for x in v]) for k, v in runs.items()}
            print("(3) %d jobs, medians of %d rounds: one queue %d jobs/s, %.2f us/job" % (bench.JOBS, PAIRS, rate["one"], cpu["one"]), flush=True)
            for kind, what in (("alone", "four queues of equal weight, the jobs in one"), ("four", "the jobs spread over the four")):
                # Rounds are paired: each ratio is against the one queue of the same round.
                rates = [x[0] / y[0] for x, y in zip(runs[kind], runs["one"])]
                cpus = [x[1] / y[1] for x, y in zip(runs[kind], runs["one"])]
                print("    %s: %d jobs/s, %.2f us/job; paired with one queue's rounds: rate %.2fx (rounds %.2f-%.2f), CPU per job %.2fx"
                      % (what, rate[kind], cpu[kind], bench.median(rates), min(rates), max(rates), bench.median(cpus)), flush=True)
    finally:
        b.close()


if __name__ == "__main__":
    main()
