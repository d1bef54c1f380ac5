import APNSCore
import RedisClient
import XCTest

final class JSONScannerTests: XCTestCase {
    private func validates(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBufferPointer { (try? JSONScanner.validateObject($0)) != nil }
    }

    func testAcceptsObjectsOfEveryKind() {
        XCTAssertTrue(validates(#"{}"#))
        XCTAssertTrue(validates(#" {"a":[1,-2.5e3,true,false,null,{"b":"c"}],"d":"\u00e9\ud83d\ude00"} "#))
        XCTAssertTrue(validates("{\"emoji\":\"😀\",\"rtl\":\"שלום\"}"))
    }

    func testRejectsMalformedInput() {
        for bad in [
            #"[]"#, #"{"a":}"#, #"{"a":1,}"#, #"{'a':1}"#, #"{"a":01}"#, #"{"a":1} x"#, #"{"a":"\x"}"#,
            "{\"a\":\"\u{1}\"}", #"{"a":"\ud800"}"#, #"{"a":tru}"#, #"{"a":1.}"#, #"{"a""#, "",
        ] {
            XCTAssertFalse(validates(bad), bad)
        }
    }

    func testRejectsInvalidUTF8() {
        let bytes: [UInt8] = Array(#"{"a":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)
        XCTAssertThrowsError(try bytes.withUnsafeBufferPointer { try JSONScanner.validateObject($0) })
    }

    func testDecodesStringsWithEscapes() throws {
        let text = Array(#""a\"b\\c\nd\u00e9\ud83d\ude00""#.utf8)
        let s = try text.withUnsafeBufferPointer { buf -> String in
            var scanner = JSONScanner(buf)
            return try scanner.readString()
        }
        XCTAssertEqual(s, "a\"b\\c\nd\u{e9}😀")
    }

    /// A lent string is the same as a read one: plain ASCII in place (at every length around
    /// the eight-byte steps), escapes and multi-byte characters decoded; bad strings fail alike.
    func testLendsStringsAsItReadsThem() throws {
        func lend(_ json: String) throws -> (String, Int) {
            try Array(json.utf8).withUnsafeBufferPointer { (buf) throws -> (String, Int) in
                var scanner = JSONScanner(buf)
                let text = try scanner.readString(lending: { String(decoding: $0, as: UTF8.self) })
                return (text, scanner.index)
            }
        }
        for n in 0...20 {
            let plain = String(repeating: "ab01", count: 6).prefix(n)
            XCTAssertEqual(try lend(" \"\(plain)\",1").0, String(plain))
            XCTAssertEqual(try lend(" \"\(plain)\",1").1, n + 3, "index after the closing quote")
        }
        XCTAssertEqual(try lend(#""a\"b\\c\nd\u00e9\ud83d\ude00""#).0, "a\"b\\c\nd\u{e9}😀")
        XCTAssertEqual(try lend("\"Zoë and 😀 in a longer string\"").0, "Zoë and 😀 in a longer string")
        for bad in ["\"abc", "\"abcdefghijkl", "\"ab\u{1}cd\"", "abc\"", #""a\x""#] {
            XCTAssertThrowsError(try lend(bad), bad)
        }
    }

    /// Keys lent to a member walk are the keys read: in place when plain, decoded otherwise; an
    /// error thrown by the walker's body comes out of the walk.
    func testLendsKeysAsItReadsThem() throws {
        let json = Array(#"{"id":1, "a\"b":2,"z\u00e9":3,"Zoë":{"x":[4]},"":5}"#.utf8)
        var keys: [String] = []
        try json.withUnsafeBufferPointer { (buf) throws(JSONSyntaxError) in
            var scanner = JSONScanner(buf)
            try scanner.forEachMember(lendingKeys: { key, s throws(JSONSyntaxError) in
                keys.append(String(decoding: key, as: UTF8.self))
                try s.skipValue()
            })
            try scanner.expectEnd()
        }
        XCTAssertEqual(keys, ["id", "a\"b", "z\u{e9}", "Zoë", ""])
        for key in [#""plain""#, #""esc\u0061ped""#] {
            let bytes = Array("{\(key):1}".utf8)
            XCTAssertThrowsError(
                try bytes.withUnsafeBufferPointer { (buf) throws(JSONSyntaxError) in
                    var scanner = JSONScanner(buf)
                    try scanner.forEachMember(lendingKeys: { _, s throws(JSONSyntaxError) in throw s.fail("refused") })
                }
            ) { error in XCTAssertEqual((error as? JSONSyntaxError)?.message, "refused", key) }
        }
    }

    func testReadsIntegersAndRejectsFractions() throws {
        try Array("-42".utf8).withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            XCTAssertEqual(try s.readInt(), -42)
        }
        try Array("4.2".utf8).withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            XCTAssertThrowsError(try s.readInt())
        }
        for text in ["99999999999999999999", "9223372036854775808", "-9223372036854775809"] {
            try Array(text.utf8).withUnsafeBufferPointer { buf in
                var s = JSONScanner(buf)
                XCTAssertThrowsError(try s.readInt(), text)
            }
        }
        for value in [Int64.max, Int64.min, 0] {
            try Array(String(value).utf8).withUnsafeBufferPointer { buf in
                var s = JSONScanner(buf)
                XCTAssertEqual(try s.readInt(), value)
            }
        }
    }

    func testDepthIsBounded() {
        let deep = String(repeating: "{\"a\":", count: 100) + "1" + String(repeating: "}", count: 100)
        XCTAssertFalse(validates(deep))
        func nested(_ n: Int, _ open: String, _ close: String) -> String {
            "{\"a\":" + String(repeating: open, count: n) + String(repeating: close, count: n) + "}"
        }
        // The root is at depth 0: 64 levels in all.
        XCTAssertTrue(validates(String(repeating: "{\"a\":", count: 63) + "1" + String(repeating: "}", count: 63)))
        XCTAssertFalse(validates(String(repeating: "{\"a\":", count: 64) + "1" + String(repeating: "}", count: 64)))
        XCTAssertTrue(validates(nested(63, "[", "]")))
        XCTAssertFalse(validates(nested(64, "[", "]")))
    }

    /// Containers are checked in one loop: every way of breaking a comma, a colon, a key or a
    /// closing bracket at any depth is refused, and whitespace is allowed between any tokens.
    func testNestedContainersAreCheckedAtEveryDepth() {
        for good in [
            #"{"a":[[],{},[{}],{"b":[]}]}"#, #" { "a" : [ 1 , { "b" : "c" } , [ ] ] , "d" : { } } "#,
            "{\"a\":\n\t[\r\n\"x\\\"y\", \"é\", -0.5e+2, true, false, null]}", #"{"":{"":[""]}}"#,
            #"{"a":{"k\"ey":1,"é":2,"c": 3}}"#,
        ] {
            XCTAssertTrue(validates(good), good)
        }
        for bad in [
            #"{"a":[1,]}"#, #"{"a":[,1]}"#, #"{"a":{,}}"#, #"{"a":[1 2]}"#, #"{"a":{"b" 1}}"#, #"{"a":{1:2}}"#,
            #"{"a":[}"#, #"{"a":{]}"#, #"{"a":[1}"#, #"{"a":{"b":1]}"#, #"{"a":[[]"#, #"{"a":[1,[2,{"b":}]]}"#,
            #"{"a" : [ 1 , 2 ] , }"#, #"{"a":[1]]}"#, #"{"a":{}}}"#, #"{"a":[{"b":1},]}"#, #"{"a":[{"b":1}{"c":2}]}"#,
            #"{"a":[nul]}"#, #"{"a":{"b":"\q"}}"#, #"{"a":["x]}"#, #"{"a":{"b\u00"}}"#,
            #"{"a":{"b":"#, #"{"a":{"b":}}"#, #"{"a":{"b";1}}"#,
        ] {
            XCTAssertFalse(validates(bad), bad)
        }
    }

    func testSkippingAValueGivesItsKindAndRange() throws {
        let text = Array(#"{"x": [1, {"y": "z"}] , "n": -1.5, "s": "t\"u", "o": {}, "b": false, "z": null}"#.utf8)
        var found: [String: (JSONKind, String)] = [:]
        try text.withUnsafeBufferPointer { buf throws(JSONSyntaxError) in
            var s = JSONScanner(buf)
            try s.forEachMember { key, s throws(JSONSyntaxError) in
                let (kind, range) = try s.skipValue()
                found[key] = (kind, String(decoding: buf[range], as: UTF8.self))
            }
            try s.expectEnd()
        }
        XCTAssertEqual(found["x"]?.0, .array)
        XCTAssertEqual(found["x"]?.1, #"[1, {"y": "z"}]"#)
        XCTAssertEqual(found["n"]?.0, .number)
        XCTAssertEqual(found["n"]?.1, "-1.5")
        XCTAssertEqual(found["s"]?.1, #""t\"u""#)
        XCTAssertEqual(found["o"]?.0, .object)
        XCTAssertEqual(found["b"]?.0, .bool)
        XCTAssertEqual(found["z"]?.0, .null)
    }

    func testWriterEscapesControlCharactersQuotesAndKeepsUnicode() throws {
        var w = JSONWriter()
        w.beginObject()
        w.field("s", "q\"b\\n\n\t\u{1}😀שלום")
        w.endObject()
        let parsed = try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [String: String]
        XCTAssertEqual(parsed?["s"], "q\"b\\n\n\t\u{1}😀שלום")
    }

    /// Numbers are written right to left; the cursor writes names given in the source as they
    /// are, and appends after what the buffer holds.
    func testWritersWriteNumbersAndTheCursorLiteralNames() throws {
        var w = JSONWriter()
        w.beginObject()
        for (i, n) in [0, 7, -5, 10, 1_795_983_389_104, Int64.max, Int64.min].enumerated() { w.field("n\(i)", n) }
        w.endObject()
        XCTAssertEqual(
            String(decoding: w.bytes, as: UTF8.self),
            #"{"n0":0,"n1":7,"n2":-5,"n3":10,"n4":1795983389104,"n5":9223372036854775807,"#
                + #""n6":-9223372036854775808}"#)
        var out = Array("before|".utf8)
        JSONCursor.append(to: &out, maxCount: 200) { c in
            c.beginObject()
            c.field(literal: "literal", "x")
            c.fieldIfPresent(literal: "absent", nil as String?)
            c.field(literal: "count", 3)
            c.field(literal: "min", Int64.min)
            c.key(literal: "list")
            c.beginArray()
            c.string("a")
            c.int(-1)
            c.endArray()
            c.endObject()
        }
        XCTAssertEqual(String(decoding: out, as: UTF8.self), #"before|{"literal":"x","count":3,"min":-9223372036854775808,"list":["a",-1]}"#)
        var args = RedisArgs()
        for n in [0, 42, -1, Int.max] { args.append(n) }
        XCTAssertEqual((0..<4).map { String(decoding: args.argument($0), as: UTF8.self) }, ["0", "42", "-1", String(Int.max)])
    }

    /// The writer's fast check looks at eight bytes per step: every byte value at every offset of
    /// a step (and in a tail of every length, which goes as one word when plain) must come out as
    /// JSON that reads back to the same text.
    func testWriterEscapesEveryByteAtEveryPosition() throws {
        for length in Array(1...17) + [19, 23] {
            for position in 0..<length {
                for value in UInt8(0)...UInt8(127) {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = value
                    let text = String(decoding: bytes, as: UTF8.self)
                    var w = JSONWriter()
                    w.beginArray()
                    w.string(text)
                    w.endArray()
                    let parsed = try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [String]
                    XCTAssertEqual(parsed?.first, text, "byte \(value) at \(position) of \(length)")
                    XCTAssertEqual(try scanFirstString(w.bytes), text, "byte \(value) at \(position) of \(length)")
                    let escaped = value < 0x20 || value == UInt8(ascii: "\"") || value == UInt8(ascii: "\\")
                    XCTAssertEqual(w.bytes.count > length + 4, escaped, "byte \(value) at \(position) of \(length)")
                    // The cursor copies plain runs word by word: it must write the same bytes.
                    var c: [UInt8] = []
                    JSONCursor.append(to: &c, maxCount: 2 + JSONCursor.room(forString: length)) {
                        $0.beginArray(); $0.string(text); $0.endArray()
                    }
                    XCTAssertEqual(c, w.bytes, "byte \(value) at \(position) of \(length)")
                }
            }
        }
    }

    /// The scanner passes plain ASCII eight bytes at a time: characters of every UTF-8 length at
    /// every offset must come back whole, and a control character must still be refused.
    func testScannerReadsMultiByteCharactersAndRefusesControlsAtEveryOffset() throws {
        for character in ["é", "€", "😀"] {
            for position in 0..<18 {
                let text = String(repeating: "a", count: position) + character + String(repeating: "b", count: 17 - position)
                XCTAssertEqual(try scanFirstString(Array("[\"\(text)\"]".utf8)), text)
            }
        }
        for position in 0..<18 {
            var bytes = Array("[\"".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 18) + Array("\"]".utf8)
            bytes[2 + position] = 0x01
            XCTAssertThrowsError(try scanFirstString(bytes), "control character at \(position)")
        }
    }

    private func scanFirstString(_ json: [UInt8]) throws -> String {
        try json.withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            try s.expect(UInt8(ascii: "["))
            return try s.readString()
        }
    }
}
