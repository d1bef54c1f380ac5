import APNSCore
import Configuration
import Foundation
import XCTest

/// `"tokens"`: an app's several keys, each scoped by environment and topics (issue 31, item 5).
final class ScopedKeySettingsTests: XCTestCase {
    private func load(_ app: String) throws -> WorkerConfiguration {
        let path = NSTemporaryDirectory() + "cfg-keys-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try #"{"apps":[\#(app)]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        return try WorkerConfiguration.load(path: path, environment: [:])
    }

    private func key(_ id: String, _ extra: String = "") -> String {
        #"{"team_id":"TEAM123456","key_id":"\#(id)","key_file":"/k/\#(id).p8"\#(extra)}"#
    }

    func testAnAppRunsOneAppPerKeyOfItsEnvironment() throws {
        let c = try load(
            #"{"name":"a","bundle_id":"com.a","environment":"production","tokens":[\#(key("SANDBOXKEY", #","environment":"development""#)),\#(key("PRODKEY001", #","environment":"production""#)),\#(key("CLIPKEY001", #","topics":["com.a.clip"]"#))]}"#
        )
        let app = c.apps[0]
        XCTAssertEqual(app.keys.map(\.keyID), ["SANDBOXKEY", "PRODKEY001", "CLIPKEY001"])
        let run = app.byKey
        XCTAssertEqual(run.map(\.name), ["a", "a"])
        XCTAssertEqual(
            run.map { if case .token(_, let k, _) = $0.auth { k } else { "" } }, ["PRODKEY001", "CLIPKEY001"], "the sandbox key is left out")
        XCTAssertEqual(Set(run.map(\.poolKey)).count, 2, "a pool per key")
        XCTAssertTrue(run[0].covers(topic: "com.a") && run[0].covers(topic: "com.a.clip"))
        XCTAssertTrue(run[1].covers(topic: "com.a.clip") && run[1].covers(topic: "com.a.clip.voip"))
        XCTAssertFalse(run[1].covers(topic: "com.a"))
        XCTAssertFalse(run[1].covers(topic: "com.a.clipper"))
        XCTAssertTrue(app.keyReport.warnings.contains { $0.contains("SANDBOXKEY") && $0.contains("never used") }, "\(app.keyReport)")
        XCTAssertTrue(app.keyReport.lines.contains("app a: key CLIPKEY001 serves com.a.clip in production"), "\(app.keyReport)")
        let single = try load(#"{"name":"b","bundle_id":"com.b","token":\#(key("ONEKEY0001"))}"#).apps[0]
        XCTAssertEqual(single.byKey.count, 1)
        XCTAssertNil(single.keyScope)
        XCTAssertTrue(single.keyReport.warnings.isEmpty)
    }

    func testKeySettingsAreChecked() throws {
        let errors: [(String, String)] = [
            (#"{"name":"a","bundle_id":"com.a","tokens":[\#(key("K1", #","environment":"development""#))]}"#, "no key serves production"),
            (#"{"name":"a","bundle_id":"com.a","tokens":[\#(key("K1"))],"token":\#(key("K2"))}"#, "not both"),
            (
                #"{"name":"a","bundle_id":"com.a","tokens":[\#(key("K1", #","environment":"staging""#))]}"#,
                "environment must be production or development"
            ),
            (#"{"name":"a","bundle_id":"com.a","tokens":[\#(key("K1", #","topics":[]"#))]}"#, "topics must name at least one"),
            (#"{"name":"a","bundle_id":"com.a","tokens":[{"team_id":"T","key_id":"K"}]}"#, "needs team_id, key_id and key_file"),
            (#"{"name":"a","bundle_id":"com.a","tokens":[\#(key("K1", #","scope":"x""#))]}"#, "unknown setting \"scope\""),
        ]
        for (app, message) in errors {
            XCTAssertThrowsError(try load(app), app) { XCTAssertTrue("\($0)".contains(message), "\(app): \($0)") }
        }
        let onlyTopic = try load(#"{"name":"a","bundle_id":"com.a","tokens":[\#(key("K1", #","topics":["com.a.clip","com.other"]"#))]}"#).apps[0]
        XCTAssertTrue(onlyTopic.keyReport.warnings.contains { $0.contains("no key serves topic com.a in production") })
        XCTAssertTrue(onlyTopic.keyReport.warnings.contains { $0.contains("com.other, which is not a topic of bundle com.a") })
    }

    /// A topic key serves its bundle and the bundle's push-type topics, not every topic that
    /// starts with it: an App Clip's topic goes with the clip's key (issue 43, item 3: the
    /// bundle's key, listed first, was taken for `com.a.clip`, and APNs refused it).
    func testATopicKeyServesItsBundlesPushTypeTopicsOnly() throws {
        let c = try load(
            #"{"name":"a","bundle_id":"com.a","tokens":[\#(key("BUNDLEKEY1", #","topics":["com.a"]"#)),\#(key("CLIPKEY001", #","topics":["com.a.clip"]"#))]}"#
        )
        let run = c.apps[0].byKey
        let bundleKey = run[0], clipKey = run[1]
        for suffix in ["", ".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity", ".voip-ptt", ".location-query"] {
            XCTAssertTrue(bundleKey.covers(topic: "com.a" + suffix), suffix)
            XCTAssertFalse(clipKey.covers(topic: "com.a" + suffix), suffix)
            XCTAssertTrue(clipKey.covers(topic: "com.a.clip" + suffix), suffix)
        }
        for topic in ["com.a.clip", "com.a.clip.voip", "com.a.widget", "com.a.voip.x", "com.ab", "com"] {
            XCTAssertFalse(bundleKey.covers(topic: topic), topic)
        }
        XCTAssertTrue(PushType.isTopic("com.a", ofBundle: "com.a"))
        XCTAssertFalse(PushType.isTopic("com.a", ofBundle: "com.a.clip"))
        let report = c.apps[0].keyReport
        XCTAssertFalse(report.warnings.contains { $0.contains("not a topic of bundle") }, "\(report)")
        XCTAssertTrue(report.lines.contains { $0.contains("CLIPKEY001 names com.a.clip, a bundle of its own") }, "\(report)")
    }
}
