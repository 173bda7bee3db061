/// The `Idempotency-Key` of a request that creates a tus or resumable upload.
///
/// The job's id is the key of every request that carries the file's bytes, so a server that keeps
/// keys recognises the repeat of a creation whose answer was lost (and an ordinary server, sent the
/// whole file again after a failed attempt, too). A creation without the bytes (the first request
/// of a large file, or of any file after a failed attempt) is another request: a key reused with
/// another payload is refused (422) by a server that checks, so it takes a key of its own.
/// Only an attempt's first creation carries a key: a creation again after the server lost the upload
/// (404) would otherwise be answered with the lost upload's stored answer.
public enum CreationKey {
    /// The key for a creation that carries `bytes` of the file, of the job whose key is `jobKey`.
    public static func value(jobKey: String, bytes: Int64) -> String {
        bytes > 0 ? jobKey : jobKey + "-empty"
    }
}
