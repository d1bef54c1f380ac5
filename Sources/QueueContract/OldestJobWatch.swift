/// How long the job at a list's consuming end has waited, at least: the list holds no enqueue
/// times, so the wait counts from when the job was first seen there.
public struct OldestJobWatch: Sendable {
    private var seen: [String: (job: [UInt8], sinceMs: Int64)] = [:]

    public init() {}

    /// Since when `tail` has been at the end of the list of the key set `label` (nil: the list
    /// is empty).
    public mutating func since(_ label: String, tail: [UInt8]?, nowMs: Int64) -> Int64? {
        guard let tail else {
            seen[label] = nil
            return nil
        }
        if seen[label]?.job != tail { seen[label] = (tail, nowMs) }
        return seen[label]?.sinceMs
    }
}
