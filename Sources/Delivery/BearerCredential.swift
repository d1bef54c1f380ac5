/// A pool's shared bearer credential: APNs's provider JWT, FCM's OAuth access token. The
/// transport reads it once per loop turn and asks for a new one when a provider refuses it.
public protocol BearerCredential: AnyObject, Sendable {
    /// The token for `authorization` and its generation (bumped at each renewal); nil while none
    /// is ready (the pool sends nothing then).
    var bearer: (token: String, generation: Int)? { get }
    /// The provider refused the token of `generation`: renew it, unless that is done or under
    /// way. Never blocks the caller on the network. Returns true if a renewal began.
    @discardableResult func renew(refusedGeneration generation: Int) -> Bool
    /// Why the last renewal failed, while it stays failed (a token endpoint that refuses).
    var renewalFailure: String? { get }
}
