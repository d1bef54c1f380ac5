import APNSCore
import Buffers
import Foundation
import QueueContract

// Renders/s for raw, structured and template jobs (parse + render + checks), single-threaded,
// next to Foundation decoding and re-encoding the same payload (what we avoid), same run.

let iterations = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 200_000
let token = String(repeating: "ab", count: 32)
let jobs: [(String, String)] = [
    (
        "raw",
        #"{"v":1,"id":"r","token":"\#(token)","payload":{"aps":{"alert":{"title":"Your order shipped","body":"Order 1234 is on its way"},"sound":"default","badge":1},"order":1234}}"#
    ),
    (
        "structured",
        #"{"v":1,"id":"s","token":"\#(token)","notification":{"alert":{"title":"Your order shipped","body":"Order 1234 is on its way"},"sound":"default","badge":1,"data":{"order":1234}}}"#
    ),
    ("template", #"{"v":1,"id":"t","token":"\#(token)","template":{"name":"shipped","locale":"pt-BR","data":{"order":1234,"name":"Zoë"}}}"#),
]
var library = TemplateLibrary()
try library.set(
    "shipped.pt",
    source: Array(
        #"{"aps":{"alert":{"title":"Pedido enviado","body":"{{name}}, o pedido {{order}} está a caminho"},"sound":"default","badge":1},"order":"{{order}}"}"#
            .utf8))

func measure(_ body: () throws -> Int) rethrows -> (perSecond: Double, bytes: Int) {
    var bytes = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<iterations { bytes &+= try body() }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    return (Double(iterations) / seconds, bytes)
}

print("render benchmark: \(iterations) jobs each, one thread")
print(
    "form".padding(toLength: 12, withPad: " ", startingAt: 0), "renders/s".padding(toLength: 14, withPad: " ", startingAt: 0),
    "us/render".padding(toLength: 10, withPad: " ", startingAt: 0), "payload bytes")
for (name, text) in jobs {
    let bytes = Array(text.utf8)
    var size = 0
    let (rate, _) = try measure {
        let job = try PayloadRenderer.render(try Job.parse(bytes), templates: library)
        size = job.payloadCount
        return size
    }
    print(name.padding(toLength: 12, withPad: " ", startingAt: 0), String(format: "%-14.0f %-10.2f %d", rate, 1e6 / rate, size))
}
let payload = Data(
    #"{"aps":{"alert":{"title":"Your order shipped","body":"Order 1234 is on its way"},"sound":"default","badge":1},"order":1234}"#.utf8)
let (foundation, _) = try measure {
    let object = try JSONSerialization.jsonObject(with: payload)
    return try JSONSerialization.data(withJSONObject: object).count
}
print(
    "reference: Foundation decode + encode of the payload alone: \(String(format: "%.0f", foundation))/s (\(String(format: "%.2f", 1e6 / foundation)) us)"
)

// The other end of a job: the result record the completer writes for a delivered notification.
let context = OutcomeRecord.Context(
    handle: 200_000, jobID: "j199999", app: "default", token: DeviceToken(token), topic: "com.example.app",
    worker: "host-12345", timeMs: 1_795_990_039_364)
let apnsID = APNSID("a4463b69-a8cb-4555-9f2a-f69ecd5d91d3")
// Into a buffer kept across records, as the completer writes them into its transaction.
var record = ByteBuffer(capacity: 1024)
let (records, _) = measure {
    record.removeAll()
    OutcomeRecord.result(context, delivered: apnsID, rejection: nil, attempts: 1, into: &record)
    return record.count
}
print("result record (\(record.count) bytes): \(String(format: "%.0f", records))/s (\(String(format: "%.3f", 1e6 / records)) us)")
