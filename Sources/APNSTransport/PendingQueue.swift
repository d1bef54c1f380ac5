import Delivery

/// A FIFO with O(1) pops from the front and pushes to the front (for resends).
struct PendingQueue {
    /// Optional, so that a request is moved out (`take()`), not copied and given back.
    private var items: [SendRequest?] = []
    private var head = 0
    private var front: [SendRequest] = []

    var isEmpty: Bool { front.isEmpty && head == items.count }
    var count: Int { front.count + items.count - head }

    mutating func append(_ r: SendRequest) { items.append(r) }

    /// An empty queue adopts the batch's array instead of copying its references (`popFirst`
    /// empties `items` once every item is taken). Its requests are all there (not nil).
    mutating func append(contentsOf batch: [SendRequest?]) { items.adopt(batch) }
    mutating func pushFront(_ r: SendRequest) { front.append(r) }

    mutating func popFirst() -> SendRequest? {
        if let r = front.popLast() { return r }
        guard head < items.count else { return nil }
        let r = items[head].take()
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 4096, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return r
    }

    /// Removes the requests `matches` names, handing each to `taking`, the others keeping their
    /// order. Returns how many went.
    mutating func remove(where matches: (SendRequest) -> Bool, taking: (SendRequest) -> Void = { _ in }) -> Int {
        var kept: [SendRequest?] = []
        var removed = 0
        while let r = popFirst() {
            if matches(r) {
                removed += 1
                taking(r)
            } else {
                kept.append(r)
            }
        }
        items = kept
        head = 0
        return removed
    }
}
