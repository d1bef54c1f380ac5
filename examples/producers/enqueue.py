#!/usr/bin/env python3
"""Enqueue notification jobs from Python with python3-redis (Debian) or redis-py.

Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (py),
SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
here at random.
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


def jobs_key():
    """The list a job goes on: the queue's own, or a shard's at random."""
    return "apns:{%s}:jobs" % queue if shards == 1 else "apns:{%s.%d}:jobs" % (queue, random.randrange(shards))


pipe = r.pipeline(transaction=False)
for i in range(count):
    job = {
        "v": 1,
        "id": "%s-%d" % (prefix, i),
        "token": "9e%062x" % i,
        "push_type": "alert",
        "payload": {"aps": {"alert": {"title": "From Python", "body": "Job %d" % i}, "sound": "default"}},
    }
    pipe.lpush(jobs_key(), json.dumps(job))
pipe.execute()
print("enqueued %d jobs on queue %s (%d shards)" % (count, queue, shards))
