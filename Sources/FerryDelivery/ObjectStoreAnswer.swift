import FerryS3

/// An answer to a plain request (a `put` to a pre-signed URL, a form to a pre-signed POST) read as
/// an object store's: S3, GCS's XML API, MinIO, Ceph and R2 answer in S3's `<Error>` document, and
/// some codes are worth a retry whatever the status (`RequestTimeout`, when the body came too
/// slowly, is a 400; `SlowDown` a 503).
public enum ObjectStoreAnswer {
    /// `answer` with a retry verdict and S3's code as its hint when it is a refusal whose body is an
    /// S3 `<Error>` with a code in ``S3ErrorAnswer/retryableCodes``; otherwise `answer` as it is.
    public static func reading(_ answer: ServerAnswer) -> ServerAnswer {
        guard answer.status >= 400, answer.verdict == nil, answer.body.first(where: { $0 > 0x20 }) == UInt8(ascii: "<"),
              let error = S3Document(answer.body)?.error, S3ErrorAnswer.retryableCodes.contains(error.code) else { return answer }
        var read = answer
        read.verdict = .retry(notBefore: nil)
        read.hint = read.hint ?? "S3 \(error.code)"
        return read
    }
}
