internal import CBuildInfo

/// What `--version` prints: the release and the commit the programs were built from.
public enum BuildInfo {
    public static let version = "0.9.0"
    public static var commit: String { String(cString: apnsw_build_commit()) }
    /// "apns-worker 0.9.0 (commit 1a2b3c4d5e6f)".
    public static func line(_ program: String) -> String { "\(program) \(version) (commit \(commit))" }
}
