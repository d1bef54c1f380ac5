#!/usr/bin/env python3
"""Enqueue notification jobs from Python with python3-redis (Debian) or redis-py.

Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (py).
"""
import json
import os

import redis

r = redis.Redis(host=os.environ.get("REDIS_HOST", "127.0.0.1"), port=int(os.environ.get("REDIS_PORT", "6379")))
queue = os.environ.get("QUEUE", "default")
prefix = os.environ.get("ID_PREFIX", "py")
count = int(os.environ.get("COUNT", "1"))

pipe = r.pipeline(transaction=False)
for i in range(count):
    job = {
        "v": 1,
        "id": "%s-%d" % (prefix, i),
        "token": "9e%062x" % i,
        "push_type": "alert",
        "payload": {"aps": {"alert": {"title": "From Python", "body": "Job %d" % i}, "sound": "default"}},
    }
    pipe.lpush("apns:{%s}:jobs" % queue, json.dumps(job))
pipe.execute()
print("enqueued %d jobs on apns:{%s}:jobs" % (count, queue))
