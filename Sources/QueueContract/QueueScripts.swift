import RedisClient

/// The Lua scripts that make each queue transition one atomic step (DESIGN.md §3).
public enum QueueScripts {
    /// Moves up to ARGV[1] jobs (the staged ones first, then the oldest of the list) into a new
    /// batch list, registers the batch with its first handle, and renews the worker's lease.
    /// The jobs never pass through Lua: SORT … STORE copies them inside Redis (BY nosort keeps a
    /// list's order; DESC reads from the consuming end). Copying each job into Lua and back cost
    /// Redis more than everything else a fetch does. The worker reads the batch with an LRANGE
    /// sent in the same write.
    /// Recovered jobs (envelopes with `recoveries`) next in line are taken only by a worker that
    /// holds nothing (ARGV[5] "1"), 16 at most, and alone once taken back twice; any other
    /// worker gets {0, -1} and asks again once idle.
    /// A batch id already in the batches hash takes nothing: `lookUpLost` gave it up.
    /// KEYS: jobs, batch, batches, workers, staging, handle counter.
    /// ARGV: max, worker id, lease ms, batch id, holds nothing ("1"/"0"). Returns {first handle,
    /// number of jobs}.
    public static let fetch = RedisScript(
        """
        local call = redis.call
        if call('HEXISTS', KEYS[3], ARGV[4]) == 1 then return {0, 0} end
        local max = tonumber(ARGV[1])
        local staged = call('LLEN', KEYS[5])
        -- Jobs taken back from a dead worker go to a worker that holds nothing, 16 at most, and
        -- one taken back twice alone: if one kills that worker too, it takes few others with it.
        local next_job = staged > 0 and call('LINDEX', KEYS[5], 0) or call('LINDEX', KEYS[1], -1)
        local recoveries = next_job and string.sub(next_job, 1, 10) == '{"_apnsw":' and string.match(next_job, '"recoveries":(%d+)')
        if recoveries then
          if ARGV[5] ~= '1' then return {0, -1} end
          max = math.min(max, tonumber(recoveries) >= 2 and 1 or 16)
        end
        local n = 0
        if max > staged then
          n = call('SORT', KEYS[1], 'BY', 'nosort', 'DESC', 'LIMIT', 0, max - staged, 'STORE', KEYS[2])
          if n > 0 then call('LTRIM', KEYS[1], 0, -n - 1) end
        end
        for _ = 1, staged do call('LMOVE', KEYS[5], KEYS[2], 'LEFT', 'LEFT') end
        n = n + staged
        local now = call('TIME')
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        call('ZADD', KEYS[4], now_ms + tonumber(ARGV[3]), ARGV[2])
        if n == 0 then return {0, 0} end
        local first = call('INCRBY', KEYS[6], n) - n + 1
        call('HSET', KEYS[3], ARGV[4], first)
        return {first, n}
        """)

    /// Looks up a batch whose fetch reply was lost: its first handle if the fetch ran, else 0,
    /// and the id goes in the batches hash with no jobs, so that the fetch, should it reach
    /// Redis late on the old connection, takes nothing. Take-backs clear such entries.
    /// KEYS: batches. ARGV: batch id.
    public static let lookUpLost = RedisScript(
        """
        local first = redis.call('HGET', KEYS[1], ARGV[1])
        if first then return tonumber(first) end
        redis.call('HSET', KEYS[1], ARGV[1], 0)
        return 0
        """)

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
    /// counts under entries 2p-1 and 2p of its pair p.
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
            counts[2 * p - 1] = counts[2 * p - 1] - 1
            counts[2 * p] = counts[2 * p] - 1
          end
        end
        for k = 1, 3 do
          if added[k] then call('XTRIM', KEYS[k], 'MAXLEN', '~', ARGV[k]) end
        end
        if added[7] then call('XTRIM', KEYS[7], 'MAXLEN', '~', ARGV[3]) end
        for j = 1, #names do
          if counts[j] > 0 then call('HINCRBY', KEYS[4], names[j], counts[j]) end
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

    /// Lua shared by hand-back and recovery: collects and deletes everything a worker holds,
    /// from KEYS[at] on: staging, batches, then per batch (list, done set), the ids being
    /// ARGV[id_at] on. Jobs of a batch's done set are finished and stay out. Staged jobs come
    /// last, oldest first.
    private static let takeBack = """
        local function with_done(job, tokens)
          if string.sub(job, 1, 10) == '{"_apnsw":' then
            local ok, env = pcall(cjson.decode, job)
            local at = string.find(job, ',"job":', 1, true)
            if ok and type(env) == 'table' and type(env._apnsw) == 'table' and at then
              local meta = env._apnsw
              if type(meta.done) == 'table' then for _, t in ipairs(meta.done) do table.insert(tokens, t) end end
              meta.done = tokens
              return '{"_apnsw":' .. cjson.encode(meta) .. string.sub(job, at)
            end
          end
          return '{"_apnsw":{"done":' .. cjson.encode(tokens) .. '},"job":' .. job .. '}'
        end
        local function take_back(at, id_at)
          local staging, batches = KEYS[at], KEYS[at + 1]
          local jobs, handles = {}, {}
          for b = 0, #ARGV - id_at do
            local list, done = KEYS[at + 2 + 2 * b], KEYS[at + 3 + 2 * b]
            local finished, recorded = {}, {}
            for _, mark in ipairs(redis.call('SMEMBERS', done)) do
              local i = tonumber(mark)
              if i then
                finished[i + 1] = true
              else
                -- A fan-out piece's mark (index:token): its token has its result; the job goes
                -- back with the token in its envelope's "done", so that it is not sent again.
                local at = string.find(mark, ':', 1, true)
                local j = at and tonumber(string.sub(mark, 1, at - 1))
                if j then
                  recorded[j + 1] = recorded[j + 1] or {}
                  table.insert(recorded[j + 1], string.sub(mark, at + 1))
                end
              end
            end
            local first = tonumber(redis.call('HGET', batches, ARGV[id_at + b])) or 0
            for i, job in ipairs(redis.call('LRANGE', list, 0, -1)) do
              if not finished[i] then
                jobs[#jobs + 1] = recorded[i] and with_done(job, recorded[i]) or job
                handles[#jobs] = first > 0 and first + i - 1 or 0
              end
            end
            redis.call('DEL', list, done)
            redis.call('HDEL', batches, ARGV[id_at + b])
          end
          local staged = redis.call('LRANGE', staging, 0, -1)
          for i = #staged, 1, -1 do jobs[#jobs + 1] = staged[i]; handles[#jobs] = 0 end
          redis.call('DEL', staging)
          return jobs, handles
        end
        """

    /// Gives back a stopping worker's unfinished jobs: they go to the consuming end of the
    /// list so they are taken next, and the worker leaves the registry. Touching the take-back
    /// key aborts any completion transaction of that worker that WATCHes it.
    /// KEYS: jobs, workers, take-back, then the keys `take_back` reads (`InFlightJobs` lists
    /// them). ARGV: worker id, then the batch ids. Returns how many went back.
    public static let handBack = RedisScript(
        takeBack + "\n" + """
            redis.call('INCR', KEYS[3])
            redis.call('PEXPIRE', KEYS[3], 60000)
            local jobs = take_back(4, 2)
            for _, job in ipairs(jobs) do redis.call('RPUSH', KEYS[1], job) end
            redis.call('ZREM', KEYS[2], ARGV[1])
            return #jobs
            """)

    /// The housekeeper's tick: renews this worker's lease, moves due retries and scheduled jobs
    /// to the consuming end of the list, and names the workers whose lease ran out.
    /// KEYS: workers, schedule, jobs, stats. ARGV: worker id, lease ms, most to promote.
    public static let tick = RedisScript(
        """
        local now = redis.call('TIME')
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
        local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[3]))
        for _, job in ipairs(due) do
          redis.call('RPUSH', KEYS[3], job)
          redis.call('ZREM', KEYS[2], job)
        end
        if #due > 0 then redis.call('HINCRBY', KEYS[4], 'promoted', #due) end
        local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms)
        local out = {}
        for _, w in ipairs(expired) do if w ~= ARGV[1] then out[#out + 1] = w end end
        return out
        """)

    /// Takes back the jobs of a worker whose lease ran out (or of this worker's previous life):
    /// each goes to the consuming end of the list with its recovery count raised and a
    /// `TakenBack` try added to its attempts, or, past the limit, to the dead letters as a
    /// poison pill, with its attempts. Only a still-expired lease is recovered,
    /// so two workers never recover the same one twice; a fetch renews the lease, so a batch
    /// fetched after the caller listed the batches is never left without its worker.
    /// Touching the take-back key aborts a completion transaction the worker may have under way.
    /// KEYS: jobs, workers, dead letters, results, stats, take-back, then the keys `take_back`
    /// reads (`InFlightJobs` lists them).
    /// ARGV: worker id, max recoveries, dead cap, results cap (0: a poison pill gets no result
    /// record, as `results: none` asks), mode, then the batch ids. Mode "lease": only a lease
    /// run out; "force": any.
    public static let recover = RedisScript(
        takeBack + "\n" + """
            local now = redis.call('TIME')
            local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            local lease = redis.call('ZSCORE', KEYS[2], ARGV[1])
            if ARGV[5] == 'lease' and (not lease or tonumber(lease) >= now_ms) then return {0, 0} end
            redis.call('INCR', KEYS[6])
            redis.call('PEXPIRE', KEYS[6], 60000)
            local jobs, handles = take_back(7, 6)
            local requeued, poisoned = 0, 0
            -- The dead worker may have had an answer it never wrote: the take-back is a try in
            -- the job's history, and its retry budget counts it.
            local taken = '{"time_ms":' .. now_ms .. ',"status":0,"reason":"TakenBack"}'
            for k, job in ipairs(jobs) do
              local n, wrapped, inner, tried = 1, nil, job, '[' .. taken .. ']'
              if string.sub(job, 1, 10) == '{"_apnsw":' then
                local ok, env = pcall(cjson.decode, job)
                local at = string.find(job, ',"job":', 1, true)
                if ok and type(env) == 'table' and type(env._apnsw) == 'table' and at then
                  local meta = env._apnsw
                  n = (tonumber(meta.recoveries) or 0) + 1
                  meta.recoveries = n
                  if type(meta.attempts) ~= 'table' then meta.attempts = {} end
                  table.insert(meta.attempts, cjson.decode(taken))
                  tried = cjson.encode(meta.attempts)
                  inner = string.sub(job, at + 7, -2)
                  wrapped = '{"_apnsw":' .. cjson.encode(meta) .. string.sub(job, at)
                end
              end
              if not wrapped then wrapped = '{"_apnsw":{"recoveries":1,"attempts":' .. tried .. '},"job":' .. job .. '}' end
              if n > tonumber(ARGV[2]) then
                local detail = 'taken back from dead workers ' .. n .. ' times: it may be what kills them'
                -- Whatever the job names (id, app, token) goes in the record, like any other's.
                local named = ''
                local ok, j = pcall(cjson.decode, inner)
                if ok and type(j) == 'table' then
                  local token = j.token
                  if type(token) ~= 'string' and type(j.tokens) == 'table' then token = j.tokens[1] end
                  for _, f in ipairs({{'job_id', j.id}, {'app', j.app}, {'token', token}}) do
                    if type(f[2]) == 'string' then named = named .. ',"' .. f[1] .. '":' .. cjson.encode(f[2]) end
                  end
                  if type(j.meta) == 'table' and next(j.meta) ~= nil then named = named .. ',"meta":' .. cjson.encode(j.meta) end
                end
                if handles[k] and handles[k] > 0 then named = named .. ',"handle":"' .. string.format('%d', handles[k]) .. '"' end
                local rec = '{"v":1,"worker":' .. cjson.encode(ARGV[1]) .. named .. ',"time_ms":' .. now_ms ..
                  ',"status":"dead_letter","reason":"PoisonPill","detail":' .. cjson.encode(detail) ..
                  ',"recoveries":' .. n .. ',"attempts":' .. tried .. ',"job_text":' .. cjson.encode(inner) .. '}'
                redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'record', rec)
                if tonumber(ARGV[4]) > 0 then redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'record', rec) end
                poisoned = poisoned + 1
              else
                redis.call('RPUSH', KEYS[1], wrapped)
                requeued = requeued + 1
              end
            end
            if ARGV[5] == 'lease' then redis.call('ZREM', KEYS[2], ARGV[1]) end
            if requeued > 0 then
              redis.call('HINCRBY', KEYS[5], 'recovered', requeued)
              -- Its worker may have sent it: the taker's send may be a second one.
              redis.call('HINCRBY', KEYS[5], 'may_duplicate', requeued)
            end
            if poisoned > 0 then redis.call('HINCRBY', KEYS[5], 'dead_lettered', poisoned); redis.call('HINCRBY', KEYS[5], 'poison_pills', poisoned) end
            return {requeued, poisoned}
            """)
}
