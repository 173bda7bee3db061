import Crypto

/// SHA-256 of `bytes`, lowercase hex.
public func sha256Hex(_ bytes: [UInt8]) -> String {
    SHA256.hash(data: bytes).map { hexByte($0) }.joined()
}

private func hexByte(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
}

/// SHA-1 of `bytes`, base64 (as tus `Upload-Checksum: sha1 …` carries it).
public func sha1Base64(_ bytes: [UInt8]) -> String {
    Data(Insecure.SHA1.hash(data: bytes)).base64EncodedString()
}

import Foundation
