import RedisClient

/// The scripts that take a worker's jobs back: at its stop (hand-back), and after its death
/// (recovery, with poison pills kept apart).
extension QueueScripts {
    /// Lua shared by hand-back and recovery: collects and deletes everything a worker holds,
    /// from KEYS[at] on: staging, batches, then per batch (list, done set), the ids being
    /// ARGV[id_at] on. Jobs of a batch's done set are finished and stay out. Staged jobs come
    /// last, oldest first. Also says which jobs came from a suspect's batch (an id with "-s"),
    /// and whether the worker held one.
    private static let takeBack =
        placeJob + "\n" + """
            -- An envelope with its meta changed by `edit`; nil for a job that is no readable envelope.
            local function edit_envelope(job, edit)
              if string.sub(job, 1, 10) ~= '{"_apnsw":' then return nil end
              local ok, env = pcall(cjson.decode, job)
              local at = string.find(job, ',"job":', 1, true)
              if not (ok and type(env) == 'table' and type(env._apnsw) == 'table' and at) then return nil end
              edit(env._apnsw)
              return '{"_apnsw":' .. cjson.encode(env._apnsw) .. string.sub(job, at)
            end
            local function with_done(job, tokens)
              return edit_envelope(job, function(meta)
                if type(meta.done) == 'table' then for _, t in ipairs(meta.done) do table.insert(tokens, t) end end
                meta.done = tokens
              end) or '{"_apnsw":{"done":' .. cjson.encode(tokens) .. '},"job":' .. job .. '}'
            end
            -- A job with an idempotency key keeps the claim it was taken under (its handle then),
            -- so that its next take knows the key's holder as itself.
            local function claim_of(job, handle)
              if handle and handle > 0 and string.find(job, '"idempotency_key"', 1, true) then return string.format('%d', handle) end
              return nil
            end
            local function with_claim(job, claim)
              if not claim then return job end
              if string.sub(job, 1, 10) ~= '{"_apnsw":' then return '{"_apnsw":{"claim":' .. cjson.encode(claim) .. '},"job":' .. job .. '}' end
              return edit_envelope(job, function(meta) meta.claim = meta.claim or claim end) or job
            end
            local function take_back(at, id_at)
              local staging, batches = KEYS[at], KEYS[at + 1]
              local jobs, handles, suspect, held_suspect = {}, {}, {}, false
              for b = 0, #ARGV - id_at do
                local list, done = KEYS[at + 2 + 2 * b], KEYS[at + 3 + 2 * b]
                local is_suspect = string.find(ARGV[id_at + b], '-s', 1, true) ~= nil
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
                    suspect[#jobs] = is_suspect
                    held_suspect = held_suspect or is_suspect
                  end
                end
                redis.call('DEL', list, done)
                redis.call('HDEL', batches, ARGV[id_at + b])
              end
              local staged = redis.call('LRANGE', staging, 0, -1)
              for i = #staged, 1, -1 do jobs[#jobs + 1] = staged[i]; handles[#jobs] = 0 end
              redis.call('DEL', staging)
              return jobs, handles, suspect, held_suspect
            end
            """

    /// Gives back a stopping worker's unfinished jobs: they go to the consuming end of the
    /// list so they are taken next (a suspect to the suspects'), and the worker leaves the
    /// registry. Touching the take-back key aborts any completion transaction of that worker
    /// that WATCHes it.
    /// KEYS: jobs, workers, take-back, suspects, then the keys `take_back` reads (`InFlightJobs`
    /// lists them). ARGV: worker id, then the batch ids. Returns how many went back.
    public static let handBack = RedisScript(
        takeBack + "\n" + """
            redis.call('INCR', KEYS[3])
            redis.call('PEXPIRE', KEYS[3], 60000)
            local jobs, handles = take_back(5, 2)
            for k, job in ipairs(jobs) do place(with_claim(job, claim_of(job, handles[k])), KEYS[1], KEYS[4]) end
            redis.call('ZREM', KEYS[2], ARGV[1])
            return #jobs
            """)

    /// Takes back the jobs of a worker whose lease ran out (or of this worker's previous life):
    /// each goes back in line (`place`) with its recovery count raised and a `TakenBack` try
    /// added to its attempts, or, past the limit, to the dead letters as a poison pill, with its
    /// attempts. A worker that died holding a suspect most likely died of it: then only the
    /// suspect's count is raised, so that a poison pill takes no innocent job with it. Only a still-expired lease is recovered,
    /// so two workers never recover the same one twice; a fetch renews the lease, so a batch
    /// fetched after the caller listed the batches is never left without its worker.
    /// Touching the take-back key aborts a completion transaction the worker may have under way.
    /// KEYS: jobs, workers, dead letters, results, stats, take-back, suspects, then the keys
    /// `take_back` reads (`InFlightJobs` lists them).
    /// ARGV: worker id, max recoveries, dead cap, results cap (0: a poison pill gets no result
    /// record, as `results: none` asks), mode, then the batch ids. Mode "lease": only a lease
    /// run out; "force": any; "failover": any, blaming no job.
    public static let recover = RedisScript(
        takeBack + "\n" + """
            local now = redis.call('TIME')
            local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            local lease = redis.call('ZSCORE', KEYS[2], ARGV[1])
            if ARGV[5] == 'lease' and (not lease or tonumber(lease) >= now_ms) then return {0, 0} end
            redis.call('INCR', KEYS[6])
            redis.call('PEXPIRE', KEYS[6], 60000)
            local jobs, handles, suspect, held_suspect = take_back(8, 6)
            local requeued, poisoned = 0, 0
            -- The dead worker may have had an answer it never wrote: the take-back is a try in
            -- the job's history, and its retry budget counts it.
            local taken = '{"time_ms":' .. now_ms .. ',"status":0,"reason":"TakenBack"}'
            for k, job in ipairs(jobs) do
              local blame = (ARGV[5] ~= 'failover' and (suspect[k] or not held_suspect)) and 1 or 0
              local n, wrapped, inner, tried = blame, nil, job, '[' .. taken .. ']'
              local claim = claim_of(job, handles[k])
              if string.sub(job, 1, 10) == '{"_apnsw":' then
                local ok, env = pcall(cjson.decode, job)
                local at = string.find(job, ',"job":', 1, true)
                if ok and type(env) == 'table' and type(env._apnsw) == 'table' and at then
                  local meta = env._apnsw
                  n = (tonumber(meta.recoveries) or 0) + blame
                  meta.recoveries = n
                  if type(meta.attempts) ~= 'table' then meta.attempts = {} end
                  table.insert(meta.attempts, cjson.decode(taken))
                  if claim and not meta.claim then meta.claim = claim end
                  tried = cjson.encode(meta.attempts)
                  inner = string.sub(job, at + 7, -2)
                  wrapped = '{"_apnsw":' .. cjson.encode(meta) .. string.sub(job, at)
                end
              end
              if not wrapped then
                local claimed = claim and (',"claim":' .. cjson.encode(claim)) or ''
                wrapped = '{"_apnsw":{"recoveries":' .. n .. ',"attempts":' .. tried .. ',"since":' .. now_ms .. claimed .. '},"job":' .. job .. '}'
              end
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
                place(wrapped, KEYS[1], KEYS[7])
                requeued = requeued + 1
              end
            end
            if ARGV[5] == 'lease' then redis.call('ZREM', KEYS[2], ARGV[1]) end
            if requeued > 0 then
              redis.call('HINCRBY', KEYS[5], 'recovered', requeued)
              -- Its worker may have sent it: the taker's send may be a second one.
              redis.call('HINCRBY', KEYS[5], 'may_duplicate', requeued)
            end
            if poisoned > 0 then
              redis.call('HINCRBY', KEYS[5], 'dead_lettered', poisoned); redis.call('HINCRBY', KEYS[5], 'poison_pills', poisoned)
              redis.call('HINCRBY', KEYS[5], 'dead_lettered/PoisonPill', poisoned)
            end
            return {requeued, poisoned}
            """)
}
