extension Array where Element == UInt8 {
    /// The path's components, split at `/`.
    func splitPath() -> [[UInt8]] {
        split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
    }

    func trimmingSlashes() -> [UInt8] {
        var slice = self[...]
        while slice.first == UInt8(ascii: "/") { slice = slice.dropFirst() }
        while slice.last == UInt8(ascii: "/") { slice = slice.dropLast() }
        return Array(slice)
    }
}
