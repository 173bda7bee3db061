// swift-tools-version:6.1
//
// Ferry — a resumable background upload daemon for Linux.
//
// The modules follow the data path, each with one job:
//
//   FerrySpool      finds files in spool directories (inotify + rescans)      spool
//   FerryQueue      the durable job queue in SQLite (GRDB)                    queue
//   FerryMultipart  the RFC 7578 multipart/form-data body encoder             body
//   FerryS3         S3's formats, pure: SigV4 signing, CRC32C and composite   body (s3)
//                   checksums, object addresses, XML documents
//   FerryDelivery   every decision about a job, pure: the attempt decision,   decide
//                   retry rules, backoff, the tus and S3 upload machines
//   FerryTransport  sends requests over HTTP(S) (AsyncHTTPClient), tus and    transport
//                   S3 shells
//   FerryDaemon     composes the above: scheduler, pipeline, senders,         disposition
//                   disposition
//
// FerryControl is the control protocol (NDJSON over a Unix socket) shared by ferryd and ferryctl.
// FerryConfig parses ferry.toml; FerryReceiver is a loopback multipart receiver used by
// `ferryd demo`, the tests and the benchmarks; FerrySystem holds the POSIX file helpers the
// others share, and CFerrySystem the few Linux calls Glibc's Swift overlay does not import
// (inotify, copy_file_range, renameat2, SO_PEERCRED); CFerrySQLite turns SQLite's memory
// statistics off, which Swift cannot (sqlite3_config is variadic).

import PackageDescription

let package = Package(
    name: "Ferry",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ferryd", targets: ["ferryd"]),
        .executable(name: "ferryctl", targets: ["ferryctl"]),
        .executable(name: "ferry-receiver", targets: ["ferry-receiver"]),
        .library(name: "FerryMultipart", targets: ["FerryMultipart"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Structured field values (RFC 9651): the resumable upload draft's Upload-Complete, Upload-Limit.
        .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
        // Hooks: child processes in their own process group, with bounded output.
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        // Tests only: NIOResumableUpload, a server of the resumable upload draft (interop 3, 5, 6).
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // Tests only: an independent multipart parser to check the encoder against.
        .package(url: "https://github.com/vapor/multipart-kit", from: "4.7.0"),
        // Docs only: `swift package generate-documentation --target FerryMultipart` (the DocC catalog).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(name: "CFerrySystem"),
        // The file copier and random source that the daemon and the standalone FerryMultipart share:
        // copy_file_range and getrandom on Linux, read/write and the system's generator elsewhere.
        .target(
            name: "FerryPortable",
            dependencies: [
                .target(name: "CFerrySystem", condition: .when(platforms: [.linux])),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "FerrySystem",
            dependencies: [
                "CFerrySystem",
                "FerryPortable",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Stands on its own (a library for apps too, on Apple platforms as well): only
        // swift-system, and CFerrySystem's copy_file_range and fallocate on Linux.
        .target(
            name: "FerryMultipart",
            dependencies: [
                "FerryPortable",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "FerryConfig",
            dependencies: [
                "FerryPortable",
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // SQLite's process-wide settings (sqlite3_config is variadic, so Swift cannot call it).
        .target(name: "CFerrySQLite", linkerSettings: [.linkedLibrary("sqlite3")]),
        .target(
            name: "FerryQueue",
            dependencies: [
                "CFerrySQLite",
                "FerrySystem",
                "FerryPortable",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .target(
            name: "FerrySpool",
            dependencies: [
                "CFerrySystem",
                "FerrySystem",
                "FerryPortable",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .target(
            name: "FerryS3",
            dependencies: [
                "CFerrySystem",
                "FerrySystem",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "FerryDelivery",
            dependencies: [
                "FerryConfig",
                "FerryQueue",
                "FerryS3",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
            ]
        ),
        .target(
            name: "FerryTransport",
            dependencies: [
                "FerryConfig",
                "FerryDelivery",
                "FerryQueue",
                "FerryS3",
                "FerrySystem",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "FerryReceiver",
            dependencies: [
                "CFerrySystem",
                "FerrySystem",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "FerryControl",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "FerryDaemon",
            dependencies: [
                "CFerrySystem",
                "FerryControl",
                "FerryPortable",
                "FerrySystem",
                "FerryConfig",
                "FerryDelivery",
                "FerryMultipart",
                "FerryQueue",
                "FerryS3",
                "FerrySpool",
                "FerryTransport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Subprocess", package: "swift-subprocess"),
            ]
        ),
        .executableTarget(
            name: "ferryd",
            dependencies: [
                "CFerrySystem",
                "FerryDaemon",
                "FerryConfig",
                "FerryReceiver",
                "FerrySystem",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "ferryctl",
            dependencies: [
                "FerryConfig",
                "FerryControl",
                "FerrySystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "ferry-receiver",
            dependencies: [
                "FerryReceiver",
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Not installed: renders README.md's configuration reference and ferry.toml(5) from
        // FerryConfig's ConfigurationReference (scripts/generate-docs.sh).
        .executableTarget(
            name: "ferry-docs",
            dependencies: [
                "FerryConfig",
                "FerrySystem",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Tests only: a server of the resumable upload draft built on swift-nio-extras'
        // NIOResumableUpload (interop 6), which the integration tests start on 127.0.0.1.
        .executableTarget(
            name: "nio-resumable-server",
            dependencies: [
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/NIOResumableServer"
        ),
        .target(
            name: "FerryTestSupport",
            dependencies: [
                "FerryControl",
                "FerryReceiver",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                "FerryQueue",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/FerryTestSupport"
        ),
        .testTarget(
            name: "FerryMultipartTests",
            dependencies: [
                "FerryMultipart",
                "FerryPortable",
                "FerryTestSupport",
                .product(name: "MultipartKit", package: "multipart-kit"),
            ]
        ),
        .testTarget(
            name: "FerryDeliveryTests",
            dependencies: ["FerryDelivery", "FerryQueue", "FerryConfig", "FerryS3", "FerrySystem", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "FerryS3Tests",
            dependencies: ["FerryS3", "FerryTestSupport"],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "FerryControlTests",
            dependencies: ["FerryControl"]
        ),
        .testTarget(
            name: "FerryConfigTests",
            dependencies: ["FerryConfig"]
        ),
        .testTarget(
            name: "FerrySpoolTests",
            dependencies: ["FerrySpool", "FerrySystem", "FerryTestSupport"]
        ),
        .testTarget(
            name: "FerryQueueTests",
            dependencies: ["FerryQueue", "FerrySystem", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "FerryTransportTests",
            dependencies: [
                "FerryTransport", "FerryReceiver", "FerrySystem", "FerryTestSupport",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "FerryDaemonTests",
            dependencies: ["CFerrySystem", "FerryConfig", "FerryDaemon", "FerryQueue", "FerryS3", "FerryTestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "FerryIntegrationTests",
            dependencies: [
                "FerryControl",
                "FerryTestSupport",
                "FerryReceiver",
                "FerryQueue",
            ]
        ),
    ]
)
