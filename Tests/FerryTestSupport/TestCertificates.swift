import Foundation
import NIOSSL

/// A certificate authority and a server certificate for 127.0.0.1, made with the `openssl` command
/// in a temporary directory, for tests of TLS verification.
public struct TestCertificates {
    public let directory: String
    /// The CA certificate (PEM) a client must trust.
    public var caFile: String { directory + "/ca.pem" }
    public var serverCertificate: String { directory + "/server.pem" }
    public var serverKey: String { directory + "/server.key" }

    public init(in directory: String) throws {
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let config = directory + "/san.cnf"
        try "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n".write(toFile: config, atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", directory + "/ca.key", "-out", caFile,
             "-days", "2", "-subj", "/CN=Ferry Test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", serverKey, "-out", directory + "/server.csr",
             "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", directory + "/server.csr", "-CA", caFile, "-CAkey", directory + "/ca.key",
             "-CAcreateserial", "-out", serverCertificate, "-days", "2", "-extfile", config],
        ]
        for arguments in steps {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl"] + arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw TestFailure("openssl \(arguments.first ?? "") failed (is the openssl command installed?)")
            }
        }
    }

    /// The server side, for ``FerryReceiver/Receiver``.
    public func serverConfiguration() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(serverCertificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: serverKey, format: .pem)))
    }
}
