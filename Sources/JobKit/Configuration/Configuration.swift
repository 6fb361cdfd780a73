import Foundation

/// Resolves settings from flags and the environment, naming the source of a bad value in the error.
public struct ConfigResolver: Sendable {
    package let environment: [String: String]

    public init(environment: [String: String]) {
        self.environment = environment
    }

    /// The raw value and where it came from. An empty variable is unset (as `PUSH_OUTBOX=` in an env file); an
    /// empty flag is a usage error, for it is what `--outbox "$UNSET"` passes.
    package func raw(_ key: ConfigKey, flag: String?) throws(JobError) -> (value: String, source: String)? {
        if let flag {
            guard !flag.isEmpty else { throw .usage("\(key.flag): empty") }
            return (flag, key.flag)
        }
        return string(key).map { ($0, key.rawValue) }
    }

    package func string(_ key: ConfigKey, flag: String?) throws(JobError) -> String? {
        try raw(key, flag: flag)?.value
    }

    /// A setting that has no flag here: its variable, unset when empty.
    package func string(_ key: ConfigKey) -> String? {
        environment[key.rawValue].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A whole-number setting (``ConfigKey/number``): the flag, else the variable, else the default.
    package func integer(_ key: ConfigKey, flag: Int?) throws(JobError) -> Int {
        guard let number = key.number else { preconditionFailure("\(key.rawValue) is not a whole-number setting") }
        return try integer(key, flag: flag, default: number.default, range: number.range)
    }

    /// An integer setting; a malformed flag is a usage error (64), a malformed variable a configuration
    /// error (78).
    package func integer(_ key: ConfigKey, flag: Int?, default value: Int, range: ClosedRange<Int>) throws(JobError)
        -> Int
    {
        let resolved: Int
        let source: String
        if let flag {
            resolved = flag
            source = key.flag
        } else if let text = string(key) {
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw .config("\(key.rawValue): not a whole number: \(text)")
            }
            resolved = number
            source = key.rawValue
        } else {
            return value
        }
        guard range.contains(resolved) else {
            let message = "\(source) must be within \(range.lowerBound)…\(range.upperBound), got \(resolved)"
            throw source.hasPrefix("--") ? .usage(message) : .config(message)
        }
        return resolved
    }
}

/// Where the data lives.
package struct DatabaseLocation: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        case sqlite(path: String)
        case postgres(url: String)
    }
    package let kind: Kind

    /// Accepts a file path, `sqlite:///absolute/path`, `sqlite://relative/path`, `file:path`, or a
    /// `postgres://`/`postgresql://` URL.
    package static func parse(_ text: String, source: String) throws(JobError) -> DatabaseLocation {
        switch DatabaseLocationSyntax.parse(text) {
        case .sqlite(let path): return DatabaseLocation(kind: .sqlite(path: path))
        case .postgres(let url): return DatabaseLocation(kind: .postgres(url: url))
        case .invalid(let reason): throw .config("\(source): \(reason)")
        }
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
        func endpoint(_ key: ConfigKey, _ flag: String?) throws(JobError) -> Endpoint? {
            guard let raw = try config.raw(key, flag: flag) else { return nil }
            guard let endpoint = Endpoint(url: raw.value) else {
                let message = "\(raw.source): not an https URL: \(raw.value)"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            return endpoint
        }
        func rate(_ key: ConfigKey, _ flag: Int?) throws(JobError) -> ProviderRate? {
            let perSecond = try config.integer(key, flag: flag)
            return perSecond == 0 ? nil : ProviderRate(perSecond: Double(perSecond))
        }
        // Every setting is checked whether or not its provider's credentials are set, so that a bad value fails
        // now rather than on the day the credentials are added.
        let apnsProduction = try endpoint(.apnsEndpoint, flags.apnsEndpoint)
        let apnsSandbox = try endpoint(.apnsSandboxEndpoint, flags.apnsSandboxEndpoint)
        let apnsRate = try rate(.apnsRate, flags.apnsRate)
        let fcmEndpoint = try endpoint(.fcmEndpoint, flags.fcmEndpoint)
        let fcmRate = try rate(.fcmRate, flags.fcmRate)
        let fcmChannel = try config.string(.fcmAndroidChannelID, flag: flags.fcmAndroidChannelID)
        let fcmWarningChannel = try config.string(
            .fcmAndroidWarningChannelID, flag: flags.fcmAndroidWarningChannelID)
        let apnsKeys: [(ConfigKey, String?)] = [
            (.apnsKeyFile, flags.apnsKeyFile), (.apnsKeyID, flags.apnsKeyID),
            (.apnsTeamID, flags.apnsTeamID), (.apnsTopic, flags.apnsTopic),
        ]
        var apnsValues: [String?] = []
        for (key, flag) in apnsKeys { apnsValues.append(try config.string(key, flag: flag)) }
        if apnsValues.contains(where: { $0 != nil }) {
            let missing = zip(apnsKeys, apnsValues).filter { $0.1 == nil }.map { $0.0.0.rawValue }
            guard missing.isEmpty else {
                throw .config("APNs is partly configured: also set \(missing.joined(separator: ", "))")
            }
            var apns = APNsConfiguration(
                keyFile: apnsValues[0]!, keyID: apnsValues[1]!, teamID: apnsValues[2]!,
                topic: apnsValues[3]!)
            if let apnsProduction { apns.productionEndpoint = apnsProduction }
            if let apnsSandbox { apns.sandboxEndpoint = apnsSandbox }
            apns.rate = apnsRate
            delivery.apns = apns
        }
        if let file = try config.string(.fcmServiceAccountFile, flag: flags.fcmServiceAccountFile) {
            var fcm = FCMConfiguration(serviceAccountFile: file)
            if let fcmEndpoint { fcm.endpoint = fcmEndpoint }
            if let fcmChannel { fcm.androidChannelID = fcmChannel }
            fcm.androidWarningChannelID = fcmWarningChannel
            fcm.validateOnly = flags.validateOnly
            fcm.rate = fcmRate
            delivery.fcm = fcm
        }
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

    /// The configuration of one of `shard.count` runners that each send their part of every slot: the providers'
    /// rates divided among them, so that together they keep to each provider's quota.
    package func sharing(_ shard: Shard) -> DeliveryConfiguration {
        var shared = self
        shared.apns?.rate = apns?.rate?.divided(by: shard.count)
        shared.fcm?.rate = fcm?.rate?.divided(by: shard.count)
        return shared
    }

    /// True when at least one provider is configured.
    package var hasProvider: Bool { apns != nil || fcm != nil }
}
