import APNSCore
import QueueContract
import XCTest

/// The `idempotency_key` field, the claim an envelope carries, and the shard a key lives on.
final class IdempotencyKeyTests: XCTestCase {
    private func job(_ key: String) -> String {
        #"{"idempotency_key":\#(key),"token":"\#(String(repeating: "ab", count: 32))","payload":{"aps":{}}}"#
    }

    func testAKeyIsOneTo128VisibleASCIICharacters() throws {
        XCTAssertEqual(try Job.parse(Array(job(#""order-1234:shipped""#).utf8)).idempotencyKey, "order-1234:shipped")
        let long = String(repeating: "k", count: 129)
        for (bad, reason) in [
            (#""""#, "BadIdempotencyKey"), ("\"\(long)\"", "BadIdempotencyKey"), (#""a b""#, "BadIdempotencyKey"),
            (#""caf\u00e9""#, "BadIdempotencyKey"), ("42", "WrongFieldType"),
        ] {
            XCTAssertThrowsError(try Job.parse(Array(job(bad).utf8)), bad) { error in
                XCTAssertEqual((error as? JobRejection)?.reason, reason, bad)
                XCTAssertTrue("\(error)".contains("idempotency_key"), "\(error)")
            }
        }
        XCTAssertEqual(try Job.parse(Array(job("\"\(String(repeating: "k", count: 128))\"").utf8)).idempotencyKey?.count, 128)
    }

    func testAnEnvelopeCarriesItsClaim() throws {
        let inner = Array(job(#""k""#).utf8)
        let wrapped = JobEnvelope.wrap(job: inner[...], meta: JobEnvelope.Meta(recoveries: 1, claim: 41))
        let (meta, opened) = try JobEnvelope.open(wrapped[...])
        XCTAssertEqual(meta.claim, 41)
        XCTAssertTrue(String(decoding: wrapped, as: UTF8.self).contains(#""claim":"41""#), "a string, as the take-back scripts write it")
        XCTAssertEqual(Array(opened), inner)
    }

    /// One script call claims every keyed job of a batch: its keys, the window, the claims.
    func testOneCallClaimsABatchsKeys() {
        let q = QueueKeys(queue: "q", shard: 2)
        let args = IdempotencyClaim.call(q, keys: ["a", "b:c"], claims: ["17", "18"], windowSeconds: 3600)
        let words = (0..<args.count).map { String(decoding: args.argument($0), as: UTF8.self) }
        XCTAssertEqual(
            words, ["EVALSHA", IdempotencyClaim.script.sha1, "2", "apns:{q.2}:idem:a", "apns:{q.2}:idem:b:c", "3600", "17", "18"],
            "the keys share the shard's hash tag: one slot, one call")
    }

    /// FNV-1a (32 bits) of the key, as the example producers compute it.
    func testAKeysShardIsItsFNV1aHashModuloTheShards() {
        XCTAssertEqual(IdempotencyClaim.shard(ofKey: "k-1", shards: 1_000_000_007), Int(2_694_867_356 % 1_000_000_007))
        XCTAssertEqual(IdempotencyClaim.shard(ofKey: "order-1234", shards: 7), Int(4_208_862_570 % 7))
        XCTAssertEqual(IdempotencyClaim.shard(ofKey: "anything", shards: 1), 0)
    }
}
