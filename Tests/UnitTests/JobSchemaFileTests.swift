import APNSCore
import Foundation
import XCTest

/// The shipped JSON Schema and the worker's parser agree on sample jobs.
final class JobSchemaFileTests: XCTestCase {
    static let schema = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("schema/job-v1.schema.json").path

    func testSchemaAndParserAgree() throws {
        let t = String(repeating: "ab", count: 32)
        let samples = [
            #"{"v":1,"id":"a","token":"\#(t)","payload":{"aps":{"alert":"x"}}}"#,
            #"{"tokens":["\#(t)","\#(t)"],"push_type":"background","priority":5,"send_at":1800000000,"max_attempts":3,"payload":{"aps":{"content-available":1}}}"#,
            #"{"token":"\#(t)","priorty":5,"payload":{"a":1}}"#,
            #"{"token":"\#(t)","push_type":"shout","payload":{"a":1}}"#,
            #"{"token":"\#(t)","priority":7,"payload":{"a":1}}"#,
            #"{"payload":{"a":1}}"#,
            #"{"token":"\#(t)","tokens":["\#(t)"],"payload":{"a":1}}"#,
            #"{"token":"xyz","payload":{"a":1}}"#,
            #"{"v":2,"token":"\#(t)","payload":{"a":1}}"#,
            #"{"token":"\#(t)","notification":{"alert":"x"},"truncate":true}"#,
            #"{"token":"\#(t)","template":{"name":"w","locale":"pt","data":{"n":1}}}"#,
            #"{"token":"\#(t)","template":{"locale":"pt"}}"#,
            #"{"token":"\#(t)","payload":{"a":1},"template":{"name":"w"}}"#,
            #"{"app":"android","token":"dGVzdA:APA91bH-x_y.z","payload":{"data":{"k":"v"}}}"#,
            #"{"app":"android","token":"has space in it","payload":{"data":{"k":"v"}}}"#,
            #"{"app":"android","topic":"news","payload":{"data":{"k":"v"}}}"#,
            #"{"app":"android","condition":"'a' in topics","payload":{"data":{"k":"v"}}}"#,
            #"{"app":"android","token":"dGVzdA:APA91bH-x_y.z","condition":"'a' in topics","payload":{"data":{"k":"v"}}}"#,
        ]
        let schemaSays = try Self.validate(samples)
        let parserSays = samples.map { (try? Job.parse(Array($0.utf8))) != nil }
        XCTAssertEqual(schemaSays, parserSays)
        XCTAssertEqual(
            parserSays, [true, true, false, false, false, false, false, false, false, true, true, false, false, true, false, true, true, false])
    }

    /// What the shipped schema says of each sample (python3-jsonschema, draft 2020-12).
    static func validate(_ samples: [String]) throws -> [Bool] {
        let script = """
            import json, sys, jsonschema
            schema = json.load(open(sys.argv[1]))
            v = jsonschema.Draft202012Validator(schema)
            print(json.dumps([v.is_valid(json.loads(s)) for s in json.loads(sys.stdin.read())]))
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", script, schema]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        try p.run()
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: samples))
        try input.fileHandleForWriting.close()
        p.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(p.terminationStatus, 0, "python3-jsonschema missing? \(text)")
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Bool], text)
    }
}
