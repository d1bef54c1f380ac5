import Foundation
import XCTest

/// The Docker image builds with the scripts CI runs; these checks keep the files in step.
final class PackagingTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func testDockerfileUsesScriptsThatExist() throws {
        let dockerfile = try String(contentsOf: Self.root.appendingPathComponent("docker/Dockerfile"), encoding: .utf8)
        let scripts = Set(dockerfile.components(separatedBy: CharacterSet(charactersIn: " \n&;(),")).filter { $0.hasPrefix("scripts/") })
        XCTAssertTrue(scripts.contains("scripts/install-deps") && scripts.contains("scripts/build-release"), "\(scripts)")
        for s in scripts {
            XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.root.appendingPathComponent(s).path), s)
        }
        let test = try String(contentsOf: Self.root.appendingPathComponent("scripts/test"), encoding: .utf8)
        XCTAssertTrue(test.contains("scripts/install-deps") && test.contains("scripts/build-release"), "CI runs the image's build steps")
        let compose = try String(contentsOf: Self.root.appendingPathComponent("docker/compose.yaml"), encoding: .utf8)
        for service in ["redis:", "mock:", "worker:"] { XCTAssertTrue(compose.contains("  " + service), service) }
    }
}
