import Foundation
import TestSupport
import XCTest

/// The example producers (examples/producers) enqueue with nothing of ours, and the worker
/// delivers what they wrote. A missing interpreter or Redis library fails the test.
final class ProducerTests: XCTestCase {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("examples/producers").path

    private func produce(_ interpreter: String, _ script: String, idPrefix: String, into f: WorkerFixture) throws {
        let p = try ChildProcess(
            interpreter, [Self.examples + "/" + script],
            environment: [
                "REDIS_HOST": f.redis.endpoint.host, "REDIS_PORT": String(f.redis.endpoint.port), "QUEUE": f.queue,
                "COUNT": "25", "ID_PREFIX": idPrefix, "NODE_PATH": "/usr/share/nodejs",
            ], outputFile: f.directory.file("\(idPrefix)-producer.log"))
        XCTAssertEqual(p.wait(timeout: 30), 0, "\(script) failed: \(p.output)")
    }

    func testJobsFromEveryExampleProducerAreDelivered() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        let producers = [
            ("/bin/sh", "enqueue.sh", "sh"), ("/usr/bin/python3", "enqueue.py", "py"),
            ("/usr/bin/ruby", "enqueue.rb", "rb"), ("/usr/bin/node", "enqueue.js", "js"),
        ]
        for (interpreter, script, prefix) in producers {
            XCTAssertTrue(FileManager.default.isExecutableFile(atPath: interpreter), "\(interpreter) is missing (scripts/test installs it)")
            try produce(interpreter, script, idPrefix: prefix, into: f)
        }
        try f.waitForOutcomes(100)
        XCTAssertEqual(try f.finalStats(), ["delivered": 100])
        let ids = Set(try f.records(f.keys.results).compactMap { $0["job_id"] as? String })
        for (_, _, prefix) in producers {
            XCTAssertEqual(ids.filter { $0.hasPrefix(prefix + "-") }.count, 25, "\(prefix) jobs delivered")
        }
    }
}
