import FerrySystem
import Foundation
import Synchronization

/// Faults chosen per request by probability or schedule, from a seed: the `ferry-receiver --fault`
/// options, usable as a ``Receiver`` plan by tests and benchmarks too.
///
/// A rule is written `KIND[:OPTION[,OPTION…]]@WHEN` (or `…=WHEN`, the last `=` separating):
///
///     500@0.05                      answer 500 after reading the body, for 5 % of requests
///     503:retry-after=1@0.05        503 with Retry-After: 1
///     429:retry-after=date:2@5%     429 with an HTTP-date 2 s ahead
///     reset@0.05                    TCP RST at a random point of the body
///     reset:at=64k@#0,3             RST after 64 KiB, for requests 0 and 3 (0-based)
///     slow:rate=128k@0.02           read at 128 KiB/s, then store and answer 201
///     partial:at=50%,status=200@every=20   answer 200 after half the body (nothing stored)
///
/// Schedules (`#N,…`, `every=N`) are checked first, in order; then one uniform draw per request
/// picks at most one probability rule (their probabilities add up; the rest are stored normally).
public final class FaultPlan: Sendable {
    public let rules: [FaultRule]
    private let random: Mutex<SplitMix64>

    public init(rules: [FaultRule], seed: UInt64) {
        self.rules = rules
        random = Mutex(SplitMix64(seed: seed))
    }

    /// Parses `--fault` arguments.
    public convenience init(specifications: [String], seed: UInt64) throws {
        self.init(rules: try specifications.map(FaultRule.init(parsing:)), seed: seed)
        let total = rules.reduce(0.0) { sum, rule in
            if case .probability(let p) = rule.when { return sum + p }
            return sum
        }
        if total > 1.000001 { throw FaultSpecificationError("the fault probabilities add up to \(total), more than 1") }
    }

    /// Decides what to do with one request: the rule's kind (`nil`: store normally) and the action.
    public func decide(_ info: RequestInfo) -> (kind: String?, action: ReceiverAction) {
        let length = info.header("Content-Length").flatMap { Int64($0) } ?? 0
        return random.withLock { random in
            let draw = random.nextDouble()
            var chosen: FaultRule?
            for rule in rules {
                switch rule.when {
                case .requests(let indices) where indices.contains(info.index): chosen = rule
                case .every(let n) where n > 0 && (info.index + 1) % n == 0: chosen = rule
                default: break
                }
                if chosen != nil { break }
            }
            if chosen == nil {
                var cumulative = 0.0
                for rule in rules {
                    guard case .probability(let p) = rule.when else { continue }
                    cumulative += p
                    if draw < cumulative {
                        chosen = rule
                        break
                    }
                }
            }
            guard let rule = chosen else { return (nil, .store()) }
            return (rule.label, rule.action(contentLength: length, random: &random))
        }
    }

    /// The plan closure for ``Receiver/start(host:port:directory:group:plan:discard:keepFiles:manifest:tls:logger:)``;
    /// `observe` sees each decision (to log or count it).
    public func plan(observe: @escaping @Sendable (RequestInfo, String?) -> Void = { _, _ in }) -> @Sendable (RequestInfo) -> ReceiverAction {
        { info in
            let (kind, action) = self.decide(info)
            observe(info, kind)
            return action
        }
    }
}

public struct FaultSpecificationError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// One `--fault` rule.
public struct FaultRule: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Answer this status after reading the body (or at once, `early`), storing nothing.
        case status(Int, retryAfter: RetryAfter?, early: Bool)
        case reset(at: CutOff)
        case disconnect(at: CutOff)
        case stall(at: CutOff)
        case stallAfterBody(store: Bool)
        case close(store: Bool)
        case slow(bytesPerSecond: Int)
        case partial(at: CutOff, status: Int)
    }

    public enum RetryAfter: Sendable, Equatable {
        case seconds(Int)
        /// An HTTP-date this many seconds ahead.
        case date(Int)
    }

    /// Where in the body a fault strikes.
    public enum CutOff: Sendable, Equatable {
        case bytes(Int64)
        /// A fraction of `Content-Length`.
        case fraction(Double)
        /// Uniformly between 1 % and 99 % of `Content-Length`.
        case random
    }

    public enum When: Sendable, Equatable {
        case probability(Double)
        case requests(Set<Int>)
        case every(Int)
    }

    public var kind: Kind
    public var when: When
    /// The rule's name in counts and logs: `500`, `503+retry-after`, `429+retry-after-date`,
    /// `500+early`, `reset`, `close+store`, `slow`…
    public var label: String

    public init(parsing text: String) throws {
        let separator = text.lastIndex(of: "@") ?? text.lastIndex(of: "=")
        guard let separator else { throw FaultSpecificationError("\(text): expected KIND[:OPTIONS]@WHEN, e.g. 503:retry-after=1@0.05") }
        let spec = String(text[..<separator])
        let whenText = String(text[text.index(after: separator)...])
        when = try Self.parseWhen(whenText, in: text)
        let colon = spec.firstIndex(of: ":")
        let name = String(spec[..<(colon ?? spec.endIndex)]).lowercased()
        var options: [String: String] = [:]
        if let colon {
            for option in spec[spec.index(after: colon)...].split(separator: ",") {
                let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
                options[pair[0].lowercased()] = pair.count > 1 ? pair[1] : ""
            }
        }
        func take(_ key: String) -> String? { options.removeValue(forKey: key) }
        func cutOff() throws -> CutOff { try take("at").map { try Self.parseCutOff($0, in: text) } ?? .random }
        func flag(_ key: String) -> Bool { take(key) != nil }
        switch name {
        case let code where code.count == 3 && Int(code).map({ (100...599).contains($0) }) == true:
            var retryAfter: RetryAfter?
            if let value = take("retry-after") {
                if value.hasPrefix("date:"), let seconds = Int(value.dropFirst(5)) {
                    retryAfter = .date(seconds)
                } else if let seconds = Int(value) {
                    retryAfter = .seconds(seconds)
                } else {
                    throw FaultSpecificationError("\(text): retry-after must be SECONDS or date:SECONDS")
                }
            }
            let early = flag("early")
            kind = .status(Int(code)!, retryAfter: retryAfter, early: early)
            switch retryAfter {
            case .seconds: label = code + "+retry-after"
            case .date: label = code + "+retry-after-date"
            case nil: label = code
            }
            if early { label += "+early" }
        case "reset": kind = .reset(at: try cutOff()); label = name
        case "disconnect": kind = .disconnect(at: try cutOff()); label = name
        case "stall": kind = .stall(at: try cutOff()); label = name
        case "stall-after-body":
            let store = flag("store")
            kind = .stallAfterBody(store: store); label = name + (store ? "+store" : "")
        case "close":
            let store = flag("store")
            kind = .close(store: store); label = name + (store ? "+store" : "")
        case "slow":
            let rate = try take("rate").map { try Self.parseBytes($0, in: text) } ?? 256 * 1024
            guard rate > 0 else { throw FaultSpecificationError("\(text): rate must be positive") }
            kind = .slow(bytesPerSecond: Int(rate)); label = name
        case "partial":
            let at = try cutOff()
            let status = try take("status").map { value -> Int in
                guard let code = Int(value), (200..<300).contains(code) else {
                    throw FaultSpecificationError("\(text): partial answers a 2xx status")
                }
                return code
            } ?? 200
            kind = .partial(at: at, status: status); label = name
        default:
            throw FaultSpecificationError("\(text): unknown fault \"\(name)\" (a status such as 503, reset, disconnect, stall, stall-after-body, close, slow, partial)")
        }
        if let unknown = options.keys.sorted().first {
            throw FaultSpecificationError("\(text): unknown option \"\(unknown)\" for \(name)")
        }
    }

    func action(contentLength: Int64, random: inout SplitMix64) -> ReceiverAction {
        func bytes(_ cut: CutOff) -> Int64 {
            switch cut {
            case .bytes(let n): n
            case .fraction(let f): Int64(Double(contentLength) * f)
            case .random: Int64(Double(contentLength) * (0.01 + 0.98 * random.nextDouble()))
            }
        }
        switch kind {
        case .status(let code, let retryAfter, let early):
            var headers: [HeaderField] = []
            switch retryAfter {
            case .seconds(let s): headers.append(HeaderField(name: "Retry-After", value: String(s)))
            case .date(let s): headers.append(HeaderField(name: "Retry-After", value: Self.httpDate(Date().addingTimeInterval(Double(s)))))
            case nil: break
            }
            let body = "{\"error\":\"planned \(code)\"}"
            return early ? .respondEarly(status: code, headers: headers, body: body) : .respond(status: code, headers: headers, body: body)
        case .reset(let at): return .reset(afterBytes: bytes(at))
        case .disconnect(let at): return .disconnect(afterBytes: bytes(at))
        case .stall(let at): return .stall(afterBytes: bytes(at))
        case .stallAfterBody(let store): return .stallAfterBody(store: store)
        case .close(let store): return .closeAfterBody(store: store)
        case .slow(let rate): return .slowRead(bytesPerSecond: rate)
        case .partial(let at, let status): return .acceptPartial(afterBytes: bytes(at), status: status)
        }
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    static func parseWhen(_ text: String, in rule: String) throws -> When {
        if text.hasPrefix("#") {
            let indices = text.dropFirst().split(separator: ",").compactMap { Int($0) }
            guard !indices.isEmpty else { throw FaultSpecificationError("\(rule): #N[,M…] lists 0-based request numbers") }
            return .requests(Set(indices))
        }
        if text.hasPrefix("every=") {
            guard let n = Int(text.dropFirst(6)), n > 0 else { throw FaultSpecificationError("\(rule): every=N needs N ≥ 1") }
            return .every(n)
        }
        let percent = text.hasSuffix("%")
        guard let value = Double(percent ? String(text.dropLast()) : text) else {
            throw FaultSpecificationError("\(rule): \"\(text)\" is not a probability (0.05, 5%), #N,… or every=N")
        }
        let p = percent ? value / 100 : value
        guard (0...1).contains(p) else { throw FaultSpecificationError("\(rule): a probability is between 0 and 1") }
        return .probability(p)
    }

    static func parseCutOff(_ text: String, in rule: String) throws -> CutOff {
        if text == "random" { return .random }
        if text.hasSuffix("%") {
            guard let value = Double(text.dropLast()), (0...100).contains(value) else {
                throw FaultSpecificationError("\(rule): at=\(text) is not a percentage")
            }
            return .fraction(value / 100)
        }
        return .bytes(try parseBytes(text, in: rule))
    }

    /// `123`, `64k`, `8m` (KiB, MiB).
    static func parseBytes(_ text: String, in rule: String) throws -> Int64 {
        let lower = text.lowercased()
        let multiplier: Int64 = lower.hasSuffix("k") ? 1024 : lower.hasSuffix("m") ? 1 << 20 : 1
        let digits = multiplier == 1 ? lower : String(lower.dropLast())
        guard let value = Int64(digits), value >= 0 else { throw FaultSpecificationError("\(rule): \"\(text)\" is not a byte count") }
        return value * multiplier
    }
}
