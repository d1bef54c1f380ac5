import APNSCore
import Foundation
import TLS

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
        /// A client certificate (mutual TLS auth) for `certificateTopic`, as PEM pair and PKCS#12.
        public let clientCertificateFile: String
        public let clientKeyFile: String
        public let clientPKCS12File: String
        public let clientPKCS12Password: String
        public let certificateTopic: String
    }

    public static func make(
        in directory: String, teamID: String = "TEAM123456", keyID: String = "KEY1234567",
        topic: String = "com.example.app", certificateTopic: String = "com.example.certapp",
        logFile: String? = nil, extraHostNames: [String] = []
    ) throws -> Files {
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
        try write("server.pem", try pki.issue(key: serverKey, commonName: "localhost", dnsNames: ["localhost"] + extraHostNames, ips: ["127.0.0.1"]))
        let providerKey = try ES256PrivateKey()
        try write("AuthKey_\(keyID).p8", try providerKey.pkcs8PEM(), secret: true)
        try write("AuthKey_\(keyID).pub.pem", try providerKey.publicKeyPEM())

        let clientKey = try ES256PrivateKey()
        let clientCert = try pki.issue(key: clientKey, commonName: "Apple Push Services: \(certificateTopic)", uid: certificateTopic, serial: 3)
        try write("client.key", try clientKey.pkcs8PEM(), secret: true)
        try write("client.pem", clientCert)
        let password = "test-password"
        try Data(TestPKI.pkcs12(key: clientKey, certificatePEM: clientCert, password: password)).write(to: URL(fileURLWithPath: path("client.p12")))

        // Client certificates are optional: token connections present none.
        var config = MockConfiguration(tls: .init(certificate: path("server.pem"), key: path("server.key"), clientCA: path("ca.pem")))
        config.keys = [.init(keyID: keyID, teamID: teamID, publicKey: path("AuthKey_\(keyID).pub.pem"), topics: [topic])]
        config.log = logFile
        try config.encoded().write(to: URL(fileURLWithPath: path("mock.json")))
        return Files(
            directory: directory, caFile: path("ca.pem"), p8File: path("AuthKey_\(keyID).p8"),
            mockConfigFile: path("mock.json"), keyID: keyID, teamID: teamID, topic: topic,
            clientCertificateFile: path("client.pem"), clientKeyFile: path("client.key"),
            clientPKCS12File: path("client.p12"), clientPKCS12Password: password, certificateTopic: certificateTopic)
    }

    /// Adds another team's provider key to a mock configuration; returns the .p8 path.
    public static func addProviderKey(
        in directory: String, to config: inout MockConfiguration, teamID: String, keyID: String,
        topics: [String]
    ) throws -> String {
        let key = try ES256PrivateKey()
        let p8 = (directory as NSString).appendingPathComponent("AuthKey_\(keyID).p8")
        let pub = (directory as NSString).appendingPathComponent("AuthKey_\(keyID).pub.pem")
        try key.pkcs8PEM().write(toFile: p8, atomically: true, encoding: .utf8)
        chmod(p8, 0o600)
        try key.publicKeyPEM().write(toFile: pub, atomically: true, encoding: .utf8)
        config.keys.append(.init(keyID: keyID, teamID: teamID, publicKey: pub, topics: topics))
        return p8
    }
}

extension MockCredentials {
    /// A service account for the mock FCM: its key written as a Firebase console's JSON file
    /// (`service-account-<project>.json`, token_uri on `port`) and its public half added to `config`.
    public static func addFCMAccount(
        in directory: String, to config: inout MockConfiguration, port: Int, projectID: String = "demo-project",
        clientEmail: String? = nil, keyID: String = "fcmkey1"
    ) throws -> (file: String, account: FCMServiceAccount) {
        let key = try RS256PrivateKey()
        let email = clientEmail ?? "sender@\(projectID).iam.gserviceaccount.com"
        let account = FCMServiceAccount(
            projectID: projectID, clientEmail: email, privateKeyID: keyID, privateKeyPEM: try key.pkcs8PEM(),
            tokenURI: "https://127.0.0.1:\(port)\(config.fcm?.tokenPath ?? "/token")")
        let file = (directory as NSString).appendingPathComponent("service-account-\(projectID)-\(keyID).json")
        let pub = (directory as NSString).appendingPathComponent("service-account-\(projectID)-\(keyID).pub.pem")
        try Data(account.json).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o600)
        try key.publicKeyPEM().write(toFile: pub, atomically: true, encoding: .utf8)
        if config.fcm == nil { config.fcm = MockFCMSettings(accounts: []) }
        config.fcm!.accounts.append(.init(clientEmail: email, projectID: projectID, keyID: keyID, publicKey: pub))
        return (file, account)
    }
}
