#if os(Linux)
import CFerrySystem
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's secure random source, read 512 bytes at a time.
///
/// On Linux, `SystemRandomNumberGenerator` makes one `getrandom(2)` call per 8 bytes, so a boundary
/// (32 characters, each drawn on its own) would cost 32 calls, a job id 2; this reads them all
/// with one. Same
/// source, same quality; only the reads are batched. Elsewhere (`arc4random` on Apple systems, no
/// system call per draw) it is `SystemRandomNumberGenerator` itself.
public struct BufferedSystemRandom: RandomNumberGenerator {
    #if os(Linux)
    private var buffer = [UInt64](repeating: 0, count: 64)
    private var index = 64
    #else
    private var system = SystemRandomNumberGenerator()
    #endif

    public init() {}

    public mutating func next() -> UInt64 {
        #if os(Linux)
        if index == buffer.count {
            refill()
            index = 0
        }
        defer { index += 1 }
        return buffer[index]
        #else
        return system.next()
        #endif
    }

    #if os(Linux)
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
    #endif
}
