import Logging

/// How a job opens its store.
package enum StoreOpenMode: Sendable, Hashable {
    /// Create the database if needed and apply pending migrations (`pushctl migrate`, `seed`, tests).
    case create
    /// The database must exist; pending migrations are applied (the jobs).
    case readWrite
    /// The database must exist and be fully migrated; nothing is ever written (dry runs, explain).
    case readOnly
}

/// Everything the jobs, `pushctl` and the tests need from one database. `SQLiteStore` (module JobKitSQLite, the embedded
/// default) and `PostgresStore` (module JobKitPostgres) implement it, and one set of contract tests runs
/// against both.
package protocol JobStore: ReminderStore, DeviceRegistry, CredentialStore, ContentLimitStore, JanitorStore, ReportStore,
    DueSetLeases,
    AppDataStore, SeedSink, APIKeyStore, IdempotencyStore, WaitingDevices
{
    /// `sqlite` or `postgres`.
    var backend: String { get }
    /// Where the data lives, for messages (never with a password).
    var displayLocation: String { get }
    /// The identifiers of applied migrations, oldest first.
    func appliedMigrations() async throws(JobError) -> [String]
    /// Releases connections; the store is unusable afterwards.
    func close() async
}

/// The app's own tables, as the app backend writes them. The jobs only read them; `pushctl`, the seeder
/// and tests write them through this API. A backend not written in Swift uses the SQL in docs/SCHEMA.md.
package protocol AppDataStore: Sendable {
    /// Creates or updates a user and their notification settings.
    func upsertUser(_ profile: UserProfile, now: Int64) async throws(JobError)
    /// Reads user `id` (`nil`: there is none), passes them to `edit` and saves what it returns (the settings row
    /// only where ``StoredUser/hasSettings``), in one transaction that holds the user's row, so that a concurrent
    /// change is never overwritten with what was read before it. What `edit` throws is thrown, and nothing is
    /// written. ``apply(_:now:)`` is the shared rule on top.
    func editUser(id: String, now: Int64, _ edit: @escaping @Sendable (StoredUser?) throws(JobError) -> StoredUser)
        async throws(JobError) -> UserEditResult
    /// Records a diary entry written at `at` (what the app backend does on each write).
    func recordEntry(userID: String, at: Int64) async throws(JobError)
    /// Deletes user `id` and, with them, their settings, devices, entries and history (account deletion, as
    /// `DELETE FROM users` does). Returns false when there was no such user.
    func deleteUser(id: String) async throws(JobError) -> Bool
}

/// What the diary reminder run needs from a store: its roles together. Each component takes only the roles
/// it uses (the answer journal a ``ClaimLedger``, the janitor its ``JanitorStore`` with ``RunJournal`` and
/// ``HistoryUpkeep``), so that a test double or another store implements only those.
package typealias ReminderStore = DueSetSource & ClaimLedger & ExplainSource & RunJournal & HistoryUpkeep

/// The due set: which users a run's queries hold, and the facts about each that the rules need.
package protocol DueSetSource: Sendable {
    /// Distinct time zones of users with reminders enabled.
    func reminderZones() async throws(JobError) -> [String]
    /// Users with reminders enabled in `zone` (used to count those in an unknown zone).
    func enabledUserCount(zone: String) async throws(JobError) -> Int
    /// Users with reminders enabled whose reminder time is not `HH:MM`.
    func malformedReminderTimeCount() async throws(JobError) -> Int
    /// A run's due set: every user with reminders enabled whose reminder minute is in one of the queries'
    /// ranges (read from an index alone), ordered by user id. A user matching two queries appears twice.
    func dueKeys(_ queries: [DueQuery]) async throws(JobError) -> [DueKey]
    /// The candidates of one page of the due set, in no promised order. Settings are read again: a key whose
    /// user no longer matches its query (reminders turned off, time or zone changed) yields no candidate.
    func dueCandidates(_ keys: [DueKey], of queries: [DueQuery]) async throws(JobError) -> [ReminderCandidate]
    /// What the pause rule (``ReminderPause``) needs of each user before a period: their latest entry, when their
    /// settings changed, their latest pause, and when each reminder of ``HistoryKey/periods`` that reached a
    /// device was claimed. A key whose user is gone is absent.
    func reminderHistory(_ keys: [HistoryKey]) async throws(JobError) -> [HistoryKey: ReminderHistory]
    /// The learned words' counts (``CopyLearning``) over the UTC `days`, summed by locale and message. A day not
    /// counted yet is counted from the log and the entries (``CopyOutcomeSQL``), and, when `record`, kept in
    /// `copy_outcomes` with the day marked in `copy_outcome_days` (one transaction; a day another run counted
    /// first is kept as it counted it). So each run reads a table of a few rows a day, never the history.
    func copyOutcomes(days: [String], record: Bool, now: Int64) async throws(JobError) -> [CopyOutcomeRow]
    /// Whether a run should select its next page while it claims the current one: worth it where the two run
    /// on separate connections of a server (PostgreSQL: 5.9 → 5.6 s at 1,000,000 users, BENCHMARKS.md#the-runs-pages), not on
    /// SQLite, where it bought no time and raised the peak memory by a sixth.
    var selectsWhileClaiming: Bool { get }
}

extension DueSetSource {
    package var selectsWhileClaiming: Bool { false }
}

/// Devices kept active although a provider called them dead, because its answers in that run meant a
/// misconfiguration (``DeadTokenGuard``): marked with the reason, so that explain, the report and the metrics say so.
package protocol DeviceHolds: Sendable {
    /// Marks these devices held (a mark already there takes the new reason, run and time). A device gone is skipped.
    func holdDevices(_ holds: [DeviceHold], runID: String, now: Int64) async throws(JobError)
    /// Removes the marks of `provider`'s devices: its answers in a run were healthy. Returns how many it removed.
    func releaseHeldDevices(provider: Provider) async throws(JobError) -> Int
    /// The devices held now, of `userID` or of everyone, by device id.
    func heldDevices(userID: String?) async throws(JobError) -> [DeviceHold]
}

/// A held device (``DeviceHolds``).
package struct DeviceHold: Sendable, Hashable, Codable {
    package let deviceID: Int64
    package let provider: Provider
    /// The provider's reason (`DeviceTokenNotForTopic`, `SENDER_ID_MISMATCH`, …).
    package let reason: String
    /// When it was held; nil in a hold not written yet.
    package var heldAt: Int64?

    package init(deviceID: Int64, provider: Provider, reason: String, heldAt: Int64? = nil) {
        self.deviceID = deviceID
        self.provider = provider
        self.reason = reason
        self.heldAt = heldAt
    }
}

/// The claims and what became of them: the notification log as the exactly-once primitive. Any
/// implementation must make ``claim(_:runID:now:staleBefore:)`` atomic per row.
package protocol ClaimLedger: DeviceHolds {
    /// Claims atomically: inserts each log row, or takes over one whose status is `retry` or whose
    /// `claimed` status dates from before `staleBefore`. Returns the claims won; the rest were lost.
    func claim(_ requests: [ClaimRequest], runID: String, now: Int64, staleBefore: Int64) async throws(JobError)
        -> [Claim]
    /// Active devices of these users.
    func activeDevices(userIDs: [String]) async throws(JobError) -> [String: [Device]]
    /// Records device attempts and the claims' final states in one transaction.
    func record(_ deliveries: [DeliveryRecord], resolutions: [ClaimResolution], runID: String, now: Int64)
        async throws(JobError)
}

/// What `--explain` reads about one user, beyond the due set.
package protocol ExplainSource: Sendable {
    /// The user's row, settings and active devices.
    func userSnapshot(userID: String) async throws(JobError) -> UserSnapshot?
    /// Settings rows and active devices whose user does not exist, of `userID` or of everyone: rows a backend
    /// wrote around the schema's guards (SQLite with foreign keys off, before migration 014). No job reads them;
    /// the health report and `--explain` name them.
    func orphanedRows(userID: String?) async throws(JobError) -> OrphanedRows
    /// For a user the push schema does not know: what says the app has them (a profile or devices waiting, their
    /// row in the app's table under the SQL mirror); nil when nothing does.
    func notPushUser(userID: String) async throws(JobError) -> NotPushUser?
    /// Diary entries of the user in `range`.
    func entryCount(userID: String, in range: Range<Int64>) async throws(JobError) -> Int
    /// A log row.
    func logState(userID: String, type: NotificationType, period: String) async throws(JobError) -> LogState?
    /// Every recorded attempt of one log row's devices, oldest first.
    func deliveryAttempts(logID: Int64) async throws(JobError) -> [DeliveryAttempt]
    /// The message index of the latest log row of `type` with a period key in `periods`
    /// (``DueQuery/previousPeriods``).
    func previousMessageIndex(userID: String, type: NotificationType, in periods: Range<String>)
        async throws(JobError) -> Int?
}

/// A run's `job_runs.outcome`: the schema's closed set.
package enum RunOutcome: String, Sendable, Hashable, Codable {
    /// Started and not ended: still going, or killed outright before it could record its end.
    case running
    case ok
    /// Ended with an error, as its exit code says.
    case failed
}

/// Job bookkeeping: the report's "last run of each job".
package protocol RunJournal: Sendable {
    /// Writes the run's row, or replaces the row of the same `id`: `running` (with no duration) as it starts,
    /// then `ok` or `failed` as it ends.
    func recordRun(id: String, job: String, runAt: Int64, durationMs: Int?, outcome: RunOutcome, summaryJSON: String)
        async throws(JobError)
    /// Ends as `failed` every run of `job` still `running` (no end recorded) whose instant is before `before`,
    /// with `error` as its summary's `error`, in one statement: of several runs doing this at once, one gets each
    /// row. Returns those runs, oldest first. A run that records its end afterwards replaces its row as usual.
    func failRunsWithoutEnd(job: String, before: Int64, error: String) async throws(JobError)
        -> [(id: String, runAt: Int64)]
}

/// The history tables' upkeep that every writing run does first.
package protocol HistoryUpkeep: Sendable {
    /// Makes sure the history partitions that rows written around `now` need exist (``HistoryPartition``), and
    /// moves rows that fell into a default partition into their own (PostgreSQL). SQLite: nothing to do.
    /// A failure costs no row (the default partitions take them) and is the caller's to log.
    func prepareHistory(now: Int64) async throws(JobError)
    /// In one transaction: the diary-reminder claims claimed in `claimedIn` that a run could still take over
    /// (``DeliveryLifecycle/canTakeOver(_:staleBefore:)``), at most `limit`, with every recorded attempt of each,
    /// oldest first; `decide` (``MissedReminders``) makes their final resolutions, which are written as they are,
    /// the run id included. Returns the claims it closed. Of several runs doing this at once, one closes each
    /// claim (PostgreSQL: a claim another holds is skipped).
    func closeUnfinishedReminders(
        claimedIn: Range<Int64>, staleBefore: Int64, limit: Int, runID: String, now: Int64,
        _ decide: @escaping @Sendable ([UnfinishedClaim]) -> [ClaimResolution]
    ) async throws(JobError) -> [UnfinishedClaim]
}

/// A reminder claim still unfinished, with its recorded attempts: what ``MissedReminders`` decides from.
package struct UnfinishedClaim: Sendable, Hashable {
    package let logID: Int64
    package let period: String
    package let attempts: [RecordedAttempt]

    package init(logID: Int64, period: String, attempts: [RecordedAttempt]) {
        self.logID = logID
        self.period = period
        self.attempts = attempts
    }
}

/// One `notification_deliveries` row, as ``MissedReminders`` reads it.
package struct RecordedAttempt: Sendable, Hashable {
    package let deviceID: Int64?
    package let provider: String
    package let outcome: DeliveryOutcome
    package let reason: String?

    package init(deviceID: Int64?, provider: String, outcome: DeliveryOutcome, reason: String?) {
        self.deviceID = deviceID
        self.provider = provider
        self.outcome = outcome
        self.reason = reason
    }
}

extension HistoryUpkeep {
    /// ``prepareHistory(now:)``, with a failure logged: rows still have the default partitions, and the next
    /// run tries again.
    package func prepareHistory(now: Int64, logger: Logger) async {
        do {
            try await prepareHistory(now: now)
        } catch {
            logger.warning(
                "history partitions not prepared; rows go to the default partitions until a later run makes them",
                metadata: ["error": "\(error.message)"])
        }
    }
}

extension ClaimLedger {
    /// Records answers that providers gave, retrying while the database cannot take them for a reason that may
    /// pass (``JobError/mayPassWithTime``: locked, its disk full, unreachable) until `deadline`, waiting on its
    /// clock. Until a claim's lease runs out no other run takes it over, so an answer recorded late is never sent
    /// again; one given up on is sent again by the run that takes over. Any other error is thrown at once.
    package func recordPersistently(
        _ deliveries: [DeliveryRecord], resolutions: [ClaimResolution], runID: String,
        now: Int64, deadline: Deadline, logger: Logger
    ) async throws(JobError) {
        var delay = Duration.milliseconds(100)
        var failures = 0
        while true {
            do {
                try await record(deliveries, resolutions: resolutions, runID: runID, now: now)
                if failures > 0 {
                    logger.notice("recorded provider answers after a wait", metadata: ["attempts": "\(failures + 1)"])
                }
                return
            } catch  where error.mayPassWithTime && deadline.allows(delay) {
                failures += 1
                if failures == 1 {
                    logger.warning(
                        "cannot record provider answers yet: retrying until the claims' lease ends",
                        metadata: [
                            "deliveries": "\(deliveries.count)", "reason": "\(error.message)",
                        ])
                }
                await deadline.clock.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }
}

/// Device registration: an idempotent upsert safe to call on every app launch, concurrently.
package protocol DeviceRegistry: Sendable {
    /// Registers a token for a user. A token another user holds moves to this user; a deactivated
    /// token is reactivated. Fails with ``JobError/dataError(_:)`` for an unknown user.
    func register(_ registration: DeviceRegistration, now: Int64) async throws(JobError) -> RegistrationResult
    /// Deactivates a token (logout). Never deletes. With `userID`, only that user's: a late logout of a user
    /// whose token has moved to another user since leaves the new owner's device alone. Returns false when the
    /// token is unknown, already inactive or, with `userID`, someone else's.
    @discardableResult
    func unregister(token: String, userID: String?, reason: String, now: Int64) async throws(JobError) -> Bool
}

extension DeviceRegistry {
    /// ``unregister(token:userID:reason:now:)`` of whoever holds the token.
    @discardableResult
    package func unregister(token: String, reason: String, now: Int64) async throws(JobError) -> Bool {
        try await unregister(token: token, userID: nil, reason: reason, now: now)
    }
}

/// Rows whose user does not exist (``ExplainSource/orphanedRows(userID:)``).
package struct OrphanedRows: Sendable, Hashable, Codable {
    package var settings = 0
    package var activeDevices = 0

    package init(settings: Int = 0, activeDevices: Int = 0) {
        self.settings = settings
        self.activeDevices = activeDevices
    }

    package var isEmpty: Bool { settings == 0 && activeDevices == 0 }

    /// "1 notification_settings row and 2 active devices".
    package var description: String {
        var parts: [String] = []
        if settings > 0 { parts.append("\(settings) notification_settings row\(settings == 1 ? "" : "s")") }
        if activeDevices > 0 { parts.append("\(activeDevices) active device\(activeDevices == 1 ? "" : "s")") }
        return parts.joined(separator: " and ")
    }
}
