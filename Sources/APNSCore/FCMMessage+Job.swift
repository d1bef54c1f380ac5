/// A job for an FCM app as the body of its send to one token: its `payload` (FCM's message
/// object), its `notification` fields, or its template's output (an FCM message object).
extension FCMMessage {
    public static func render(_ job: Job, token: DeviceToken, templates: TemplateLibrary, nowSeconds: Int64) throws(JobRejection) -> Job {
        let target: FCMTarget =
            if !token.isAbsent {
                .token(token.hex)
            } else if let condition = job.condition {
                .condition(condition)
            } else {
                .topic(job.topic ?? "")
            }
        let body: [UInt8]
        switch job.content {
        case .raw:
            let made = job.withPayload { raw in
                Result { () throws(JobRejection) in try request(payload: raw.assumingMemoryBound(to: UInt8.self), target: target) }
            }
            body = try made.get()
        case .notification(let range):
            let options = Options(priority: job.priority?.value, expiration: job.expiration, collapseID: job.collapseID, nowSeconds: nowSeconds)
            body = try job.raw.withUnsafeBufferPointer { (all) throws(JobRejection) in
                try request(notification: UnsafeBufferPointer(rebasing: all[range]), target: target, options: options)
            }
        case .template(let name, let locale, let data):
            let object = try PayloadRenderer.fill(job, template: name, locale: locale, data: data, templates: templates)
            body = try object.withUnsafeBufferPointer { (b) throws(JobRejection) in try request(payload: b, target: target) }
        }
        return job.rendered(body)
    }
}
