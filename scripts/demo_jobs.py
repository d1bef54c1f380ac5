"""Jobs for scripts/demo: enqueue a mix, wait for the outcomes, summarise and check them.

Uses Debian's python3-redis and nothing of ours: the job format and keys are the public contract.
"""
import json
import sys
import time

import redis


def keys(queue):
    p = "apns:{%s}" % queue
    return {"jobs": p + ":jobs", "results": p + ":results", "dead": p + ":dead",
            "invalid": p + ":invalid-tokens", "stats": p + ":stats"}


def token(i, prefix=""):
    h = "%x" % i
    return prefix + "0" * (64 - len(prefix) - len(h)) + h


MALFORMED = [
    ("not json", "MalformedJob"),
    ('{"payload":{"aps":{"alert":"no token"}}}', "MissingDeviceToken"),
    ('{"token":"%s","push_type":"shout","payload":{"aps":{}}}' % token(1), "InvalidPushType"),
    ('{"token":"%s","priority":7,"payload":{"aps":{"alert":"x"}}}' % token(1), "BadPriority"),
    ('{"token":"%s","payload":{"aps":{"alert":"%s"}}}' % (token(1), "x" * 5000), "PayloadTooLarge"),
    ('{"token":"%s","pyload":{"aps":{}}}' % token(1), "UnknownField"),
]


def enqueue(port, queue, n):
    r = redis.Redis(port=int(port))
    k = keys(queue)
    expected = {"good": [], "gone": [], "other_app": [], "malformed": {}, "fcm_good": [], "fcm_gone": []}
    pipe = r.pipeline(transaction=False)
    for i in range(int(n)):
        if i % 50 == 7:  # 2%: malformed, in every flavour
            text, reason = MALFORMED[(i // 50) % len(MALFORMED)]
            expected["malformed"][reason] = expected["malformed"].get(reason, 0) + 1
            pipe.lpush(k["jobs"], text)
            continue
        if i % 4 == 1:  # a quarter: Android phones, through the FCM app, 1% of them unregistered
            t = ("unregistered-%d" % i) if i % 100 == 9 else "demo-fcm-token:APA91b%08d" % i
            expected["fcm_gone" if i % 100 == 9 else "fcm_good"].append(t)
            job = {"v": 1, "id": "demo-%d" % i, "app": "android", "token": t, "priority": 10,
                   "notification": {"title": "Demo", "body": "Notification %d" % i, "channel_id": "demo"}}
            pipe.lpush(k["jobs"], json.dumps(job, separators=(",", ":")))
            continue
        if i % 50 == 3:  # 2%: the device token is gone (410)
            t, bucket = token(i, "dead"), "gone"
        elif i % 100 == 6:  # 1%: the token belongs to another app (400)
            t, bucket = token(i, "baad"), "other_app"
        else:
            t, bucket = token(i), "good"
        expected[bucket].append(t)
        job = {"v": 1, "id": "demo-%d" % i, "app": "default", "token": t, "push_type": "alert", "priority": 10,
               "payload": {"aps": {"alert": {"title": "Demo", "body": "Notification %d" % i}, "sound": "default"}}}
        pipe.lpush(k["jobs"], json.dumps(job, separators=(",", ":")))
        if len(pipe) >= 1000:
            pipe.execute()
    pipe.execute()
    json.dump(expected, sys.stdout)


FINAL = (b"delivered", b"invalid_token", b"dead_lettered")


def total(r, queue):
    stats = r.hgetall(keys(queue)["stats"])
    return sum(int(stats.get(k, 0)) for k in FINAL)


def wait(port, queue, n, timeout):
    r = redis.Redis(port=int(port))
    deadline = time.time() + float(timeout)
    while total(r, queue) < int(n):
        if time.time() > deadline:
            sys.exit("timed out: %d of %s outcomes" % (total(r, queue), n))
        time.sleep(0.02)


def stream(r, key):
    return [json.loads(fields[b"record"]) for _, fields in r.xrange(key)]


def accepted_by(mock_log):
    """The mock's log: how often it accepted each token."""
    accepted = {}
    with open(mock_log) as f:
        for line in f:
            e = json.loads(line)
            if e["status"] == 200 and "token" in e:
                accepted[e["token"]] = accepted.get(e["token"], 0) + 1
    return accepted


def summary(port, queue, expected_file, mock_log, fcm_log, start, end, cpu_ticks, hz, rss_kb):
    r = redis.Redis(port=int(port))
    k = keys(queue)
    expected = json.load(open(expected_file))
    stats = {a.decode(): int(b) for a, b in r.hgetall(k["stats"]).items()}
    results = stream(r, k["results"])
    dead = stream(r, k["dead"])
    invalid = stream(r, k["invalid"])
    rejected = {}
    for rec in results:
        if rec["status"] == "failed":
            rejected[rec["reason"]] = rejected.get(rec["reason"], 0) + 1
    dead_reasons = {}
    for rec in dead:
        dead_reasons[rec["reason"]] = dead_reasons.get(rec["reason"], 0) + 1
    accepted, fcm_accepted = accepted_by(mock_log), accepted_by(fcm_log)
    elapsed = float(end) - float(start)
    n = sum(stats.get(k.decode(), 0) for k in FINAL)
    sent = stats.get("delivered", 0) + sum(rejected.values())
    cpu_us = int(cpu_ticks) * 1e6 / int(hz)

    print()
    print("apns-worker demo summary")
    print("  jobs                %d" % n)
    fcm_delivered = sum(1 for rec in results if rec.get("provider") == "fcm")
    print("  delivered           %d  (%d to iPhones through APNs, %d to Android phones through FCM)"
          % (stats.get("delivered", 0), stats.get("delivered", 0) - fcm_delivered, fcm_delivered))
    print("  rejected            %d  %s" % (sum(rejected.values()), json.dumps(rejected, sort_keys=True)))
    print("  invalid tokens      %d  (feed: %s)" % (len(invalid), k["invalid"]))
    print("  dead-lettered       %d  %s" % (len(dead), json.dumps(dead_reasons, sort_keys=True)))
    print("  elapsed             %.2f s (worker start to last outcome, connections included)" % elapsed)
    print("  throughput          %.0f jobs/s" % (n / elapsed))
    print("  worker CPU          %.1f us per notification sent (%.2f s for %d); peak RSS %.1f MiB"
          % (cpu_us / max(sent, 1), cpu_us / 1e6, sent, int(rss_kb) / 1024))

    problems = []
    good, fcm_good = expected["good"], expected["fcm_good"]
    if stats.get("delivered", 0) != len(good) + len(fcm_good):
        problems.append("delivered %d, expected %d" % (stats.get("delivered", 0), len(good) + len(fcm_good)))
    if fcm_delivered != len(fcm_good):
        problems.append("delivered through FCM %d, expected %d" % (fcm_delivered, len(fcm_good)))
    twice = [t for t in good if accepted.get(t, 0) != 1] + [t for t in fcm_good if fcm_accepted.get(t, 0) != 1]
    if twice:
        problems.append("%d good tokens not accepted exactly once by the mocks (e.g. %s)" % (len(twice), twice[0]))
    if rejected.get("UNREGISTERED", 0) != len(expected["fcm_gone"]):
        problems.append("UNREGISTERED %d, expected %d" % (rejected.get("UNREGISTERED", 0), len(expected["fcm_gone"])))
    if rejected.get("Unregistered", 0) != len(expected["gone"]):
        problems.append("Unregistered %d, expected %d" % (rejected.get("Unregistered", 0), len(expected["gone"])))
    if rejected.get("DeviceTokenNotForTopic", 0) != len(expected["other_app"]):
        problems.append("DeviceTokenNotForTopic %d, expected %d" % (rejected.get("DeviceTokenNotForTopic", 0), len(expected["other_app"])))
    if {t: c for t, c in expected["malformed"].items()} != {t: c for t, c in dead_reasons.items() if t in expected["malformed"]}:
        problems.append("dead letters %s, expected %s" % (dead_reasons, expected["malformed"]))
    invalid_expected = len(expected["gone"]) + len(expected["other_app"]) + len(expected["fcm_gone"])
    if len(invalid) != invalid_expected:
        problems.append("invalid-token feed has %d, expected %d" % (len(invalid), invalid_expected))
    if problems:
        print("\nCHECK FAILED:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("\ncheck: every good job was delivered exactly once (the mocks' logs agree), every rejection")
    print("is recorded with its reason, and every malformed job is in the dead letters.")


if __name__ == "__main__":
    {"enqueue": enqueue, "wait": wait, "summary": summary}[sys.argv[1]](*sys.argv[2:])
