import Foundation
import QueueContract
import TestSupport
import XCTest

/// A crash costs time only for the jobs it held (issue 43, item 1): a worker killed holding
/// 2,000 jobs, at APNs latencies of 200 ms and 2 s. Its jobs were taken back and then went 16 per
/// round trip to an idle worker only, while every other worker fetched nothing: 8 jobs/s at 2 s.
final class TakeBackRateTests: XCTestCase {
    func testAKilledWorkersJobsGoOutAtFullSpeedAt200Milliseconds() throws { try takeBack(latencyMs: 200) }

    func testAKilledWorkersJobsGoOutAtFullSpeedAt2Seconds() throws { try takeBack(latencyMs: 2000) }

    /// Two survivors of 2 × 100 streams each (400 in all) reach their pace; then a victim of
    /// 2 × 500 streams takes 2,000 jobs, is stopped while it holds them, has them read, and is
    /// killed; its lease (2 s) runs out and a survivor takes the jobs back.
    private func takeBack(latencyMs latency: Int) throws {
        let survivorStreams = 2 * 2 * 100
        let f = try WorkerFixture(settings: ["connections": 2, "streams": 100, "batch_size": 100, "lease_ms": 2000]) { config in
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: latency)]
        }
        let rate = Double(survivorStreams) * 1000 / Double(latency)
        // Enough for the survivors to stay busy through the warm-up, the windows and the take-back.
        let jobs = 2000 + Int(rate * (Double(18 * latency) / 1000 + 8))
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0) })
        try f.startWorker("w-a")
        try f.startWorker("w-b")
        usleep(useconds_t(1000 * max(2000, 6 * latency)))  // the survivors reach their pace
        let victimStartMs = Int(Date().timeIntervalSince1970 * 1000)
        let victim = try f.startWorker("w-victim", environment: ["APNSW_BATCH_SIZE": "1000", "APNSW_STREAMS": "500"])
        XCTAssertTrue(try waitUntil(timeout: 10) { try f.inFlight("w-victim") >= 2000 }, "the victim took 2,000")
        victim.signal(SIGSTOP)
        let held = try heldJobIDs(f, worker: "w-victim")
        victim.signal(SIGKILL)
        XCTAssertNotNil(victim.wait(timeout: 5))
        XCTAssertGreaterThanOrEqual(held.count, 1900, "the victim died holding its jobs")
        var takenBackMs = 0
        XCTAssertTrue(
            try waitUntil(timeout: 15) {
                guard try f.stats()["recovered"] ?? 0 > 0 else { return false }
                takenBackMs = Int(Date().timeIntervalSince1970 * 1000)
                return true
            }, "a survivor took the jobs back")
        let bound = (held.count / survivorStreams + 2) * latency + 1000
        XCTAssertTrue(
            try waitUntil(timeout: Double(bound) / 1000 + 30) {
                try f.records(f.keys.results).filter { held.contains($0["job_id"] as? String ?? "") }.count >= held.count
            }, "every taken-back job was recorded")
        usleep(useconds_t(1000 * latency))

        let results = try f.records(f.keys.results)
        let taken = results.filter { held.contains($0["job_id"] as? String ?? "") }
        let doneMs = taken.compactMap { $0["time_ms"] as? Int }.max() ?? 0
        let survivors = results.filter { ($0["worker"] as? String) != "w-victim" }.compactMap { $0["time_ms"] as? Int }
        func perSecond(_ from: Int, _ to: Int) -> Double {
            Double(survivors.filter { $0 >= from && $0 < to }.count) * 1000 / Double(max(1, to - from))
        }
        let window = max(1000, 4 * latency)
        let before = perSecond(victimStartMs - window, victimStartMs)
        let during = perSecond(takenBackMs, max(doneMs, takenBackMs + window))
        print(
            "take-back at \(latency) ms: \(held.count) held, all recorded \(doneMs - takenBackMs) ms after the take-back (bound \(bound) ms);"
                + " survivors \(Int(before))/s before, \(Int(during))/s during")
        XCTAssertEqual(Set(taken.compactMap { $0["job_id"] as? String }), held, "one result for each taken-back job")
        XCTAssertLessThanOrEqual(doneMs - takenBackMs, bound, "the taken-back jobs went at the pool's pace")
        XCTAssertGreaterThanOrEqual(during, 0.8 * before, "the survivors kept their pace: \(during)/s against \(before)/s")
        XCTAssertEqual(try f.stats()["poison_pills"] ?? 0, 0)
        XCTAssertEqual(try f.connect().command(["LLEN", f.keys.suspects]).integer, 0, "taken back once: no suspect")
    }

    /// The ids of the jobs a worker holds unfinished (its batches less their done sets).
    private func heldJobIDs(_ f: WorkerFixture, worker: String) throws -> Set<String> {
        let r = try f.connect()
        var ids: Set<String> = []
        for batch in try r.command(["HKEYS", f.keys.batches(worker: worker)]).array.compactMap(\.text) {
            let done = Set(try r.command(["SMEMBERS", f.keys.batchDone(worker: worker, id: batch)]).array.compactMap(\.text))
            for (i, job) in try r.command(["LRANGE", f.keys.batch(worker: worker, id: batch), "0", "-1"]).array.compactMap(\.text).enumerated()
            where !done.contains(String(i)) {
                if let id = job.split(separator: "\"").dropFirst().first(where: { $0.hasPrefix("job-") }) { ids.insert(String(id)) }
            }
        }
        return ids
    }
}
