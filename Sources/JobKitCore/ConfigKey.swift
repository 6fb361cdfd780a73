/// Every environment variable the jobs read, with its meaning. The executables read the environment at
/// their entry point only and resolve each setting (`ConfigResolver` in JobKit): a flag wins over the
/// environment, the environment over the default. docs/CONFIGURATION.md lists the same keys.
///
/// Foundation-free, so that the `content-limit-hook` front and the full hook share one list of what
/// exists and of what the hook reads when no warning fires (``hookQuietPath``).
package enum ConfigKey: String, CaseIterable, Sendable {
    case databaseURL = "PUSH_DATABASE_URL"
    case databasePasswordFile = "PUSH_DATABASE_PASSWORD_FILE"
    case earlyMinutes = "PUSH_EARLY_MINUTES"
    case catchUpMinutes = "PUSH_CATCH_UP_MINUTES"
    case claimLeaseMinutes = "PUSH_CLAIM_LEASE_MINUTES"
    case pauseAfterIgnored = "PUSH_PAUSE_AFTER_IGNORED"
    case shard = "PUSH_SHARD"
    case copyCatalog = "PUSH_COPY_CATALOG"
    case outbox = "PUSH_OUTBOX"
    case logLevel = "PUSH_LOG_LEVEL"
    case logFormat = "PUSH_LOG_FORMAT"
    case metricsFile = "PUSH_METRICS_FILE"
    case pingURL = "PUSH_PING_URL"
    case apnsKeyFile = "PUSH_APNS_KEY_FILE"
    case apnsKeyID = "PUSH_APNS_KEY_ID"
    case apnsTeamID = "PUSH_APNS_TEAM_ID"
    case apnsTopic = "PUSH_APNS_TOPIC"
    case apnsEndpoint = "PUSH_APNS_ENDPOINT"
    case apnsSandboxEndpoint = "PUSH_APNS_SANDBOX_ENDPOINT"
    case fcmServiceAccountFile = "PUSH_FCM_SERVICE_ACCOUNT_FILE"
    case fcmEndpoint = "PUSH_FCM_ENDPOINT"
    case fcmAndroidChannelID = "PUSH_FCM_ANDROID_CHANNEL_ID"
    case fcmAndroidWarningChannelID = "PUSH_FCM_ANDROID_WARNING_CHANNEL_ID"
    case caFile = "PUSH_CA_FILE"
    case retryBudgetSeconds = "PUSH_RETRY_BUDGET_SECONDS"
    case apnsRate = "PUSH_APNS_RATE"
    case fcmRate = "PUSH_FCM_RATE"
    case deepLinkBase = "PUSH_DEEP_LINK_BASE"
    case iosBadge = "PUSH_IOS_BADGE"
    case outageShare = "PUSH_OUTAGE_SHARE"
    case outageMinDevices = "PUSH_OUTAGE_MIN_DEVICES"
    case deadGuardShare = "PUSH_DEAD_GUARD_SHARE"
    case deadGuardMinDelivered = "PUSH_DEAD_GUARD_MIN_DELIVERED"
    case apiJWTSecretFile = "PUSH_API_JWT_SECRET_FILE"
    case apiJWKSFile = "PUSH_API_JWKS_FILE"
    case apiJWKSURL = "PUSH_API_JWKS_URL"
    case apiJWTIssuer = "PUSH_API_JWT_ISSUER"
    case apiJWTAudience = "PUSH_API_JWT_AUDIENCE"
    case apiJWTUserClaim = "PUSH_API_JWT_USER_CLAIM"
    case apiRate = "PUSH_API_RATE"
    case apiWebhookMapping = "PUSH_API_WEBHOOK_MAPPING"

    /// The flag that overrides this key: the variable's name without `PUSH_`, in lower case, `_` as `-`
    /// (`PUSH_APNS_KEY_ID` is `--apns-key-id`); `PUSH_DATABASE_URL` alone is `--database`, as it names a path too.
    /// The command-line tools declare their options from this and ``help`` (module JobCLI), and a test checks every
    /// command's flags against it.
    package var flag: String {
        if self == .databaseURL { return "--database" }
        var name = ""
        for scalar in rawValue.unicodeScalars.dropFirst("PUSH_".count) {
            name.unicodeScalars.append(scalar == "_" ? "-" : Unicode.Scalar(UInt8(ascii: scalar) | 0x20))
        }
        return "--" + name
    }

    /// What a value of this setting is, for the options' help (`--apns-key-file <path>`).
    package var valueName: String {
        switch self {
        case .databaseURL: "path|url"
        case .databasePasswordFile, .copyCatalog, .outbox, .metricsFile, .apnsKeyFile, .fcmServiceAccountFile, .caFile,
            .apiJWTSecretFile, .apiJWKSFile, .apiWebhookMapping:
            "path"
        case .apiJWTIssuer, .apiJWTAudience: "text"
        case .apiJWTUserClaim: "claim"
        case .pingURL, .apiJWKSURL, .apnsEndpoint, .apnsSandboxEndpoint, .fcmEndpoint, .deepLinkBase: "url"
        case .apnsKeyID, .apnsTeamID, .fcmAndroidChannelID, .fcmAndroidWarningChannelID: "id"
        case .apnsTopic: "topic"
        case .shard: "K/N"
        case .logLevel: "level"
        case .logFormat: "format"
        case .earlyMinutes, .catchUpMinutes, .claimLeaseMinutes: "minutes"
        case .pauseAfterIgnored: "days"
        case .retryBudgetSeconds: "seconds"
        case .apnsRate, .fcmRate, .outageMinDevices, .deadGuardMinDelivered, .apiRate: "n"
        case .iosBadge: "n|none"
        case .outageShare, .deadGuardShare: "percent"
        }
    }

    package var help: String {
        switch self {
        case .databaseURL:
            "SQLite file path (or sqlite:///absolute/path), or a postgres:// URL (sslmode, password_file, max_connections). Required."
        case .databasePasswordFile: "A file holding the PostgreSQL password (instead of one in the URL)."
        case .earlyMinutes: "Minutes before the reminder time a run may already send."
        case .catchUpMinutes: "Minutes after the reminder time a late run still sends."
        case .claimLeaseMinutes:
            "Minutes after which an unfinished claim of a dead run is taken over."
        case .pauseAfterIgnored:
            "After this many consecutive days of reminders with no entry since, a user gets one last reminder saying so, then none until they write or change their reminder settings (0: never pause)."
        case .shard:
            "K/N: this host handles the users whose stable id hash falls in slice K of N (diary-reminder, token-janitor probes)."
        case .copyCatalog: "A copy catalog JSON file replacing the built-in one."
        case .outbox: "Deliver by appending JSON lines to this file (- for stdout) instead of a provider."
        case .logLevel: "trace, debug, info, notice, warning, error or critical; logs go to stderr."
        case .logFormat:
            "text or json: one JSON object per log line, with timestamp, level, job, run and every metadata field."
        case .metricsFile:
            "Write the run's metrics here (Prometheus text format, replaced atomically) for node_exporter's textfile collector (diary-reminder, token-janitor)."
        case .pingURL:
            "Heartbeat: POST URL/start, then URL or URL/fail with the JSON summary (healthchecks.io, Cronitor; diary-reminder, token-janitor)."
        case .apnsKeyFile: "APNs token-auth signing key (.p8)."
        case .apnsKeyID: "The .p8 key's 10-character key id."
        case .apnsTeamID: "The Apple developer team id."
        case .apnsTopic: "The app's bundle id (apns-topic)."
        case .apnsEndpoint: "APNs production endpoint."
        case .apnsSandboxEndpoint: "APNs sandbox endpoint."
        case .fcmServiceAccountFile: "Firebase service-account JSON (its token_uri is used for OAuth)."
        case .fcmEndpoint: "FCM endpoint."
        case .fcmAndroidChannelID: "Android notification channel id of the reminders."
        case .fcmAndroidWarningChannelID:
            "Android notification channel id of the quota warnings (default: the reminders' channel)."
        case .caFile: "PEM CA certificates trusted in addition to the system roots (simulator, proxies)."
        case .retryBudgetSeconds: "Seconds a run may spend retrying transient provider errors."
        case .apnsRate:
            "APNs requests per second at most, reached over the first 60 s of a run (0: unpaced; APNs publishes no quota)."
        case .fcmRate:
            "FCM requests per second at most, reached over the first 60 s of a run (the default is 90 % of FCM's 600,000 a minute; 0: unpaced). Divided by N under --shard K/N."
        case .deepLinkBase: "Base of the deep links in notifications."
        case .iosBadge:
            "The app icon's badge an iOS notification sets, through APNs or FCM: a number (0 clears it), or none to leave it as it is."
        case .outageShare:
            "A provider is down (exit 69) when its own transient answers (5xx, FCM's project quota) leave more than this percent of its attempts in a run pending, and at least --outage-min-devices devices, or every one of its attempts however few. Throttled devices never count; no connection always does."
        case .outageMinDevices:
            "The fewest devices pending by a provider's transient answers that make an outage (unless they are all its attempts)."
        case .deadGuardShare:
            "A dead-token answer that can also mean this sender is set up wrong (APNs BadDeviceToken, DeviceTokenNotForTopic; FCM SENDER_ID_MISMATCH, an invalid token or FID) deactivates its device only while such answers are at most this percent of the provider's deliveries and them together in the run, and the provider delivered at least --dead-guard-min-delivered; otherwise the device is kept and held, and the run exits 78."
        case .deadGuardMinDelivered:
            "Deliveries of a provider in a run before a dead-token answer that can mean a misconfiguration is believed (see --dead-guard-share)."
        case .apiJWTSecretFile:
            "push-api: a file holding the HS256 secret of the app's end-user JWTs (Supabase's JWT secret), for apps that call the API with their user's token."
        case .apiJWKSFile:
            "push-api: a JWKS file (JSON) with the public keys of the app's end-user JWTs (Firebase Auth, Auth0, Supabase's asymmetric keys)."
        case .apiJWKSURL:
            "push-api: the URL of that JWKS (https; Supabase's and Firebase's are public), read at start-up, every hour, and when a token names a key it lacks (at most once a minute)."
        case .apiJWTIssuer: "push-api: the end-user JWTs' issuer (iss), required with a JWT key."
        case .apiJWTAudience: "push-api: the end-user JWTs' audience (aud), required with a JWT key."
        case .apiJWTUserClaim: "push-api: the claim of an end-user JWT that holds the user id."
        case .apiRate:
            "push-api: requests a second each API key (or app user) may make on average, in bursts of as many; over it, 429 with Retry-After (0: no limit)."
        case .apiWebhookMapping:
            "push-api: a JSON file saying which of the app's own tables and columns hold users, devices and entries, for POST /v1/webhooks/database (docs/API.md)."
        }
    }
}

extension ConfigKey {
    /// A whole-number setting's default and the values it accepts; nil for the other settings. The code that
    /// uses each one takes its default from here (``DueRule``, ``OutageThreshold``, the providers' rates).
    package var number: (default: Int, range: ClosedRange<Int>)? {
        switch self {
        case .earlyMinutes: (2, 0...14)
        case .catchUpMinutes: (60, 1...720)
        case .claimLeaseMinutes: (10, 2...60)
        case .pauseAfterIgnored: (14, 0...60)
        case .retryBudgetSeconds: (60, 0...3600)
        case .apnsRate: (0, 0...1_000_000)
        case .fcmRate: (9_000, 0...1_000_000)
        case .outageShare: (1, 0...100)
        case .outageMinDevices: (10, 1...1_000_000)
        case .deadGuardShare: (25, 0...100)
        case .deadGuardMinDelivered: (1, 0...1_000_000)
        case .apiRate: (1_000, 0...1_000_000)
        default: nil
        }
    }

    /// The value a setting takes when neither its flag nor its variable sets it, as it would be written; nil when
    /// unset means "none" (or, for the database, that it is required).
    package var defaultValue: String? {
        if let number { return String(number.default) }
        return switch self {
        case .logLevel: "info"
        case .logFormat: "text"
        case .apnsEndpoint: "https://api.push.apple.com"
        case .apnsSandboxEndpoint: "https://api.sandbox.push.apple.com"
        case .fcmEndpoint: "https://fcm.googleapis.com"
        case .fcmAndroidChannelID: "diary_reminders"
        case .deepLinkBase: "diary://"
        case .iosBadge: "1"
        case .apiJWTUserClaim: "sub"
        default: nil
        }
    }

    /// The help of this setting's option and its reference line: ``help``, then the default and range.
    package var fullHelp: String {
        var text = help
        if let number {
            text += " Default \(number.default), \(number.range.lowerBound)–\(number.range.upperBound)."
        } else if let defaultValue {
            text += " Default \(defaultValue)."
        }
        return text
    }
}

extension ConfigKey {
    /// What the content-limit hook does with a setting when a write fires no warning (the quiet path).
    package enum QuietPathUse: Sendable, Hashable {
        /// Read and checked by both hook binaries with the shared code (the database location, the log level).
        case shared
        /// Not read at all: only a warning that is sent needs it (providers, the outbox, the catalog), or the
        /// hook has no use for it (the reminder run's settings).
        case unread
        /// Read by the full hook only: the front hands the invocation over when it is set.
        case fullHookOnly
    }

    /// How the hook's quiet path uses this setting. The full hook must not read an ``QuietPathUse/unread``
    /// setting before it knows a warning fires: the differential test of the two binaries checks it.
    package var hookQuietPath: QuietPathUse {
        switch self {
        case .databaseURL, .logLevel, .logFormat: .shared
        case .databasePasswordFile: .fullHookOnly
        case .earlyMinutes, .catchUpMinutes, .claimLeaseMinutes, .pauseAfterIgnored, .shard, .copyCatalog, .outbox,
            .apnsKeyFile,
            .apnsKeyID,
            .apnsTeamID, .apnsTopic, .apnsEndpoint, .apnsSandboxEndpoint, .fcmServiceAccountFile, .fcmEndpoint,
            .fcmAndroidChannelID, .fcmAndroidWarningChannelID, .caFile, .retryBudgetSeconds, .apnsRate, .fcmRate,
            .deepLinkBase, .iosBadge, .outageShare, .outageMinDevices, .deadGuardShare, .deadGuardMinDelivered,
            .metricsFile,
            .pingURL, .apiJWTSecretFile, .apiJWKSFile, .apiJWTIssuer, .apiJWTAudience, .apiJWTUserClaim,
            .apiRate, .apiJWKSURL, .apiWebhookMapping:
            .unread
        }
    }
}

/// The log formats every job accepts.
package enum LogFormatName {
    package static let all = ["text", "json"]

    package static func parse(_ text: String) -> String? {
        let lower = text.lowercased()
        return all.contains(lower) ? lower : nil
    }
}

/// The log levels every job accepts (swift-log's, in order), case-insensitive.
package enum LogLevelName {
    package static let all = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// The level named by `text` (any case), or nil.
    package static func parse(_ text: String) -> String? {
        let lower = text.lowercased()
        return all.contains(lower) ? lower : nil
    }
}

/// The syntax of a database location, shared by JobKit (`DatabaseLocation`) and the hook front.
package enum DatabaseLocationSyntax: Sendable, Hashable {
    case sqlite(path: String)
    case postgres(url: String)
    /// Not a location; the reason, to follow the setting's name.
    case invalid(String)

    /// Accepts a file path, `sqlite:///absolute/path`, `sqlite://relative/path`, `file:path`, or a
    /// `postgres://`/`postgresql://` URL; spaces and tabs around it are ignored.
    package static func parse(_ text: String) -> DatabaseLocationSyntax {
        let trimmed = trimmingSpaces(text)
        guard !trimmed.isEmpty else { return .invalid("empty database location") }
        let lower = trimmed.lowercased()
        if lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://") { return .postgres(url: trimmed) }
        for scheme in ["sqlite://", "file://", "sqlite:", "file:"] where lower.hasPrefix(scheme) {
            let path = String(trimmed.unicodeScalars.dropFirst(scheme.unicodeScalars.count))
            return path.isEmpty ? .invalid("no path in \(scheme) URL") : .sqlite(path: path)
        }
        if lower.contains("://") {
            return .invalid("unsupported database URL scheme (use a SQLite path or sqlite:///path)")
        }
        return .sqlite(path: trimmed)
    }

    /// Without the spaces (Unicode category Zs) and tabs at either end: Foundation's `.whitespaces`.
    static func trimmingSpaces(_ text: String) -> String {
        let scalars = text.unicodeScalars
        func isSpace(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator
        }
        guard let first = scalars.firstIndex(where: { !isSpace($0) }),
            let last = scalars.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(scalars[first...last])
    }
}
