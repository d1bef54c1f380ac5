import APNSCore
import Buffers
import Delivery
import HTTP2

/// The header values an FCM app's requests share (fcm-protocol.md §2.1), kept in the
/// connection's header list so that each request copies none of them and the HPACK encoder
/// indexes the bearer token once.
struct FCMRequestHeaders {
    let bearer: String
    let method: HeaderList.Kept, scheme: HeaderList.Kept, path: HeaderList.Kept, authority: HeaderList.Kept
    let authorization: HeaderList.Kept, contentType: HeaderList.Kept

    init(path: String, authority: String, bearer: String, into headers: inout HeaderList) {
        self.bearer = bearer
        method = headers.keep("POST")
        scheme = headers.keep("https")
        self.path = headers.keep(path)
        self.authority = headers.keep(authority)
        authorization = headers.keep("Bearer " + bearer)
        contentType = headers.keep("application/json")
    }

    func write(into headers: inout HeaderList) {
        headers.add(":method", kept: method)
        headers.add(":scheme", kept: scheme)
        headers.add(":path", kept: path)
        headers.add(":authority", kept: authority)
        headers.add("authorization", kept: authorization)
        headers.add("content-type", kept: contentType)
    }

    /// The `name` of a 200's body (`projects/<id>/messages/<id>`), the message's id in records.
    static func messageName(_ body: [UInt8]) -> APNSID {
        // Scanned in place: a tree of the answer per message cost more than its send.
        var name = APNSID()
        body.withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            try? s.forEachMember(lendingKeys: { (key, s) throws(JSONSyntaxError) in
                if key.equals("name"), try s.peek() == UInt8(ascii: "\"") {
                    name = try s.readString(lending: { APNSID($0) })
                } else {
                    try s.skipValue()
                }
            })
        }
        return name
    }
}

extension APNSConnection {
    /// `send(from:limit:authorization:)` for an FCM app: each request's body is its job's payload,
    /// the message rendered for its token when the job was routed.
    func sendFCM(
        from queue: inout PendingQueue, limit: Int, authorization: (token: String, generation: Int)?, session: HTTP2ClientSession, now: UInt64
    ) -> Int {
        guard let authorization, let path = app.fcmPath else { return 0 }
        jwtGeneration = authorization.generation
        var headers = HeaderList(unreserved: ())
        swap(&headers, &self.headers)
        defer { swap(&headers, &self.headers) }
        if fcmShared?.bearer != authorization.token {
            headers.clearAll()
            fcmShared = FCMRequestHeaders(path: path, authority: app.configuration.endpoint.serverName, bearer: authorization.token, into: &headers)
        }
        let shared = fcmShared!
        return openStreams(from: &queue, limit: limit, session: session, now: now) { request in
            headers.clear()
            shared.write(into: &headers)
            return request.job.withPayload { try? session.submitRequest(headers, body: $0) }
        }
    }
}
