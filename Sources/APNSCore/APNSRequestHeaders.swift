/// Where request headers go: nghttp2's header list in production, an array in tests. Names are
/// lowercase literals, which live as long as the program: nghttp2 sends them without a copy.
public protocol HeaderSink: ~Copyable {
    /// A value the sink keeps for the requests that follow (`APNSRequestHeaders.Shared`).
    associatedtype Kept
    mutating func keep(_ value: String) -> Kept
    mutating func add(_ name: StaticString, kept value: Kept, sensitive: Bool)
    mutating func add(_ name: StaticString, _ value: String, sensitive: Bool)
    /// A value of a prefix and bytes (a token's digits), without building a String of them.
    mutating func add(_ name: StaticString, _ prefix: String, utf8 value: UnsafeBufferPointer<UInt8>, sensitive: Bool)
}

extension HeaderSink where Kept == String {
    public mutating func keep(_ value: String) -> String { value }
    public mutating func add(_ name: StaticString, kept value: String, sensitive: Bool) { add(name, value, sensitive: sensitive) }

    public mutating func add(_ name: StaticString, _ prefix: String, utf8 value: UnsafeBufferPointer<UInt8>, sensitive: Bool) {
        add(name, prefix + String(decoding: value, as: UTF8.self), sensitive: sensitive)
    }
}

/// The HTTP/2 headers of one device push (apns-protocol.md §2.1, §2.3).
public enum APNSRequestHeaders {
    /// The values a run of requests shares (one endpoint and credential, push type, topic and
    /// priority): written into the sink once, not copied again for each request.
    /// The functions are inlinable so that the I/O thread's calls are specialized for its sink:
    /// generic, they copied this struct through its value witnesses per request.
    public struct Shared<Kept> {
        public let authority: String, bearer: String?, pushType: PushType, topic: String, priority: Priority
        public let method: Kept, scheme: Kept, authorityValue: Kept, authorization: Kept?, pushTypeValue: Kept, topicValue: Kept,
            priorityValue: Kept

        @usableFromInline
        init<S: HeaderSink & ~Copyable>(
            authority: String, bearer: String?, pushType: PushType, topic: String, priority: Priority,
            keptIn sink: inout S
        ) where S.Kept == Kept {
            self.authority = authority
            self.bearer = bearer
            self.pushType = pushType
            self.topic = topic
            self.priority = priority
            method = sink.keep("POST")
            scheme = sink.keep("https")
            authorityValue = sink.keep(authority)
            authorization = bearer.map { sink.keep("bearer " + $0) }
            pushTypeValue = sink.keep(pushType.rawValue)
            topicValue = sink.keep(topic)
            priorityValue = sink.keep(String(priority.value))
        }

        /// Whether a request with these values can use this.
        @inlinable
        public func fits(authority: String, bearer: String?, pushType: PushType, topic: String, priority: Priority) -> Bool {
            self.pushType == pushType && self.priority == priority && self.topic == topic && self.bearer == bearer && self.authority == authority
        }
    }

    /// Keeps the shared values in `sink`. `bearer`: the JWT, nil with certificate authentication.
    @inlinable
    public static func share<S: HeaderSink & ~Copyable>(
        authority: String, bearer: String?, pushType: PushType, topic: String, priority: Priority,
        into sink: inout S
    ) -> Shared<S.Kept> {
        Shared(authority: authority, bearer: bearer, pushType: pushType, topic: topic, priority: priority, keptIn: &sink)
    }

    /// Writes the request's headers; `shared` must fit the job (`Shared.fits`). Values that
    /// change per request (`:path`, `apns-id`) are marked sensitive so they never enter the
    /// HPACK table; the shared ones, the JWT among them, are sent as an index once in the table
    /// (`HPACKEncoder`, as Apple's "Establishing a connection" page allows: §2.3).
    @inlinable
    public static func write<S: HeaderSink & ~Copyable>(job: Job, token: DeviceToken, shared: Shared<S.Kept>, into sink: inout S) {
        sink.add(":method", kept: shared.method, sensitive: false)
        sink.add(":scheme", kept: shared.scheme, sensitive: false)
        token.withHex { sink.add(":path", "/3/device/", utf8: $0, sensitive: true) }
        sink.add(":authority", kept: shared.authorityValue, sensitive: false)
        if let a = shared.authorization { sink.add("authorization", kept: a, sensitive: false) }
        sink.add("apns-push-type", kept: shared.pushTypeValue, sensitive: false)
        sink.add("apns-topic", kept: shared.topicValue, sensitive: false)
        sink.add("apns-priority", kept: shared.priorityValue, sensitive: false)  // absent reads as 10, wrong for some push types
        if let e = job.expiration { sink.add("apns-expiration", String(e), sensitive: false) }
        if let c = job.collapseID { sink.add("apns-collapse-id", c, sensitive: false) }
        if let id = job.apnsID { sink.add("apns-id", id, sensitive: true) }
    }

    /// The headers of a broadcast to `job.channel` (apns-protocol.md §3.1): the bundle in the path,
    /// no topic, and always an expiration, since APNs wants one. The job's `apns_id` names the
    /// request. Nothing is shared: broadcasts are few, each to many devices.
    public static func writeBroadcast<S: HeaderSink & ~Copyable>(job: Job, bundle: String, authority: String, bearer: String?, into sink: inout S) {
        sink.add(":method", "POST", sensitive: false)
        sink.add(":scheme", "https", sensitive: false)
        sink.add(":path", "/4/broadcasts/apps/" + bundle, sensitive: false)
        sink.add(":authority", authority, sensitive: false)
        if let bearer { sink.add("authorization", "bearer " + bearer, sensitive: false) }
        sink.add("apns-push-type", PushType.liveactivity.rawValue, sensitive: false)
        sink.add("apns-channel-id", job.channel ?? "", sensitive: true)
        sink.add("apns-priority", String(job.effectivePriority.value), sensitive: false)
        sink.add("apns-expiration", String(job.expiration ?? BroadcastRules.defaultExpiration), sensitive: false)
        if let id = job.apnsID { sink.add("apns-request-id", id, sensitive: true) }
    }

    /// The headers of one request on their own, with nothing shared before.
    public static func write<S: HeaderSink & ~Copyable>(
        job: Job, token: DeviceToken, topic: String, authority: String, bearer: String?, into sink: inout S
    ) {
        let shared = share(authority: authority, bearer: bearer, pushType: job.pushType, topic: topic, priority: job.effectivePriority, into: &sink)
        write(job: job, token: token, shared: shared, into: &sink)
    }
}
