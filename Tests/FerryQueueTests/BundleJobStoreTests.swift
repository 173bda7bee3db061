@testable import FerryQueue
import Foundation
import Testing

@Suite("Bundle jobs in the queue")
struct BundleJobStoreTests {
    static let files = [BundleFile(name: Array("a \"q\".txt".utf8), size: 3), BundleFile(name: [0x62, 0xFF], size: 4)]

    @Test("A bundle is one job with its files in order; a file job has none")
    func members() async throws {
        let queue = try TestQueue()
        var bundle = file("scan-1", inode: 7, size: 7)
        bundle.bundleFiles = Self.files
        let created = try await queue.store.enqueue([bundle, file("single.txt", inode: 8)], now: Date(), makeBoundary: boundary)
        #expect(created.count == 2)
        let job = try #require(created.first { $0.relativePath == Array("scan-1".utf8) })
        #expect(job.kind == .bundle)
        let members = try await queue.store.bundleMembers(of: job)
        #expect(members.map(\.name) == Self.files.map(\.name))
        #expect(members.map(\.size) == [3, 4])
        #expect(members.map(\.position) == [0, 1])
        #expect(members[1].shownName == "b\\xFF")
        let single = try #require(created.first { $0.relativePath == Array("single.txt".utf8) })
        #expect(single.kind == .file)
        #expect(try await queue.store.bundleMembers(of: single).isEmpty)
        // Read back from the database, the kind survives.
        let reread = try #require(try await queue.store.job(id: job.id))
        #expect(reread.kind == .bundle)
    }

    @Test("A superseded bundle's successor is a bundle with the new files, on the first version's max_age clock")
    func supersede() async throws {
        let queue = try TestQueue()
        var bundle = file("scan-2", inode: 9, size: 7)
        bundle.bundleFiles = Self.files
        let queued = Date(timeIntervalSince1970: 1_800_000_000)
        let job = try #require(try await queue.store.enqueue([bundle], now: queued, makeBoundary: boundary).first)
        let newFiles = Self.files + [BundleFile(name: Array("c".utf8), size: 1)]
        let later = queued.addingTimeInterval(3600)
        let successor = try await queue.store.supersede(
            job, by: identity(9, size: 8, mtime: 2_000), now: later, notBefore: later, boundary: "b2", bundleFiles: newFiles)
        #expect(successor.kind == .bundle)
        #expect(successor.ageStart == queued, "the max_age clock goes on from the first version's")
        #expect(try await queue.store.job(id: successor.id)?.ageStart == queued)
        #expect(try await queue.store.bundleMembers(of: successor).map(\.name) == newFiles.map(\.name))
        let old = try #require(try await queue.store.job(id: job.id))
        #expect(old.state == .superseded)
        #expect(old.lastError?.hasPrefix("the bundle changed") == true)
    }

    @Test("The field sidecar's version is kept with an attempt's outcome")
    func sidecarVersion() async throws {
        let queue = try TestQueue()
        var job = try #require(try await queue.store.enqueue([file("photo.jpg", inode: 3)], now: Date(), makeBoundary: boundary).first)
        job.state = .uploading
        job.fieldsSidecar = identity(4, size: 20, mtime: 5)
        let finished = try await queue.store.finish(
            job, startedAt: Date(), now: Date(), bytesSent: 10, transition: .failed(error: "x", status: 400, body: nil, contentType: nil))
        #expect(finished.fieldsSidecar == identity(4, size: 20, mtime: 5))
        let reread = try #require(try await queue.store.job(id: job.id))
        #expect(reread.fieldsSidecar == identity(4, size: 20, mtime: 5))
    }
}
