import CFerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's secure random source (`getrandom(2)`), read 512 bytes at a time.
///
/// `SystemRandomNumberGenerator` makes one system call per 8 bytes: a multipart boundary (32
/// characters, each drawn on its own) cost 32 calls, a job id 2. Drawing them from one of these costs
/// one call each. Same source, same quality; only the reads are batched.
public struct BufferedSystemRandom: RandomNumberGenerator {
    private var buffer = [UInt64](repeating: 0, count: 64)
    private var index = 64

    public init() {}

    public mutating func next() -> UInt64 {
        if index == buffer.count {
            refill()
            index = 0
        }
        defer { index += 1 }
        return buffer[index]
    }

    private mutating func refill() {
        let filled = buffer.withUnsafeMutableBytes { raw -> Bool in
            var done = 0
            while done < raw.count {
                let count = cferry_getrandom(raw.baseAddress! + done, raw.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                done += count
            }
            return true
        }
        if !filled {
            // getrandom(2) missing (a kernel before 3.17): the standard library's source, 8 bytes a call.
            var system = SystemRandomNumberGenerator()
            for slot in buffer.indices { buffer[slot] = system.next() }
        }
    }
}
