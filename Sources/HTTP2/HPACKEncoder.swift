import Buffers
import Glibc

/// Encodes a client's request headers (RFC 7541) the way apns-protocol.md §2.3 describes:
/// values a run of requests shares (the credential, topic, push type, authority) go into the
/// dynamic table once and are sent as an index after that; values of one request (`:path`,
/// `apns-id`, `apns-expiration`, `apns-collapse-id`) are literals that never enter the table.
///
/// Why not nghttp2's encoder: it never indexes `authorization`, so the JWT (about 190 bytes)
/// went out Huffman-coded in every request, where Apple's newer guidance says the token "can be
/// indexed". Literals go out without Huffman coding: a few bytes a request are not worth a table
/// walk per character on both ends.
struct HPACKEncoder {
    /// Entries in insertion order; an entry's number in `sequence` never changes, so its index
    /// is 62 + (entries inserted after it).
    private var table: [(name: [UInt8], value: [UInt8], sequence: Int)] = []
    private var tableSize = 0
    /// The size the peer's decoder allows (SETTINGS_HEADER_TABLE_SIZE, at most 4096 used here).
    private var capacity = 4096
    /// A smaller size to announce at the start of the next block.
    private var pendingSizeUpdate: Int?
    private var inserted = 0
    /// Where each kept field of the last header list went (by position in the list): its
    /// table sequence, for as long as the list keeps the same values and the entry is in the
    /// table, so that no kept value is looked up in the table again.
    private var remembered: [Remembered] = []
    private struct Remembered {
        var generation = -1, name: UnsafeRawPointer?, value: UnsafePointer<UInt8>?, count = 0, sequence = 0
    }

    static let maxTableSize = 4096

    /// The peer's SETTINGS_HEADER_TABLE_SIZE. A smaller table than the one in use is announced
    /// at the start of the next header block, as RFC 7541 §4.2 requires.
    mutating func peerTableSize(_ size: Int) {
        let wanted = min(size, Self.maxTableSize)
        guard wanted < capacity else { return }
        capacity = wanted
        pendingSizeUpdate = min(pendingSizeUpdate ?? wanted, wanted)
        evict(toFit: 0)
    }

    /// Appends the header block of `headers` to `out`.
    mutating func encode(_ headers: borrowing HeaderList, into out: inout ByteBuffer) {
        if let size = pendingSizeUpdate {
            Self.writeInteger(size, prefixBits: 5, flags: 0x20, into: &out)
            pendingSizeUpdate = nil
        }
        let generation = headers.keptGeneration
        if remembered.count < headers.count {
            remembered.append(contentsOf: repeatElement(Remembered(), count: headers.count - remembered.count))
        }
        headers.forEachField { position, name, value, kept, sensitive in
            if let exact = Self.staticExact(name, value) {
                out.append(0x80 | UInt8(exact))
                return
            }
            guard kept, !sensitive, capacity > 0 else {
                // A literal kept out of the table: with an indexed name where the static table has one.
                Self.writeLiteral(name, value, flags: sensitive ? 0x10 : 0x00, prefixBits: 4, into: &out)
                return
            }
            let r = remembered[position]
            if r.generation == generation, r.name == UnsafeRawPointer(name.utf8Start), r.value == value.baseAddress, r.count == value.count,
                let index = index(ofSequence: r.sequence)
            {
                Self.writeInteger(index, prefixBits: 7, flags: 0x80, into: &out)
                return
            }
            let sequence: Int
            if let found = find(name, value) {
                Self.writeInteger(index(ofSequence: found)!, prefixBits: 7, flags: 0x80, into: &out)
                sequence = found
            } else {
                let size = name.utf8CodeUnitCount + value.count + 32
                guard size <= capacity else {
                    Self.writeLiteral(name, value, flags: 0x00, prefixBits: 4, into: &out)
                    return
                }
                Self.writeLiteral(name, value, flags: 0x40, prefixBits: 6, into: &out)
                sequence = insert(name, value, size: size)
            }
            remembered[position] = Remembered(
                generation: generation, name: UnsafeRawPointer(name.utf8Start), value: value.baseAddress, count: value.count, sequence: sequence)
        }
    }

    // MARK: The dynamic table

    private func index(ofSequence sequence: Int) -> Int? {
        guard let first = table.first, sequence >= first.sequence else { return nil }
        return 62 + (inserted - 1 - sequence)
    }

    private func find(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>) -> Int? {
        let nameBytes = Self.bytes(of: name)
        for entry in table.reversed() where entry.value.count == value.count && entry.name.elementsEqual(nameBytes) {
            if entry.value.withUnsafeBufferPointer({ memcmp($0.baseAddress!, value.baseAddress!, value.count) == 0 }) { return entry.sequence }
        }
        return nil
    }

    private mutating func insert(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>, size: Int) -> Int {
        evict(toFit: size)
        let sequence = inserted
        table.append((Array(Self.bytes(of: name)), Array(value), sequence))
        tableSize += size
        inserted += 1
        return sequence
    }

    /// Drops the oldest entries until `size` more bytes fit.
    private mutating func evict(toFit size: Int) {
        var drop = 0
        while tableSize + size > capacity, drop < table.count {
            tableSize -= table[drop].name.count + table[drop].value.count + 32
            drop += 1
        }
        if drop > 0 { table.removeFirst(drop) }
    }

    // MARK: Representations

    /// Static table entries a request uses whole (RFC 7541 Appendix A).
    private static func staticExact(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>) -> Int? {
        let n = bytes(of: name)
        if n.equals(":method") { return value.equals("POST") ? 3 : value.equals("GET") ? 2 : nil }
        if n.equals(":scheme") { return value.equals("https") ? 7 : value.equals("http") ? 6 : nil }
        return nil
    }

    /// The static table's index of a name a request may carry; 0 for a name sent as a literal.
    private static func staticName(_ name: StaticString) -> Int {
        let n = bytes(of: name)
        for (known, index) in staticNames where n.equals(known) { return index }
        return 0
    }

    private static let staticNames: [(StaticString, Int)] = [
        (":path", 4), (":method", 2), (":scheme", 6), (":authority", 1), ("authorization", 23), ("content-type", 31), ("content-length", 28),
    ]

    private static func bytes(of name: StaticString) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
    }

    /// A literal field: `flags` and the name's static index in a `prefixBits` integer, the name
    /// as a string when it has no index, then the value.
    private static func writeLiteral(
        _ name: StaticString, _ value: UnsafeBufferPointer<UInt8>, flags: UInt8, prefixBits: Int,
        into out: inout ByteBuffer
    ) {
        let nameIndex = staticName(name)
        writeInteger(nameIndex, prefixBits: prefixBits, flags: flags, into: &out)
        if nameIndex == 0 { writeString(bytes(of: name), into: &out) }
        writeString(value, into: &out)
    }

    /// A string literal without Huffman coding.
    private static func writeString(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout ByteBuffer) {
        writeInteger(bytes.count, prefixBits: 7, flags: 0, into: &out)
        out.append(UnsafeRawBufferPointer(bytes))
    }

    /// An integer with an N-bit prefix (RFC 7541 §5.1).
    static func writeInteger(_ value: Int, prefixBits: Int, flags: UInt8, into out: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            out.append(flags | UInt8(value))
            return
        }
        out.append(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            out.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }
}
