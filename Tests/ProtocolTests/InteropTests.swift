import APNSCore
import Foundation
import TestSupport
import XCTest

@testable import APNSWorker

/// The worker's HTTP/2 client against an implementation that shares no code with nghttp2 (the
/// mock's): Python's h2 and hpack (Debian's python3-h2), which check every frame and header they
/// read. Its stream windows of 32 bytes make every body wait for WINDOW_UPDATEs as it goes.
final class InteropTests: XCTestCase {
    private static let server = #"""
        import asyncio, json, ssl, sys, traceback, uuid
        import h2.config, h2.connection, h2.events, h2.settings
        cert, key, port_file, log_file = sys.argv[1:5]
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["h2"])
        log = open(log_file, "w")

        async def handle(reader, writer):
            try:
                await serve(reader, writer)
            except Exception:
                traceback.print_exc()
                sys.stdout.flush()

        async def serve(reader, writer):
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
            conn.initiate_connection()
            # Each stream's window is a quarter of a body: every body waits for WINDOW_UPDATEs.
            conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 32})
            writer.write(conn.data_to_send())
            heads, bodies = {}, {}
            while data := await reader.read(65536):
                for e in conn.receive_data(data):
                    if isinstance(e, h2.events.RequestReceived):
                        heads[e.stream_id], bodies[e.stream_id] = e.headers, b""
                    elif isinstance(e, h2.events.DataReceived):
                        bodies[e.stream_id] += e.data
                        conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    elif isinstance(e, h2.events.StreamEnded):
                        h = heads.pop(e.stream_id)
                        log.write(json.dumps({"headers": h, "body": bodies.pop(e.stream_id).decode()}) + "\n")
                        log.flush()
                        conn.send_headers(e.stream_id, [(":status", "200"), ("apns-id", dict(h).get("apns-id") or str(uuid.uuid4()))], end_stream=True)
                writer.write(conn.data_to_send())
                await writer.drain()

        async def main():
            server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
            with open(port_file, "w") as f:
                f.write(str(server.sockets[0].getsockname()[1]))
            async with server:
                await server.serve_forever()

        asyncio.run(main())
        """#

    func testPythonH2ReadsEveryRequestAsSent() throws {
        let dir = try TemporaryDirectory("apnsw-interop")
        // The mock's credentials give the server its certificate; the mock itself stays unused.
        let probe = try MockFixture()
        let portFile = dir.file("port"), logFile = dir.file("requests.jsonl")
        let python = try ChildProcess(
            "/usr/bin/python3",
            [
                "-c", Self.server, probe.files.directory + "/server.pem", probe.files.directory + "/server.key",
                portFile, logFile,
            ], outputFile: dir.file("server.out"))
        XCTAssertTrue(
            waitUntil(timeout: 10) { (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) } != nil },
            "python3-h2 did not start: \(python.output)")
        let port = try XCTUnwrap(Int(String(contentsOfFile: portFile, encoding: .utf8)))
        let h = try ProtocolHarness(connections: 2, streams: 100, port: port, mock: probe)
        let n = 1500
        let filler = String(repeating: "x", count: 100)  // bodies of about 130 bytes
        let jobs = try (0..<n).map { i in
            let extra =
                i % 3 == 0
                ? #","apns_id":"\#(String(format: "00000000-0000-4000-8000-%012x", i))""#
                : i % 3 == 1 ? #","expiration":\#(1_700_000_000 + i),"collapse_id":"c\#(i % 7)""# : ""
            return try h.job(#"{"token":"\#(ProtocolHarness.token(i))","payload":{"aps":{"alert":"n\#(i)\#(filler)"}}\#(extra)}"#)
        }
        h.send(jobs)
        XCTAssertEqual(Set(h.waitForOutcomes(n).compactMap(\.deliveredID)).count, n, python.output)

        let lines = try String(contentsOfFile: logFile, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, n)
        var paths = Set<String>(), bearers = Set<String>()
        for line in lines {
            let entry = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let fields = try XCTUnwrap(entry["headers"] as? [[String]]).map { ($0[0], $0[1]) }
            let byName = Dictionary(fields, uniquingKeysWith: { a, _ in a })
            XCTAssertEqual(byName[":method"], "POST")
            XCTAssertEqual(byName[":scheme"], "https")
            XCTAssertEqual(byName[":authority"], "localhost")
            XCTAssertEqual(byName["apns-topic"], "com.example.app")
            XCTAssertEqual(byName["apns-push-type"], "alert")
            let path = try XCTUnwrap(byName[":path"])
            let i = try XCTUnwrap(Int(path.dropFirst("/3/device/".count), radix: 16))
            XCTAssertEqual(entry["body"] as? String, #"{"aps":{"alert":"n\#(i)\#(filler)"}}"#)
            XCTAssertEqual(byName["apns-id"], i % 3 == 0 ? String(format: "00000000-0000-4000-8000-%012x", i) : nil)
            XCTAssertEqual(byName["apns-expiration"], i % 3 == 1 ? String(1_700_000_000 + i) : nil)
            XCTAssertEqual(byName["apns-collapse-id"], i % 3 == 1 ? "c\(i % 7)" : nil)
            paths.insert(path)
            bearers.insert(try XCTUnwrap(byName["authorization"]))
        }
        XCTAssertEqual(paths.count, n, "each job's own token")
        XCTAssertEqual(bearers.count, 1)
        XCTAssertTrue(try XCTUnwrap(bearers.first).hasPrefix("bearer eyJ"))
        python.signal(SIGTERM)
    }
}
