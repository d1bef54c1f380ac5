import RedisClient

/// Writing outcomes by script: `complete` and its call.
extension QueueScripts {
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

    /// One call of `complete`, built in the order the script reads it: KEYS (the streams, then
    /// each touched batch's list and done-set), the caps and the job count, each batch (id,
    /// finishes), six arguments per job, then the counters.
    public struct CompleteCall {
        public private(set) var args: RedisArgs

        public init(_ keys: QueueKeys, worker: String, caps: RecordCaps, jobs: Int, groups: AckGroups) {
            var scriptKeys = [
                keys.results, keys.deadLetters, keys.invalidTokens, keys.stats, keys.scheduled, keys.batches(worker: worker), keys.invalidChannels,
            ]
            for g in groups.all {
                scriptKeys.append(keys.batch(worker: worker, id: g.batch.id))
                scriptKeys.append(keys.batchDone(worker: worker, id: g.batch.id))
            }
            args = RedisArgs(script: complete, keys: scriptKeys, capacity: 512 + jobs * 400)
            args.append(caps.results)
            args.append(caps.deadLetters)
            args.append(caps.invalidTokens)
            args.append(jobs)
            for g in groups.all {
                args.append(g.batch.id)
                args.append(g.finishes ? "1" : "0")
            }
        }

        /// One job: its ack group (from 0), its mark (`piece` for a fan-out piece that is not its
        /// job's last, else its index), its counter pair; then `records` appends its kind, its
        /// first record and its second (`OutcomeRecords.append`).
        public mutating func appendJob(group: Int, piece: String?, index: Int, counterPair: Int, records: (inout RedisArgs) -> Void) {
            args.append(group + 1)
            if let piece { args.append(piece) } else { args.append(index) }
            args.append(counterPair)
            records(&args)
        }

        /// The call, with the counters last.
        public consuming func finish(counters: CounterPairs) -> RedisArgs {
            counters.append(to: &args)
            return args
        }
    }
}
