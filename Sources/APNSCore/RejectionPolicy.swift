/// What an APNs answer, or the lack of one, does to a send: one pure decision, made where the
/// answer arrives (DESIGN.md §4, apns-protocol.md §5.2). The transport carries out the actions
/// that keep a job in flight; a final verdict travels with the job's outcome to its records.
public struct RejectionPolicy: Sendable, Equatable {
    public var retry: RetryPolicy
    /// Sends of one notification that count no attempt (reconnects, refreshed JWTs, streams
    /// refused or cut) before it is given up.
    public var maxFreeResends: Int

    public init(retry: RetryPolicy = RetryPolicy(), maxFreeResends: Int = 10) {
        self.retry = retry
        self.maxFreeResends = maxFreeResends
    }

    /// What came back for one send.
    public enum Answer: Equatable, Sendable {
        /// APNs answered with an error status.
        case rejected(APNSRejection)
        /// No answer: refused, reset, cut by GOAWAY or a closed connection, or timed out.
        /// `freeResends` counts such sends of this notification so far, this one included.
        case unanswered(freeResends: Int)
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
        /// A result and a dead letter with this detail.
        case deadLetter(detail: String)
    }

    /// The rejection a notification given up without an answer is recorded with.
    public static let connectionFailures = APNSRejection(status: 0, reason: APNSReason("ConnectionFailures"), apnsID: nil, timestamp: nil)

    /// `attempts`: the tries that count so far, the one just rejected included.
    public func decide<G: RandomNumberGenerator>(_ answer: Answer, attempts: Int, jobMaxAttempts: Int?, using rng: inout G) -> Action {
        switch answer {
        case .unanswered(let sends):
            guard sends > maxFreeResends else { return .resend }
            return .finish(verdict(Self.connectionFailures, .deadLetter, attempts: attempts, jobMaxAttempts: jobMaxAttempts, using: &rng))
        case .rejected(let rejection):
            let disposition = rejection.reason.info.disposition
            switch disposition {
            case .refreshAuthAndRetry: return .refreshTokenAndResend
            case .reconnectAndRetry: return .reconnectAndResend
            case .pauseCredential: return .pauseCredential(closeConnection: rejection.reason == .tooManyProviderTokenUpdates)
            case .deadLetter, .invalidToken, .retry:
                return .finish(verdict(rejection, disposition, attempts: attempts, jobMaxAttempts: jobMaxAttempts, using: &rng))
            }
        }
    }

    private func verdict<G: RandomNumberGenerator>(
        _ rejection: APNSRejection, _ disposition: Disposition, attempts: Int, jobMaxAttempts: Int?,
        using rng: inout G
    ) -> Verdict {
        if case .retry(let kind) = disposition,
            case .retry(let afterMs) = retry.decide(kind, attempts: attempts, jobMaxAttempts: jobMaxAttempts, using: &rng)
        {
            return .retry(afterMs: afterMs)
        }
        if disposition == .invalidToken { return .invalidToken }
        return .deadLetter(detail: "APNs answered \(rejection.status): \(rejection.reason.info.meaning) (after \(attempts) attempts)")
    }
}
