import Configuration
import FoundationEssentials
import Glibc
import Telemetry

/// Apps and keys re-read while the worker runs (SIGHUP, or the settings file changed).
extension Worker {
    /// Re-reads the settings and takes their apps and keys: new apps start taking jobs, a
    /// changed app's new runtimes take its new jobs while its old connections drain, and a
    /// removed app's jobs wait in the schedule. Settings that do not load change nothing.
    /// Returns whether the settings loaded. Any thread but an I/O loop's.
    @discardableResult
    public func reload(path: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        reloading.withLock { _ in
            let next: WorkerConfiguration
            let snapshot: AppRegistry.Snapshot, change: AppRegistry.Change
            do {
                next = try WorkerConfiguration.load(path: path, environment: environment)
                (snapshot, change) = try registry.reload(next.apps)
            } catch {
                logger.error("reload refused: the old settings stay", ["file": .string(path ?? "-"), "error": .string("\(error)")])
                return false
            }
            guard !change.isEmpty else {
                logger.info("reloaded the settings: no app or key changed", ["file": .string(path ?? "-")])
                return true
            }
            for thread in ioThreads { thread.update(snapshot) }
            logCredentialWarnings(next.apps.filter { change.added.contains($0.name) || change.changed.contains($0.name) })
            logger.info(
                "reloaded the apps; settings other than apps take effect at a restart",
                [
                    "added": .string(change.added.joined(separator: ",")), "changed": .string(change.changed.joined(separator: ",")),
                    "removed": .string(change.removed.joined(separator: ",")),
                ])
            return true
        }
    }
}

extension Worker {
    /// Reloads when the settings file, or a credential file it names, changes (an editor's
    /// save, a mounted secret's swap). Polls: inotify misses a file replaced by a symlink swap.
    public func watchSettings(path: String, everyMs: Int = 1000) async {
        var last = FileStamp.of([path] + registry.credentialFiles)
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(everyMs))
            guard FileStamp.of([path] + registry.credentialFiles) != last else { continue }
            try? await Task.sleep(for: .milliseconds(200))  // let a writer finish
            logger.info("the settings or a credential file changed; reloading", ["file": .string(path)])
            reload(path: path)
            last = FileStamp.of([path] + registry.credentialFiles)
        }
    }
}

/// What tells a file changed: its inode, size and modification time (stat follows symlinks).
enum FileStamp {
    static func of(_ paths: [String]) -> [Int64] {
        paths.flatMap { path -> [Int64] in
            var st = stat()
            guard stat(path, &st) == 0 else { return [-1] }
            return [Int64(st.st_ino), Int64(st.st_size), Int64(st.st_mtim.tv_sec), Int64(st.st_mtim.tv_nsec)]
        }
    }
}
