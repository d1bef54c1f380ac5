import APNSCore
import Foundation
import XCTest

/// Rendering compared as parsed JSON (issue #5).
final class RenderTests: XCTestCase {
    static let token = String(repeating: "ab", count: 32)

    private func render(
        _ fields: String, push: String = "alert", templates: TemplateLibrary = TemplateLibrary(),
        truncate: Bool = false
    ) throws -> [String: Any] {
        let job = try Job.parse(Array(#"{"token":"\#(Self.token)","push_type":"\#(push)",\#(fields)}"#.utf8))
        let rendered = try PayloadRenderer.render(job, templates: templates, truncateByDefault: truncate)
        return try JSONSerialization.jsonObject(with: Data(rendered.payload)) as! [String: Any]
    }

    private func reason(_ fields: String, push: String = "alert", templates: TemplateLibrary = TemplateLibrary()) -> String? {
        do {
            _ = try render(fields, push: push, templates: templates)
            return nil
        } catch let error as JobRejection {
            return error.reason
        } catch {
            return "\(error)"
        }
    }

    func testEveryStructuredField() throws {
        let p = try render(
            #"""
            "notification":{"alert":{"title":"T","subtitle":"S","body":"B","launch_image":"L","title_loc_key":"TK","title_loc_args":["a"],
              "subtitle_loc_key":"SK","subtitle_loc_args":["b"],"loc_key":"K","loc_args":["c",1]},
              "badge":3,"sound":{"critical":true,"name":"alarm.caf","volume":0.5},"thread_id":"th","category":"cat",
              "mutable_content":true,"target_content_id":"win","interruption_level":"time-sensitive","relevance_score":0.75,
              "filter_criteria":"work","data":{"order":{"id":7},"deep_link":"app://x"}}
            """#)
        let aps = p["aps"] as! [String: Any]
        XCTAssertEqual(
            aps["alert"] as? NSDictionary,
            [
                "title": "T", "subtitle": "S", "body": "B", "launch-image": "L",
                "title-loc-key": "TK", "title-loc-args": ["a"], "subtitle-loc-key": "SK",
                "subtitle-loc-args": ["b"], "loc-key": "K", "loc-args": ["c", 1],
            ] as NSDictionary)
        XCTAssertEqual(aps["badge"] as? Int, 3)
        XCTAssertEqual(aps["sound"] as? NSDictionary, ["critical": 1, "name": "alarm.caf", "volume": 0.5] as NSDictionary)
        XCTAssertEqual(aps["thread-id"] as? String, "th")
        XCTAssertEqual(aps["category"] as? String, "cat")
        XCTAssertEqual(aps["mutable-content"] as? Int, 1)
        XCTAssertEqual(aps["target-content-id"] as? String, "win")
        XCTAssertEqual(aps["interruption-level"] as? String, "time-sensitive")
        XCTAssertEqual(aps["relevance-score"] as? Double, 0.75)
        XCTAssertEqual(aps["filter-criteria"] as? String, "work")
        XCTAssertNil(aps["content-available"])
        XCTAssertEqual(p["order"] as? NSDictionary, ["id": 7] as NSDictionary)
        XCTAssertEqual(p["deep_link"] as? String, "app://x")
    }

    func testPushTypesGetTheirPayloadShape() throws {
        let bg = try render(#""priority":5,"notification":{"content_available":true,"data":{"sync":1}}"#, push: "background")
        XCTAssertEqual(bg["aps"] as? NSDictionary, ["content-available": 1] as NSDictionary)
        XCTAssertEqual(bg["sync"] as? Int, 1)
        XCTAssertEqual(reason(#""priority":5,"notification":{"content_available":true,"badge":1}"#, push: "background"), "BadPayloadForPushType")
        XCTAssertEqual(reason(#""priority":5,"notification":{"badge":1}"#, push: "background"), "BadPayloadForPushType")
        XCTAssertEqual(reason(#""priority":5,"payload":{"aps":{"alert":"x"}}"#, push: "background"), "BadPayloadForPushType", "raw payloads too")
        let w = try render(#""notification":{}"#, push: "widgets")
        XCTAssertEqual(w["aps"] as? NSDictionary, ["content-changed": true] as NSDictionary)
        let la = try render(
            #""notification":{"event":"start","timestamp":1700000000,"content_state":{"score":"2-1"},"stale_date":1700003600,"dismissal_date":1700007200,"attributes_type":"Match","attributes":{"home":"A"},"alert":{"title":"Kick-off","body":"Go"},"relevance_score":50}"#,
            push: "liveactivity")
        let aps = la["aps"] as! [String: Any]
        XCTAssertEqual(aps["event"] as? String, "start")
        XCTAssertEqual(aps["timestamp"] as? Int, 1_700_000_000)
        XCTAssertEqual(aps["content-state"] as? NSDictionary, ["score": "2-1"] as NSDictionary)
        XCTAssertEqual(aps["stale-date"] as? Int, 1_700_003_600)
        XCTAssertEqual(aps["dismissal-date"] as? Int, 1_700_007_200)
        XCTAssertEqual(aps["attributes-type"] as? String, "Match")
        XCTAssertEqual(aps["attributes"] as? NSDictionary, ["home": "A"] as NSDictionary)
        XCTAssertEqual(reason(#""notification":{"event":"update"}"#, push: "liveactivity"), "BadPayloadForPushType")
        XCTAssertEqual(reason(#""notification":{"event":"begin","timestamp":1}"#, push: "liveactivity"), "WrongFieldType")
        let voip = try render(#""notification":{"data":{"call":"x"}}"#, push: "voip")
        XCTAssertEqual(voip["call"] as? String, "x")
    }

    func testEveryPushTypeRendersItsShape() throws {
        let cases: [(String, String, [String: Any])] = [
            ("alert", #""notification":{"alert":"A"}"#, ["aps": ["alert": "A"]]),
            ("background", #""priority":5,"notification":{"content_available":true}"#, ["aps": ["content-available": 1]]),
            ("voip", #""notification":{"data":{"call":1}}"#, ["aps": [String: Any](), "call": 1]),
            ("complication", #""notification":{"data":{"c":1}}"#, ["aps": [String: Any](), "c": 1]),
            ("fileprovider", #""notification":{"data":{"f":1}}"#, ["aps": [String: Any](), "f": 1]),
            ("location", #""notification":{"data":{"l":1}}"#, ["aps": [String: Any](), "l": 1]),
            ("mdm", #""topic":"com.example.mdm","notification":{"data":{"mdm":"magic"}}"#, ["mdm": "magic"]),
            ("pushtotalk", #""notification":{"data":{"ch":"x"}}"#, ["aps": [String: Any](), "ch": "x"]),
            (
                "liveactivity", #""notification":{"event":"end","timestamp":5,"dismissal_date":9}"#,
                ["aps": ["event": "end", "timestamp": 5, "dismissal-date": 9]]
            ),
            ("widgets", #""notification":{}"#, ["aps": ["content-changed": true]]),
            ("controls", #""notification":{}"#, ["aps": ["content-changed": true]]),
        ]
        XCTAssertEqual(cases.count, PushType.all.count)
        for (type, fields, expected) in cases {
            XCTAssertEqual(try render(fields, push: type) as NSDictionary, expected as NSDictionary, type)
        }
    }

    func testTemplatesFallBackByLocale() throws {
        var lib = TemplateLibrary()
        try lib.set("welcome", source: Array(#"{"aps":{"alert":{"title":"Welcome","body":"Hi {{name}}"}}}"#.utf8))
        try lib.set("welcome.pt", source: Array(#"{"aps":{"alert":{"title":"Bem-vindo","body":"Olá {{name}}"}}}"#.utf8))
        try lib.set("welcome.pt-BR", source: Array(#"{"aps":{"alert":{"title":"Bem-vindo!","body":"Oi {{name}}"}}}"#.utf8))
        func title(_ locale: String) throws -> String? {
            let p = try render(#""template":{"name":"welcome","locale":"\#(locale)","data":{"name":"Ana"}}"#, templates: lib)
            return ((p["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String
        }
        XCTAssertEqual(try title("pt-BR"), "Bem-vindo!")
        XCTAssertEqual(try title("pt_BR"), "Bem-vindo!")
        XCTAssertEqual(try title("pt-PT"), "Bem-vindo")
        XCTAssertEqual(try title("pt"), "Bem-vindo")
        XCTAssertEqual(try title("de-AT"), "Welcome")
        XCTAssertEqual(TemplateLibrary.candidates(name: "w", locale: "zh-Hant-TW"), ["w.zh-Hant-TW", "w.zh-Hant", "w.zh", "w"])
    }

    /// A fetched job is a slice of its batch's buffer, starting anywhere in it: its payload,
    /// and what structured fields and templates render, are the same as for the job alone.
    func testAJobInsideALargerBufferRendersAsOnItsOwn() throws {
        var lib = TemplateLibrary()
        try lib.set("hi", source: Array(#"{"aps":{"alert":{"body":"Hi {{name}}"}}}"#.utf8))
        let jobs = [
            #"{"token":"\#(Self.token)","payload":{"aps":{"alert":"raw"},"n":1}}"#,
            #"{"token":"\#(Self.token)","notification":{"alert":{"body":"B"},"badge":2,"data":{"k":"v"}}}"#,
            #"{"token":"\#(Self.token)","template":{"name":"hi","data":{"name":"Ana"}}}"#,
        ]
        let buffer = Array(jobs.joined(separator: "\n").utf8)
        var start = 0
        for text in jobs {
            let alone = try PayloadRenderer.render(try Job.parse(Array(text.utf8)), templates: lib)
            let slice = buffer[start..<(start + text.utf8.count)]
            let inside = try PayloadRenderer.render(try Job.parse(slice), templates: lib)
            XCTAssertEqual(Array(inside.payload), Array(alone.payload), text)
            // The bytes the I/O thread sends are the same, lent from the job's own buffers.
            XCTAssertEqual(inside.withPayload { Array($0) }, Array(alone.payload), text)
            XCTAssertFalse(inside.payloadCount == 0, text)
            XCTAssertEqual(Array(inside.raw), Array(text.utf8))
            start += text.utf8.count + 1
        }
    }

    func testPlaceholdersAreEscapedAndTyped() throws {
        var lib = TemplateLibrary()
        try lib.set(
            "t",
            source: Array(
                ##"{"aps":{"alert":{"body":"{{greeting}}, {{name}}!","title":"{{name}}"},"badge":"{{count}}"},"meta":"{{meta}}","n":"#{{count}}"}"##
                    .utf8))
        let tricky = "Zoë \"Q\" \\ line\nbreak\ttab \u{1} 😀 שלום עולם"
        var data = JSONWriter()
        data.beginObject()
        data.field("greeting", "Hello")
        data.field("name", tricky)
        data.field("count", 42)
        data.key("meta"); data.raw(Array(#"{"a":[1,"x"]}"#.utf8))
        data.endObject()
        let p = try render(#""template":{"name":"t","data":\#(String(decoding: data.bytes, as: UTF8.self))}"#, templates: lib)
        let aps = p["aps"] as! [String: Any]
        let alert = aps["alert"] as! [String: Any]
        XCTAssertEqual(alert["body"] as? String, "Hello, \(tricky)!")
        XCTAssertEqual(alert["title"] as? String, tricky)
        XCTAssertEqual(aps["badge"] as? Int, 42, "a whole-string placeholder keeps the value's type")
        XCTAssertEqual(p["meta"] as? NSDictionary, ["a": [1, "x"]] as NSDictionary)
        XCTAssertEqual(p["n"] as? String, "#42")
    }

    func testStructuredFieldsKeepTheProducersEscaping() throws {
        let p = try render(#""notification":{"alert":{"title":"\"Q\"\n\u0001","body":"😀 שלום"}}"#)
        let alert = (p["aps"] as! [String: Any])["alert"] as! [String: Any]
        XCTAssertEqual(alert["title"] as? String, "\"Q\"\n\u{1}")
        XCTAssertEqual(alert["body"] as? String, "😀 שלום")
    }

    func testTruncationCutsAtCharacterBoundariesWithAnEllipsis() throws {
        for unit in ["é", "😀", "שׁ", "a", "\""] {
            let body = String(repeating: unit, count: 5000)
            let job = try Job.parse(
                Array(
                    #"{"token":"\#(Self.token)","truncate":true,"notification":{"alert":{"title":"t","body":"\#(body.replacingOccurrences(of: "\"", with: "\\\""))"}}}"#
                        .utf8))
            let rendered = try PayloadRenderer.render(job, templates: TemplateLibrary())
            XCTAssertLessThanOrEqual(rendered.payload.count, 4096, unit)
            XCTAssertGreaterThan(rendered.payload.count, 4096 - 16, "uses the room there is: \(unit)")
            let p = try JSONSerialization.jsonObject(with: Data(rendered.payload)) as! [String: Any]
            let got = ((p["aps"] as! [String: Any])["alert"] as! [String: Any])["body"] as! String
            XCTAssertTrue(got.hasSuffix("…"))
            XCTAssertTrue(body.hasPrefix(String(got.dropLast())), unit)
        }
        // A string alert is its body.
        let long = String(repeating: "ü", count: 3000)
        let p = try render(#""notification":{"alert":"\#(long)"}"#, truncate: true)
        XCTAssertTrue(((p["aps"] as! [String: Any])["alert"] as! String).hasSuffix("…"))
    }

    func testEachBadInputHasItsDeadLetterReason() throws {
        var lib = TemplateLibrary()
        try lib.set("t", source: Array(#"{"aps":{"alert":"Hi {{name}}"}}"#.utf8))
        XCTAssertEqual(reason(#""template":{"name":"nope","locale":"fr"}"#, templates: lib), "UnknownTemplate")
        XCTAssertEqual(reason(#""template":{"name":"t","data":{"nom":"x"}}"#, templates: lib), "MissingPlaceholder")
        do {
            _ = try render(#""template":{"name":"t","data":{}}"#, templates: lib)
        } catch let e as JobRejection {
            XCTAssertTrue(e.detail.contains("\"name\""), "the error names the missing placeholder: \(e.detail)")
        }
        XCTAssertEqual(reason(#""notification":{"badge":"three"}"#), "WrongFieldType")
        XCTAssertEqual(reason(#""notification":{"sound":{"volume":2}}"#), "WrongFieldType")
        XCTAssertEqual(reason(#""notification":{"alert":{"bodyy":"x"}}"#), "UnknownField")
        XCTAssertEqual(reason(#""notification":{"interruption_level":"loud"}"#), "WrongFieldType")
        XCTAssertEqual(reason(#""notification":{"data":{"aps":{}}}"#), "WrongFieldType")
        XCTAssertEqual(reason(#""template":{"name":"t","data":{"name":"x"},"extra":1}"#, templates: lib), "UnknownField")
        XCTAssertEqual(reason(#""payload":{"a":1},"notification":{}"#), "MissingPayload")
        let big = String(repeating: "x", count: 5000)
        do {
            _ = try render(#""notification":{"alert":{"body":"\#(big)"}}"#)
            XCTFail("oversize must fail without truncation")
        } catch let e as JobRejection {
            XCTAssertEqual(e.reason, "PayloadTooLarge")
            XCTAssertTrue(e.detail.contains("5035 bytes") || e.detail.contains("bytes"), e.detail)
        }
        XCTAssertThrowsError(try TemplateLibrary().lookup(name: "x", locale: nil).map { _ in () })
        XCTAssertThrowsError(try Template(Array("not json {{x}}".utf8)))
    }
}

private extension Optional {
    func map(_ f: (Wrapped) throws -> Void) throws { if let w = self { try f(w) } else { throw JobRejection("None", "") } }
}
