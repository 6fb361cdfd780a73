import Foundation
import Logging
import NIOSSL

/// Everything needed to deliver for real.
package struct DeliveryConfiguration: Sendable {
    package var apns: APNsConfiguration?
    package var fcm: FCMConfiguration?
    package var tls = TLSSettings()
    package var retry = RetryPolicy()
    package var links = DeepLinks()
    /// What an iOS notification does to the app icon's badge, through APNs or FCM.
    package var badge = AppBadge(ConfigKey.iosBadge.defaultValue!)!
    /// The clock of credentials (JWT `iat`, token expiry): the real clock, which the providers share.
    /// Scheduling uses the run's `now` instead.
    package var credentialClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    /// The clock of the retry budget and of the waits between attempts (``RetryPolicy``).
    package var retryClock: any RetryClock = SystemRetryClock()
    /// The backoff's jitter, a factor within 0.5…1.0.
    package var retryJitter: @Sendable () -> Double = { Double.random(in: 0.5...1.0) }
    /// Where devices left pending by a provider's own transient answers make an outage (exit 69).
    package var outage = OutageThreshold.default
    /// When a dead-token answer that can also mean a misconfiguration is believed (``DeadTokenGuard``).
    package var deadTokenGuard = DeadTokenGuard.default

    package init() {}
}

extension DeliveryConfiguration {
    /// Reads and parses every configured key file, so that a bad one is reported before anything is opened
    /// or written.
    package func checkFiles() async throws(JobError) {
        if let apns { _ = try await ProviderTokens.apnsKey(apns) }
        if let fcm {
            _ = try await ProviderTokens.serviceAccountKey(try ServiceAccount.load(path: fcm.serviceAccountFile))
        }
        _ = try tls.makeContext()
    }
}

/// Delivers through APNs and FCM, routing each device to its provider. Devices of a provider with no
/// credentials configured are not deliverable (the run skips them before claiming).
package final class PushSender: Sender {
    /// The client of each configured provider: the sender routes by this table.
    private let clients: [Provider: ProviderClient]
    package let outageThreshold: OutageThreshold

    /// Loads keys and the service account once; connects lazily.
    package init(configuration: DeliveryConfiguration, credentials: any CredentialStore, logger: Logger)
        async throws(JobError)
    {
        let tls = try configuration.tls.makeContext()
        outageThreshold = configuration.outage
        let clock = configuration.credentialClock
        let links = configuration.links
        let badge = configuration.badge
        var clients: [Provider: ProviderClient] = [:]
        if let apnsConfiguration = configuration.apns {
            let keys = try await ProviderTokens.apnsKey(apnsConfiguration)
            let credential = SharedCredential(
                key: "apns:\(apnsConfiguration.teamID):\(apnsConfiguration.keyID)", store: credentials, clock: clock,
                waitClock: configuration.retryClock,
                isFresh: { credential, now in
                    now - credential.issuedAt < ProviderTokens.apnsReuseSeconds && credential.issuedAt <= now + 60
                },
                logger: logger,
                mint: { now async throws(JobError) in
                    try await ProviderTokens.mintAPNs(keys: keys, configuration: apnsConfiguration, now: now)
                })
            let topic = apnsConfiguration.topic
            clients[.apns] = ProviderClient(
                provider: ProviderProtocol(
                    provider: .apns,
                    endpoint: {
                        $0.apnsEnvironment == .sandbox
                            ? apnsConfiguration.sandboxEndpoint : apnsConfiguration.productionEndpoint
                    },
                    authorization: APNs.authorization(jwt:),
                    request: { notification, authorization, authority in
                        APNs.request(
                            for: notification, topic: topic, authority: authority, authorization: authorization,
                            links: links, badge: badge)
                    },
                    classify: { APNs.classify(status: $0.status, headers: $0.headers, body: $0.body) }),
                credential: credential, tls: tls, policy: configuration.retry, rate: apnsConfiguration.rate,
                deadTokenGuard: configuration.deadTokenGuard, clock: configuration.retryClock,
                jitter: configuration.retryJitter, logger: logger)
        }
        if let fcmConfiguration = configuration.fcm {
            let account = try ServiceAccount.load(path: fcmConfiguration.serviceAccountFile)
            let keys = try await ProviderTokens.serviceAccountKey(account)
            let credential = SharedCredential(
                key: "fcm:\(account.clientEmail)", store: credentials, clock: clock,
                waitClock: configuration.retryClock,
                isFresh: { credential, now in credential.expiresAt - now > ProviderTokens.fcmExpiryMarginSeconds },
                logger: logger,
                mint: { now async throws(JobError) in
                    try await ProviderTokens.mintFCM(keys: keys, account: account, tls: tls, now: now)
                })
            clients[.fcm] = ProviderClient(
                provider: ProviderProtocol(
                    provider: .fcm,
                    endpoint: { _ in fcmConfiguration.endpoint },
                    authorization: FCM.authorization(accessToken:),
                    request: { [path = FCM.path(projectID: account.projectID)] notification, authorization, _ in
                        FCM.request(
                            for: notification, configuration: fcmConfiguration, path: path,
                            authorization: authorization, links: links, badge: badge,
                            now: clock())
                    },
                    classify: { FCM.classify(status: $0.status, headers: $0.headers, body: $0.body) }),
                credential: credential, tls: tls, policy: configuration.retry, rate: fcmConfiguration.rate,
                deadTokenGuard: configuration.deadTokenGuard, clock: configuration.retryClock,
                jitter: configuration.retryJitter, logger: logger)
        }
        self.clients = clients
    }

    package func canDeliver(to provider: Provider) -> Bool {
        clients[provider] != nil
    }

    package func send(_ batch: [OutgoingNotification]) async -> [DeliveryReport] {
        await send(batch, finishedEarly: nil)
    }

    package func send(_ batch: [OutgoingNotification], finished: @escaping FinishedReports) async -> [DeliveryReport] {
        await send(batch, finishedEarly: finished)
    }

    private func send(_ batch: [OutgoingNotification], finishedEarly finished: FinishedReports?) async
        -> [DeliveryReport]
    {
        var reports = [DeliveryReport?](repeating: nil, count: batch.count)
        // Each provider's part of the batch, sent at once.
        let parts = Dictionary(grouping: batch.indices) { batch[$0].device.provider }
        await withTaskGroup(of: ([Int], [DeliveryReport]).self) { group in
            for (provider, indices) in parts {
                let (client, items) = (clients[provider], indices.map { batch[$0] })
                group.addTask {
                    (indices, await Self.route(client, items, finished: Self.reindexed(finished, indices)))
                }
            }
            for await (indices, answers) in group {
                for (i, report) in zip(indices, answers) { reports[i] = report }
            }
        }
        // A client answers every notification it is given; a missing answer is left for a later run, never lost.
        return zip(batch, reports).map { notification, report in
            report
                ?? DeliveryReport(
                    channel: DeliveryChannel(notification.device.provider), outcome: .retryLater, reason: "no answer")
        }
    }

    /// `finished` for a part of the batch: the part's indices mapped back to the batch's.
    private static func reindexed(_ finished: FinishedReports?, _ indices: [Int]) -> FinishedReports? {
        guard let finished else { return nil }
        return { local, reports in finished(local.map { indices[$0] }, reports) }
    }

    private static func route(
        _ client: ProviderClient?, _ items: [OutgoingNotification],
        finished: FinishedReports?
    ) async -> [DeliveryReport] {
        guard !items.isEmpty else { return [] }
        guard let client else {
            return items.map {
                DeliveryReport(
                    channel: DeliveryChannel($0.device.provider), outcome: .credentials,
                    reason: "provider not configured")
            }
        }
        return await client.send(items, finished: finished)
    }

    package func credentialMints() async -> [Provider: Int] {
        var mints: [Provider: Int] = [:]
        for (provider, client) in clients { mints[provider] = await client.mints }
        return mints
    }

    package func beginRun(finishBy: ContinuousClock.Instant?) async {
        for client in clients.values { await client.beginRun(finishBy: finishBy) }
    }

    package func shutdown() async {
        for client in clients.values { await client.shutdown() }
    }
}
