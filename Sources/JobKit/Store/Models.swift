/// A device's operating system. APNs serves iOS devices only; an FCM message carries the `android` or the
/// `apns` block by it.
package enum Platform: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case ios, android
    package var description: String { rawValue }
}

/// Which APNs host an APNs token belongs to: apps from the App Store and TestFlight use production, development
/// builds the sandbox.
package enum APNsEnvironment: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case production, sandbox
    package var description: String { rawValue }
}

/// What a device's stored value is, and so which field of a provider's request carries it
/// (`user_devices.token_kind`).
package enum TokenKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// An APNs device token or an FCM registration token: APNs' path, FCM's `message.token`.
    case token
    /// A Firebase Installation ID (FCM only), the successor of FCM registration tokens: FCM's `message.fid`.
    case fid
    package var description: String { rawValue }
}

/// One active device of a user, as senders need it.
package struct Device: Sendable, Hashable {
    package let id: Int64
    package let userID: String
    /// The device token or, for ``TokenKind/fid``, the Firebase Installation ID.
    package let token: String
    package let provider: Provider
    package let platform: Platform
    /// Set for APNs devices.
    package let apnsEnvironment: APNsEnvironment?
    package let kind: TokenKind

    package init(
        id: Int64, userID: String, token: String, provider: Provider, platform: Platform,
        apnsEnvironment: APNsEnvironment?, kind: TokenKind = .token
    ) {
        self.id = id
        self.userID = userID
        self.token = token
        self.provider = provider
        self.platform = platform
        self.apnsEnvironment = apnsEnvironment
        self.kind = kind
    }

    /// A device row as a store reads it. The schema's checks allow only values this version knows, so a value
    /// it does not know (a row written by a newer version) is a ``JobError/dataError(_:)`` naming the row, never
    /// a default.
    package init(
        storedID id: Int64, userID: String, token: String, provider: String, platform: String,
        apnsEnvironment: String?, kind: String = TokenKind.token.rawValue
    ) throws(JobError) {
        func known<Value>(_ value: Value?, _ column: String, _ text: String) throws(JobError) -> Value {
            guard let value else {
                throw .dataError("user_devices row \(id): unknown \(column) \(LineText.quoted(text))")
            }
            return value
        }
        self.init(
            id: id, userID: userID, token: token,
            provider: try known(Provider(rawValue: provider), "provider", provider),
            platform: try known(Platform(rawValue: platform), "platform", platform),
            apnsEnvironment: try apnsEnvironment.map { (text) throws(JobError) in
                try known(APNsEnvironment(rawValue: text), "apns_environment", text)
            },
            kind: try known(TokenKind(rawValue: kind), "token_kind", kind))
    }
}

/// The state of a notification log row: the claim.
package struct ClaimStatus: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    package let rawValue: String
    package init(rawValue: String) { self.rawValue = rawValue }

    /// Claimed by a run that has not finished sending (or died: see the claim lease).
    package static let claimed = ClaimStatus(rawValue: "claimed")
    /// Delivered to every device.
    package static let sent = ClaimStatus(rawValue: "sent")
    /// Delivered to some devices; the others failed permanently.
    package static let partial = ClaimStatus(rawValue: "partial")
    /// Reached no device, for permanent reasons (dead tokens, rejected request).
    package static let failed = ClaimStatus(rawValue: "failed")
    /// Reached no device, only because of transient errors: the next run in the window tries again.
    package static let retry = ClaimStatus(rawValue: "retry")
    /// Held back (quiet hours) to be delivered later.
    package static let deferred = ClaimStatus(rawValue: "deferred")
    /// Replaced by a later notification of the same period (90 % overtaken by 100 %).
    package static let superseded = ClaimStatus(rawValue: "superseded")

    /// Every state this version knows; the schema's CHECK allows exactly these. A row in another state was
    /// written by a newer version, and no rule of this one applies to it.
    package static let all: Set<ClaimStatus> = [.claimed, .sent, .partial, .failed, .retry, .deferred, .superseded]
    package var isKnown: Bool { Self.all.contains(self) }

    package var description: String { rawValue }
}

/// One recorded attempt of a claim's device (a `notification_deliveries` row), as explain shows it.
package struct DeliveryAttempt: Sendable, Hashable {
    /// `nil` once the device row is gone.
    package let deviceID: Int64?
    package let outcome: DeliveryOutcome
    package let reason: String?
    package let runID: String
    package let at: Int64

    package init(deviceID: Int64?, outcome: DeliveryOutcome, reason: String?, runID: String, at: Int64) {
        self.deviceID = deviceID
        self.outcome = outcome
        self.reason = reason
        self.runID = runID
        self.at = at
    }
}

/// A notification log row as the rules see it.
package struct LogState: Sendable, Hashable {
    package let id: Int64
    package let status: ClaimStatus
    package let claimedAt: Int64
    package let messageIndex: Int?
    package let locale: String?
    package let runID: String
    /// A `deferred` quota warning's `deliver_after` (read with the quota state; `nil` elsewhere).
    package let deliverAfter: Int64?
    /// The plan a quota warning was counted against (read with the quota state; `nil` elsewhere, and for a
    /// warning stored without one).
    package let plan: String?

    package init(
        id: Int64, status: ClaimStatus, claimedAt: Int64, messageIndex: Int?, locale: String?, runID: String,
        deliverAfter: Int64? = nil, plan: String? = nil
    ) {
        self.id = id
        self.status = status
        self.claimedAt = claimedAt
        self.messageIndex = messageIndex
        self.locale = locale
        self.runID = runID
        self.deliverAfter = deliverAfter
        self.plan = plan
    }
}

/// What the store returns for a user whose reminder time has come.
package struct ReminderCandidate: Sendable, Hashable {
    /// The index of the ``DueQuery`` (in the run's list) the user is due under.
    package let query: Int
    package let userID: String
    package let locale: String
    package let hasActiveDevice: Bool
    package let wroteToday: Bool
    /// This period's log row, if any.
    package let log: LogState?
    /// The message index of the user's latest earlier reminder.
    package let previousMessageIndex: Int?
    /// The user's active devices in id order, when the store read them with the candidate (PostgreSQL, where
    /// that saves a statement a page); `nil` when the run reads them with ``ClaimLedger/activeDevices(userIDs:)``.
    package let devices: [Device]?
    /// What the pause rule and the learned words need (``ReminderHistory``), when the store read it with the
    /// candidate (SQLite, where that saves a statement a user; its query's ``DueQuery/historyFrom`` is set); `nil`
    /// when the run reads it with ``DueSetSource/reminderHistory(_:)``.
    package var history: ReminderHistory? = nil

    package init(
        query: Int, userID: String, locale: String, hasActiveDevice: Bool, wroteToday: Bool, log: LogState?,
        previousMessageIndex: Int?, devices: [Device]? = nil
    ) {
        self.query = query
        self.userID = userID
        self.locale = locale
        self.hasActiveDevice = hasActiveDevice
        self.wroteToday = wroteToday
        self.log = log
        self.previousMessageIndex = previousMessageIndex
        self.devices = devices
    }
}

/// Part of a run's due set: users in `zone` whose reminder minute is in `minutes`, for the local date
/// `period` whose bounds are `day`.
package struct DueQuery: Sendable, Hashable {
    package let zone: String
    package let period: String
    package let minutes: ClosedRange<Int>
    package let day: Range<Int64>
    package let type: NotificationType
    /// The periods before `period` whose reminders the candidates' history holds (``ReminderCandidate/history``):
    /// the run's ``DiaryReminderRunner/historyKey(userID:period:_:)``; `nil`: no history is read.
    package var historyFrom: String? = nil

    /// The periods whose reminder counts as the user's previous one, whose words today's must not repeat
    /// (``CopyCatalog/choose(_:locale:userID:period:previousIndex:)``): the latest of the 7 days before
    /// `period`. Bounded so that the look-up stays in one or two monthly partitions of PostgreSQL's log
    /// instead of probing every partition back to the retention limit.
    package var previousPeriods: Range<String> { Self.previousPeriods(before: period) }

    package static let previousReminderDays = 7

    package static func previousPeriods(before period: String) -> Range<String> {
        guard let date = LocalDate(period) else { return period..<period }
        return date.adding(days: -previousReminderDays).description..<period
    }
}

/// One member of a run's due set: a user and the index of the ``DueQuery`` they matched. A run walks its
/// due set in user-id order, whatever the zone, so that each page reads neighbouring rows of every table.
package struct DueKey: Sendable, Hashable, Comparable {
    package let userID: String
    package let query: Int

    package static func < (lhs: DueKey, rhs: DueKey) -> Bool {
        lhs.userID != rhs.userID ? lhs.userID < rhs.userID : lhs.query < rhs.query
    }

    package init(userID: String, query: Int) {
        self.userID = userID
        self.query = query
    }
}

/// A claim to make: insert the log row, or take over a stale or retryable one.
package struct ClaimRequest: Sendable, Hashable {
    package let userID: String
    package let type: NotificationType
    package let period: String
    package let messageIndex: Int
    package let locale: String
    /// The pause this claim starts: set on the last reminder (``ReminderPause``), whose words are the catalog's
    /// `diary_reminder_last`. The store records it with the claim, in the same transaction, when it inserts the
    /// log row.
    package var pause: PauseRecord? = nil
}

/// A claim this run holds.
package struct Claim: Sendable, Hashable {
    package let logID: Int64
    package let userID: String
    package let period: String
    /// The words recorded in the claim (a takeover keeps the original run's choice).
    package let messageIndex: Int
    package let locale: String
    /// True when an earlier run's stale or retryable claim was taken over.
    package let takenOver: Bool
    /// Devices that already received this notification under an earlier run of the same claim.
    package let deliveredDeviceIDs: Set<Int64>
    /// The last reminder before a pause: its words are the catalog's `diary_reminder_last`.
    package var lastReminder = false

    package init(
        logID: Int64, userID: String, period: String, messageIndex: Int, locale: String, takenOver: Bool,
        deliveredDeviceIDs: Set<Int64>
    ) {
        self.logID = logID
        self.userID = userID
        self.period = period
        self.messageIndex = messageIndex
        self.locale = locale
        self.takenOver = takenOver
        self.deliveredDeviceIDs = deliveredDeviceIDs
    }
}

/// One device attempt to record: the sender's report for one device of one claim.
package struct DeliveryRecord: Sendable, Hashable {
    package let logID: Int64
    package let deviceID: Int64
    package let report: DeliveryReport
}

/// The final state of one claim after sending.
package struct ClaimResolution: Sendable, Hashable {
    package let logID: Int64
    /// The claim's period key: where PostgreSQL keeps the row (``HistoryPartition``), so that resolving a page
    /// looks in the partitions of its periods only.
    package let period: String
    package let status: ClaimStatus
    package let detail: String?
}

/// Everything the explain command needs to know about one user.
package struct UserSnapshot: Sendable, Hashable {
    package let userID: String
    package let timezone: String
    package let locale: String
    package let plan: String
    /// `nil` when the user has no notification_settings row.
    package let settings: Settings?
    package let activeDevices: [Device]

    package struct Settings: Sendable, Hashable {
        package let diaryReminderEnabled: Bool
        package let reminderTime: String
        package let contentLimitWarningsEnabled: Bool

        package init(diaryReminderEnabled: Bool, reminderTime: String, contentLimitWarningsEnabled: Bool) {
            self.diaryReminderEnabled = diaryReminderEnabled
            self.reminderTime = reminderTime
            self.contentLimitWarningsEnabled = contentLimitWarningsEnabled
        }
    }

    package init(
        userID: String, timezone: String, locale: String, plan: String, settings: Settings?, activeDevices: [Device]
    ) {
        self.userID = userID
        self.timezone = timezone
        self.locale = locale
        self.plan = plan
        self.settings = settings
        self.activeDevices = activeDevices
    }
}

/// A device registration request (an app launch or a login).
package struct DeviceRegistration: Sendable, Hashable {
    package let userID: String
    /// The device token or, for ``TokenKind/fid``, the Firebase Installation ID.
    package let token: String
    package let provider: Provider
    package let platform: Platform
    /// Set for APNs devices (production unless given), `nil` for FCM ones.
    package let apnsEnvironment: APNsEnvironment?
    package let appVersion: String?
    package let kind: TokenKind
    /// The token this registration replaces on the same phone (an app's first launch with FCM installation ids
    /// sends its old registration token with its new FID): the store retires it (inactive, reason `replaced`) in
    /// the same transaction, when it is the same user's, so that the phone is not reminded through both.
    package let replaces: String?
    /// The deactivation reason of a token retired by a registration that replaces it.
    package static let replacedReason = "replaced"
    /// Mirrored from the app's own device table (a database webhook): the app decides whether the device is
    /// active, so the janitor's age rules leave it alone (migration 019). A later API registration keeps the mark.
    package var mirrored = false
    /// The app's own last sighting of the device (Unix seconds), when its table has one: stored as `last_seen`
    /// instead of the registration's time.
    package var lastSeen: Int64?

    /// Validates the user id's length and the combination (an APNs token on iOS, an APNs environment only for an
    /// APNs token, a FID only for FCM) and the value's shape for its kind; a bad one is a
    /// ``JobError/dataError(_:)``.
    package init(
        userID: String, token: String, provider: Provider, platform: Platform,
        apnsEnvironment: APNsEnvironment? = nil, appVersion: String? = nil, kind: TokenKind = .token,
        replaces: String? = nil
    ) throws(JobError) {
        if let problem = UserProfile.idProblem(userID) { throw .dataError("device registration: \(problem)") }
        let token = token.trimmingCharacters(in: .whitespacesAndNewlines)
        let descriptor = provider.descriptor
        guard descriptor.platforms.contains(platform) else {
            throw .dataError("device registration: \(descriptor.name) devices are not \(platform) devices")
        }
        guard descriptor.kinds.contains(kind) else {
            throw .dataError("device registration: a Firebase installation id (FID) is not for \(descriptor.name)")
        }
        if descriptor.defaultEnvironment == nil, let apnsEnvironment {
            // Dropping it would hide a caller's mistake: FCM chooses the APNs environment of the apps it serves.
            throw .dataError(
                "device registration: an APNs environment is for APNs tokens; an \(descriptor.name) token has none (got \(apnsEnvironment.rawValue))"
            )
        }
        // APNs tokens are hexadecimal in either case as apps print them; stored lower-case.
        let normalized = descriptor.storesLowerCase ? token.lowercased() : token
        if let problem = DeviceToken.problem(normalized, provider: provider, kind: kind) {
            throw .dataError("device registration: \(problem)")
        }
        if kind == .token, let problem = descriptor.foreignTokenProblem(normalized) {
            throw .dataError("device registration: \(problem)")
        }
        let replaced = replaces?.trimmingCharacters(in: .whitespacesAndNewlines)
        if let replaced {
            guard !replaced.isEmpty, replaced.utf8.count <= DeviceToken.maxFCMLength * 2 else {
                throw .dataError("device registration: the replaced token is empty or too long")
            }
            guard replaced != normalized else {
                throw .dataError("device registration: a device cannot replace itself")
            }
        }
        let environment = descriptor.defaultEnvironment.map { apnsEnvironment ?? $0 }
        self.userID = userID
        self.token = normalized
        self.provider = provider
        self.platform = platform
        self.apnsEnvironment = environment
        self.appVersion = appVersion
        self.kind = kind
        self.replaces = replaced
    }
}

extension DeviceRegistration {
    /// What registering a token already in `user_devices` does to its row: the `SET` of `ON CONFLICT (token) DO
    /// UPDATE`, said once for both stores and an integrated app's trigger. The row moves to the registering user with
    /// the new provider, platform, environment and kind; it is active again, its deactivation cleared; its app
    /// version stays unless a new one is given. `row` names the existing row (its table or alias); `lastSeen`,
    /// `mirrored` and `updatedAt` are the new values (``lastSeenSQL(_:row:given:)``, ``mirroredSQL(_:row:)``).
    package static func reRegisterSetSQL(
        _ dialect: SQLDialect, row: String, lastSeen: String, mirrored: String,
        updatedAt: String = "excluded.updated_at"
    ) -> String {
        """
        user_id = excluded.user_id, provider = excluded.provider, platform = excluded.platform,
        apns_environment = excluded.apns_environment, token_kind = excluded.token_kind, is_active = \(dialect.trueLiteral),
        last_seen = \(lastSeen), app_version = coalesce(excluded.app_version, \(row).app_version),
        updated_at = \(updatedAt), deactivated_at = NULL, deactivation_reason = NULL, mirrored = \(mirrored)
        """
    }

    /// A re-registration's `last_seen`: the app's own sighting when it gave one (``lastSeen``), else the later of the
    /// stored one and this registration's, so that a registration never moves a sighting back.
    package static func lastSeenSQL(_ dialect: SQLDialect, row: String, given: Bool) -> String {
        given ? "excluded.last_seen" : dialect.greatest("\(row).last_seen", "excluded.last_seen")
    }

    /// A re-registration's `mirrored`: once an app's table brought the device, it stays mirrored (``mirrored``).
    package static func mirroredSQL(_ dialect: SQLDialect, row: String) -> String {
        dialect.either("\(row).mirrored", "excluded.mirrored")
    }
}

/// What a registration did.
package struct RegistrationResult: Sendable, Hashable {
    package enum Change: String, Sendable, Hashable {
        case created, refreshed, reactivated
        case movedFromAnotherUser = "moved"

        /// What registering the token for `userID` did, given the token's row before (owner, active), if any.
        package init(previous: (owner: String, active: Bool)?, userID: String) {
            guard let previous else {
                self = .created
                return
            }
            self = previous.owner != userID ? .movedFromAnotherUser : (previous.active ? .refreshed : .reactivated)
        }
    }
    package let deviceID: Int64
    package let change: Change
    /// Whether the token the registration named in ``DeviceRegistration/replaces`` was an active device of the
    /// same user and is now retired (reason ``DeviceRegistration/replacedReason``).
    package let retiredReplaced: Bool

    package init(deviceID: Int64, change: Change, retiredReplaced: Bool = false) {
        self.deviceID = deviceID
        self.change = change
        self.retiredReplaced = retiredReplaced
    }
}
