import APNSCore
import Configuration
import FoundationEssentials
import RedisClient
import Synchronization
import Telemetry

/// The worker's templates, shared by its fetchers: files from `templates_dir`, overridden by the
/// queue's templates hash in Redis, which is re-read at most once a second (by one fetcher of
/// the queue's own keys, which live where that hash does) so that templates can be changed while
/// workers run.
final class TemplateSource: Sendable {
    private struct State {
        var library = TemplateLibrary()
        var fromRedis: Set<String> = []
        var readAt: UInt64 = 0
        var readOnce = false
    }
    private let state = Mutex(State())
    private let files: [String: [UInt8]]
    private let key: String
    private let logger: Logger

    /// The templates as they are now: a copy, for a batch's jobs to render with.
    var library: TemplateLibrary { state.withLock { $0.library } }
    /// Whether Redis's hash has been read: until then a job naming one of its templates would
    /// find none.
    var hasReadRedis: Bool { state.withLock { $0.readOnce } }

    init(directory: String?, redisKey: String, logger: Logger) throws {
        key = redisKey
        self.logger = logger
        guard let directory else {
            files = [:]
            return
        }
        var library = TemplateLibrary()
        var files: [String: [UInt8]] = [:]
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory,
            let listed = try? FileManager.default.contentsOfDirectory(atPath: directory)
        else {
            throw ConfigurationError("templates_dir \(directory) is not a directory this worker can read")
        }
        let names = listed.filter { $0.hasSuffix(".json") }.sorted()
        for name in names {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            let templateKey = String(name.dropLast(".json".count))
            do {
                try library.set(templateKey, source: [UInt8](data))
                files[templateKey] = [UInt8](data)
            } catch {
                throw ConfigurationError("template \(path): \(error.detail)")
            }
        }
        self.files = files
        state.withLock { $0.library = library }
        logger.info("loaded templates", ["directory": .string(directory), "count": .int(files.count)])
    }

    /// The command that reads the Redis hash, if the last read is more than a second old.
    func readIfStale(nowMs: UInt64) -> RedisArgs? {
        let due = state.withLock { s in
            guard nowMs - s.readAt >= 1000 else { return false }
            s.readAt = nowMs
            return true
        }
        return due ? RedisArgs(["HGETALL", key]) : nil
    }

    /// Takes the hash as HGETALL answered it (read flat: the array, then name and source pairs).
    func apply(_ reply: RedisFlatReply) {
        guard reply.count > 0, reply.isArray(0) else { return }
        state.withLock {
            apply(reply, to: &$0)
            $0.readOnce = true
        }
    }

    private func apply(_ reply: RedisFlatReply, to s: inout State) {
        var seen: Set<String> = []
        var i = 1
        while i + 1 < reply.count {
            if let name = reply.bytes(i).map({ String(decoding: $0, as: UTF8.self) }), let source = reply.bytes(i + 1) {
                seen.insert(name)
                do {
                    try s.library.set(name, source: source)
                } catch {
                    logger.warning("ignoring a template from Redis", ["template": .string(name), "error": .string(error.detail)])
                }
            }
            i += 2
        }
        for gone in s.fromRedis.subtracting(seen) {
            if let file = files[gone] { try? s.library.set(gone, source: file) } else { s.library.remove(gone) }
        }
        s.fromRedis = seen
    }
}
