import FerryTransport
import Testing

@Suite("Content-Disposition for a request's file")
struct ContentDispositionTests {
    @Test("plain ASCII names are quoted as they are; others get an ASCII stand-in and the exact name in filename*")
    func names() {
        let table: [(String, String)] = [
            ("clip.mp4", #"attachment; filename="clip.mp4""#),
            ("two words (1).txt", #"attachment; filename="two words (1).txt""#),
            ("100%.log", #"attachment; filename="100%.log""#),
            ("café.jpg", #"attachment; filename="caf__.jpg"; filename*=UTF-8''caf%C3%A9.jpg"#),
            (#"say "hi".txt"#, #"attachment; filename="say _hi_.txt"; filename*=UTF-8''say%20%22hi%22.txt"#),
            (#"back\slash"#, #"attachment; filename="back_slash"; filename*=UTF-8''back%5Cslash"#),
            ("line\r\nbreak", #"attachment; filename="line__break"; filename*=UTF-8''line%0D%0Abreak"#),
            ("tab\there", #"attachment; filename="tab_here"; filename*=UTF-8''tab%09here"#),
            ("日本.txt", #"attachment; filename="______.txt"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.txt"#),
            ("", #"attachment; filename="""#),
        ]
        for (name, expected) in table {
            let header = ContentDisposition.attachment(filename: name)
            #expect(header == expected, "\(name)")
            #expect(!header.utf8.contains { $0 < 0x20 || $0 >= 0x7F }, "only printable ASCII in the header: \(name)")
        }
    }
}
