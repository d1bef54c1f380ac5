/// What an APNs answer, or the lack of one, does to a send: one pure decision, made where the
/// answer arrives (DESIGN.md §4, apns-protocol.md §5.2). The transport carries out the actions
/// that keep a job in flight; a final verdict travels with the job's outcome to its records.
public struct RejectionPolicy: Sendable, Equatable {
    public var retry: RetryPolicy
    /// Resets of one notification's own stream (`Answer.resetAlone`) before it is given up.
    public var maxStreamResets: Int
    /// Timeouts of one notification while its connection answered others (`Answer.timedOutAlone`)
    /// before it is given up.
    public var maxTimeoutsAlone: Int

    public init(retry: RetryPolicy = RetryPolicy(), maxStreamResets: Int = 5, maxTimeoutsAlone: Int = 3) {
        self.retry = retry
        self.maxStreamResets = maxStreamResets
        self.maxTimeoutsAlone = maxTimeoutsAlone
    }

    /// What came back for one send.
    public enum Answer: Equatable, Sendable {
        /// APNs answered with an error status.
        case rejected(Rejection)
        /// No answer: refused, cut by GOAWAY or a closed connection, reset while the connection
        /// answered nothing else, or timed out. Never the job's fault, however often.
        case unanswered
        /// The server reset this stream with `code` (not REFUSED_STREAM) while it answered other
        /// streams of the connection; `times` counts such resets of this notification, this one
        /// included.
        case resetAlone(code: String, times: Int)
        /// No answer within the request timeout while the connection answered other streams or
        /// its PINGs; `times` counts such timeouts of this notification, this one included.
        case timedOutAlone(times: Int)
    }

    public enum Action: Equatable, Sendable {
        /// Send again, on any connection, counting no attempt.
        case resend
        /// Close this connection and send again on a new one, counting no attempt.
        case reconnectAndResend
        /// Mint a new JWT (unless another connection already did), close this connection, and
        /// send again on a new one, counting no attempt.
        case refreshTokenAndResend
        /// The credential is at fault: pause the app and send again once a probe succeeds,
        /// counting no attempt. `closeConnection`: this connection is unusable for a while.
        case pauseCredential(closeConnection: Bool)
        /// The send is decided.
        case finish(Verdict)
    }

    /// A decided send's fate, as its records write it.
    public enum Verdict: Equatable, Sendable {
        /// Scheduled to be sent again after a pause (the rejected try counts).
        case retry(afterMs: Int)
        /// The token is dead for the topic: a result and an invalid-token record.
        case invalidToken
        /// The channel is gone: a result and an invalid-channel record.
        case invalidChannel
        /// A result and a dead letter with this detail.
        case deadLetter(detail: String)
    }

    /// The rejection a notification whose stream APNs kept resetting is recorded with.
    public static let streamReset = Rejection(status: 0, reason: APNSReason("StreamReset"), apnsID: nil, timestamp: nil)
    /// The rejection a notification that APNs never answered, while it answered others, is recorded with.
    public static let timedOut = Rejection(status: 0, reason: APNSReason("TimedOut"), apnsID: nil, timestamp: nil)

    /// `attempts`: the tries that count so far, the one just rejected included.
    public func decide<G: RandomNumberGenerator>(_ answer: Answer, attempts: Int, jobMaxAttempts: Int?, using rng: inout G) -> Action {
        switch answer {
        case .unanswered:
            return .resend
        case .resetAlone(let code, let times):
            guard times >= maxStreamResets else { return .resend }
            return .finish(
                .deadLetter(
                    detail: "APNs reset this notification's stream with \(code) \(times) times, while it answered others on the connection"))
        case .timedOutAlone(let times):
            guard times >= maxTimeoutsAlone else { return .resend }
            return .finish(
                .deadLetter(
                    detail:
                        "APNs answered none of \(times) sends of this notification within the request timeout, while it answered others on the connection"
                ))
        case .rejected(let rejection):
            let disposition = rejection.reason.isKnown ? rejection.reason.info.disposition : Self.disposition(status: rejection.status)
            switch disposition {
            case .refreshAuthAndRetry: return .refreshTokenAndResend
            case .reconnectAndRetry: return .reconnectAndResend
            case .pauseCredential: return .pauseCredential(closeConnection: rejection.reason == .tooManyProviderTokenUpdates)
            case .deadLetter, .invalidToken, .invalidChannel, .retry:
                return .finish(verdict(rejection, disposition, attempts: attempts, jobMaxAttempts: jobMaxAttempts, using: &rng))
            }
        }
    }

    /// For a reason APNs does not document, or none (a proxy's HTML page): 5xx is a server error
    /// (502 and 504 are gateways that could not reach APNs), 429 a throttle, anything else a
    /// request to fix.
    static func disposition(status: Int) -> Disposition {
        switch status {
        case 429: .retry(.tooManyRequests)
        case 500...599: .retry(.serverError)
        default: .deadLetter
        }
    }

    private func verdict<G: RandomNumberGenerator>(
        _ rejection: Rejection, _ disposition: Disposition, attempts: Int, jobMaxAttempts: Int?,
        using rng: inout G
    ) -> Verdict {
        if case .retry(let kind) = disposition,
            case .retry(let afterMs) = retry.decide(kind, attempts: attempts, jobMaxAttempts: jobMaxAttempts, using: &rng)
        {
            // A server's retry-after is the least it asked for (fcm-protocol.md §4.4).
            let least = rejection.reason == .fcmQuotaExceeded ? retry.quotaMinDelayMs : 0
            return .retry(afterMs: max(afterMs, rejection.retryAfterMs ?? least))
        }
        if disposition == .invalidToken { return .invalidToken }
        if disposition == .invalidChannel { return .invalidChannel }
        let provider = rejection.reason.isFCM ? "FCM" : "APNs"
        let said = rejection.detail.map { " (\(provider) said: \($0))" } ?? ""
        return .deadLetter(detail: "\(provider) answered \(rejection.status): \(rejection.reason.info.meaning)\(said) (after \(attempts) attempts)")
    }
}
