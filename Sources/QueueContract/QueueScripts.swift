import RedisClient

/// The Lua scripts that make each queue transition one atomic step (DESIGN.md §3).
public enum QueueScripts {
    /// Moves up to ARGV[1] jobs (the staged ones first, then the oldest of the list) into a new
    /// batch list, registers the batch with its first handle, and renews the worker's lease.
    /// The jobs never pass through Lua: SORT … STORE copies them inside Redis (BY nosort keeps a
    /// list's order; DESC reads from the consuming end). Copying each job into Lua and back cost
    /// Redis more than everything else a fetch does. The worker reads the batch with an LRANGE
    /// sent in the same write.
    /// With ARGV[7] "1" it takes one suspect (a job taken back twice or more) alone instead.
    /// A fetch sent on a connection the fetcher has since given up takes nothing: `lookUpLost`
    /// raised the fetcher's fence (ARGV[5], a field of the batches hash) past its epoch.
    /// KEYS: jobs, batch, batches, workers, staging, handle counter, suspects.
    /// ARGV: max, worker id, lease ms, batch id, fence field, connection epoch, a suspect ("1"/"0").
    /// Returns {first handle, number of jobs, suspects waiting}.
    public static let fetch = RedisScript(
        """
        local call = redis.call
        local fence = call('HGET', KEYS[3], ARGV[5])
        if fence and tonumber(fence) > tonumber(ARGV[6]) then return {0, 0, 0} end
        local n = 0
        if ARGV[7] == '1' then
          if call('LMOVE', KEYS[7], KEYS[2], 'RIGHT', 'LEFT') then n = 1 end
        else
          local max = tonumber(ARGV[1])
          local staged = call('LLEN', KEYS[5])
          if max > staged then
            n = call('SORT', KEYS[1], 'BY', 'nosort', 'DESC', 'LIMIT', 0, max - staged, 'STORE', KEYS[2])
            if n > 0 then call('LTRIM', KEYS[1], 0, -n - 1) end
          end
          for _ = 1, staged do call('LMOVE', KEYS[5], KEYS[2], 'LEFT', 'LEFT') end
          n = n + staged
        end
        local now = call('TIME')
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        call('ZADD', KEYS[4], now_ms + tonumber(ARGV[3]), ARGV[2])
        local suspects = call('LLEN', KEYS[7])
        if n == 0 then return {0, 0, suspects} end
        local first = call('INCRBY', KEYS[6], n) - n + 1
        call('HSET', KEYS[3], ARGV[4], first)
        return {first, n, suspects}
        """)

    /// Looks up a batch whose fetch reply was lost: its first handle if the fetch ran, else 0.
    /// First it raises the fetcher's fence to the new connection's epoch, so that a fetch still
    /// on its way on an old connection takes nothing: one field per fetcher, never one per batch.
    /// KEYS: batches. ARGV: batch id, fence field, epoch.
    public static let lookUpLost = RedisScript(
        """
        redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
        return tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
        """)

    /// One call of `fetch`, its keys and arguments in the script's order.
    public static func fetchCall(
        _ keys: QueueKeys, worker: String, batch: String, max: Int, leaseMs: Int, fence: String, epoch: Int, suspect: Bool
    ) -> RedisArgs {
        var args = RedisArgs(
            script: fetch,
            keys: [
                keys.jobs, keys.batch(worker: worker, id: batch), keys.batches(worker: worker), keys.workers,
                keys.staging(worker: worker), keys.handleCounter, keys.suspects,
            ])
        args.append(max)
        args.append(worker)
        args.append(leaseMs)
        args.append(batch)
        args.append(fence)
        args.append(epoch)
        args.append(suspect ? 1 : 0)
        return args
    }

    /// One call of `lookUpLost`.
    public static func lookUpLostCall(_ keys: QueueKeys, worker: String, batch: String, fence: String, epoch: Int) -> RedisArgs {
        var args = RedisArgs(script: lookUpLost, keys: [keys.batches(worker: worker)])
        args.append(batch)
        args.append(fence)
        args.append(epoch)
        return args
    }

    /// After the worker's lease may have lapsed: renews it, and says which of its batches are
    /// still there, in one step, so that no take-back comes between the answer and the sends.
    /// KEYS: workers, then the batches' lists. ARGV: worker id, lease ms. Returns 1 or 0 per batch.
    public static let confirmLease = RedisScript(
        """
        local now = redis.call('TIME')
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
        local out = {}
        for k = 2, #KEYS do out[#out + 1] = redis.call('EXISTS', KEYS[k]) end
        return out
        """)

    /// Records a batch of outcomes. A job is acked in the same step that records its last
    /// outcome: its batch list goes once all of its jobs are finished, and until then the
    /// finished ones are marked in the batch's done set (a fan-out piece that is not the job's
    /// last as `index:token`). A batch list that is gone was taken back by a recovery, whose
    /// worker records its jobs, so nothing is written for them here; an outcome already marked
    /// was written by an earlier try whose reply was lost, so it is not written again.
    /// KEYS: results, dead letters, invalid tokens, stats, schedule, batches, invalid channels,
    /// then per batch touched: its list, its done set.
    /// ARGV: results cap, dead cap, invalid cap, number of jobs, then per batch touched (id,
    /// "1" if this finishes it), then per job (batch number, mark, counter pair, kind, a, b), then
    /// (counter name, count) entries: the totals if every job is owned and unmarked. A job
    /// counts under entries 3p-2, 3p-1 and 3p of its pair p; an empty name counts nothing.
    /// Streams are trimmed once per call, not per entry.
    /// Kinds: r = result a; d = result a, dead letter b; i = result a, invalid token b;
    /// c = result a, invalid channel b (KEYS[7], capped as invalid tokens are);
    /// s = schedule member a at b ("+ms" from now or "=unix ms"). An empty result is not written.
    public static let complete = RedisScript(
        """
        local call = redis.call
        -- Checked before the first write: Redis keeps what a failing script wrote, and the
        -- worker would write it all again.
        for k = 1, 3 do
          if (tonumber(ARGV[k]) or 0) < 1 then return redis.error_reply('ERR record caps must be whole numbers from 1') end
        end
        local n_batches = (#KEYS - 7) / 2
        local first_job = 5 + 2 * n_batches
        local first_counter = first_job + 6 * tonumber(ARGV[4])
        local names, counts = {}, {}
        for j = first_counter, #ARGV, 2 do
          names[#names + 1] = ARGV[j]
          counts[#counts + 1] = tonumber(ARGV[j + 1])
        end
        local owned, acks = {}, {}
        for b = 1, n_batches do
          owned[b] = call('EXISTS', KEYS[6 + 2 * b]) == 1
          acks[b] = {}
        end
        local results, recorded, now_ms, added = KEYS[1], 0, nil, {}
        for i = first_job, first_counter - 1, 6 do
          local b = tonumber(ARGV[i])
          local kind = ARGV[i + 3]
          if owned[b] and call('SISMEMBER', KEYS[7 + 2 * b], ARGV[i + 1]) == 0 then
            recorded = recorded + 1
            acks[b][#acks[b] + 1] = ARGV[i + 1]
            if kind == 's' then
              local at = ARGV[i + 5]
              local score = tonumber(string.sub(at, 2))
              if string.sub(at, 1, 1) == '+' then
                if not now_ms then
                  local now = call('TIME')
                  now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
                end
                score = now_ms + score
              end
              call('ZADD', KEYS[5], score, ARGV[i + 4])
            else
              if ARGV[i + 4] ~= '' then
                call('XADD', results, '*', 'record', ARGV[i + 4])
                added[1] = true
              end
              if kind == 'd' then call('XADD', KEYS[2], '*', 'record', ARGV[i + 5]); added[2] = true end
              if kind == 'i' then call('XADD', KEYS[3], '*', 'record', ARGV[i + 5]); added[3] = true end
              if kind == 'c' then call('XADD', KEYS[7], '*', 'record', ARGV[i + 5]); added[7] = true end
            end
          else
            local p = tonumber(ARGV[i + 2])
            for j = 3 * p - 2, 3 * p do counts[j] = counts[j] - 1 end
          end
        end
        for k = 1, 3 do
          if added[k] then call('XTRIM', KEYS[k], 'MAXLEN', '~', ARGV[k]) end
        end
        if added[7] then call('XTRIM', KEYS[7], 'MAXLEN', '~', ARGV[3]) end
        for j = 1, #names do
          if counts[j] > 0 and names[j] ~= '' then call('HINCRBY', KEYS[4], names[j], counts[j]) end
        end
        for b = 1, n_batches do
          if owned[b] then
            if ARGV[4 + 2 * b] == '1' then
              call('DEL', KEYS[6 + 2 * b], KEYS[7 + 2 * b])
              call('HDEL', KEYS[6], ARGV[3 + 2 * b])
            elseif #acks[b] > 0 then
              call('SADD', KEYS[7 + 2 * b], unpack(acks[b]))
            end
          end
        end
        return recorded
        """)

    /// The housekeeper's tick: renews this worker's lease, moves due retries and scheduled jobs
    /// to the consuming end of the list (a suspect to the suspects' list), and names the workers
    /// whose lease ran out.
    /// KEYS: workers, schedule, jobs, stats, suspects. ARGV: worker id, lease ms, most to promote.
    public static let tick = RedisScript(
        placeJob + "\n" + """
            local now = redis.call('TIME')
            local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
            local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[3]))
            for _, job in ipairs(due) do
              place(job, KEYS[3], KEYS[5])
              redis.call('ZREM', KEYS[2], job)
            end
            if #due > 0 then redis.call('HINCRBY', KEYS[4], 'promoted', #due) end
            local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms)
            local out = {}
            for _, w in ipairs(expired) do if w ~= ARGV[1] then out[#out + 1] = w end end
            return out
            """)

    /// Lua that puts a job back in line: a suspect (an envelope taken back twice or more) at the
    /// far end of the suspects' list, which fetchers take one at a time; any other job at the
    /// consuming end of the jobs list, to go next at full speed.
    static let placeJob = """
        local function place(job, jobs, suspects)
          local at = string.sub(job, 1, 10) == '{"_apnsw":' and string.find(job, ',"job":', 1, true)
          local n = at and tonumber(string.match(string.sub(job, 1, at), '"recoveries":(%d+)'))
          if n and n >= 2 then redis.call('LPUSH', suspects, job) else redis.call('RPUSH', jobs, job) end
        end
        """
}
