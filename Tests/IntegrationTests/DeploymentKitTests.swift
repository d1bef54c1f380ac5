import Configuration
import Foundation
import QueueContract
import TestSupport
import XCTest

/// The deployment kit (issue 28, item 7), checked offline with the tools that read it: the
/// Kubernetes manifests rendered by kustomize and matched against Kubernetes's schemas, the
/// systemd unit verified by systemd-analyze, the image and compose files read for what they promise.
final class DeploymentKitTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    private func run(_ tool: String, _ args: [String], in dir: TemporaryDirectory) throws -> (code: Int32?, out: String) {
        let path =
            tool.hasPrefix("/")
            ? tool : (["/usr/bin/", "/usr/local/bin/", "/bin/"].map { $0 + tool }.first { FileManager.default.isExecutableFile(atPath: $0) } ?? tool)
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestSupportError("\(tool) is not installed: scripts/install-deps test installs it")
        }
        let p = try ChildProcess(
            path, args, outputFile: dir.file("\(URL(fileURLWithPath: tool).lastPathComponent)-\(UInt32.random(in: 0...UInt32.max)).out"))
        return (p.wait(timeout: 60), p.output)
    }

    private func text(_ path: String) throws -> String { try String(contentsOfFile: root + "/" + path, encoding: .utf8) }

    /// A kustomization rendered into `dir`/all.yaml and matched against Kubernetes's schemas.
    private func renderAndValidate(_ kustomization: String, in dir: TemporaryDirectory) throws -> (rendered: String, validated: String) {
        let rendered = try run("kubectl", ["kustomize", root + "/" + kustomization], in: dir)
        XCTAssertEqual(rendered.code, 0, rendered.out)
        try rendered.out.write(toFile: dir.file("all.yaml"), atomically: true, encoding: .utf8)
        let validated = try run(root + "/.build/tools/kv/bin/kubernetes-validate", ["--strict", "-k", "1.30.0", dir.file("all.yaml")], in: dir)
        XCTAssertEqual(validated.code, 0, validated.out)
        XCTAssertFalse(validated.out.contains("failed"), validated.out)
        return (rendered.out, validated.out)
    }

    func testTheKubernetesManifestsRenderAndMatchTheSchemas() throws {
        let dir = try TemporaryDirectory("apnsw-k8s")
        let (all, validated) = try renderAndValidate("docker/kubernetes", in: dir)
        for kind in ["configmap", "secret", "deployment", "poddisruptionbudget"] {
            XCTAssertTrue(validated.contains("passed for resource \(kind)/"), validated)
        }
        XCTAssertTrue(all.contains("path: /readyz") && all.contains("path: /healthz"), "readiness and liveness probes")

        // The settings it ships load, and the grace outlasts shutdown_grace_ms.
        var settings = try JSONSerialization.jsonObject(with: Data(try text("docker/kubernetes/worker.json").utf8)) as! [String: Any]
        try "pw\n".write(toFile: dir.file("redis_password"), atomically: true, encoding: .utf8)
        var redis = settings["redis"] as! [String: Any]
        redis["password_file"] = dir.file("redis_password")
        settings["redis"] = redis
        try JSONSerialization.data(withJSONObject: settings).write(to: URL(fileURLWithPath: dir.file("worker.json")))
        let config = try WorkerConfiguration.load(path: dir.file("worker.json"), environment: [:])
        let grace = try XCTUnwrap(
            all.range(of: #"terminationGracePeriodSeconds: (\d+)"#, options: .regularExpression).map { Int(all[$0].split(separator: " ")[1])! })
        XCTAssertGreaterThanOrEqual(grace * 1000, config.shutdownGraceMs + 5000, "SIGKILL comes after the grace and the hand-back")
        XCTAssertEqual(config.metricsHost, "0.0.0.0", "the probes reach the pod's address")
    }

    /// The KEDA overlay (issue 47, item 3): rendered with the base kit, the Kubernetes objects
    /// match their schemas, and the two KEDA objects (whose schemas are KEDA's CRDs, not
    /// Kubernetes's) are checked for what KEDA reads: the Deployment scaled, a redis trigger per
    /// list the shipped settings have producers push to, targets that make sense, and credentials
    /// from the Secret the workers read.
    func testTheKEDAScaledObjectScalesOnEveryListTheWorkersServe() throws {
        let dir = try TemporaryDirectory("apnsw-keda")
        _ = try renderAndValidate("docker/keda", in: dir)
        // YAML to JSON with the PyYAML that kubernetes-validate brings.
        let converter = "import json, sys, yaml; json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), open(sys.argv[2], 'w'))"
        let converted = try run(root + "/.build/tools/kv/bin/python", ["-c", converter, dir.file("all.yaml"), dir.file("all.json")], in: dir)
        XCTAssertEqual(converted.code, 0, converted.out)
        let docs = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir.file("all.json")))) as? [[String: Any]])
        func object(_ kind: String) throws -> [String: Any] { try XCTUnwrap(docs.first { $0["kind"] as? String == kind }, kind) }
        func name(_ o: [String: Any]) -> String? { (o["metadata"] as? [String: Any])?["name"] as? String }

        let scaled = try object("ScaledObject"), auth = try object("TriggerAuthentication")
        XCTAssertEqual(scaled["apiVersion"] as? String, "keda.sh/v1alpha1")
        XCTAssertEqual(auth["apiVersion"] as? String, "keda.sh/v1alpha1")
        let spec = try XCTUnwrap(scaled["spec"] as? [String: Any])
        XCTAssertEqual((spec["scaleTargetRef"] as? [String: Any])?["name"] as? String, name(try object("Deployment")), "it scales the workers")
        let (least, most) = (try XCTUnwrap(spec["minReplicaCount"] as? Int), try XCTUnwrap(spec["maxReplicaCount"] as? Int))
        XCTAssertTrue(least >= 1 && least <= most, "one worker always up, at most \(most)")
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(spec["cooldownPeriod"] as? Int), 60, "no flapping")

        // One redis trigger for each list the shipped settings serve, by the worker's own key names.
        let settings = try JSONSerialization.jsonObject(with: Data(try text("docker/kubernetes/worker.json").utf8)) as! [String: Any]
        let served = QueueKeys.served(queue: settings["queue"] as? String ?? "default", shards: settings["shards"] as? Int ?? 1).map(\.jobs)
        let triggers = try XCTUnwrap(spec["triggers"] as? [[String: Any]])
        let redis = settings["redis"] as? [String: Any] ?? [:]
        var lists: [String] = []
        for t in triggers {
            XCTAssertEqual(t["type"] as? String, redis["cluster"] == nil ? "redis" : "redis-cluster")
            let m = try XCTUnwrap(t["metadata"] as? [String: String], "KEDA's metadata values are strings")
            lists.append(try XCTUnwrap(m["listName"]))
            let address = (redis["host"] as? String ?? "") + ":" + String(redis["port"] as? Int ?? 6379)
            XCTAssertEqual(m["address"], address, "the Redis the workers use")
            XCTAssertEqual(m["enableTLS"], redis["tls"] == nil ? "false" : "true")
            let (target, activation) = (try XCTUnwrap(Int(m["listLength"] ?? "")), try XCTUnwrap(Int(m["activationListLength"] ?? "")))
            XCTAssertTrue(activation > 0 && activation < target, "activation \(activation) below the target \(target)")
            XCTAssertEqual((t["authenticationRef"] as? [String: Any])?["name"] as? String, name(auth))
        }
        XCTAssertEqual(lists.sorted(), served.sorted(), "every list producers push to, and no other")

        // Its credentials come from the Secret the workers read, by keys that Secret has.
        let secret = try object("Secret")
        let keys = Set(((secret["stringData"] as? [String: Any]) ?? [:]).keys)
        let refs = try XCTUnwrap((auth["spec"] as? [String: Any])?["secretTargetRef"] as? [[String: String]])
        XCTAssertEqual(Set(refs.compactMap { $0["parameter"] }), redis["username_file"] == nil ? ["password"] : ["password", "username"])
        for r in refs {
            XCTAssertEqual(r["name"], name(secret))
            XCTAssertTrue(keys.contains(r["key"] ?? ""), "the Secret has \(r["key"] ?? "")")
        }
        XCTAssertEqual(
            URL(fileURLWithPath: redis["password_file"] as? String ?? "").lastPathComponent, refs.first { $0["parameter"] == "password" }?["key"])
    }

    func testTheSystemdUnitsVerify() throws {
        for (name, program) in [("apns-worker.service", "apns-worker"), ("apnsctl-web.service", "apnsctl")] {
            let dir = try TemporaryDirectory("apnsw-systemd")
            let unit = try text("docker/systemd/" + name)
            XCTAssertTrue(unit.contains("DynamicUser=yes") && unit.contains("ProtectSystem=strict") && unit.contains("NoNewPrivileges=yes"), name)
            // As installed, with the binary where ExecStart says it is.
            let local = unit.replacingOccurrences(of: "/usr/local/bin/\(program)", with: ChildProcess.productsDirectory + "/" + program)
            try local.write(toFile: dir.file(name), atomically: true, encoding: .utf8)
            let verified = try run("systemd-analyze", ["verify", dir.file(name)], in: dir)
            XCTAssertEqual(verified.code, 0, verified.out)
            XCTAssertEqual(verified.out.trimmingCharacters(in: .whitespacesAndNewlines), "", "\(name): no warning either (an unknown key is one)")
        }
        XCTAssertTrue(
            try text("docker/systemd/apnsctl-web.service").contains("--listen 127.0.0.1:8088 --auth-file"),
            "the dashboard on loopback, with its secret")
    }

    func testTheImageAndComposeFilesSayWhatTheyShould() throws {
        let dockerfile = try text("docker/Dockerfile")
        XCTAssertTrue(dockerfile.contains("GET /readyz"), "the health check asks /readyz")
        XCTAssertTrue(dockerfile.contains("${APNSW_METRICS_PORT}"), "on the configured port")
        XCTAssertFalse(dockerfile.contains("9090"), "9090 is Prometheus's own")
        XCTAssertTrue(dockerfile.contains("AS mock"), "the mock in a stage of its own")
        let worker = try XCTUnwrap(dockerfile.components(separatedBy: "AS worker").last)
        XCTAssertTrue(
            worker.contains("/dist/apns-worker /dist/apnsctl") && !worker.contains("apns-mock"), "the worker image ships the worker and apnsctl only")
        XCTAssertTrue(try text(".dockerignore").split(separator: "\n").contains(".build"), ".build stays out of the build context")
        XCTAssertTrue(try text("scripts/build-release").contains("strip "), "binaries are stripped")
        let compose = try text("docker/compose.yaml")
        XCTAssertEqual(
            compose.components(separatedBy: "condition: service_healthy").count - 1, 4,
            "the worker waits for Redis and the mock, web and ctl for Redis")
        XCTAssertTrue(
            compose.contains("\"--auth-file\", \"/run/secrets/web_secret\"") && compose.contains("127.0.0.1:8088:8088"),
            "the dashboard with its secret, published on loopback")
        XCTAssertEqual(compose.components(separatedBy: "target: worker").count - 1, 1, "the worker image is built once")
        XCTAssertTrue(compose.contains("APNSW_REDIS_PASSWORD_FILE: /run/secrets/redis_password") && compose.contains("secrets:"))
    }

    /// The programs that ship link Foundation's essentials only: no ICU, whose data was 34 MB of
    /// each binary. Read from the files: a dynamic build names libFoundation.so as needed, a
    /// static one carries ICU's data, whose name starts "icudt".
    func testTheShippedProgramsCarryNoICU() throws {
        for program in ["apns-worker", "apnsctl"] {
            let path = ChildProcess.productsDirectory + "/" + program
            let bytes = try XCTUnwrap(FileManager.default.contents(atPath: path), path)
            for marker in ["libFoundation.so\0", "lib_FoundationICU", "libFoundationInternationalization", "icudt"] {
                XCTAssertNil(bytes.range(of: Data(marker.utf8)), "\(path) holds \"\(marker)\"")
            }
        }
        // The check can see ICU: the mock, which keeps Foundation, shows it.
        let mock = try XCTUnwrap(FileManager.default.contents(atPath: ChildProcess.productsDirectory + "/apns-mock"))
        XCTAssertTrue(["libFoundation.so\0", "icudt"].contains { mock.range(of: Data($0.utf8)) != nil }, "the mock links Foundation")
    }
}
