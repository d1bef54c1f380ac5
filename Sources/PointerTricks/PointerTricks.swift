// The project's ownership tricks, quarantined here (DESIGN.md §5, as swift-nio-ssl keeps its
// SSLPointerTricks.swift). Each helper skips a reference count or a copy that the hot path paid
// per notification; each is sound only under the condition its comment states, which the caller
// keeps. Nothing outside this file uses `Unmanaged`, an underscored standard-library call, or a
// pointer that outlives the closure that made it. What each saves is in docs/performance.md.

/// A reference that counts nothing, for a holder that its object outlives by construction (an
/// event loop's connection and the sender that owns it; a job lent for the length of a batch).
public struct UncountedReference<Object: AnyObject>: @unchecked Sendable {
    @usableFromInline let reference: Unmanaged<Object>

    @inlinable @inline(__always)
    public init(_ object: Object) { reference = .passUnretained(object) }

    /// Calls `body` with the object, counting no reference: the object must be alive throughout.
    @inlinable @inline(__always)
    public func withObject<Result>(_ body: (Object) throws -> Result) rethrows -> Result {
        try reference._withUnsafeGuaranteedRef(body)
    }

    /// The object, with a reference of the caller's own.
    @inlinable @inline(__always)
    public var object: Object { reference.takeUnretainedValue() }
}

/// One reference taken by hand and given back by hand, so that a table can lend its object out
/// per lookup without counting, and move it on (`take`) without counting either.
public struct RetainedReference<Object: AnyObject>: @unchecked Sendable {
    @usableFromInline let reference: Unmanaged<Object>

    @inlinable @inline(__always)
    public init(retaining object: Object) { reference = .passRetained(object) }

    /// The object without its reference: valid while this reference is held.
    @inlinable @inline(__always)
    public var uncounted: UncountedReference<Object> { UncountedReference(reference.takeUnretainedValue()) }

    /// The object, with a reference of the caller's own; this one is still held.
    @inlinable @inline(__always)
    public var object: Object { reference.takeUnretainedValue() }

    /// The object, with this reference moved to the caller: use this value no more.
    @inlinable @inline(__always)
    public func take() -> Object { reference.takeRetainedValue() }

    /// Gives the reference back: use this value no more.
    @inlinable @inline(__always)
    public func release() { reference.release() }
}

/// An object as a C library's user data, and back, counting nothing: the object must outlive
/// every callback that carries the pointer (the library calls back only from calls it makes).
public enum CallbackContext {
    @inlinable @inline(__always)
    public static func pointer(to object: AnyObject) -> UnsafeMutableRawPointer {
        Unmanaged.passUnretained(object).toOpaque()
    }

    @inlinable @inline(__always)
    public static func with<Object: AnyObject, Result>(
        _ pointer: UnsafeMutableRawPointer, as type: Object.Type,
        _ body: (Object) throws -> Result
    ) rethrows -> Result {
        try Unmanaged<Object>.fromOpaque(pointer)._withUnsafeGuaranteedRef(body)
    }
}

/// Bytes of an array kept past the closure that lends them: valid while the array (or a copy of
/// it, which shares its storage) is held and never mutated. A job points at its payload and a
/// record at its shared fields this way, instead of copying them or lending them per use.
public enum StableBytes {
    @inlinable
    public static func of(_ array: [UInt8]) -> UnsafeBufferPointer<UInt8> {
        array.withUnsafeBufferPointer { $0 }
    }

    /// `offsets` (from the slice's start) of `slice`'s bytes.
    @inlinable
    public static func of(_ slice: ArraySlice<UInt8>, offsets: Range<Int>) -> UnsafeRawBufferPointer {
        slice.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[offsets]) }
    }
}

/// An object handed through a C call that starts something (a thread) as one retained pointer:
/// the receiver takes it exactly once, with `take`.
public enum HandOff {
    public static func pointer(retaining object: AnyObject) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(object).toOpaque()
    }

    public static func take<Object: AnyObject>(_ pointer: UnsafeMutableRawPointer, as type: Object.Type) -> Object {
        Unmanaged<Object>.fromOpaque(pointer).takeRetainedValue()
    }
}
