extension UploadProtocol {
    /// The reader of this protocol's keys: the one place the configuration depends on the protocol.
    var configurationKeys: any UploadProtocolKeys.Type {
        switch self {
        case .multipart: ConfigurationLoader.MultipartKeys.self
        case .put: ConfigurationLoader.PutKeys.self
        case .tus: ConfigurationLoader.TusKeys.self
        case .s3: ConfigurationLoader.S3Keys.self
        case .resumable: ConfigurationLoader.ResumableKeys.self
        }
    }
}
