/// Turns what a job asked to send into the exact bytes that go to APNs, and checks them:
/// the push type's rules and the size limit, with optional truncation of the alert body.
public enum PayloadRenderer {
    /// `job` is consumed: a raw job comes back as it is, without a reference counted on it.
    public static func render(_ job: consuming Job, templates: TemplateLibrary, truncateByDefault: Bool = false) throws(JobRejection) -> Job {
        let bytes: [UInt8]
        switch job.content {
        case .raw:
            // Sent as is: only the push-type rules are checked, and only where there are any.
            try PayloadFitting.checkAgreement(job.payloadBytes, pushType: job.pushType, broadcast: job.isBroadcast)
            return job
        case .notification(let range):
            bytes = try StructuredPayload.render(job.raw, range, pushType: job.pushType)
        case .template(let name, let locale, let dataRange):
            bytes = try fill(job, template: name, locale: locale, data: dataRange, templates: templates)
        }
        try bytes.withUnsafeBytes { b in
            Result { () throws(JobRejection) in try PayloadFitting.checkAgreement(b, pushType: job.pushType, broadcast: job.isBroadcast) }
        }.get()
        var fitted = bytes
        let limit = job.maxPayloadBytes
        if fitted.count > limit, job.truncate ?? truncateByDefault {
            guard let shorter = PayloadFitting.truncateBody(fitted, limit: limit) else {
                throw JobRejection(
                    .payloadTooLarge,
                    "payload is \(fitted.count) bytes; the limit for \(job.limitName) is \(limit), and shortening the alert body cannot make it fit")
            }
            fitted = shorter
        }
        try RequestRules.checkPayload(fitted.count, limit: limit, of: job.limitName)
        return job.rendered(fitted)
    }

    /// A template job's object: the template for its locale, filled with its data.
    static func fill(
        _ job: borrowing Job, template name: String, locale: String?, data dataRange: Range<Int>?, templates: TemplateLibrary
    )
        throws(JobRejection) -> [UInt8]
    {
        guard let (key, template) = templates.lookup(name: name, locale: locale) else {
            let tried = TemplateLibrary.candidates(name: name, locale: locale).joined(separator: ", ")
            throw JobRejection(JobRejection.unknownTemplate, "no template \"\(name)\" (looked for \(tried))")
        }
        let bytes = try job.raw.withUnsafeBufferPointer { (buf) throws(JobRejection) in
            try template.fill(TemplateData(buf, dataRange), describe: "\"\(key)\"")
        }
        do {
            try bytes.withUnsafeBufferPointer { (b) throws(JSONSyntaxError) in try JSONScanner.validateObject(b) }
        } catch {
            throw JobRejection(JobRejection.malformedJSON, "template \"\(key)\" did not render to a JSON object: \(error)")
        }
        return bytes
    }
}
