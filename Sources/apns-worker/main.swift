import APNSWorker
import Foundation

// apns-worker: takes notification jobs from Redis and delivers them to APNs.

let usage = """
usage: apns-worker [--config FILE]
  Runs a worker until SIGTERM or SIGINT. Settings come from FILE (JSON) and APNSW_* environment
  variables; see README.md "Configuration". Exit codes: 0 stopped cleanly, 2 bad configuration.
"""

var configPath: String? = ProcessInfo.processInfo.environment["APNSW_CONFIG"]
var args = Array(CommandLine.arguments.dropFirst())
while let arg = args.first {
    args.removeFirst()
    switch arg {
    case "--help", "-h": print(usage); exit(0)
    case "--config":
        guard let value = args.first else { FileHandle.standardError.write(Data("apns-worker: --config needs a file\n".utf8)); exit(2) }
        configPath = value
        args.removeFirst()
    default:
        FileHandle.standardError.write(Data("apns-worker: unknown argument \(arg)\n\(usage)\n".utf8))
        exit(2)
    }
}

signal(SIGPIPE, SIG_IGN)
let configuration: WorkerConfiguration
do {
    configuration = try WorkerConfiguration.load(path: configPath)
} catch {
    FileHandle.standardError.write(Data("apns-worker: configuration error: \(error)\n".utf8))
    exit(2)
}
let logger = Logger(level: configuration.logLevel)
let worker: Worker
do {
    worker = try Worker(configuration: configuration, logger: logger)
} catch {
    logger.error("cannot start", ["error": .string("\(error)")])
    exit(2)
}

let signals = SignalStream.watch([SIGTERM, SIGINT])
do {
    try worker.startHealthServer()
} catch {
    logger.error("cannot serve metrics", ["error": .string("\(error)")])
    exit(2)
}
worker.start()
let maintenance = Task { await worker.maintain() }
for await sig in signals {
    logger.info("signal received", ["signal": .int(Int(sig))])
    break
}
maintenance.cancel()
await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
    Thread.detachNewThread {
        worker.shutdown()
        done.resume()
    }
}
exit(0)
