extension Array {
    /// Appends `batch`; an empty array takes the batch's buffer instead, so that handing a batch
    /// between threads counts no reference per element.
    public mutating func adopt(_ batch: [Element]) {
        if isEmpty { self = batch } else { append(contentsOf: batch) }
    }
}
