import APNSCore
import Buffers
import Configuration
import Foundation
import PointerTricks
import QueueContract
import Synchronization
import XCTest

@testable import APNSTransport
@testable import APNSWorker

final class InFlightGateTests: XCTestCase {
    /// The gate's room follows connection pools: apps sharing endpoint and credential share one.
    func testGateCapacitiesCountPoolsNotApps() {
        let endpoint = APNSEndpoint(host: "127.0.0.1", port: 1, caFile: nil)
        func app(_ name: String, key: String) -> AppConfiguration {
            AppConfiguration(
                name: name, bundleID: "com.example.\(name)", endpoint: endpoint,
                auth: .token(teamID: "TEAM123456", keyID: key, keyFile: "/dev/null"))
        }
        var config = WorkerConfiguration()
        config.connections = 2
        config.streams = 100
        config.apps = [app("a", key: "KEY1")]
        XCTAssertEqual(config.sendingCapacity, 400)
        XCTAssertEqual(config.recordingCapacity, 400, "twice what the connections carry")
        config.apps = [app("a", key: "KEY1"), app("b", key: "KEY1")]
        XCTAssertEqual(config.sendingCapacity, 400, "one shared pool")
        config.apps = [app("a", key: "KEY1"), app("b", key: "KEY2")]
        XCTAssertEqual(config.sendingCapacity, 800, "two pools")
        config.streams = 500
        XCTAssertEqual(config.recordingCapacity, 4000)
        config.streams = 10
        XCTAssertEqual(config.recordingCapacity, 256, "at least one batch")
    }

    /// Sends and unrecorded outcomes are bounded apart: a completion backlog within its own
    /// limit does not hold the fetcher back, one above it does, and recording frees it.
    func testGateBoundsSendingAndRecordingApart() {
        let gate = InFlightGate(sendingCapacity: 10, recordingCapacity: 5)
        let woken = DispatchSemaphore(value: 0)
        gate.add(sent: 8, decided: 1)
        XCTAssertFalse(gate.hasRoom(3, {}), "8 sending + 3 > 10")
        gate.answered(4)
        XCTAssertEqual(gate.current, 9, "answered jobs are held until recorded")
        XCTAssertTrue(
            gate.hasRoom(3, { XCTFail("no wait, no wake") }),
            "4 sending + 3 fit, and 5 recording is within its limit")
        gate.answered(2)
        XCTAssertFalse(gate.hasRoom(3, { woken.signal() }), "7 recording is over its limit")
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { gate.recorded(4) }
        XCTAssertEqual(woken.wait(timeout: .now() + 5), .success, "recording wakes the waiting fetcher")
        XCTAssertTrue(gate.hasRoom(3, {}))
        gate.answered(2)
        gate.recorded(5)
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 1))
    }

    /// Waiters are woken only once what they wait for holds, so no wake may be missed: answers
    /// that free room a little at a time wake the fetcher when the last of it comes (once), and
    /// the last record wakes a shutdown waiting to drain.
    func testGateWakesEachWaiterWhenItsConditionHolds() {
        let gate = InFlightGate(sendingCapacity: 10, recordingCapacity: 100)
        gate.add(sent: 10, decided: 0)
        let wakes = Mutex<[Int]>([])
        let woken = DispatchSemaphore(value: 0)
        XCTAssertFalse(
            gate.hasRoom(
                5,
                {
                    wakes.withLock { $0.append(gate.current) }; woken.signal()
                }))
        let answers = DispatchGroup()
        DispatchQueue.global().async(group: answers) {
            for _ in 0..<5 {
                usleep(10_000)
                gate.answered(1)
            }
        }
        XCTAssertEqual(woken.wait(timeout: .now() + 10), .success, "five answers of one make room for five")
        answers.wait()
        XCTAssertEqual(wakes.withLock { $0 }, [10], "woken once, when the room was there")
        DispatchQueue.global().async {
            gate.answered(5)
            for _ in 0..<10 {
                usleep(5_000)
                gate.recorded(1)
            }
        }
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 10), "the last record wakes the drain")
        XCTAssertEqual(gate.current, 0)
    }

    /// A fetch is sized to the room: with 8 of 10 sending, 2 may come, not a whole batch of 5;
    /// below the minimum the fetcher waits, and is woken once the minimum fits.
    func testTheRoomSizesAFetch() {
        let gate = InFlightGate(sendingCapacity: 10, recordingCapacity: 10)
        gate.add(sent: 8, decided: 0)
        XCTAssertEqual(gate.room(upTo: 5, atLeast: 2, waiter: ObjectIdentifier(self), orWake: {}), 2)
        let woken = DispatchSemaphore(value: 0)
        XCTAssertNil(gate.room(upTo: 5, atLeast: 3, waiter: ObjectIdentifier(self), orWake: { woken.signal() }))
        gate.answered(1)
        XCTAssertEqual(woken.wait(timeout: .now() + 1), .success)
        XCTAssertEqual(gate.room(upTo: 5, atLeast: 3, waiter: ObjectIdentifier(self), orWake: {}), 3)
    }
}

extension InFlightGate {
    /// Whether `n` more jobs fit now, as a fetch of exactly `n` asks.
    fileprivate func hasRoom(_ n: Int, _ wake: @escaping @Sendable () -> Void) -> Bool {
        room(upTo: n, atLeast: n, waiter: ObjectIdentifier(self), orWake: wake) != nil
    }
}
