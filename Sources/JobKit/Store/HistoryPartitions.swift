/// How PostgreSQL's history is partitioned (migration 009), as values: no I/O here. The store asks which
/// partitions a moment needs and which may be dropped; it supplies the catalog and the rows.
///
/// - `notification_logs` is partitioned by `period_key` (range, "C" collation). A month's partition holds that
///   month's daily keys and its monthly key (`2026-11` up to `2026-12`); a year's holds its yearly key alone
///   (`2026` up to `2026-01`, the keys between December's partition and January's). The dedup key
///   (user, type, period key) contains the partition key, so the unique constraint stays exact and a claim
///   touches one partition.
/// - `notification_deliveries` is partitioned by `created_at` by UTC month.
/// - Each table has a `DEFAULT` partition, so that a row never fails for want of a partition; the store moves
///   such rows into their own partition when it creates it.
package struct HistoryPartition: Sendable, Hashable, CustomStringConvertible {
    package enum Table: String, Sendable, CaseIterable {
        case logs = "notification_logs"
        case deliveries = "notification_deliveries"

        /// The partition that takes rows no other partition takes.
        package var defaultPartition: String { "\(rawValue)_default" }
    }

    package enum Span: Sendable, Hashable {
        case month(year: Int, month: Int)
        /// Logs only: a year's yearly period key.
        case year(Int)
    }

    package let table: Table
    package let span: Span

    init(_ table: Table, _ span: Span) {
        self.table = table
        self.span = span
    }

    /// `notification_logs_m2026_11`, `notification_logs_y2026`, `notification_deliveries_m2026_11`.
    package var name: String {
        switch span {
        case .month(let year, let month): "\(table.rawValue)_m\(LocalDate.pad(year, 4))_\(LocalDate.pad(month, 2))"
        case .year(let year): "\(table.rawValue)_y\(LocalDate.pad(year, 4))"
        }
    }

    package var description: String { name }

    /// The log partition's period keys: from `lower` (included) up to `upper` (excluded), compared by bytes.
    package var keyBounds: (lower: String, upper: String) {
        switch span {
        case .month(let year, let month):
            let upper =
                month == 12 ? LocalDate.pad(year + 1, 4) : "\(LocalDate.pad(year, 4))-\(LocalDate.pad(month + 1, 2))"
            return ("\(LocalDate.pad(year, 4))-\(LocalDate.pad(month, 2))", upper)
        case .year(let year):
            return (LocalDate.pad(year, 4), "\(LocalDate.pad(year, 4))-01")
        }
    }

    /// The delivery partition's instants (UTC seconds): from `lower` (included) up to `upper` (excluded).
    package var timeBounds: (lower: Int64, upper: Int64) {
        guard case .month(let year, let month) = span else { return (0, 0) }
        let first = LocalDate(year: year, month: month, day: 1)!
        let next = first.adding(days: LocalDate.daysIn(month: month, year: year))
        return (Int64(first.daysSinceEpoch) * 86_400, Int64(next.daysSinceEpoch) * 86_400)
    }

    /// The partition a ``name`` names; nil for any other table (a default partition, one an operator made).
    package init?(name: some StringProtocol) {
        guard let table = Table.allCases.first(where: { name.hasPrefix("\($0.rawValue)_") }) else { return nil }
        let rest = name.dropFirst(table.rawValue.count + 1)
        let digits = rest.dropFirst()
        guard digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "_") }) else { return nil }
        let span: Span
        switch rest.first {
        case "y" where table == .logs && digits.count == 4:
            guard let year = Int(digits) else { return nil }
            span = .year(year)
        case "m" where digits.count == 7:
            let parts = digits.split(separator: "_")
            guard parts.count == 2, let year = Int(parts[0]), let month = Int(parts[1]), (1...12).contains(month)
            else { return nil }
            span = .month(year: year, month: month)
        default: return nil
        }
        self.init(table, span)
        guard self.name == name else { return nil }
    }

    /// The log partition a period key belongs in: `YYYY-MM-DD` and `YYYY-MM` in their month's, `YYYY` in its
    /// year's. Nil for any other shape (such a row stays in the default partition).
    package static func logs(holding key: some StringProtocol) -> HistoryPartition? {
        let parts = key.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count), parts[0].count == 4, parts[0].allSatisfy(\.isASCII),
            let year = Int(parts[0]), year >= 0
        else { return nil }
        if parts.count == 1 { return HistoryPartition(.logs, .year(year)) }
        guard parts[1].count == 2, let month = Int(parts[1]), (1...12).contains(month) else { return nil }
        return HistoryPartition(.logs, .month(year: year, month: month))
    }

    /// The delivery partition an instant belongs in.
    package static func deliveries(holding instant: Int64) -> HistoryPartition {
        let date = LocalDate.split(wallSeconds: instant).date
        return HistoryPartition(.deliveries, .month(year: date.year, month: date.month))
    }

    /// The partitions rows written around `now` need, so that they exist before the rows come: for both tables
    /// the UTC months from two days before `now` (a period key is a local date, at most 14 hours from UTC's)
    /// to two months after, and the log partitions of those months' years.
    package static func needed(now: Int64) -> [HistoryPartition] {
        let first = LocalDate.split(wallSeconds: now - 2 * 86_400).date
        let current = LocalDate.split(wallSeconds: now).date
        var months: [(year: Int, month: Int)] = []
        var (year, month) = (first.year, first.month)
        let last = (current.year * 12 + current.month - 1) + 2
        while year * 12 + month - 1 <= last {
            months.append((year, month))
            (year, month) = month == 12 ? (year + 1, 1) : (year, month + 1)
        }
        var years: [Int] = []
        for month in months where !years.contains(month.year) { years.append(month.year) }
        return years.map { HistoryPartition(.logs, .year($0)) }
            + months.map { HistoryPartition(.logs, .month(year: $0.year, month: $0.month)) }
            + months.map { HistoryPartition(.deliveries, .month(year: $0.year, month: $0.month)) }
    }

    /// Whether a delivery partition may be dropped whole: every instant it can hold is before `before`, the
    /// janitor's delivery cutoff (the rule it deletes rows by).
    package func deliveriesAllBefore(_ before: Int64) -> Bool {
        table == .deliveries && timeBounds.upper <= before
    }

    /// Whether every period key a log partition can hold has ended in every zone (older than `guards`). Only
    /// such a partition is a candidate for dropping; the store then checks that each of its rows also meets
    /// the rest of the janitor's rule (claimed before the cutoff, finished).
    package func periodsEnded(_ guards: PeriodGuards) -> Bool {
        guard table == .logs else { return false }
        return switch span {
        case .month: keyBounds.lower < guards.month
        case .year: keyBounds.lower < guards.year
        }
    }
}

/// A history partition the janitor dropped whole (or, dry, would drop), and how many rows went with it.
package struct HistoryPartitionDrop: Sendable, Hashable {
    package let partition: HistoryPartition
    package let rows: Int

    package init(partition: HistoryPartition, rows: Int) {
        self.partition = partition
        self.rows = rows
    }
}
