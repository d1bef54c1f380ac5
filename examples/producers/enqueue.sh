#!/bin/sh
# Enqueue notification jobs with nothing but redis-cli.
# Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (sh).
set -eu
host="${REDIS_HOST:-127.0.0.1}"; port="${REDIS_PORT:-6379}"; queue="${QUEUE:-default}"
count="${COUNT:-1}"; prefix="${ID_PREFIX:-sh}"
i=0
while [ "$i" -lt "$count" ]; do
    token=$(printf '5a%062x' "$i")
    job=$(printf '{"v":1,"id":"%s-%d","token":"%s","payload":{"aps":{"alert":{"title":"From shell","body":"Job %d"}}}}' \
        "$prefix" "$i" "$token" "$i")
    redis-cli -h "$host" -p "$port" LPUSH "apns:{$queue}:jobs" "$job" >/dev/null
    i=$((i + 1))
done
echo "enqueued $count jobs on apns:{$queue}:jobs"
