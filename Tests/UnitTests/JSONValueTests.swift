import APNSCore
import XCTest

final class JSONValueTests: XCTestCase {
    private func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(Array(text.utf8)) }

    func testReadsEveryKindAndWritesItBackWithSortedKeys() throws {
        let value = try parse(#" {"z":[1,-2.5e3,true,false,null],"a":{"b":"c\u00e9"},"big":9223372036854775807} "#)
        XCTAssertEqual(value["z"], .array([.integer(1), .number(-2500), .bool(true), .bool(false), .null]))
        XCTAssertEqual(value["a"]?["b"]?.string, "cé")
        XCTAssertEqual(value["big"], .integer(Int64.max))
        XCTAssertEqual(value.text, #"{"a":{"b":"cé"},"big":9223372036854775807,"z":[1,-2500.0,true,false,null]}"#)
        XCTAssertEqual(try parse(value.text), value, "what it writes reads back the same")
    }

    func testNumbersPastInt64AreNumbersNotErrors() throws {
        XCTAssertEqual(try parse("18446744073709551616"), .number(18_446_744_073_709_551_616))
        XCTAssertEqual(try parse("1.0"), .number(1))
    }

    func testRefusesMalformedInputDuplicateKeysAndDeepNesting() {
        for bad in [#"{"a":1,}"#, #"{"a":1} x"#, "", #"{"a""#, "[1 2]", #"{"a":tru}"#] {
            XCTAssertThrowsError(try parse(bad), bad)
        }
        XCTAssertThrowsError(try parse(#"{"a":1,"a":2}"#)) { error in
            XCTAssertTrue("\(error)".contains(#"the key "a" is given twice"#), "\(error)")
        }
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        XCTAssertThrowsError(try parse(deep)) { error in
            XCTAssertEqual((error as? JSONSyntaxError)?.kind, .tooDeep)
        }
        XCTAssertNoThrow(try parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)))
    }
}
