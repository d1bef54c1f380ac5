import APNSCore
import APNSMock
import APNSTransport
import APNSWorker
import Configuration
import Foundation
import IOLoop
import TLS
import Telemetry
import XCTest

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
            apps.append(
                AppConfiguration(
                    name: name, bundleID: "com.example.\(name)",
                    endpoint: APNSEndpoint(host: "127.0.0.1", port: 1, caFile: nil),
                    auth: .certificate(certificateFile: "\(dir)/\(name).pem", keyFile: "\(dir)/\(name).key")))
        }
        var config = WorkerConfiguration()
        config.apps = apps
        let log = try FileStream.appending(to: "\(dir)/log")
        let worker = try Worker(configuration: config, logger: Logger(level: .info, output: log))
        XCTAssertEqual(worker.checkCertificates(), ["expired"])
        log.close()
        let lines = try String(contentsOfFile: "\(dir)/log", encoding: .utf8).split(separator: "\n")
        XCTAssertTrue(lines.contains { $0.contains("expires within 30 days") && $0.contains("\"app\":\"soon\"") })
        XCTAssertTrue(lines.contains { $0.contains("has expired") && $0.contains("\"app\":\"expired\"") })
        XCTAssertFalse(lines.contains { $0.contains("\"app\":\"fresh\"") })
    }

}
