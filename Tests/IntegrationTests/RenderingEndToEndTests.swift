import APNSCore
import Foundation
import TestSupport
import XCTest

final class RenderingEndToEndTests: XCTestCase {
    func testTemplatesFromFilesAndRedisStructuredFieldsAndExactBytes() throws {
        let dir = try TemporaryDirectory("apnsw-templates")
        try #"{"aps":{"alert":{"title":"Order {{order}}","body":"Hi {{name}}"}},"order":"{{order}}"}"#
            .write(toFile: dir.file("order.json"), atomically: true, encoding: .utf8)
        try #"{"aps":{"alert":{"title":"Pedido {{order}}","body":"Olá {{name}}"}}}"#
            .write(toFile: dir.file("order.pt.json"), atomically: true, encoding: .utf8)
        let f = try WorkerFixture(settings: ["templates_dir": dir.path])
        try f.startWorker()
        let r = try f.connect()
        _ = try r.command(["HSET", f.keys.templates, "promo", #"{"aps":{"alert":"{{text}} v1"}}"#])
        try f.enqueue([
            #"{"id":"file","token":"\#(WorkerFixture.token(1))","template":{"name":"order","locale":"pt-BR","data":{"order":7,"name":"Zoë \"Z\""}}}"#,
            #"{"id":"redis","token":"\#(WorkerFixture.token(2))","template":{"name":"promo","data":{"text":"Sale"}}}"#,
            #"{"id":"fields","token":"\#(WorkerFixture.token(3))","notification":{"alert":{"title":"T","body":"B"},"badge":2,"data":{"k":"v"}}}"#,
            #"{"id":"missing","token":"\#(WorkerFixture.token(4))","template":{"name":"order","data":{"order":1}}}"#,
        ])
        try f.waitForOutcomes(4)
        // Templates in Redis change while the worker runs.
        _ = try r.command(["HSET", f.keys.templates, "promo", #"{"aps":{"alert":"{{text}} v2"}}"#])
        usleep(1_200_000)
        try f.enqueue([#"{"id":"redis2","token":"\#(WorkerFixture.token(5))","template":{"name":"promo","data":{"text":"Sale"}}}"#])
        try f.waitForOutcomes(5)
        XCTAssertEqual(try f.finalStats(), ["delivered": 4, "dead_lettered": 1])
        XCTAssertEqual(try f.records(f.keys.deadLetters).first?["reason"] as? String, "MissingPlaceholder")
        let log = Dictionary(uniqueKeysWithValues: try f.mock.logEntries().map { ($0["token"] as! String, $0) })
        func payload(_ i: Int) -> [String: Any] { log[WorkerFixture.token(i)]?["payload"] as? [String: Any] ?? [:] }
        XCTAssertEqual(
            ((payload(1)["aps"] as? [String: Any])?["alert"] as? NSDictionary),
            ["title": "Pedido 7", "body": "Olá Zoë \"Z\""] as NSDictionary)
        XCTAssertEqual((payload(2)["aps"] as? [String: Any])?["alert"] as? String, "Sale v1")
        XCTAssertEqual((payload(5)["aps"] as? [String: Any])?["alert"] as? String, "Sale v2")
        XCTAssertEqual(payload(3)["k"] as? String, "v")
        XCTAssertEqual((payload(3)["aps"] as? [String: Any])?["badge"] as? Int, 2)
        // The exact bytes: what the worker rendered is what arrived.
        let expected = #"{"aps":{"alert":{"title":"T","body":"B"},"badge":2},"k":"v"}"#
        XCTAssertEqual(log[WorkerFixture.token(3)]?["payload_bytes"] as? Int, expected.utf8.count)
    }
}
