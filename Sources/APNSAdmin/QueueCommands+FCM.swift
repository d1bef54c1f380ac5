import APNSCore
import FCMTransport
import FoundationEssentials

extension QueueCommands {
    /// An FCM app's service account: the file reads, its fields are there, its key parses; and
    /// `online`, its token endpoint gives an access token. Nothing of the file is said.
    static func checkFCM(
        _ app: String, file: String, project: String?, caFile: String?, online: Bool, ok: (String) -> Void, fail: (String) -> Void
    ) {
        guard let bytes = FileManager.default.contents(atPath: file) else { return fail("app \(app): cannot read the service-account file \(file)") }
        do {
            let account = try FCMServiceAccount.parse([UInt8](bytes), source: "app \(app): \(file)")
            let token = try FCMAccessToken(account: account, caFile: caFile)
            ok("app \(app): the service account \(account.clientEmail) reads, and its key parses (project \(project ?? account.projectID))")
            guard online else { return }
            try token.refreshIfDue()
            ok("app \(app): \(account.tokenURI) gave an access token for \(token.secondsLeft ?? 0) s")
        } catch {
            fail("\(error)")
        }
    }
}
