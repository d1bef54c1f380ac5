#!/bin/sh
# Enqueue notification jobs with nothing but redis-cli.
# Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (sh),
# SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
# here by a hash of its token (cksum), so that one device's jobs keep to one shard.
set -eu
host="${REDIS_HOST:-127.0.0.1}"; port="${REDIS_PORT:-6379}"; queue="${QUEUE:-default}"
count="${COUNT:-1}"; prefix="${ID_PREFIX:-sh}"; shards="${SHARDS:-1}"
i=0
while [ "$i" -lt "$count" ]; do
    token=$(printf '5a%062x' "$i")
    job=$(printf '{"v":1,"id":"%s-%d","token":"%s","payload":{"aps":{"alert":{"title":"From shell","body":"Job %d"}}}}' \
        "$prefix" "$i" "$token" "$i")
    key="apns:{$queue}:jobs"
    if [ "$shards" -gt 1 ]; then
        key="apns:{$queue.$(( $(printf '%s' "$token" | cksum | cut -d' ' -f1) % shards ))}:jobs"
    fi
    redis-cli -h "$host" -p "$port" LPUSH "$key" "$job" >/dev/null
    i=$((i + 1))
done
echo "enqueued $count jobs on queue $queue ($shards shards)"
