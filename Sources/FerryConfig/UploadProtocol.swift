/// How a spool's files are sent (`protocol`).
public enum UploadProtocol: String, Sendable, CaseIterable {
    /// An RFC 7578 `multipart/form-data` form: the configured fields, then the file (the default).
    /// The body is a snapshot of the file in the state directory, so the file may change meanwhile.
    case multipart
    /// The file's bytes as the whole request body (`PUT` by default, or `POST`), `Content-Type` by
    /// extension: WebDAV, pre-signed object-store URLs, simple ingest endpoints. Sent from the
    /// file itself; the URL may name it with `{filename}` or `{relative_path}`.
    case put
    /// tus 1.0 resumable uploads (tus.io): the upload URL and the offset the server confirmed are
    /// kept in the queue, so a failure or a restart resumes where the server's bytes end.
    case tus
    /// Objects in an S3-compatible bucket (AWS S3, MinIO, Ceph, SeaweedFS, R2, B2, …), signed with
    /// SigV4; large files as multipart uploads whose confirmed parts are kept in the queue, so a
    /// restart sends only the parts the server lacks.
    case s3
    /// The IETF draft "Resumable Uploads for HTTP" (the successor of tus that Apple's URLSession
    /// speaks): an upload created with `POST` or `PUT` and continued with `PATCH`; its URL and the
    /// offset the server confirmed are kept in the queue. A server that does not offer resumption
    /// gets an ordinary upload of the whole file.
    case resumable
}
