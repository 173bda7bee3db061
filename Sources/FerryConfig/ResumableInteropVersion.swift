/// The `Upload-Draft-Interop-Version` a `protocol = "resumable"` spool speaks (`interop_version`):
/// which revision of the IETF draft "Resumable Uploads for HTTP" (draft-ietf-httpbis-resumable-upload)
/// client and server follow. A server answers only requests of a version it knows, so this must be
/// the server's. What differs between the versions is in FerryDelivery's `ResumableInterop`.
public enum ResumableInteropVersion: Int, Sendable, CaseIterable, Comparable {
    /// Drafts -04 and -05: what Apple's URLSession (iOS 17, macOS 14) and swift-nio-extras'
    /// `NIOResumableUpload` speak.
    case v6 = 6
    /// Drafts -12 to -15, the newest.
    case v9 = 9

    /// The newest version the draft defines, the default.
    public static let latest = ResumableInteropVersion.v9

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
