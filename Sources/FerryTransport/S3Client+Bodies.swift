import Crypto
import FerryDelivery
import FerryS3
import FerrySystem
import Foundation
import NIOPosix

/// How ``S3Client`` reads the bodies it checksums: a part's range in one pass, a small file whole.
extension S3Client {
    // MARK: Checksums

    struct ChecksumFailure: Error {
        var response: S3UploadMachine.Response
    }

    /// A range's checksum (base64) and, for SHA-256, its hex form (then also the signed payload hash).
    typealias PartChecksum = (checksum: String, sha256Hex: String?)

    /// A small file read into memory: its bytes, their checksum (base64) and, for SHA-256, its hex
    /// form (then also the signed payload hash).
    struct SmallBody {
        var bytes: [UInt8]
        var checksum: String?
        var sha256Hex: String?

        init(_ bytes: [UInt8], _ algorithm: S3ChecksumAlgorithm?) {
            self.bytes = bytes
            if let algorithm { (checksum, sha256Hex) = S3ChecksumHasher.checksum(of: bytes, by: algorithm) }
        }
    }

    /// Reads the whole (small) file in one blocking call and checks it is still the version queued.
    /// (Already read when it was opened: no blocking call.)
    static func smallBody(_ source: SourceFile, _ algorithm: S3ChecksumAlgorithm?) async -> Result<SmallBody, ChecksumFailure> {
        if let prefetched = source.prefetched { return .success(SmallBody(prefetched, algorithm)) }
        do {
            return .success(try await NIOThreadPool.singleton.runIfActive {
                let bytes = try source.bytes()
                guard source.isUnchanged else { throw SourceReadError.changed }
                return SmallBody(bytes, algorithm)
            })
        } catch SourceReadError.changed {
            return .failure(ChecksumFailure(response: .sourceChanged))
        } catch {
            return .failure(ChecksumFailure(response: .failed("cannot read the file: \(error)")))
        }
    }

    /// A range's MD5 and, with `algorithm`, its checksum, read in one blocking call from the version
    /// queued: what the machine compares with a part's or an object's ETag whose answer was lost.
    /// Cancellable between pieces: it may read a whole file.
    static func digest(_ source: SourceFile, _ range: Range<Int64>, _ algorithm: S3ChecksumAlgorithm?) async -> S3UploadMachine.Response {
        let flag = CancellationFlag()
        do {
            return try await withTaskCancellationHandler {
                try await NIOThreadPool.singleton.runIfActive {
                    guard source.isUnchanged else { throw SourceReadError.changed }
                    var md5 = Insecure.MD5()
                    var checksum = algorithm.map(S3ChecksumHasher.init)
                    try source.read(range, isCancelled: { flag.isCancelled }) { piece in
                        md5.update(bufferPointer: piece)
                        checksum?.update(bufferPointer: piece)
                    }
                    guard source.isUnchanged else { throw SourceReadError.changed }
                    return .digested(md5: md5.finalize().hex, checksum: checksum?.finalize().checksum)
                }
            } onCancel: {
                flag.cancel()
            }
        } catch SourceReadError.changed {
            return .sourceChanged
        } catch SourceReadError.cancelled {
            return .cancelled
        } catch {
            return .failed("cannot read the file back: \(error)")
        }
    }

    /// A range's checksum, read in one blocking call, and the file checked to be the version queued.
    func checksum(
        _ source: SourceFile, _ range: Range<Int64>, _ algorithm: S3ChecksumAlgorithm
    ) async -> Result<PartChecksum, ChecksumFailure> {
        do {
            return .success(try await NIOThreadPool.singleton.runIfActive {
                guard source.isUnchanged else { throw SourceReadError.changed }
                var checksum = S3ChecksumHasher(algorithm)
                try source.read(range) { checksum.update(bufferPointer: $0) }
                return checksum.finalize()
            })
        } catch SourceReadError.changed {
            return .failure(ChecksumFailure(response: .sourceChanged))
        } catch {
            return .failure(ChecksumFailure(response: .failed("cannot read the file for its checksum: \(error)")))
        }
    }
}
