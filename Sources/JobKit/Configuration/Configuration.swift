import Foundation

/// Every environment variable the jobs read, with its meaning. The executables read the environment at
/// their entry point only and resolve each setting here: a flag wins over the environment, the
/// environment over the default. The README's configuration table lists the same keys.
public enum ConfigKey: String, CaseIterable, Sendable {
    case databaseURL = "PUSH_DATABASE_URL"
    case databasePasswordFile = "PUSH_DATABASE_PASSWORD_FILE"
    case earlyMinutes = "PUSH_EARLY_MINUTES"
    case catchUpMinutes = "PUSH_CATCH_UP_MINUTES"
    case claimLeaseMinutes = "PUSH_CLAIM_LEASE_MINUTES"
    case shard = "PUSH_SHARD"
    case copyCatalog = "PUSH_COPY_CATALOG"
    case outbox = "PUSH_OUTBOX"
    case logLevel = "PUSH_LOG_LEVEL"
    case apnsKeyFile = "PUSH_APNS_KEY_FILE"
    case apnsKeyID = "PUSH_APNS_KEY_ID"
    case apnsTeamID = "PUSH_APNS_TEAM_ID"
    case apnsTopic = "PUSH_APNS_TOPIC"
    case apnsEndpoint = "PUSH_APNS_ENDPOINT"
    case apnsSandboxEndpoint = "PUSH_APNS_SANDBOX_ENDPOINT"
    case fcmServiceAccountFile = "PUSH_FCM_SERVICE_ACCOUNT_FILE"
    case fcmEndpoint = "PUSH_FCM_ENDPOINT"
    case fcmAndroidChannelID = "PUSH_FCM_ANDROID_CHANNEL_ID"
    case caFile = "PUSH_CA_FILE"
    case retryBudgetSeconds = "PUSH_RETRY_BUDGET_SECONDS"
    case deepLinkBase = "PUSH_DEEP_LINK_BASE"

    /// The flag that overrides this key.
    public var flag: String {
        switch self {
        case .databaseURL: "--database"
        case .databasePasswordFile: "--database-password-file"
        case .earlyMinutes: "--early-minutes"
        case .catchUpMinutes: "--catch-up-minutes"
        case .claimLeaseMinutes: "--claim-lease-minutes"
        case .shard: "--shard"
        case .copyCatalog: "--copy-catalog"
        case .outbox: "--outbox"
        case .logLevel: "--log-level"
        case .apnsKeyFile: "--apns-key-file"
        case .apnsKeyID: "--apns-key-id"
        case .apnsTeamID: "--apns-team-id"
        case .apnsTopic: "--apns-topic"
        case .apnsEndpoint: "--apns-endpoint"
        case .apnsSandboxEndpoint: "--apns-sandbox-endpoint"
        case .fcmServiceAccountFile: "--fcm-service-account-file"
        case .fcmEndpoint: "--fcm-endpoint"
        case .fcmAndroidChannelID: "--fcm-android-channel-id"
        case .caFile: "--ca-file"
        case .retryBudgetSeconds: "--retry-budget-seconds"
        case .deepLinkBase: "--deep-link-base"
        }
    }

    public var help: String {
        switch self {
        case .databaseURL: "SQLite file path (or sqlite:///absolute/path), or a postgres:// URL (sslmode, password_file, max_connections). Required."
        case .databasePasswordFile: "A file holding the PostgreSQL password (instead of one in the URL)."
        case .earlyMinutes: "Minutes before the reminder time a run may already send (default 2, 0–14)."
        case .catchUpMinutes: "Minutes after the reminder time a late run still sends (default 60, 1–720)."
        case .claimLeaseMinutes: "Minutes after which an unfinished claim of a dead run is taken over (default 10, 2–60)."
        case .shard: "K/N: this host handles the users whose stable id hash falls in slice K of N (diary-reminder, token-janitor probes)."
        case .copyCatalog: "A copy catalog JSON file replacing the built-in one."
        case .outbox: "Deliver by appending JSON lines to this file (- for stdout) instead of a provider."
        case .logLevel: "trace, debug, info, notice, warning, error or critical (default info); logs go to stderr."
        case .apnsKeyFile: "APNs token-auth signing key (.p8)."
        case .apnsKeyID: "The .p8 key's 10-character key id."
        case .apnsTeamID: "The Apple developer team id."
        case .apnsTopic: "The app's bundle id (apns-topic)."
        case .apnsEndpoint: "APNs production endpoint (default https://api.push.apple.com)."
        case .apnsSandboxEndpoint: "APNs sandbox endpoint (default https://api.sandbox.push.apple.com)."
        case .fcmServiceAccountFile: "Firebase service-account JSON (its token_uri is used for OAuth)."
        case .fcmEndpoint: "FCM endpoint (default https://fcm.googleapis.com)."
        case .fcmAndroidChannelID: "Android notification channel id (default diary_reminders)."
        case .caFile: "PEM CA certificates trusted in addition to the system roots (simulator, proxies)."
        case .retryBudgetSeconds: "Seconds a run may spend retrying transient provider errors (default 60)."
        case .deepLinkBase: "Base of the deep links in notifications (default diary://)."
        }
    }
}

/// Resolves settings from flags and the environment, naming the source of a bad value in the error.
public struct ConfigResolver: Sendable {
    public let environment: [String: String]

    public init(environment: [String: String]) {
        self.environment = environment
    }

    /// The raw value and where it came from.
    public func raw(_ key: ConfigKey, flag: String?) -> (value: String, source: String)? {
        if let flag { return (flag, key.flag) }
        if let value = environment[key.rawValue], !value.isEmpty { return (value, key.rawValue) }
        return nil
    }

    public func string(_ key: ConfigKey, flag: String?) -> String? {
        raw(key, flag: flag)?.value
    }

    /// An integer setting; a malformed flag is a usage error (64), a malformed variable a configuration
    /// error (78).
    public func integer(_ key: ConfigKey, flag: Int?, default value: Int, range: ClosedRange<Int>) throws(JobError) -> Int {
        let resolved: Int
        let source: String
        if let flag {
            resolved = flag
            source = key.flag
        } else if let text = environment[key.rawValue], !text.isEmpty {
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
public struct DatabaseLocation: Sendable, Hashable {
    public enum Kind: Sendable, Hashable { case sqlite(path: String), postgres(url: String) }
    public let kind: Kind

    /// Accepts a file path, `sqlite:///absolute/path`, `sqlite://relative/path`, `file:path`, or a
    /// `postgres://`/`postgresql://` URL.
    public static func parse(_ text: String, source: String) throws(JobError) -> DatabaseLocation {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw .config("\(source): empty database location") }
        let lower = trimmed.lowercased()
        if lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://") {
            return DatabaseLocation(kind: .postgres(url: trimmed))
        }
        for scheme in ["sqlite://", "file://", "sqlite:", "file:"] where lower.hasPrefix(scheme) {
            let path = String(trimmed.dropFirst(scheme.count))
            guard !path.isEmpty else { throw .config("\(source): no path in \(scheme) URL") }
            return DatabaseLocation(kind: .sqlite(path: path))
        }
        if lower.contains("://") {
            throw .config("\(source): unsupported database URL scheme (use a SQLite path or sqlite:///path)")
        }
        return DatabaseLocation(kind: .sqlite(path: trimmed))
    }
}

/// Flag values for delivery; `nil` means "not given on the command line".
public struct DeliveryFlags: Sendable {
    public var apnsKeyFile, apnsKeyID, apnsTeamID, apnsTopic, apnsEndpoint, apnsSandboxEndpoint: String?
    public var fcmServiceAccountFile, fcmEndpoint, fcmAndroidChannelID, caFile, deepLinkBase: String?
    public var retryBudgetSeconds: Int?
    public var validateOnly = false
    public init() {}
}

extension DeliveryConfiguration {
    /// Resolves the providers from flags and the environment. A provider with none of its settings is
    /// simply not configured; one with some but not all is a configuration error.
    public static func resolve(_ config: ConfigResolver, flags: DeliveryFlags) throws(JobError) -> DeliveryConfiguration {
        var delivery = DeliveryConfiguration()
        func endpoint(_ key: ConfigKey, _ flag: String?) throws(JobError) -> Endpoint? {
            guard let raw = config.raw(key, flag: flag) else { return nil }
            guard let endpoint = Endpoint(url: raw.value) else {
                let message = "\(raw.source): not an https URL: \(raw.value)"
                throw raw.source.hasPrefix("--") ? .usage(message) : .config(message)
            }
            return endpoint
        }
        let apnsKeys: [(ConfigKey, String?)] = [(.apnsKeyFile, flags.apnsKeyFile), (.apnsKeyID, flags.apnsKeyID),
                                                 (.apnsTeamID, flags.apnsTeamID), (.apnsTopic, flags.apnsTopic)]
        let apnsValues = apnsKeys.map { config.string($0.0, flag: $0.1) }
        if apnsValues.contains(where: { $0 != nil }) {
            let missing = zip(apnsKeys, apnsValues).filter { $0.1 == nil }.map { $0.0.0.rawValue }
            guard missing.isEmpty else {
                throw .config("APNs is partly configured: also set \(missing.joined(separator: ", "))")
            }
            var apns = APNsConfiguration(keyFile: apnsValues[0]!, keyID: apnsValues[1]!, teamID: apnsValues[2]!,
                                         topic: apnsValues[3]!)
            if let production = try endpoint(.apnsEndpoint, flags.apnsEndpoint) { apns.productionEndpoint = production }
            if let sandbox = try endpoint(.apnsSandboxEndpoint, flags.apnsSandboxEndpoint) { apns.sandboxEndpoint = sandbox }
            delivery.apns = apns
        }
        if let file = config.string(.fcmServiceAccountFile, flag: flags.fcmServiceAccountFile) {
            var fcm = FCMConfiguration(serviceAccountFile: file)
            if let fcmEndpoint = try endpoint(.fcmEndpoint, flags.fcmEndpoint) { fcm.endpoint = fcmEndpoint }
            if let channel = config.string(.fcmAndroidChannelID, flag: flags.fcmAndroidChannelID) { fcm.androidChannelID = channel }
            fcm.validateOnly = flags.validateOnly
            delivery.fcm = fcm
        }
        delivery.tls.additionalCAFile = config.string(.caFile, flag: flags.caFile)
        delivery.retry.budget = .seconds(try config.integer(.retryBudgetSeconds, flag: flags.retryBudgetSeconds,
                                                            default: 60, range: 0...3600))
        if let base = config.string(.deepLinkBase, flag: flags.deepLinkBase) { delivery.links = DeepLinks(base: base) }
        return delivery
    }

    /// True when at least one provider is configured.
    public var hasProvider: Bool { apns != nil || fcm != nil }
}
