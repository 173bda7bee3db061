import FerryDelivery
import FerryS3

extension S3UploadMachine.Settings {
    /// The settings of the scripted tests: their object is `http://s3.test/b/k`, so the creation
    /// marker is `http://s3.test/b/k?uploads`.
    init(
        length: Int64, partSize: Int64, multipartThreshold: Int64, endpointKey: String? = nil, checksum: S3ChecksumAlgorithm? = .crc32c,
        partConcurrency: Int = 1
    ) {
        self.init(
            length: length, partSize: partSize, multipartThreshold: multipartThreshold, endpointKey: endpointKey, checksum: checksum,
            partConcurrency: partConcurrency, creationMarker: "http://s3.test/b/k?uploads")
    }
}
