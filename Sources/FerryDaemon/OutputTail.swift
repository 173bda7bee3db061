/// The last bytes of a hook's output, and how many it wrote in all.
struct OutputTail: Sendable {
    let limit: Int
    private(set) var bytes: [UInt8] = []
    private(set) var total = 0

    init(limit: Int) { self.limit = limit }

    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        total += chunk.count
        bytes.append(contentsOf: chunk.suffix(limit))
        if bytes.count > limit { bytes.removeFirst(bytes.count - limit) }
    }

    /// The tail as text, starting at a line boundary when it was cut, invalid UTF-8 replaced.
    var text: String {
        var kept = bytes[...]
        if total > bytes.count, let newline = kept.firstIndex(of: 0x0A) { kept = kept[(newline + 1)...] }
        return String(decoding: kept, as: UTF8.self)
    }
}
