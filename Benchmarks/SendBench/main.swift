// send-bench: sends N notifications through JobKit's PushSender to a running push-simulator and prints
// one JSON object: rate, CPU time per notification, peak RSS. It also writes the exact APNs request it
// sent (headers and body) so that h2load can send the same requests to the same server.
//
//   send-bench --simulator demo/simulator.json --count 20000 [--fcm-share 0.4] [--batch 2000] [--emit DIR]
//              [--apns-port N]   (send the APNs requests to another server on loopback, e.g. nghttpd, with the
//                                 simulator's certificate and keys)
//              [--streams N]     (streams in flight per connection; default: the sender's own)
//              [--one-token]     (every APNs notification to the same device: a static-file server answers 200 to one path)
import Foundation
import JobKit
import JobKitDelivery
import JobKitSQLite
import Logging

#if canImport(Glibc)
    import Glibc
#endif

func argument(_ name: String) -> String? {
    guard let index = CommandLine.arguments.firstIndex(of: name), index + 1 < CommandLine.arguments.count else {
        return nil
    }
    return CommandLine.arguments[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("send-bench: \(message)\n".utf8))
    exit(64)
}

guard let readyFile = argument("--simulator"),
    let ready = try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: readyFile)))
        as? [String: String],
    let port = ready["port"].flatMap(Int.init)
else { fail("--simulator FILE: the simulator's ready line") }
let count = argument("--count").flatMap(Int.init) ?? 20_000
let fcmShare = argument("--fcm-share").flatMap(Double.init) ?? 0
let batch = argument("--batch").flatMap(Int.init) ?? 2_000
let oneToken = CommandLine.arguments.contains("--one-token")

let endpoint = Endpoint(host: "127.0.0.1", port: port)
var delivery = DeliveryConfiguration()
var apns = APNsConfiguration(
    keyFile: ready["apns_key_file"]!, keyID: ready["apns_key_id"]!, teamID: ready["apns_team_id"]!,
    topic: ready["apns_topic"]!)
apns.productionEndpoint =
    argument("--apns-port").flatMap(Int.init).map { Endpoint(host: "127.0.0.1", port: $0) } ?? endpoint
delivery.apns = apns
var fcm = FCMConfiguration(serviceAccountFile: ready["fcm_service_account_file"]!)
fcm.endpoint = endpoint
delivery.fcm = fcm
delivery.tls.additionalCAFile = ready["ca_file"]
if let streams = argument("--streams").flatMap(Int.init) { delivery.retry.streamsPerConnection = streams }

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("send-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
let store = try SQLiteStore.open(path: directory.appendingPathComponent("credentials.sqlite").path, mode: .create)
var logger = Logger(label: "send-bench")
logger.logLevel = .warning
let sender = try await PushSender(configuration: delivery, credentials: store, logger: logger)

let body = "What made you smile today? Take a minute to write it down before the day slips away."
let expiresAt = Int64(Date().timeIntervalSince1970) + 3600
let notifications: [OutgoingNotification] = (0..<count).map { i in
    let isFCM = Double(i % 1000) < fcmShare * 1000
    let device =
        isFCM
        ? Device(
            id: Int64(i), userID: "u\(i)", token: "bench-fcm-token-\(i)", provider: .fcm, platform: .android,
            apnsEnvironment: nil)
        : Device(
            id: Int64(i), userID: "u\(i)", token: String(format: "%064x", oneToken ? 1 : i + 1), provider: .apns,
            platform: .ios,
            apnsEnvironment: .production)
    return OutgoingNotification(
        logID: nil, device: device, type: .diaryReminder, period: "2026-11-21", locale: "en",
        messageIndex: 0, title: "How was your day?", body: body, expiresAt: expiresAt)
}

// Warm up: connections, TLS, credentials (not measured, as in a long run).
_ = await sender.send(Array(notifications.prefix(10)))

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

let cpuBefore = cpuSeconds()
let start = ContinuousClock.now
var delivered = 0
var index = 0
// Two batches in delivery at a time, as diary-reminder's DeliveryPipeline keeps two pages: a batch starts
// before the answers of the one before it are collected, so the connection never drains between batches.
var inFlight: Task<Int, Never>?
while index < notifications.count {
    let slice = Array(notifications[index..<min(index + batch, notifications.count)])
    let next = Task { await sender.send(slice).filter { $0.outcome == .delivered }.count }
    if let inFlight { delivered += await inFlight.value }
    inFlight = next
    index += batch
}
if let inFlight { delivered += await inFlight.value }
let elapsed = ContinuousClock.now - start
let cpu = cpuSeconds() - cpuBefore
await sender.shutdown()
var usage = rusage()
getrusage(RUSAGE_SELF.rawValue, &usage)
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18

if let emit = argument("--emit") {
    // The request h2load replays: the same path shape, headers (with the cached provider token) and body.
    let jwt = try await store.cachedCredential(key: "apns:\(apns.teamID):\(apns.keyID)")?.token ?? ""
    let payload =
        "{\"aps\":{\"alert\":{\"body\":\"\(body)\",\"title\":\"How was your day?\"},\"badge\":1,\"sound\":\"default\",\"thread-id\":\"diary_reminder\"},\"link\":\"diary://entries/new?date=2026-11-21\",\"period\":\"2026-11-21\",\"type\":\"diary_reminder\"}"
    try payload.write(toFile: "\(emit)/body.json", atomically: true, encoding: .utf8)
    let headers = [
        "authorization: bearer \(jwt)", "apns-push-type: alert", "apns-priority: 10", "apns-topic: \(apns.topic)",
        "apns-expiration: \(expiresAt)", "apns-collapse-id: diary_reminder:2026-11-21",
        "content-type: application/json",
    ]
    try headers.joined(separator: "\n").write(toFile: "\(emit)/headers.txt", atomically: true, encoding: .utf8)
    try "/3/device/\(String(format: "%064x", 1))".write(toFile: "\(emit)/path.txt", atomically: true, encoding: .utf8)
}
try? FileManager.default.removeItem(at: directory)

let result: [String: Any] = [
    "notifications": count, "delivered": delivered, "seconds": (seconds * 1000).rounded() / 1000,
    "per_second": Int(Double(count) / seconds), "cpu_seconds": (cpu * 1000).rounded() / 1000,
    "cpu_us_per_notification": Int(cpu / Double(count) * 1e6), "peak_rss_mb": Int(usage.ru_maxrss / 1024),
    "fcm_share": fcmShare, "batch": batch,
]
print(String(decoding: try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys]), as: UTF8.self))
exit(delivered == count ? 0 : 1)
