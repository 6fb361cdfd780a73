/// How close a usage is to its quota: the rule behind `content_limit_90` and `content_limit_100`.
///
/// It lives here, free of Foundation and I/O, because two binaries apply it: JobKit's ``ContentLimitRule``
/// and the `content-limit-hook` quiet path, which must start faster than Foundation loads.
package enum QuotaLevel: Sendable, Hashable {
    /// Below 90 %, or an unlimited plan: nothing to warn about.
    case below
    /// From 90 % (integer arithmetic, no rounding) up to the limit.
    case ninetyPercent
    /// At or past the limit.
    case full

    package init(used: Int, limit: Int?) {
        guard let limit, limit > 0 else {
            self = .below
            return
        }
        if used >= limit {
            self = .full
        } else if Self.product(used, 10) >= Self.product(limit, 9) {
            self = .ninetyPercent
        } else {
            self = .below
        }
    }

    /// `used` as a whole percentage of `limit`, rounded down and capped at 100; exact for every `Int` (a
    /// backend may send `Int.max` for "unlimited"). 0 for a limit that is not positive or a negative usage.
    package static func percent(used: Int, limit: Int) -> Int {
        guard limit > 0, used > 0 else { return 0 }
        guard used < limit else { return 100 }
        // used < limit, so used × 100 / limit < 100: the quotient fits, the product may not.
        return limit.dividingFullWidth(used.multipliedFullWidth(by: 100)).quotient
    }

    /// `a × b` as a 128-bit value (high word, low word), compared lexicographically: never overflows.
    private static func product(_ a: Int, _ b: Int) -> (high: Int, low: UInt) {
        let full = a.multipliedFullWidth(by: b)
        return (full.high, full.low)
    }
}

/// The SQLite schema this version reads and writes, as far as a reader without GRDB needs to know it.
package enum SQLiteSchemaVersion {
    /// The identifier of the newest migration (GRDB's `grdb_migrations` table). Migrations apply in order,
    /// so a database that has it has them all. A test keeps it equal to the migrator's last one.
    package static let latestMigration = "020_support_key_scope"
}
