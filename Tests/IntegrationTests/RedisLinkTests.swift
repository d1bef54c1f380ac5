import Foundation
import QueueContract
import TestSupport
import XCTest

/// The link between a worker and Redis cut by a proxy of the test's own (`TCPProxy`): bytes
/// stop, the worker gives up on the connection and goes on with a new one, and what it wrote
/// before may still reach Redis late (issue 27, items 5-7).
final class RedisLinkTests: XCTestCase {
    private func fixture(_ proxy: inout TCPProxy?, settings: [String: Any] = [:], delayMs: Int = 20) throws -> WorkerFixture {
        let redis = try TestRedis()
        let p = try TCPProxy(to: redis.endpoint.host, port: redis.endpoint.port)
        proxy = p
        var all: [String: Any] = ["redis": ["host": "127.0.0.1", "port": p.port], "lease_ms": 3000, "streams": 50]
        for (k, v) in settings { all[k] = v }
        return try WorkerFixture(redis: redis, settings: all) { config in
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: delayMs)]
        }
    }

    /// A completion transaction held in a dead connection's path reaches Redis after the worker
    /// wrote the same outcomes again on a new one: it must change nothing (item 5: two results
    /// per job, 11 s after the network came back).
    func testALateCompletionFromADeadConnectionWritesNothing() throws {
        try lateCompletion(deliverAfterReset: false)
    }

    /// The same, with the late copy already in the network, past the worker's abortive close:
    /// the fence in Redis alone makes it harmless.
    func testALateCompletionPastAnAbortiveCloseWritesNothing() throws {
        try lateCompletion(deliverAfterReset: true)
    }

    private func lateCompletion(deliverAfterReset: Bool) throws {
        var proxy: TCPProxy?
        let f = try fixture(&proxy)
        let jobs = 3000
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0) })
        try f.startWorker("w-late-exec")
        XCTAssertTrue(try waitUntil(timeout: 30) { try f.finalOutcomes() >= 300 })
        proxy!.hold(whenClientSends: "\r\nEXEC\r\n", releaseAfterMs: 4000, deliverAfterReset: deliverAfterReset)
        try f.waitForOutcomes(jobs, timeout: 60)
        XCTAssertEqual(proxy!.held, 1, "a transaction was held")
        usleep(5_000_000)  // the held copy has arrived
        try f.assertOneResultEach(jobs)
    }

    /// A fetch held in a dead connection's path reaches Redis after the worker looked its batch
    /// up on a new connection and found nothing: it must take nothing (item 6: 256 jobs sat in
    /// a live worker's batch until a SIGTERM).
    func testALateFetchFromADeadConnectionTakesNothing() throws {
        var proxy: TCPProxy?
        // Slow enough that jobs still wait when the held fetch arrives.
        let f = try fixture(&proxy, settings: ["batch_size": 200], delayMs: 50)
        let jobs = 12_000
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0) })
        try f.startWorker("w-late-fetch")
        XCTAssertTrue(try waitUntil(timeout: 30) { try f.finalOutcomes() >= 300 })
        proxy!.hold(whenClientSends: QueueScripts.fetch.sha1, releaseAfterMs: 3000, deliverAfterReset: true)
        try f.waitForOutcomes(jobs, timeout: 60)
        XCTAssertEqual(proxy!.held, 1, "a fetch was held")
        usleep(5_000_000)  // the held fetch has arrived
        XCTAssertEqual(try f.connect().command(["LLEN", f.keys.jobs]).integer, 0)
        XCTAssertEqual(try f.inFlight("w-late-fetch"), 0, "no batch of the live worker is stranded")
        try f.assertOneResultEach(jobs)
        // The lost fetch's fence is the fetcher's one field, not an entry per lost fetch that
        // stays for the worker's life (issue 43, item 5).
        let listed = try f.connect().command(["HGETALL", f.keys.batches(worker: "w-late-fetch")]).array.compactMap(\.text)
        let fields = stride(from: 0, to: listed.count, by: 2).map { (listed[$0], listed[$0 + 1]) }
        XCTAssertFalse(fields.contains { $0.1 == "0" }, "no fenced-off batch id: \(fields)")
        XCTAssertEqual(fields.filter { InFlightJobs.Field($0.0) == .fence }.count, 1, "one fence: \(fields)")
        XCTAssertTrue(fields.allSatisfy { InFlightJobs.Field($0.0) == .fence }, "and no batch: \(fields)")
    }

    /// A 2 s cut of one worker's link to Redis, with a 3 s lease: the worker notices the dead
    /// connections and renews its lease through new ones in time, so no peer takes its jobs
    /// back (item 7: the 5 s reply timeouts cost it its lease every time).
    func testACutShorterThanTheLeaseCostsNoLease() throws {
        var proxy: TCPProxy?
        let f = try fixture(&proxy, delayMs: 50)
        let jobs = 12_000
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0) })
        try f.startWorker("w-cut")
        XCTAssertTrue(try waitUntil(timeout: 30) { try f.finalOutcomes() >= 300 })
        // A peer on a link of its own, which would take the jobs back if the lease ran out.
        let direct = try WorkerFixture.reconfigure(
            f, ["redis": ["host": f.redis.endpoint.host, "port": f.redis.endpoint.port], "lease_ms": 3000])
        try direct.startWorker("w-peer")
        usleep(500_000)
        proxy!.stall(forMs: 2000)
        try f.waitForOutcomes(jobs, timeout: 60)
        XCTAssertEqual(try f.stats()["recovered"] ?? 0, 0, "the peer took nothing back")
        try f.assertOneResultEach(jobs)
        let cut = f.workers[0].output
        XCTAssertTrue(cut.contains("Redis call failed"), "the cut was seen")
        XCTAssertFalse(cut.contains("were taken back"), cut.suffix(2000).description)
    }
}
