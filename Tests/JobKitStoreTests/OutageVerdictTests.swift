import Foundation
import JobKitTestSupport
import NIOCore
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitDelivery

/// Issue 63: a run fails (69) when a provider fails, not when a device is throttled; the reminders truly lost (a
/// window that closed with devices not reached) are recorded, counted and logged.
@Suite struct OutageVerdictTests {
    // MARK: The rule

    @Test func theThresholdNeedsBothTheShareAndTheDevices() {
        let rule = OutageThreshold.default
        #expect(!rule.isOutage(devices: 9, attempts: 20))  // fewer than 10, and not all of them
        #expect(rule.isOutage(devices: 9, attempts: 9))  // all of them: an outage whatever the count (issue 77)
        #expect(rule.isOutage(devices: 10, attempts: 10))
        #expect(!rule.isOutage(devices: 10, attempts: 1_000))  // 1 %: not more than the share
        #expect(rule.isOutage(devices: 11, attempts: 1_000))
        #expect(!rule.isOutage(devices: 50, attempts: 10_000))
        #expect(OutageThreshold(sharePercent: 0, minDevices: 1).isOutage(devices: 1, attempts: 1_000_000))
        #expect(!OutageThreshold(sharePercent: 100, minDevices: 1).isOutage(devices: 5, attempts: 6))
        #expect(OutageThreshold(sharePercent: 100, minDevices: 1).isOutage(devices: 5, attempts: 5))
    }

    @Test func onlyTheProvidersOwnAnswersMakeAnOutage() {
        var pending: [PendingDevices] = []
        for _ in 0..<50 { PendingDevices.add(provider: .apns, reason: "TooManyRequests", scope: .device, to: &pending) }
        for _ in 0..<3 {
            PendingDevices.add(provider: .apns, reason: "ServiceUnavailable", scope: .provider, to: &pending)
        }
        for _ in 0..<12 { PendingDevices.add(provider: .fcm, reason: "UNAVAILABLE", scope: .provider, to: &pending) }
        let attempts: [DeliveryChannel: Int] = [.apns: 60, .fcm: 100]
        let troubles = ProviderTrouble.judge([], pending: pending, attempts: attempts, threshold: .default)
        // 50 throttled and 3 answered 503 of 60: no outage of APNs; 12 of 100 answered 503: FCM's.
        #expect(
            troubles == [ProviderTrouble(provider: .fcm, cause: .unavailable, devices: 12, reasons: ["UNAVAILABLE"])])
        #expect(ProviderTrouble.exitCode(troubles) == 69)
        // Troubles the run already has (no connection, credentials) stay, whatever the share.
        let refused = ProviderTrouble(
            provider: .apns, cause: .credentials, devices: 1, reasons: ["InvalidProviderToken"])
        #expect(
            ProviderTrouble.judge([refused], pending: [], attempts: attempts, threshold: .default) == [refused])
        // Reasons are bounded per provider: a provider writing a new text into every answer adds one "other".
        var many: [PendingDevices] = []
        for n in 0..<20 { PendingDevices.add(provider: .fcm, reason: "HTTP 5\(n)", scope: .provider, to: &many) }
        #expect(many.count == PendingDevices.reasonsKept + 1)
        #expect(
            many.last?.reason == PendingDevices.otherReasons && many.last?.devices == 20 - PendingDevices.reasonsKept)
    }

    /// FCM's QUOTA_EXCEEDED is about the project or one device; its `QuotaFailure` detail says which. Without
    /// one, the answer counts as the project's (the safe side: every send to FCM pauses).
    @Test func fcmQuotaAnswersAreToldApartByTheirQuotaFailure() {
        func answer(_ violations: String?) -> ProviderVerdict {
            var details =
                #"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}"#
            if let violations {
                details += #",{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[\#(violations)]}"#
            }
            return FCM.classify(
                status: 429, headers: ["retry-after": "5"],
                body: ByteBuffer(
                    string:
                        #"{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[\#(details)]}}"#
                ))
        }
        let device = answer(#"{"subject":"device","description":"Device message rate exceeded."}"#)
        #expect(device.scope == .device && !device.pausesProvider && device.retryAfter == 5)
        #expect(device.reason == "QUOTA_EXCEEDED (device)")
        let project = answer(#"{"subject":"project:p","description":"Quota exceeded for the project."}"#)
        #expect(project.scope == .provider && project.pausesProvider)
        let unknown = answer(nil)
        #expect(unknown.scope == .provider && unknown.pausesProvider)
        let mixed = answer(#"{"subject":"device"},{"subject":"project:p"}"#)
        #expect(mixed.pausesProvider)
    }

    // MARK: Runs

    func delivery(_ harness: DeliveryHarness) -> DeliveryConfiguration {
        var delivery = harness.delivery()
        // A throttle's Retry-After (1 s) is past this budget: the device is left for the next run at once.
        delivery.retry.budget = .milliseconds(500)
        return delivery
    }

    /// Five devices APNs always throttles, among eleven: the run exits 0, counts them pending by reason, and
    /// the next run retries them. (Every such run exited 69, and cron mailed every 15 minutes.)
    @Test(arguments: Backend.allCases)
    func onlyThrottledDevicesLeaveTheRunSucceeding(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "7407", kind: .throttle, retryAfter: 1)]
        }
        defer { Task { await harness.stop() } }
        for n in 0..<11 {
            try await harness.addUser("u\(n)", devices: [(hexToken(n < 5 ? "7407" : "aa", n), .apns, .ios)])
        }
        let logs = CapturedLogs()
        let first = try await harness.run(
            at: "2026-11-21T20:00:00Z", sender: try await harness.sender(delivery(harness)), logger: logs.logger)
        #expect(first.failure == nil, "\(first.text)")
        #expect(first.troubles.isEmpty)
        #expect(first.sent == 6 && first.retry == 5, "\(first.text)")
        #expect(
            first.pendingRetry == [
                PendingDevices(provider: .apns, reason: "TooManyRequests", scope: .device, devices: 5)
            ])
        #expect(first.text.contains("pending[apns TooManyRequests=5]"), "\(first.text)")
        // One line for the five, a warning, not an error.
        let lines = logs.lines.filter { $0.contains("pending retry") }
        #expect(lines.count == 1 && lines[0].hasPrefix("warning"), "\(lines)")
        #expect(!logs.lines.contains { $0.hasPrefix("error") }, "\(logs.lines)")
        // The metrics say so: a pending gauge, no device left to an outage, exit 0.
        let metrics = MetricsFile.text(
            first, job: "diary-reminder", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil)
        #expect(
            metrics.contains(
                #"diary_push_run_devices_pending_retry{job="diary-reminder",provider="apns",reason="TooManyRequests"} 5"#
            ),
            "\(metrics)")
        #expect(
            metrics.contains(
                #"diary_push_run_devices_left{job="diary-reminder",provider="apns",cause="unavailable"} 0"#))
        let requests = harness.simulator.stats.requests
        let second = try await harness.run(
            at: "2026-11-21T20:15:00Z", sender: try await harness.sender(delivery(harness)))
        #expect(second.takenOver == 5 && second.failure == nil, "\(second.text)")
        #expect(harness.simulator.stats.requests == requests + 5, "the throttled devices were retried")
    }

    /// A provider answering 503 to 12 of 100 devices is down (12 % and at least 10): 69. To 5 of 100, it is not:
    /// the five are retried quietly.
    @Test(arguments: Backend.allCases)
    func transientAnswersAboveTheShareAreAnOutage(_ backend: Backend) async throws {
        for (failing, outage) in [(12, true), (5, false)] {
            let harness = try await DeliveryHarness.start(backend) {
                $0.rules = [SimulatorRule(prefix: "fa11", kind: .flaky, times: 1_000)]
            }
            for n in 0..<100 {
                try await harness.addUser("u\(n)", devices: [("\(n < failing ? "fa11" : "ok")-\(n)", .fcm, .android)])
            }
            let summary = try await harness.run(
                at: "2026-11-21T20:00:00Z", sender: try await harness.sender(delivery(harness)))
            await harness.stop()
            #expect(summary.retry == failing && summary.sent == 100 - failing, "\(summary.text)")
            if outage {
                #expect(summary.failure?.exitCode == 69, "\(summary.text)")
                #expect(summary.troubles.map(\.devices) == [failing])
                #expect(summary.failure?.message.contains("FCM was unavailable: 12 devices") == true)
            } else {
                #expect(summary.failure == nil, "\(summary.text)")
                #expect(summary.pendingRetry.map(\.devices) == [failing])
            }
        }
    }

    /// One device over its FCM message rate waits alone: the provider is not paused for the others.
    @Test(arguments: Backend.allCases)
    func anFCMDeviceQuotaDoesNotPauseTheOtherDevices(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "busy", kind: .throttle, retryAfter: 30)]
        }
        defer { Task { await harness.stop() } }
        try await harness.addUser("busy", devices: [("busy-phone", .fcm, .android)])
        for n in 0..<6 { try await harness.addUser("u\(n)", devices: [("phone-\(n)", .fcm, .android)]) }
        let logs = CapturedLogs()
        let summary = try await harness.run(
            at: "2026-11-21T20:00:00Z", sender: try await harness.sender(delivery(harness)), logger: logs.logger)
        #expect(summary.sent == 6 && summary.retry == 1 && summary.failure == nil, "\(summary.text)")
        #expect(summary.pendingRetry.map(\.reason) == ["QUOTA_EXCEEDED (device)"])
        #expect(!logs.lines.contains { $0.contains("pausing every send") }, "\(logs.lines)")
    }

    /// The same line for the hook and the janitor's probes: a throttled device leaves the warning (or the probe)
    /// for later and is no provider's trouble; a provider answering 503 to everything is one.
    @Test(arguments: Backend.allCases)
    func theHookAndTheProbesDrawTheSameLine(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [
                SimulatorRule(prefix: "busy", kind: .throttle, retryAfter: 30),
                SimulatorRule(prefix: "down", kind: .flaky, times: 1_000),
            ]
        }
        defer { Task { await harness.stop() } }
        let store = harness.db.store
        let configuration = delivery(harness)
        for (user, token) in [("throttled", "busy-phone"), ("failing", "down-phone")] {
            try await store.upsertUser(UserProfile(id: user, timezone: "UTC"), now: 0)
            _ = try await store.register(
                DeviceRegistration(userID: user, token: token, provider: .fcm, platform: .android),
                now: instant("2026-11-15T00:00:00Z"))
        }
        var outage = configuration
        outage.outage = OutageThreshold(sharePercent: 0, minDevices: 1)
        for (user, delivery, fails) in [("throttled", configuration, false), ("failing", outage, true)] {
            let hook = ContentLimitHook(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
                try await PushSender(configuration: delivery, credentials: store, logger: quietLogger)
            }
            let summary = try await hook.handle(
                try ContentLimitEvent(userID: user, used: 30, limit: 30, period: .monthly),
                options: .init(now: instant("2026-11-21T12:00:00Z")))
            #expect(summary.action == .retry, "\(user): \(summary.text)")
            #expect(summary.troubles.isEmpty != fails, "\(user): \(summary.troubles)")
            #expect(summary.pendingRetry.map(\.devices) == [1], "\(user): \(summary.pendingRetry)")
        }
        var options = JanitorOptions(now: instant("2026-12-30T12:00:00Z"))
        options.probe = true
        var probing = configuration
        probing.fcm?.validateOnly = true
        let probes = probing
        let janitor = TokenJanitor(store: store, logger: quietLogger) { () async throws(JobError) -> any Sender in
            try await PushSender(configuration: probes, credentials: store, logger: quietLogger)
        }
        let probed = try await janitor.run(options)
        #expect(probed.probed == 2, "\(probed.text)")
        // One throttled, one 503: two of two pending, but 503s at one device are under the default's 10.
        #expect(probed.troubles.isEmpty, "\(probed.troubles)")
        #expect(
            Set(probed.pendingRetry.map(\.reason)) == ["QUOTA_EXCEEDED (device)", "UNAVAILABLE"],
            "\(probed.pendingRetry)")
    }

    // MARK: Reminders truly lost

    /// A device throttled until its window closes: the first run past the window's end ends the claim,
    /// records why, counts the device missed by provider and reason, logs one error line, and still exits 0 (its
    /// own work went well); the report counts the reminder missed; a later run does not count it again.
    @Test(arguments: Backend.allCases)
    func aWindowClosingUndeliveredIsRecordedAndCounted(_ backend: Backend) async throws {
        let harness = try await DeliveryHarness.start(backend) {
            $0.rules = [SimulatorRule(prefix: "7407", kind: .throttle, retryAfter: 1)]
        }
        defer { Task { await harness.stop() } }
        try await harness.addUser("stuck", devices: [(hexToken("7407", 1), .apns, .ios), ("ok-phone", .fcm, .android)])
        try await harness.addUser("fine", devices: [(hexToken("aa", 2), .apns, .ios)])
        // Claimed at 20:00 and taken over by each run in the window, the last at 20:45. The window closes at
        // 21:00; a run knows it has closed for a claim last taken over at 20:45 once it is 2 (early) + 60 (catch-up)
        // minutes later, whatever the user's reminder time: the 22:00 run.
        for at in ["20:00", "20:15", "20:30", "20:45", "21:00", "21:15", "21:30", "21:45"] {
            let run = try await harness.run(
                at: "2026-11-21T\(at):00Z", sender: try await harness.sender(delivery(harness)))
            #expect(run.remindersMissed == 0 && run.failure == nil, "\(at): \(run.text)")
        }
        let logs = CapturedLogs()
        let closing = try await harness.run(
            at: "2026-11-21T22:00:00Z", sender: try await harness.sender(delivery(harness)), logger: logs.logger)
        #expect(closing.failure == nil, "\(closing.text)")
        #expect(closing.remindersMissed == 1)
        #expect(closing.devicesMissed == [MissedDevices(provider: "apns", reason: "TooManyRequests", devices: 1)])
        #expect(closing.text.contains("reminders_missed=1 devices_missed=1[apns TooManyRequests=1]"), "\(closing.text)")
        let errors = logs.lines.filter { $0.hasPrefix("error") }
        #expect(errors.count == 1 && errors[0].contains("reminders missed"), "\(errors)")
        #expect(
            try await harness.db.strings(
                "SELECT status || ' ' || detail FROM notification_logs WHERE user_id = 'stuck'")
                == ["partial \(MissedReminders.detail)"])
        // The counter, carried from file to file.
        let file = MetricsFile(path: harness.db.directory.appendingPathComponent("m.prom").path)
        try file.write(
            MetricsFile.text(
                closing, job: "diary-reminder", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil,
                previousCounters: file.previousCounters()))
        let sample = #"diary_push_devices_missed_total{job="diary-reminder",provider="apns",reason="TooManyRequests"}"#
        #expect(try String(contentsOfFile: file.path, encoding: .utf8).contains("\(sample) 1"))
        try file.write(
            MetricsFile.text(
                closing, job: "diary-reminder", now: 0, exitCode: 0, durationSeconds: 1, previousLastSuccess: nil,
                previousCounters: file.previousCounters()))
        let text = try String(contentsOfFile: file.path, encoding: .utf8)
        #expect(text.contains("\(sample) 2") && text.contains("# TYPE diary_push_devices_missed_total counter"))
        // The next run finds nothing more to close.
        let later = try await harness.run(
            at: "2026-11-21T22:15:00Z", sender: try await harness.sender(delivery(harness)))
        #expect(later.remindersMissed == 0)
        // The health report counts the reminder missed.
        let end = instant("2026-11-22T00:00:00Z")
        let report = try await harness.db.store.healthReport(from: end - 86_400, to: end)
        #expect(
            report.volume.filter { $0.type == "diary_reminder" }.map { "\($0.claimed) \($0.sent) \($0.missed)" }
                == ["2 1 1"], "\(report.text)")
    }
}
