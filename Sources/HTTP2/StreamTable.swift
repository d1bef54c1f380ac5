/// Values by HTTP/2 stream id, for streams opened by a client: their ids are consecutive odd
/// numbers, so id / 2 modulo a power of two is a slot, and a lookup hashes nothing. A stream
/// whose slot is taken (one still open 2 × capacity streams later) goes to a dictionary.
/// A Swift dictionary hashed each id with SipHash, several times per request. Inlinable, so
/// that users in other modules get it specialized, not through generic metadata at run time.
public struct StreamTable<Value> {
    @usableFromInline var slots: [(id: Int32, value: Value)?]
    @usableFromInline var overflow: [Int32: Value] = [:]
    @usableFromInline let mask: Int
    @usableFromInline var stored = 0
    public var count: Int { stored }

    /// `capacity`: about how many streams are open at once.
    @inlinable
    public init(capacity: Int) {
        var size = 64
        while size < 2 * capacity { size *= 2 }
        slots = Array(repeating: nil, count: size)
        mask = size - 1
    }

    @inlinable
    func slot(_ id: Int32) -> Int { Int(id >> 1) & mask }

    @inlinable
    public subscript(id: Int32) -> Value? {
        get {
            if let entry = slots[slot(id)], entry.id == id { return entry.value }
            return overflow.isEmpty ? nil : overflow[id]
        }
        set {
            guard let newValue else { removeValue(forKey: id); return }
            let i = slot(id)
            if let entry = slots[i], entry.id != id {
                if overflow.updateValue(newValue, forKey: id) == nil { stored += 1 }
                return
            }
            if slots[i] == nil { stored += 1 }
            slots[i] = (id, newValue)
            // An id met again after its slot had been taken: the slot now holds it.
            if !overflow.isEmpty, overflow.removeValue(forKey: id) != nil { stored -= 1 }
        }
    }

    @inlinable @discardableResult
    public mutating func removeValue(forKey id: Int32) -> Value? {
        let i = slot(id)
        if let entry = slots[i], entry.id == id {
            slots[i] = nil
            stored -= 1
            return entry.value
        }
        guard !overflow.isEmpty, let value = overflow.removeValue(forKey: id) else { return nil }
        stored -= 1
        return value
    }

    @inlinable
    public mutating func removeAll() {
        for i in slots.indices { slots[i] = nil }
        overflow.removeAll()
        stored = 0
    }

    /// Every (id, value), in no particular order.
    @inlinable
    public var entries: [(id: Int32, value: Value)] {
        var all: [(id: Int32, value: Value)] = []
        all.reserveCapacity(count)
        for case let entry? in slots { all.append(entry) }
        for (id, value) in overflow { all.append((id, value)) }
        return all
    }
}
