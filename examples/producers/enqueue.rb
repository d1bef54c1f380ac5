#!/usr/bin/env ruby
# Enqueue notification jobs from Ruby with ruby-redis (Debian) or the redis gem.
# Env: REDIS_HOST (127.0.0.1), REDIS_PORT (6379), QUEUE (default), COUNT (1), ID_PREFIX (rb).
require "json"
require "redis"

redis = Redis.new(host: ENV.fetch("REDIS_HOST", "127.0.0.1"), port: Integer(ENV.fetch("REDIS_PORT", "6379")))
queue = ENV.fetch("QUEUE", "default")
prefix = ENV.fetch("ID_PREFIX", "rb")
count = Integer(ENV.fetch("COUNT", "1"))

redis.pipelined do |pipe|
  count.times do |i|
    job = {
      v: 1,
      id: "#{prefix}-#{i}",
      token: format("7b%062x", i),
      payload: { aps: { alert: { title: "From Ruby", body: "Job #{i}" } } }
    }
    pipe.lpush("apns:{#{queue}}:jobs", JSON.generate(job))
  end
end
puts "enqueued #{count} jobs on apns:{#{queue}}:jobs"
