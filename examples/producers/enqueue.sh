#!/bin/sh
# Enqueue notification jobs with nothing but redis-cli.
# Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (sh),
# SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
# here by a hash of its token (cksum), so that one device's jobs keep to one shard; KEY_PREFIX:
# give each job the idempotency_key "<prefix>-<i>", and push it to the shard FNV-1a-32(key) mod N
# instead, so that a key has one home (idempotency keys are per shard).
set -eu
host="${REDIS_HOST:-127.0.0.1}"; port="${REDIS_PORT:-6379}"; queue="${QUEUE:-default}"
count="${COUNT:-1}"; prefix="${ID_PREFIX:-sh}"; shards="${SHARDS:-1}"; key_prefix="${KEY_PREFIX:-}"
# FNV-1a, 32 bits, of the key's bytes (README): the shard of an idempotency key.
fnv1a32() {
    h=2166136261
    for b in $(printf '%s' "$1" | od -An -v -tu1); do h=$(( ((h ^ b) * 16777619) & 4294967295 )); done
    echo "$h"
}
i=0
while [ "$i" -lt "$count" ]; do
    token=$(printf '5a%062x' "$i")
    idem=""
    [ -n "$key_prefix" ] && idem=$(printf ',"idempotency_key":"%s-%d"' "$key_prefix" "$i")
    job=$(printf '{"v":1,"id":"%s-%d"%s,"token":"%s","payload":{"aps":{"alert":{"title":"From shell","body":"Job %d"}}}}' \
        "$prefix" "$i" "$idem" "$token" "$i")
    key="apns:{$queue}:jobs"
    if [ "$shards" -gt 1 ]; then
        if [ -n "$key_prefix" ]; then
            key="apns:{$queue.$(( $(fnv1a32 "$key_prefix-$i") % shards ))}:jobs"
        else
            key="apns:{$queue.$(( $(printf '%s' "$token" | cksum | cut -d' ' -f1) % shards ))}:jobs"
        fi
    fi
    redis-cli -h "$host" -p "$port" LPUSH "$key" "$job" >/dev/null
    i=$((i + 1))
done
echo "enqueued $count jobs on queue $queue ($shards shards)"
