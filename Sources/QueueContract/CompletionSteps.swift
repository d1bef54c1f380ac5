import Delivery
import RedisClient

/// The steps of writing a chunk of outcomes, as a value: each event (ready to send, a reply, a
/// failed connection) returns what to send next, and the completer does the sending. The
/// steps: the check (WATCH the take-back key, EXISTS the oldest batch touched) unless one on
/// this connection covers it; the transaction (MULTI … EXEC, the next check riding on it); the
/// complete script instead when jobs were taken back, when an outcome cannot go in a
/// transaction, or when a write may have run with its reply lost; then WAIT, if replicas are
/// awaited. Unit-tested without Redis (`CompletionStepsTests`).
public struct CompletionSteps {
    public enum Action: Equatable {
        /// Nothing to send now.
        case none
        /// The check of `batch` (`CompletionTransaction.check`).
        case check(TakenBatch)
        /// The transaction, with the check of `next` after it.
        case transaction(next: TakenBatch?)
        /// The complete script, loaded ahead of it if `loading` (NOSCRIPT).
        case script(loading: Bool)
        /// Jobs were taken back since the WATCH: UNWATCH, say so, and send the script.
        case unwatchThenScript
        /// WAIT for the replicas.
        case waitReplicas
        /// The chunk is written (and replicated, with `replicas` answering WAIT).
        case recorded(replicas: Int64?)

        public static func == (a: Action, b: Action) -> Bool {
            switch (a, b) {
            case (.none, .none), (.unwatchThenScript, .unwatchThenScript), (.waitReplicas, .waitReplicas): true
            case (.check(let x), .check(let y)): x === y
            case (.transaction(let x), .transaction(let y)): x === y
            case (.script(let x), .script(let y)): x == y
            case (.recorded(let x), .recorded(let y)): x == y
            default: false
            }
        }
    }

    /// A reply, as its parser read it.
    public enum Reply {
        /// The check: whether the batch's list is still there.
        case checked(found: Bool)
        /// EXEC: whether it ran (nil: a WATCHed key changed), and the riding check's answer.
        case executed(ran: Bool, nextFound: Bool)
        /// The script: its error, if any.
        case scripted(error: String?)
        /// WAIT: how many replicas have the writes.
        case waited(replicas: Int64)
    }

    /// What the request on its way asks, so that its reply is read as such.
    public enum Awaited {
        case nothing
        case checking(TakenBatch)
        case transaction(next: TakenBatch?)
        case script
        case replicating
    }

    private struct Chunk {
        let oldest: TakenBatch
        let recordable: Bool
        /// A write may have run with its reply lost: only the script, which skips what is
        /// marked done, may write the chunk again.
        var uncertain = false
    }

    /// The number of the batch found in Redis since the take-back key was WATCHed on the
    /// current connection: a transaction touching no older batch needs no check of its own.
    public private(set) var checked: Int?
    private var step = Awaited.nothing
    private var chunk: Chunk?
    private let waitsForReplicas: Bool

    public init(waitsForReplicas: Bool) { self.waitsForReplicas = waitsForReplicas }

    /// Whether a chunk is being written.
    public var isWriting: Bool { chunk != nil }
    /// Whether nothing is on its way to Redis for the chunk.
    public var isIdle: Bool { if case .nothing = step { true } else { false } }

    /// A new chunk, touching batches from `oldest` on; `recordable`: its outcomes fit in a transaction.
    public mutating func begin(oldest: TakenBatch, recordable: Bool) {
        chunk = Chunk(oldest: oldest, recordable: recordable)
        step = .nothing
    }

    /// The chunk's next request, if the connection is `ready` and none is on its way; `next`
    /// gives the batch whose check rides on a transaction.
    public mutating func send(ready: Bool, next: () -> TakenBatch?) -> Action {
        guard ready, let c = chunk, case .nothing = step else { return .none }
        guard c.recordable && !c.uncertain else {
            step = .script
            return .script(loading: false)
        }
        if let checked, c.oldest.number >= checked {
            let n = next()
            step = .transaction(next: n)
            return .transaction(next: n)
        }
        step = .checking(c.oldest)
        return .check(c.oldest)
    }

    /// A new connection: no WATCH on it yet.
    public mutating func connected() { checked = nil }

    /// The connection failed; if it was lost with a write on its way, that write may have run.
    public mutating func failed(connectionLost: Bool) {
        checked = nil  // the WATCH went with the connection
        guard chunk != nil else { return }
        if case .nothing = step {} else if connectionLost { chunk!.uncertain = true }
        step = .nothing
    }

    /// The chunk is given up (shutdown with Redis gone): its jobs stay in flight.
    public mutating func abandon() {
        chunk = nil
        step = .nothing
    }

    /// A reply came: what it answers (read it with that request's parser), and nothing is on
    /// its way any more.
    public mutating func replyArrived() -> Awaited {
        let was = chunk == nil ? .nothing : step
        step = .nothing
        return was
    }

    /// The reply to `awaited`, read. Throws an error answer it cannot act on.
    public mutating func replied(_ reply: Reply, to awaited: Awaited, ready: Bool, next: () -> TakenBatch?) throws(RedisError) -> Action {
        guard chunk != nil else { return .none }
        switch (awaited, reply) {
        case (.checking(let oldest), .checked(let found)):
            guard found else {
                checked = nil  // jobs were taken back meanwhile: the script decides job by job
                step = .script
                return .unwatchThenScript
            }
            checked = oldest.number
            return send(ready: ready, next: next)
        case (.transaction(let riding), .executed(let ran, let nextFound)):
            checked = nextFound ? riding?.number : nil
            // EXEC answered nil: jobs were taken back meanwhile, so decide again.
            guard ran else { return send(ready: ready, next: next) }
            return written()
        case (.script, .scripted(let error)):
            if let error {
                guard RedisScript.isMissing(error) else { throw .server(error) }
                step = .script
                return .script(loading: true)
            }
            return written()
        case (.replicating, .waited(let replicas)):
            chunk = nil
            return .recorded(replicas: replicas)
        default:
            return .none
        }
    }

    private mutating func written() -> Action {
        guard waitsForReplicas else {
            chunk = nil
            return .recorded(replicas: nil)
        }
        step = .replicating
        return .waitReplicas
    }
}
