/// The `Content-Type` of a file part, chosen from the file name's extension.
///
/// Servers such as Mastodon check the part's declared type, so the common image, video, audio,
/// document, archive and text types are named; anything else is `application/octet-stream`.
public enum MediaType {
    /// The type for an unknown extension.
    public static let fallback = "application/octet-stream"

    /// The media type for `filename`, looked up by its extension, case-insensitively.
    public static func forFilename(_ filename: String) -> String {
        guard let dot = filename.lastIndex(of: "."), dot != filename.startIndex else { return fallback }
        let ext = filename[filename.index(after: dot)...].lowercased()
        return byExtension[ext] ?? fallback
    }

    /// Extension (lowercase, no dot) → media type.
    public static let byExtension: [String: String] = [
        // Images
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "jpe": "image/jpeg", "jfif": "image/jpeg",
        "png": "image/png", "gif": "image/gif", "webp": "image/webp", "avif": "image/avif",
        "heic": "image/heic", "heif": "image/heif", "bmp": "image/bmp", "tif": "image/tiff",
        "tiff": "image/tiff", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
        "jxl": "image/jxl", "dng": "image/x-adobe-dng", "cr2": "image/x-canon-cr2",
        "nef": "image/x-nikon-nef", "arw": "image/x-sony-arw", "psd": "image/vnd.adobe.photoshop",
        // Video
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "3gp": "video/3gpp", "3g2": "video/3gpp2", "ts": "video/mp2t", "m2ts": "video/mp2t",
        "ogv": "video/ogg", "wmv": "video/x-ms-wmv", "flv": "video/x-flv",
        // Audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "ogg": "audio/ogg",
        "oga": "audio/ogg", "opus": "audio/opus", "flac": "audio/flac", "wav": "audio/wav",
        "weba": "audio/webm", "mid": "audio/midi", "midi": "audio/midi", "aif": "audio/aiff",
        "aiff": "audio/aiff", "amr": "audio/amr", "wma": "audio/x-ms-wma",
        // Documents
        "pdf": "application/pdf", "rtf": "application/rtf", "epub": "application/epub+zip",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text",
        "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "odp": "application/vnd.oasis.opendocument.presentation",
        // Archives and compressed data
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "zst": "application/zstd", "7z": "application/x-7z-compressed", "rar": "application/vnd.rar",
        "lz4": "application/x-lz4", "jar": "application/java-archive",
        // Text and structured text
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "csv": "text/csv",
        "tsv": "text/tab-separated-values", "md": "text/markdown", "html": "text/html",
        "htm": "text/html", "css": "text/css", "js": "text/javascript", "mjs": "text/javascript",
        "ics": "text/calendar", "vcf": "text/vcard", "xml": "application/xml",
        "json": "application/json", "ndjson": "application/x-ndjson", "jsonl": "application/jsonl",
        "yaml": "application/yaml", "yml": "application/yaml", "toml": "application/toml",
        "geojson": "application/geo+json", "gpx": "application/gpx+xml",
        // Other
        "wasm": "application/wasm", "sqlite": "application/vnd.sqlite3", "db": "application/vnd.sqlite3",
        "parquet": "application/vnd.apache.parquet", "bin": "application/octet-stream",
    ]
}
