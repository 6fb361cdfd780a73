import Foundation
import JobKit
import Logging
import NIOSSL

/// Delivers through the configured providers, routing each device to its provider's client. Devices of a
/// provider with no credentials configured are not deliverable (the run skips them before claiming).
package final class PushSender: Sender {
    /// The client of each configured provider: the sender routes by this table.
    private let clients: [Provider: ProviderClient]
    package let outageThreshold: OutageThreshold

    /// Loads keys and the service account once; connects lazily.
    package init(configuration: DeliveryConfiguration, credentials: any CredentialStore, logger: Logger)
        async throws(JobError)
    {
        outageThreshold = configuration.outage
        let shared = SharedDelivery(
            configuration: configuration, tls: try configuration.tls.makeContext(), credentials: credentials,
            logger: logger)
        var clients: [Provider: ProviderClient] = [:]
        for setup in configuration.setups { clients[setup.provider] = try await setup.client(shared) }
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
