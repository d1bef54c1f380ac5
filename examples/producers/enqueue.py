#!/usr/bin/env python3
"""Enqueue notification jobs from Python with python3-redis (Debian) or redis-py.

Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (py),
SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
here at random; KEY_PREFIX: give each job the idempotency_key "<prefix>-<i>", and push it to the
shard FNV-1a-32(key) mod N, so that a key has one home (idempotency keys are per shard).
"""
import json
import os
import random

import redis

r = redis.Redis(host=os.environ.get("REDIS_HOST", "127.0.0.1"), port=int(os.environ.get("REDIS_PORT", "6379")))
queue = os.environ.get("QUEUE", "default")
prefix = os.environ.get("ID_PREFIX", "py")
count = int(os.environ.get("COUNT", "1"))
shards = int(os.environ.get("SHARDS", "1"))
key_prefix = os.environ.get("KEY_PREFIX")


def fnv1a32(text):
    """FNV-1a, 32 bits, of the UTF-8 bytes: the shard of an idempotency key (README)."""
    h = 0x811C9DC5
    for b in text.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def jobs_key(idempotency_key=None):
    """The list a job goes on: the queue's own, or a shard's (by its key's hash, else at random)."""
    if shards == 1:
        return "apns:{%s}:jobs" % queue
    shard = fnv1a32(idempotency_key) % shards if idempotency_key else random.randrange(shards)
    return "apns:{%s.%d}:jobs" % (queue, shard)


pipe = r.pipeline(transaction=False)
for i in range(count):
    job = {
        "v": 1,
        "id": "%s-%d" % (prefix, i),
        "token": "9e%062x" % i,
        "push_type": "alert",
        "payload": {"aps": {"alert": {"title": "From Python", "body": "Job %d" % i}, "sound": "default"}},
    }
    if key_prefix:
        job["idempotency_key"] = "%s-%d" % (key_prefix, i)
    pipe.lpush(jobs_key(job.get("idempotency_key")), json.dumps(job))
pipe.execute()
print("enqueued %d jobs on queue %s (%d shards)" % (count, queue, shards))
