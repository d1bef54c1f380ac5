import APNSMock
import Foundation
import RedisClient
import TLS
import TestSupport
import XCTest

/// Redis over TLS (issue 30, item 1): Debian's redis-server with `--tls-port` and a test CA,
/// without and with client certificates. Both servers start once for the class.
final class RedisTLSTests: XCTestCase {
    nonisolated(unsafe) private static var plain: TestRedis!
    nonisolated(unsafe) private static var mutual: TestRedis!

    override class func setUp() {
        super.setUp()
        do {
            plain = try TestRedis(tls: true)
            mutual = try TestRedis(tls: true, clientCertificates: true)
        } catch {
            XCTFail("a TLS redis-server did not start: \(error)")
        }
    }

    override class func tearDown() {
        plain?.stop()
        mutual?.stop()
        super.tearDown()
    }

    private func servers() throws -> (TestRedis, TestRedis) {
        (try XCTUnwrap(Self.plain, "no TLS redis-server"), try XCTUnwrap(Self.mutual, "no mutual-TLS redis-server"))
    }

    /// The blocking connection (housekeeping, apnsctl) and the non-blocking one (the I/O loops),
    /// each against both servers, with a reply bigger than one TLS record.
    func testBothConnectionKindsSpeakTLS() throws {
        for redis in [try servers().0, try servers().1] {
            let r = try redis.connect()
            let big = String(repeating: "x", count: 300_000)
            XCTAssertEqual(try r.command(["SET", "tls-big", big]), .status("OK"))
            XCTAssertEqual(try r.command(["GET", "tls-big"]), .string(Array(big.utf8)))
            XCTAssertEqual(try r.pipeline((0..<500).map { _ in [Array("INCR".utf8), Array("tls-n".utf8)] }).count, 500)
            XCTAssertTrue(redis.endpoint.description.hasPrefix("rediss://"), redis.endpoint.description)
        }
    }

    /// A worker with TLS settings delivers, records and completes every job, and apnsctl reads
    /// the queue over TLS too; the mutual server refuses the same client without its certificate.
    func testAWorkerAndApnsctlRunOverMutualTLS() throws {
        let (_, mutual) = try servers()
        let f = try WorkerFixture(redis: mutual, settings: ["lease_ms": 1500])
        try f.enqueue((0..<300).map { WorkerFixture.job($0) })
        let w = try f.startWorker("w-tls")
        try f.waitForOutcomes(300, timeout: 60)
        try f.assertOneResultEach(300)
        w.signal(SIGTERM)
        XCTAssertEqual(w.wait(timeout: 20), 0, w.output)
        XCTAssertTrue(w.output.contains("rediss://127.0.0.1"), w.output)

        let tls = try XCTUnwrap(mutual.tlsFiles)
        let env = [
            "APNSW_REDIS_HOST": "127.0.0.1", "APNSW_REDIS_PORT": String(mutual.endpoint.port), "APNSW_QUEUE": f.queue,
            "APNSW_REDIS_TLS_CA_FILE": tls.caFile, "APNSW_REDIS_TLS_CERT_FILE": tls.clientCertificateFile,
            "APNSW_REDIS_TLS_KEY_FILE": tls.clientKeyFile,
        ]
        let stats = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["stats", "--json"], environment: env, outputFile: f.directory.file("ctl.out"))
        XCTAssertEqual(stats.wait(timeout: 30), 0, stats.output)
        XCTAssertTrue(stats.output.contains("\"delivered\""), stats.output)

        var noCertificate = env
        noCertificate["APNSW_REDIS_TLS_CERT_FILE"] = nil
        noCertificate["APNSW_REDIS_TLS_KEY_FILE"] = nil
        let refused = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["stats"], environment: noCertificate, outputFile: f.directory.file("ctl-refused.out"))
        XCTAssertEqual(refused.wait(timeout: 30), 3, refused.output)
        XCTAssertTrue(refused.output.contains("rediss://127.0.0.1:\(mutual.endpoint.port)"), "names the address: \(refused.output)")
        XCTAssertTrue(refused.output.contains("certificate required"), "says why: \(refused.output)")
    }

    /// A CA that did not sign the server's certificate, and a name the certificate does not carry,
    /// are errors that name the address and what failed; so is a plain client at a TLS port.
    func testAWrongCAOrNameIsAClearErrorNamingTheAddress() throws {
        let (plain, _) = try servers()
        let dir = try TemporaryDirectory("apnsw-tls-wrong")
        let otherCA = dir.file("other-ca.pem")
        try TestPKI(commonName: "some other CA").caCertificatePEM().write(toFile: otherCA, atomically: true, encoding: .utf8)
        let address = "rediss://127.0.0.1:\(plain.endpoint.port)"
        var wrongCA = plain.endpoint
        wrongCA.tls = RedisTLS(caFile: otherCA)
        var wrongName = plain.endpoint
        wrongName.tls = RedisTLS(caFile: plain.tlsFiles!.caFile, serverName: "redis.example.com")
        for (endpoint, expected) in [(wrongCA, "certificate verification"), (wrongName, "certificate verification")] {
            XCTAssertThrowsError(try BlockingRedisConnection(endpoint, timeoutMs: 2000)) { error in
                XCTAssertTrue("\(error)".contains(address) && "\(error)".contains(expected), "\(error)")
            }
        }
        // The non-blocking connection fails its handshake with the same words.
        let pipe = try NonBlockingRedisConnection(wrongCA)
        var failure: Error?
        let deadline = Date().addingTimeInterval(5)
        while failure == nil, Date() < deadline {
            do {
                if pipe.wantsWrite { try pipe.writable() } else { try pipe.readable() }
            } catch { failure = error }
            usleep(10_000)
        }
        XCTAssertTrue("\(failure.map { "\($0)" } ?? "no error")".contains("certificate verification"), "\(String(describing: failure))")

        // A worker whose CA file does not exist refuses to start, naming the setting.
        let f = try WorkerFixture(
            redis: plain, settings: ["redis": ["host": "127.0.0.1", "port": plain.endpoint.port, "tls": ["ca_file": dir.file("missing.pem")]]])
        let w = try f.startWorker("w-no-ca")
        XCTAssertEqual(w.wait(timeout: 20), 2, w.output)
        XCTAssertTrue(w.output.contains("redis.tls") && w.output.contains("missing.pem"), w.output)
    }
}
