#!/usr/bin/env ruby
# Enqueue notification jobs from Ruby with ruby-redis (Debian) or the redis gem.
# Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (rb),
# SHARDS (1): a queue of N shards takes each job on one of apns:{Q.0}:jobs … apns:{Q.N-1}:jobs,
# here at random.
require "json"
require "redis"

redis = Redis.new(host: ENV.fetch("REDIS_HOST", "127.0.0.1"), port: Integer(ENV.fetch("REDIS_PORT", "6379")))
queue = ENV.fetch("QUEUE", "default")
prefix = ENV.fetch("ID_PREFIX", "rb")
count = Integer(ENV.fetch("COUNT", "1"))
shards = Integer(ENV.fetch("SHARDS", "1"))
jobs_key = -> { shards == 1 ? "apns:{#{queue}}:jobs" : "apns:{#{queue}.#{rand(shards)}}:jobs" }

redis.pipelined do |pipe|
  count.times do |i|
    job = {
      v: 1,
      id: "#{prefix}-#{i}",
      token: format("7b%062x", i),
      payload: { aps: { alert: { title: "From Ruby", body: "Job #{i}" } } }
    }
    pipe.lpush(jobs_key.call, JSON.generate(job))
  end
end
puts "enqueued #{count} jobs on queue #{queue} (#{shards} shards)"
