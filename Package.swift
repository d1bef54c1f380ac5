// swift-tools-version:6.0
import Foundation
import PackageDescription

// The commit `--version` prints: APNSW_COMMIT (scripts/build-release and the image set it), else
// what .git says when the manifest is read.
let commit: String = {
    if let given = ProcessInfo.processInfo.environment["APNSW_COMMIT"], !given.isEmpty { return given }
    let git = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(".git")
    guard let head = try? String(contentsOf: git.appendingPathComponent("HEAD"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    else { return "unknown" }
    guard head.hasPrefix("ref: ") else { return String(head.prefix(12)) }
    let ref = String(head.dropFirst(5))
    if let id = try? String(contentsOf: git.appendingPathComponent(ref), encoding: .utf8) { return String(id.prefix(12)) }
    let packed = (try? String(contentsOf: git.appendingPathComponent("packed-refs"), encoding: .utf8)) ?? ""
    return packed.split(separator: "\n").first { $0.hasSuffix(" " + ref) }.map { String($0.prefix(12)) } ?? "unknown"
}()

// Release builds skip the run-time exclusivity checks on the hot path (each class property access
// took a thread-local lookup); debug builds, which the tests use, keep them.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "apns-worker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "apns-worker", targets: ["apns-worker"]),
        .executable(name: "apns-mock", targets: ["apns-mock"]),
        .executable(name: "apnsctl", targets: ["apnsctl"]),
    ],
    targets: [
        // C libraries, each behind a shim header (macros wrapped as static inline functions).
        .systemLibrary(name: "CHiredis", path: "Sources/CHiredis"),
        .systemLibrary(name: "CNghttp2", path: "Sources/CNghttp2", pkgConfig: "libnghttp2"),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl"),
        .systemLibrary(name: "CLinux", path: "Sources/CLinux"),
        // hiredis's own I/O and a RESP scanner, in C where they reach into hiredis's internals
        // (the header lists every one).
        // DWARF 4: Debian 12's valgrind (scripts/bench's callgrind) cannot read clang's DWARF 5.
        .target(name: "CHiredisIO", dependencies: ["CHiredis"], cSettings: [.unsafeFlags(["-gdwarf-4"])]),
        // The commit the programs were built from, for --version.
        .target(name: "CBuildInfo", cSettings: [.define("APNSW_COMMIT", to: "\"\(commit)\"")]),

        // Bytes the modules below write into: requests, frames, transactions, records.
        .target(name: "Buffers", swiftSettings: hotPath),
        // The ownership tricks of the hot path, quarantined in one file behind named helpers.
        .target(name: "PointerTricks", swiftSettings: hotPath),
        // Domain: jobs, tokens, push types, reasons, keys, JSON scanning. No C import.
        .target(name: "APNSCore", dependencies: ["Buffers", "PointerTricks"], swiftSettings: hotPath),
        // Edges: one module per C library family.
        .target(name: "RedisClient", dependencies: ["Buffers", "CHiredis", "CHiredisIO", "PointerTricks", "TLS"], swiftSettings: hotPath),
        // The event loop: epoll, sockets, the resolver, clocks, system errors.
        .target(name: "IOLoop", dependencies: ["CLinux", "PointerTricks"], swiftSettings: hotPath),
        // TLS: OpenSSL contexts and streams, certificates, ES256 keys, OpenSSL's errors.
        .target(name: "TLS", dependencies: ["COpenSSL", "PointerTricks"], swiftSettings: hotPath),
        // HTTP/2: our client session and HPACK encoder, frames, nghttp2's server session, and the
        // TLS + HTTP/2 connection an event loop drives.
        .target(name: "HTTP2", dependencies: ["Buffers", "CNghttp2", "IOLoop", "PointerTricks", "TLS"], swiftSettings: hotPath),
        // The seam between the queue and a provider: a send (the queue's ticket, what to send, the
        // provider's answer), its neutral outcome, and the finished job. No Redis, no network.
        .target(name: "Delivery", dependencies: ["APNSCore", "PointerTricks"], swiftSettings: hotPath),
        // The Redis contract: key names, Lua scripts, completion transactions, outcome records,
        // job envelopes and in-flight bookkeeping, shared by the worker and apnsctl.
        .target(name: "QueueContract", dependencies: ["APNSCore", "Buffers", "Delivery", "PointerTricks", "RedisClient"], swiftSettings: hotPath),
        // Logs, metrics and readiness, passed to whoever reports.
        .target(name: "Telemetry", dependencies: ["APNSCore", "IOLoop", "CBuildInfo"], swiftSettings: hotPath),
        // The worker's settings: read from the file and the environment, and checked.
        .target(name: "Configuration", dependencies: ["APNSCore", "QueueContract", "RedisClient", "Telemetry"], swiftSettings: hotPath),
        // The APNs transport: connections, pools, stream budget, circuit breaker, backoff, JWT.
        // Below the queue: it knows sends (Delivery), never Redis or the worker's settings.
        .target(
            name: "APNSTransport", dependencies: ["APNSCore", "Buffers", "Delivery", "PointerTricks", "Telemetry", "IOLoop", "TLS", "HTTP2"],
            swiftSettings: hotPath),
        // The FCM transport (HTTP v1): OAuth tokens of service accounts, and the sender beside
        // APNs's. Below the queue, as APNSTransport is.
        .target(
            name: "FCMTransport", dependencies: ["APNSCore", "Buffers", "Delivery", "PointerTricks", "Telemetry", "IOLoop", "TLS", "HTTP2"],
            swiftSettings: hotPath),
        // The queue pipeline: fetch, send, complete, the gate, housekeeping, lifecycle.
        .target(
            name: "APNSWorker",
            dependencies: [
                "APNSCore", "Buffers", "Delivery", "PointerTricks", "QueueContract", "RedisClient", "Configuration", "Telemetry",
                "APNSTransport", "FCMTransport", "IOLoop", "TLS",
            ], swiftSettings: hotPath),
        // The operators' commands behind apnsctl.
        .target(
            name: "APNSAdmin",
            dependencies: [
                "APNSCore", "Delivery", "QueueContract", "RedisClient", "Configuration", "APNSTransport", "FCMTransport", "APNSWorker", "TLS",
                "IOLoop",
            ]),
        // apnsctl web: an HTTP/1.1 server, the dashboard's pages and its JSON API over APNSAdmin.
        .target(name: "Dashboard", dependencies: ["APNSAdmin", "APNSCore", "QueueContract", "RedisClient", "Configuration", "IOLoop", "TLS"]),
        // Test support and demo/bench server: the strict mock APNs.
        .target(name: "APNSMock", dependencies: ["APNSCore", "Buffers", "IOLoop", "TLS", "HTTP2"], swiftSettings: hotPath),

        // Helpers for the test tiers: a real redis-server, the mock in-process, child processes.
        .target(name: "TestSupport", dependencies: ["APNSCore", "RedisClient", "APNSMock", "TLS"]),

        .executableTarget(name: "apns-worker", dependencies: ["APNSWorker", "Configuration", "IOLoop", "Telemetry"]),
        .executableTarget(name: "apns-mock", dependencies: ["APNSMock", "Telemetry"]),
        .executableTarget(name: "apns-render-bench", dependencies: ["APNSCore", "Buffers", "Delivery", "QueueContract"]),
        .executableTarget(
            name: "apnsctl",
            dependencies: ["APNSAdmin", "APNSCore", "Dashboard", "Configuration", "IOLoop", "QueueContract", "RedisClient", "Telemetry"]),

        // Pure: no sockets, no services.
        .testTarget(
            name: "UnitTests",
            dependencies: [
                "APNSCore", "Delivery", "PointerTricks", "QueueContract", "Configuration", "Telemetry", "APNSTransport", "FCMTransport", "Buffers",
                "IOLoop", "TLS",
                "HTTP2",
                "APNSWorker", "APNSMock", "Dashboard", "RedisClient", "CNghttp2",
            ]),
        // The worker's client against the mock APNs over real TLS + HTTP/2.
        .testTarget(
            name: "ProtocolTests",
            dependencies: [
                "APNSCore", "Delivery", "PointerTricks", "QueueContract", "Configuration", "Telemetry", "APNSTransport", "FCMTransport", "Buffers",
                "IOLoop", "TLS",
                "HTTP2",
                "APNSWorker", "APNSMock", "TestSupport",
            ]),
        // Worker processes against a real redis-server and the mock.
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "APNSCore", "Delivery", "PointerTricks", "QueueContract", "Configuration", "Telemetry", "APNSTransport", "FCMTransport", "Buffers",
                "RedisClient",
                "APNSWorker",
                "APNSMock", "TestSupport", "APNSAdmin", "Dashboard", "IOLoop", "TLS",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
