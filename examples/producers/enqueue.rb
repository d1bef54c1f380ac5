#!/usr/bin/env ruby
# Enqueue notification jobs from Ruby with ruby-redis (Debian) or the redis gem.
# Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (rb),
# SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
# here at random; KEY_PREFIX: give each job the idempotency_key "<prefix>-<i>", and push it to the
# shard FNV-1a-32(key) mod N, so that a key has one home (idempotency keys are per shard).
require "json"
require "redis"

redis = Redis.new(host: ENV.fetch("REDIS_HOST", "127.0.0.1"), port: Integer(ENV.fetch("REDIS_PORT", "6379")))
queue = ENV.fetch("QUEUE", "default")
prefix = ENV.fetch("ID_PREFIX", "rb")
count = Integer(ENV.fetch("COUNT", "1"))
shards = Integer(ENV.fetch("SHARDS", "1"))
key_prefix = ENV["KEY_PREFIX"]
# FNV-1a, 32 bits, of the UTF-8 bytes: the shard of an idempotency key (README).
fnv1a32 = ->(text) { text.bytes.reduce(0x811C9DC5) { |h, b| ((h ^ b) * 0x01000193) & 0xFFFFFFFF } }
jobs_key = lambda do |key|
  next "apns:{#{queue}}:jobs" if shards == 1
  "apns:{#{queue}.#{key ? fnv1a32.call(key) % shards : rand(shards)}}:jobs"
end

redis.pipelined do |pipe|
  count.times do |i|
    job = {
      v: 1,
      id: "#{prefix}-#{i}",
      token: format("7b%062x", i),
      payload: { aps: { alert: { title: "From Ruby", body: "Job #{i}" } } }
    }
    job[:idempotency_key] = "#{key_prefix}-#{i}" if key_prefix
    pipe.lpush(jobs_key.call(job[:idempotency_key]), JSON.generate(job))
  end
end
puts "enqueued #{count} jobs on queue #{queue} (#{shards} shards)"
