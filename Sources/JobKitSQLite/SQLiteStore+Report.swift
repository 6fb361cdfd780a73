import GRDB
import JobKit

/// The report's queries are ``ReportSQL``'s; this runs them and decodes their rows.
extension SQLiteStore: ReportStore {
    package func reminderOutcomes(from: Int64, to: Int64) async throws(JobError) -> [ReminderOutcomeRow] {
        try await read("reading the reminders' outcomes") { db in
            try Row.fetchAll(db, sql: ReportSQL(.sqlite, from: from, to: to).reminderOutcomes)
                .map { ($0[0], $0[1], $0[2], $0[3], $0[4], $0[5], $0[6]) }
        }
    }

    package func remindedLocales(from: Int64, to: Int64) async throws(JobError) -> [(locale: String, users: Int)] {
        try await read("reading the reminded users' locales") { db in
            try Row.fetchAll(db, sql: ReportSQL(.sqlite, from: from, to: to).remindedLocales).map { ($0[0], $0[1]) }
        }
    }

    package func pauseFigures(from: Int64, to: Int64) async throws(JobError) -> HealthReport.Pauses {
        try await read("counting paused reminders") { db in
            guard let row = try Row.fetchOne(db, sql: ReportSQL(.sqlite, from: from, to: to).pauses) else {
                return HealthReport.Pauses()
            }
            return HealthReport.Pauses(paused: row[0], started: row[1], cameBack: row[2])
        }
    }

    package func healthFigures(from: Int64, to: Int64) async throws(JobError) -> HealthFigures {
        let sql = ReportSQL(.sqlite, from: from, to: to)
        return try await read("building the report") { db in
            var figures = HealthFigures()
            figures.claims = try Row.fetchAll(db, sql: sql.claims).map { ($0[0], $0[1], $0[2], $0[3]) }
            figures.countDeliveries(
                try Row.fetchAll(db, sql: sql.deliveries).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) })
            figures.activeDevices = try Row.fetchAll(db, sql: sql.activeDevices).map { ($0[0], $0[1]) }
            figures.deactivations = try Row.fetchAll(db, sql: sql.deactivations).map { ($0[0], $0[1]) }
            figures.lastRuns = try Row.fetchAll(db, sql: sql.lastRuns).map { ($0[0], $0[1], $0[2], $0[3], $0[4]) }
            figures.windowRuns = try Row.fetchAll(db, sql: sql.windowRuns)
                .map { ($0[0], $0[1], $0[2], $0[3], $0[4]) }
            figures.lastFailures = try Row.fetchAll(db, sql: sql.lastFailures).map { ($0[0], $0[1], $0[2]) }
            return figures
        }
    }
}
