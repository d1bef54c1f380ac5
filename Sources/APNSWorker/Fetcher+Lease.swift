import Delivery
import IOLoop
import QueueContract
import RedisClient

extension Fetcher {
    /// Loop thread, before each turn's sends: whether the lease holds. If it may have lapsed,
    /// asks Redis (one request at a time) which batches are still this worker's, renewing the
    /// lease in the same step; until the answer, nothing is sent.
    func leaseHolds(nowMs: UInt64) -> Bool {
        // Until the sentinels name the master, and its batches are taken back there after a switch.
        if redis.masterWatch?.failingOver == true || lease.awaitsTakeBack { return false }
        if lease.holds(nowMs: nowMs) { return true }
        guard !confirming, redis.isReady else { return false }
        confirming = true
        let batches = completer.unfinished.held
        send([confirmArgs(batches)], expecting: .confirm(sentAtMs: nowMs, batches: batches))
        return false
    }

    private func confirmArgs(_ batches: [TakenBatch]) -> RedisArgs {
        QueueScripts.confirmLeaseCall(keys, worker: workerID, leaseMs: configuration.leaseMs, batches: batches)
    }

    /// The confirmation's answer: a batch no longer there was taken back, and its unsent jobs
    /// are dropped (the I/O thread drops them before sending again).
    func confirmed(_ reply: RedisFlatReply, sentAtMs: UInt64, batches: [TakenBatch]) throws(RedisError) {
        if try loadedAndSentAgain(reply, QueueScripts.confirmLease, [confirmArgs(batches)], .confirm(sentAtMs: sentAtMs, batches: batches)) {
            return
        }
        let there = try QueueScripts.readConfirmation(reply, batches: batches.count)
        var gone = 0
        for (k, b) in batches.enumerated() where !there[k] {
            b.takenBack = true
            gone += 1
        }
        confirming = false
        if let since = lease.confirmed(sentAtMs: sentAtMs) {
            // Fetched since the sentinels last named the old master: from it, perhaps after the
            // switch, and then the new one still queues those jobs. The sent ones may go twice
            // (the I/O thread counts them, less the unsent it drops); the unsent go from there.
            failoverJobs += recentFetches.jobs(since: since)
            logger.warning(
                "the master changed: what was fetched from the old one since its last confirmation may be sent again from the new one",
                ["worker": .string(workerID), "batches_not_on_new_master": .int(gone), "fetched_since": .int(failoverJobs)])
            return
        }
        guard gone > 0 else { return }
        logger.warning(
            "this worker's lease lapsed (it was stopped, or cut off from Redis) and another took back some of its jobs; their unsent sends are dropped",
            ["worker": .string(workerID), "batches_taken_back": .int(gone), "lease_ms": .int(configuration.leaseMs)])
    }
}
