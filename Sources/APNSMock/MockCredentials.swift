import Foundation
import HTTP2TLS

/// Writes a throwaway PKI and provider key for the mock, the demo and tests:
/// `ca.pem`, `server.pem`, `server.key`, `AuthKey_<kid>.p8`, `AuthKey_<kid>.pub.pem`, `mock.json`.
public enum MockCredentials {
    public struct Files: Sendable {
        public let directory: String
        public let caFile: String
        public let p8File: String
        public let mockConfigFile: String
        public let keyID: String
        public let teamID: String
        public let topic: String
    }

    public static func make(in directory: String, teamID: String = "TEAM123456", keyID: String = "KEY1234567",
                            topic: String = "com.example.app", logFile: String? = nil) throws -> Files {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }
        func write(_ name: String, _ text: String, secret: Bool = false) throws {
            try text.write(toFile: path(name), atomically: true, encoding: .utf8)
            if secret { chmod(path(name), 0o600) }
        }
        let pki = try TestPKI()
        try write("ca.pem", try pki.caCertificatePEM())
        let serverKey = try ES256PrivateKey()
        try write("server.key", try serverKey.pkcs8PEM(), secret: true)
        try write("server.pem", try pki.issue(key: serverKey, commonName: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1"]))
        let providerKey = try ES256PrivateKey()
        try write("AuthKey_\(keyID).p8", try providerKey.pkcs8PEM(), secret: true)
        try write("AuthKey_\(keyID).pub.pem", try providerKey.publicKeyPEM())

        var config = MockConfiguration(tls: .init(certificate: path("server.pem"), key: path("server.key")))
        config.keys = [.init(keyID: keyID, teamID: teamID, publicKey: path("AuthKey_\(keyID).pub.pem"), topics: [topic])]
        config.log = logFile
        try config.encoded().write(to: URL(fileURLWithPath: path("mock.json")))
        return Files(directory: directory, caFile: path("ca.pem"), p8File: path("AuthKey_\(keyID).p8"),
                     mockConfigFile: path("mock.json"), keyID: keyID, teamID: teamID, topic: topic)
    }
}
