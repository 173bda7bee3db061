/// Text for a raw Linux file name or path in logs and messages: valid UTF-8 as it is, and each byte
/// that is not valid UTF-8 as `\xNN`, so two different names never print the same.
public func displayName(_ bytes: some Collection<UInt8>) -> String {
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    var output = ""
    var parser = Unicode.UTF8.ForwardParser()
    var iterator = bytes.makeIterator()
    var pending = Array(bytes)[...]
    while true {
        switch parser.parseScalar(from: &iterator) {
        case .valid(let encoded):
            output.unicodeScalars.append(Unicode.UTF8.decode(encoded))
            pending = pending.dropFirst(encoded.count)
        case .error(let length):
            for byte in pending.prefix(length) {
                output += "\\x" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
            pending = pending.dropFirst(length)
        case .emptyInput:
            return output
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}

/// The longest file name Linux filesystems accept, in bytes.
public let maximumNameLength = 255

/// `name` cut to at most `limit` bytes without splitting a UTF-8 sequence.
public func truncatedName(_ name: [UInt8], toBytes limit: Int) -> [UInt8] {
    guard name.count > limit else { return name }
    var end = limit
    // Step back over continuation bytes (10xxxxxx) so no character is cut in half.
    while end > 0 && name[end] & 0xC0 == 0x80 { end -= 1 }
    return Array(name[..<end])
}
