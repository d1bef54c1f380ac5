import APNSWorker
import Foundation
import APNSMock
import TLS
import XCTest
import Telemetry
import Configuration
import APNSTransport

final class CertificateCheckTests: XCTestCase {
    func testWarnsThirtyDaysAheadAndFlagsExpiredCertificates() throws {
        let dir = NSTemporaryDirectory() + "certcheck-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pki = try TestPKI()
        var apps: [AppConfiguration] = []
        for (name, days) in [("fresh", 365), ("soon", 10), ("expired", -2)] {
            let key = try ES256PrivateKey()
            try key.pkcs8PEM().write(toFile: "\(dir)/\(name).key", atomically: true, encoding: .utf8)
            try pki.issue(key: key, commonName: name, uid: "com.example.\(name)", days: days)
                .write(toFile: "\(dir)/\(name).pem", atomically: true, encoding: .utf8)
            apps.append(AppConfiguration(name: name, bundleID: "com.example.\(name)",
                                         endpoint: APNSEndpoint(host: "127.0.0.1", port: 1, caFile: nil),
                                         auth: .certificate(certificateFile: "\(dir)/\(name).pem", keyFile: "\(dir)/\(name).key")))
        }
        var config = WorkerConfiguration()
        config.apps = apps
        XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/log", contents: nil))
        let log = try XCTUnwrap(FileHandle(forWritingAtPath: "\(dir)/log"))
        let worker = try Worker(configuration: config, logger: Logger(level: .info, output: log))
        XCTAssertEqual(worker.checkCertificates(), ["expired"])
        try log.close()
        let lines = try String(contentsOfFile: "\(dir)/log", encoding: .utf8).split(separator: "\n")
        XCTAssertTrue(lines.contains { $0.contains("expires within 30 days") && $0.contains("\"app\":\"soon\"") })
        XCTAssertTrue(lines.contains { $0.contains("has expired") && $0.contains("\"app\":\"expired\"") })
        XCTAssertFalse(lines.contains { $0.contains("\"app\":\"fresh\"") })
    }

    func testCircuitBreakerPausesProbesAndCloses() {
        var b = CircuitBreaker(pauseMs: 100, probeTimeoutMs: 1000)
        XCTAssertEqual(b.allowance(nowMs: 0), .max)
        let pause = b.failed(nowMs: 1000)
        XCTAssertTrue((100...200).contains(pause))
        XCTAssertEqual(b.allowance(nowMs: 1050), 0)
        XCTAssertEqual(b.allowance(nowMs: 1000 + UInt64(pause)), 1, "one probe once the pause is over")
        XCTAssertEqual(b.allowance(nowMs: 1000 + UInt64(pause) + 1), 0, "and only one")
        let second = b.failed(nowMs: 2000)
        XCTAssertGreaterThan(second, 150, "pauses grow")
        XCTAssertEqual(b.allowance(nowMs: 2000 + UInt64(second)), 1)
        XCTAssertEqual(b.allowance(nowMs: 2000 + UInt64(second) + 1000), 1, "a probe lost with its connection is replaced")
        b.succeeded()
        XCTAssertEqual(b.allowance(nowMs: 10_000), .max)
    }
}
