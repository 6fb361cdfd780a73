import Foundation
import JobKitTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// Measured case 6 of "Nothing lost": a request is resent only once its connection is known dead. A slow or
/// stalled server that still answers PINGs is waited for; resending after a plain timeout delivered the
/// reminder twice (15 s stall: 907 of 4,480 devices).
@Suite struct SlowOrDeadConnectionTests {
    func apnsNotifications(_ prefix: String, count: Int, from first: Int = 0) -> [OutgoingNotification] {
        (first..<(first + count)).map { i in
            OutgoingNotification(
                logID: nil,
                device: Device(
                    id: Int64(i), userID: "u\(i)", token: hexToken(prefix, i), provider: .apns, platform: .ios,
                    apnsEnvironment: .production),
                type: .diaryReminder, period: "2026-11-21", locale: "en", messageIndex: 0, title: "t", body: "b",
                expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
        }
    }

    @Test func aSlowAnswerIsWaitedForAndNotSentTwice() async throws {
        let harness = try await DeliveryHarness.start {
            $0.rules = [SimulatorRule(prefix: "5104", kind: .slow, delayMs: 2500)]
        }
        var delivery = harness.delivery(fcm: false)
        delivery.retry.requestTimeout = .seconds(2)  // answers come after 1.25 request timeouts; given up at 3
        let sender = try await harness.sender(delivery)
        let reports = await sender.send(apnsNotifications("5104", count: 5))
        await sender.shutdown()
        #expect(reports.map(\.outcome) == Array(repeating: .delivered, count: 5))
        #expect(reports.map(\.ambiguousAttempts) == Array(repeating: 0, count: 5))
        #expect(harness.simulator.accepted().count == 5)
        await harness.stop()
    }

    @Test func aStalledServerIsWaitedForAndNothingIsSentTwice() async throws {
        let harness = try await DeliveryHarness.start()
        var delivery = harness.delivery(fcm: false)
        // A PING after 2 s; dead after 4 s more; given up at 6 s. The stall lasts 3 s: past the request timeout
        // (the PING goes out), well short of the deadlines, with room for a machine the whole suite loads.
        delivery.retry.requestTimeout = .seconds(2)
        let sender = try await harness.sender(delivery)
        // Connected first (TLS, the provider token): on a loaded machine that alone can outlast the timeout this
        // test sets, so the warm-up is tried until it goes through; it is not what the test is about.
        var warmUp: [DeliveryOutcome] = []
        for attempt in 0..<5 where warmUp != [.delivered] {
            warmUp = await sender.send(apnsNotifications("ab", count: 1, from: 100 + attempt)).map(\.outcome)
        }
        #expect(warmUp == [.delivered])
        let warmUpAccepted = harness.simulator.accepted().count
        await harness.simulator.pause()
        let resume = Task {
            try await Task.sleep(for: .milliseconds(3000))
            await harness.simulator.resume()
        }
        let reports = await sender.send(apnsNotifications("ab", count: 5, from: 1))
        try await resume.value
        await sender.shutdown()
        #expect(reports.map(\.outcome) == Array(repeating: .delivered, count: 5))
        let tokens = harness.simulator.accepted().dropFirst(warmUpAccepted).map(\.token)
        #expect(tokens.count == 5 && Set(tokens).count == 5, "sent twice: \(tokens.count - Set(tokens).count)")
        await harness.stop()
    }
}
