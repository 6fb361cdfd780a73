import Foundation
import JobKit

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
    /// How many runners send a part of every slot (`--shard`): each paces to its share of a provider's rate.
    package var shards = 1

    package init() {}
}

extension DeliveryConfiguration {
    /// The configured providers, each with its settings: what the sender builds its clients from. A new
    /// provider's settings are a field above and their place here.
    var setups: [any ProviderSetup] {
        [apns as (any ProviderSetup)?, fcm].compactMap { $0 }
    }

    /// The configured providers.
    package var configuredProviders: Set<Provider> { Set(setups.map(\.provider)) }

    /// Reads and parses every configured key file, so that a bad one is reported before anything is opened
    /// or written.
    package func checkFiles() async throws(JobError) {
        for setup in setups { try await setup.checkFiles() }
        _ = try tls.makeContext()
    }
}

/// Flag values for delivery; `nil` means "not given on the command line".
public struct DeliveryFlags: Sendable {
    public var apnsKeyFile, apnsKeyID, apnsTeamID, apnsTopic, apnsEndpoint, apnsSandboxEndpoint: String?
    public var fcmServiceAccountFile, fcmEndpoint, fcmAndroidChannelID, fcmAndroidWarningChannelID: String?
    public var caFile, deepLinkBase, iosBadge: String?
    public var retryBudgetSeconds: Int?
    /// Requests per second (0: unpaced).
    public var apnsRate, fcmRate: Int?
    /// `OutageThreshold`: percent of a provider's attempts, and devices.
    public var outageShare, outageMinDevices: Int?
    /// `DeadTokenGuard`: percent of a provider's answers, and deliveries.
    public var deadGuardShare, deadGuardMinDelivered: Int?
    public var validateOnly = false
    public init() {}
}

extension DeliveryConfiguration {
    /// Resolves the providers from flags and the environment. A provider with none of its settings is
    /// simply not configured; one with some but not all is a configuration error.
    package static func resolve(_ config: ConfigResolver, flags: DeliveryFlags) throws(JobError)
        -> DeliveryConfiguration
    {
        var delivery = DeliveryConfiguration()
        delivery.apns = try APNsConfiguration.resolve(config, flags: flags)
        delivery.fcm = try FCMConfiguration.resolve(config, flags: flags)
        delivery.tls.additionalCAFile = try config.string(.caFile, flag: flags.caFile)
        delivery.outage = OutageThreshold(
            sharePercent: try config.integer(.outageShare, flag: flags.outageShare),
            minDevices: try config.integer(.outageMinDevices, flag: flags.outageMinDevices))
        delivery.deadTokenGuard = DeadTokenGuard(
            sharePercent: try config.integer(.deadGuardShare, flag: flags.deadGuardShare),
            minDelivered: try config.integer(.deadGuardMinDelivered, flag: flags.deadGuardMinDelivered))
        delivery.retry.budget = .seconds(try config.integer(.retryBudgetSeconds, flag: flags.retryBudgetSeconds))
        if let raw = try config.raw(.deepLinkBase, flag: flags.deepLinkBase) {
            guard let links = DeepLinks(checking: raw.value) else {
                let message =
                    "\(raw.source): not a URL base with a scheme that ends in / (e.g. diary:// or https://example.com/app/): \(raw.value)"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            delivery.links = links
        }
        if let raw = try config.raw(.iosBadge, flag: flags.iosBadge) {
            guard let badge = AppBadge(raw.value) else {
                let message =
                    "\(raw.source): not a badge number from 0 to \(AppBadge.numbers.upperBound) or none: \(raw.value)"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            delivery.badge = badge
        }
        return delivery
    }

    /// The configuration of one of `shard.count` runners that each send their part of every slot: every provider's
    /// rate divided among them (``share(of:)``), so that together they keep to each provider's quota.
    package func sharing(_ shard: Shard) -> DeliveryConfiguration {
        var shared = self
        shared.shards = shard.count
        return shared
    }

    /// This runner's part of a provider's rate: `rate` divided among the ``shards``.
    package func share(of rate: ProviderRate?) -> ProviderRate? { rate?.divided(by: shards) }

    /// True when at least one provider is configured.
    package var hasProvider: Bool { !setups.isEmpty }
}

extension ConfigResolver {
    /// The provider endpoint a setting names (`nil`: not set); anything but an https URL is refused.
    func endpoint(_ key: ConfigKey, flag: String?) throws(JobError) -> Endpoint? {
        guard let raw = try raw(key, flag: flag) else { return nil }
        guard let endpoint = Endpoint(url: raw.value) else {
            let message = "\(raw.source): not an https URL: \(raw.value)"
            throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
        }
        return endpoint
    }

    /// The requests a second a setting allows (`nil`: 0, unpaced).
    func rate(_ key: ConfigKey, flag: Int?) throws(JobError) -> ProviderRate? {
        let perSecond = try integer(key, flag: flag)
        return perSecond == 0 ? nil : ProviderRate(perSecond: Double(perSecond))
    }
}
