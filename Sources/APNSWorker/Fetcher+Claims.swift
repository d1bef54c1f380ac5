import Delivery
import QueueContract
import RedisClient

/// Idempotency keys: a fetch's keyed jobs go once their claims are answered (`IdempotencyClaim`),
/// in one write for the batch; the rest of the batch does not wait for them.
extension Fetcher {
    /// A keyed job of a fetch, and the claim it makes: the one its envelope carries (an earlier
    /// take's), else the handle it has now.
    struct PendingClaim {
        let index: Int
        let key: String
        let claim: Int64
    }

    /// A fetch's keyed jobs, waiting for their claims' answers.
    struct Claiming {
        let taken: TakenJobs
        let batch: TakenBatch
        let claims: [PendingClaim]
    }

    /// Sends (or, after a lost connection, sends again: a claim already made answers as ours).
    func sendClaims(_ c: Claiming) { send([claimCall(c)], expecting: .claims(c)) }

    private func claimCall(_ c: Claiming) -> RedisArgs {
        IdempotencyClaim.call(
            keys, keys: c.claims.map(\.key), claims: c.claims.map { String($0.claim) }, windowSeconds: configuration.idempotencyWindowSeconds)
    }

    func claimed(_ reply: RedisFlatReply, _ c: Claiming) throws(RedisError) {
        if try loadedAndSentAgain(reply, IdempotencyClaim.script, [claimCall(c)], .claims(c)) { return }
        let answers = try IdempotencyClaim.read(reply, claims: c.claims.map { String($0.claim) })
        var byIndex: [Int: IdempotencyClaim.Answer] = [:]
        for (claim, answer) in zip(c.claims, answers) { byIndex[claim.index] = answer }
        route(c.taken, batch: c.batch, claims: byIndex)
    }
}
