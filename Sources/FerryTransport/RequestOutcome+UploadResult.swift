import FerryDelivery

extension RequestOutcome {
    /// A transport's result as an upload machine takes it.
    init(_ result: UploadResult) {
        switch result {
        case .response(let status, let headers, let body, let bytes): self = .answer(status: status, headers: headers, body: body, bytesSent: bytes)
        case .failed(let failure, let bytes) where failure.kind == .sourceChanged: self = .sourceChanged(bytesSent: bytes)
        case .failed(let failure, _) where failure.isUnreachable: self = .unreachable(failure.message)
        case .failed(let failure, let bytes): self = .failed(failure.message, bytesSent: bytes)
        case .cancelled(let bytes): self = .cancelled(bytesSent: bytes)
        }
    }
}
