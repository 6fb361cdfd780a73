/// Claiming a page of reminders: the one algorithm both stores run in one transaction, over two primitives.
///
/// 1. Insert a `claimed` log row for each request unless its (user, type, period) row exists; the store answers
///    the ids of the rows it inserted (``inserted``). With them, the pauses the inserted last reminders start
///    (``pausesStarted(_:inserted:)``, written `INSERT INTO reminder_pauses … \(pauseReplacesSQL)`).
/// 2. For the requests left (``remaining(_:inserted:)``), take the existing row over where
///    ``DeliveryLifecycle/canTakeOver(_:staleBefore:)`` allows (`takeOverSQL`): `claimed` by this run, one
///    attempt more; the store answers each row taken, with the words its first claim recorded and the devices an
///    earlier run already reached (``TakenOver``).
/// 3. ``claims(_:inserted:takenOver:)`` turns the answers into the claims won, in request order, once per row.
///
/// The stores spell each primitive's SQL (SQLite a row at a time with prepared statements, PostgreSQL one
/// statement per page); what is claimed, and what a claim carries, is decided here.
package enum ReminderClaim {
    /// A log row's unique key.
    package struct Key: Sendable, Hashable {
        package let userID: String
        package let type: String
        package let period: String

        package init(userID: String, type: String, period: String) {
            self.userID = userID
            self.type = type
            self.period = period
        }

        package init(_ request: ClaimRequest) {
            self.init(userID: request.userID, type: request.type.rawValue, period: request.period)
        }
    }

    /// A row step 2 took over.
    package struct TakenOver: Sendable, Hashable {
        package let id: Int64
        /// The words the row's first claim recorded (nil: none recorded, the request's are used).
        package let messageIndex: Int?
        package let locale: String?
        /// The devices an earlier run of this claim reached: never sent to again.
        package let delivered: Set<Int64>

        package init(id: Int64, messageIndex: Int?, locale: String?, delivered: Set<Int64>) {
            self.id = id
            self.messageIndex = messageIndex
            self.locale = locale
            self.delivered = delivered
        }
    }

    /// The pauses step 1 starts: those of the last reminders it inserted (``ClaimRequest/pause``), written in the same
    /// transaction, so that a pause stands exactly when its last reminder's claim does. A last reminder taken over
    /// started its pause when it was first inserted.
    package static func pausesStarted(_ requests: [ClaimRequest], inserted: [Key: Int64])
        -> [(userID: String, pause: PauseRecord)]
    {
        requests.compactMap { request in
            guard let pause = request.pause, inserted[Key(request)] != nil else { return nil }
            return (request.userID, pause)
        }
    }

    /// How a pause is written over the user's earlier one (a user has one row): the end of the stores'
    /// `INSERT INTO reminder_pauses (user_id, period_key, paused_at, ignored) …`.
    package static let pauseReplacesSQL = """
        ON CONFLICT (user_id) DO UPDATE SET
            period_key = excluded.period_key, paused_at = excluded.paused_at, ignored = excluded.ignored
        """

    /// The requests step 1 did not insert, once each: those step 2 may take over.
    package static func remaining(_ requests: [ClaimRequest], inserted: [Key: Int64]) -> [ClaimRequest] {
        var seen = Set<Key>()
        return requests.filter {
            let key = Key($0)
            return inserted[key] == nil && seen.insert(key).inserted
        }
    }

    /// The claims won, in request order; a request named twice gets one claim, as the unique key gives it.
    package static func claims(_ requests: [ClaimRequest], inserted: [Key: Int64], takenOver: [Key: TakenOver])
        -> [Claim]
    {
        var claims: [Claim] = []
        claims.reserveCapacity(inserted.count + takenOver.count)
        var returned = Set<Key>()
        returned.reserveCapacity(requests.count)
        for request in requests {
            let key = Key(request)
            guard returned.insert(key).inserted else { continue }
            var claim: Claim
            if let id = inserted[key] {
                claim = Claim(
                    logID: id, userID: request.userID, period: request.period,
                    messageIndex: request.messageIndex, locale: request.locale, takenOver: false,
                    deliveredDeviceIDs: [])
            } else if let row = takenOver[key] {
                claim = Claim(
                    logID: row.id, userID: request.userID, period: request.period,
                    messageIndex: row.messageIndex ?? request.messageIndex, locale: row.locale ?? request.locale,
                    takenOver: true, deliveredDeviceIDs: row.delivered)
            } else {
                continue
            }
            claim.lastReminder = request.pause != nil
            claims.append(claim)
        }
        return claims
    }
}
