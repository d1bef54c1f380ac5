import APNSWorker
import Configuration
import FoundationEssentials
import Glibc
import IOLoop
import Telemetry

// apns-worker: takes notification jobs from Redis and delivers them to APNs.
// This file parses arguments and wires things up; state lives in `main()`, not in globals.

@main
struct APNSWorkerMain {
    static let usage = """
        usage: apns-worker [--config FILE] | --version
          Runs a worker until SIGTERM or SIGINT. Settings come from FILE (JSON) and APNSW_* environment
          variables; see README.md "Configuration". SIGHUP, or a change to FILE or a credential file it
          names, reloads the apps and keys. Exit codes: 0 stopped cleanly, 2 bad configuration.
        """

    static func fail(_ message: String) -> Never {
        FileStream.standardError.write("apns-worker: \(message)\n")
        exit(2)
    }

    static func main() async {
        var configPath: String? = ProcessInfo.processInfo.environment["APNSW_CONFIG"]
        var args = Array(CommandLine.arguments.dropFirst())
        while let arg = args.first {
            args.removeFirst()
            switch arg {
            case "--help", "-h": print(usage); exit(0)
            case "--version": print(BuildInfo.line("apns-worker")); exit(0)
            case "--config":
                guard let value = args.first else { fail("--config needs a file") }
                configPath = value
                args.removeFirst()
            default:
                fail("unknown argument \(arg)\n\(usage)")
            }
        }

        signal(SIGPIPE, SIG_IGN)
        var configuration: WorkerConfiguration
        do { configuration = try WorkerConfiguration.load(path: configPath) } catch { fail("configuration error: \(error)") }
        let logger = Logger(level: configuration.logLevel)
        let worker: Worker
        do {
            try Worker.checkRedis(configuration, logger: logger)
            configuration.setDrainingShards(try configuration.servedQueues.map { try Worker.shardsToDrain($0, configuration, logger: logger) })
            worker = try Worker(configuration: configuration, logger: logger)
            try worker.startHealthServer()
        } catch let refusal as StartRefusal {
            fail(refusal.description)
        } catch {
            logger.error("cannot start", ["error": .string("\(error)")])
            exit(2)
        }

        let signals = SignalStream.watch([SIGTERM, SIGINT, SIGHUP])
        worker.start()
        let maintenance = Task { await worker.maintain() }
        let watch = configPath.map { path in Task { await worker.watchSettings(path: path) } }
        for await sig in signals {
            if sig == SIGHUP {
                logger.info("SIGHUP: reloading the apps and keys", [:])
                worker.reload(path: configPath)
                continue
            }
            logger.info("signal received", ["signal": .int(Int(sig))])
            break
        }
        maintenance.cancel()
        watch?.cancel()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            OSThread.start(name: "shutdown") {
                worker.shutdown()
                done.resume()
            }
        }
        exit(0)
    }
}
