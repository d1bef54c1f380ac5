import Foundation
import TestSupport
import XCTest

/// Bad settings stop the worker at start with exit 2 and one line that names the setting
/// (issue 28, item 3: several killed it later with SIGILL and no message, or wedged it).
final class SettingsTests: XCTestCase {
    private func run(_ f: WorkerFixture, _ name: String, _ edit: (inout [String: Any]) -> Void) throws -> (code: Int32?, out: String) {
        var config = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: f.configFile))) as! [String: Any]
        edit(&config)
        let file = f.directory.file("bad-\(name).json")
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: file))
        return try start(f, file, name)
    }

    private func start(_ f: WorkerFixture, _ file: String, _ name: String) throws -> (code: Int32?, out: String) {
        let w = try ChildProcess(
            ChildProcess.productsDirectory + "/apns-worker", ["--config", file], outputFile: f.directory.file("bad-\(name).log"))
        let code = w.wait(timeout: 10)
        if code == nil { w.signal(SIGKILL) }
        return (code, w.output)
    }

    private func app(_ c: inout [String: Any], _ edit: (inout [String: Any]) -> Void) {
        var apps = c["apps"] as! [[String: Any]]
        edit(&apps[0])
        c["apps"] = apps
    }

    func testEveryBadSettingIsRefusedAtStartNamingIt() throws {
        let f = try WorkerFixture()
        let cases: [(String, String, (inout [String: Any]) -> Void)] = [
            ("request_timeout_ms", "request_timeout_ms", { $0["request_timeout_ms"] = -1 }),
            ("results_max_age_s", "results_max_age_s", { $0["results_max_age_s"] = -1 }),
            ("metrics_port-high", "metrics_port", { $0["metrics_port"] = 70000 }),
            ("metrics_port-low", "metrics_port", { $0["metrics_port"] = -1 }),
            ("credential_pause_ms", "credential_pause_ms", { $0["credential_pause_ms"] = -5 }),
            ("results_max", "results_max", { $0["results_max"] = -1 }),
            (
                "redis.port-0", "redis.port",
                { c in
                    var r = c["redis"] as! [String: Any]; r["port"] = 0; c["redis"] = r
                }
            ),
            (
                "redis.port-high", "redis.port",
                { c in
                    var r = c["redis"] as! [String: Any]; r["port"] = 99999; c["redis"] = r
                }
            ),
            (
                "redis.database", "redis.database",
                { c in
                    var r = c["redis"] as! [String: Any]; r["database"] = -1; c["redis"] = r
                }
            ),
            (
                "team_id", "token.team_id",
                { c in
                    self.app(&c) { a in
                        var t = a["token"] as! [String: Any]; t["team_id"] = ""; a["token"] = t
                    }
                }
            ),
            ("bundle_id", "bundle_id", { c in self.app(&c) { $0["bundle_id"] = "" } }),
            ("name", "name", { c in self.app(&c) { $0["name"] = "" } }),
            (
                "endpoint.port", "endpoint.port",
                { c in
                    self.app(&c) { a in
                        var e = a["endpoint"] as! [String: Any]; e["port"] = 0; a["endpoint"] = e
                    }
                }
            ),
            ("templates_dir", "templates_dir", { $0["templates_dir"] = "/nonexistent/templates" }),
            ("streams", "streams", { $0["streams"] = "many" }),
        ]
        for (name, setting, edit) in cases {
            let (code, out) = try run(f, name, edit)
            XCTAssertEqual(code, 2, "\(name): \(out)")
            XCTAssertTrue(out.contains(setting), "\(name): the error names \(setting): \(out)")
            XCTAssertFalse(out.contains("NSCocoaErrorDomain") || out.contains("Fatal error"), "\(name): \(out)")
            XCTAssertLessThanOrEqual(out.split(separator: "\n").count, 2, "\(name): one line: \(out)")
        }

        // A file cut short says so.
        let full = try String(contentsOfFile: f.configFile, encoding: .utf8)
        try String(full.prefix(full.count / 2)).write(toFile: f.directory.file("cut.json"), atomically: true, encoding: .utf8)
        let cut = try start(f, f.directory.file("cut.json"), "cut")
        XCTAssertEqual(cut.code, 2)
        XCTAssertTrue(cut.out.contains("not valid JSON"), cut.out)

        // An encrypted .p8 is a clear error, not a pass phrase prompt.
        let encrypted = f.directory.file("encrypted.p8")
        try "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAi0\n-----END ENCRYPTED PRIVATE KEY-----\n"
            .write(toFile: encrypted, atomically: true, encoding: .utf8)
        let locked = try run(f, "encrypted") { c in
            self.app(&c) { a in
                var t = a["token"] as! [String: Any]; t["key_file"] = encrypted; a["token"] = t
            }
        }
        XCTAssertEqual(locked.code, 2, locked.out)
        XCTAssertTrue(locked.out.contains("encrypted"), locked.out)
    }

    /// A .p8 every user can read still starts the worker (a Kubernetes Secret is mounted 0644 by
    /// default), with a warning that says how to fix it.
    func testAWorldReadableKeyIsWarnedAbout() throws {
        let f = try WorkerFixture()
        let config = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: f.configFile))) as! [String: Any]
        let key = ((config["apps"] as! [[String: Any]])[0]["token"] as! [String: Any])["key_file"] as! String
        chmod(key, 0o644)
        let w = try f.startWorker("w-open-key")
        XCTAssertTrue(waitUntil(timeout: 10) { w.output.contains("worker started") }, w.output)
        XCTAssertTrue(w.output.contains("readable by every user") && w.output.contains("chmod 600"), w.output)
    }
}
