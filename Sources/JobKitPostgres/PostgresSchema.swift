import Foundation
import JobKit
import JobKitSchema

/// The PostgreSQL store's migrations: ``SchemaMigrations`` in their PostgreSQL form, applied statement by
/// statement.
enum PostgresSchema {
    struct Migration {
        let id: String
        let sql: String
    }

    /// Serializes migrations between processes (`pg_advisory_xact_lock`).
    static let migrationLockKey: Int64 = 0x6469_6172_7970_7573  // "diarypus"

    /// A migration's statements, one by one (the extended protocol takes one per message): split at a `;`
    /// ending a line, except inside a `$$` function body.
    static func statements(_ sql: String) -> [String] {
        var statements: [String] = []
        var current: [Substring] = []
        var inBody = false
        for line in sql.split(separator: "\n", omittingEmptySubsequences: false) {
            current.append(line)
            if line.components(separatedBy: "$$").count % 2 == 0 { inBody.toggle() }
            if !inBody && line.trimmingCharacters(in: .whitespaces).hasSuffix(";") {
                statements.append(current.joined(separator: "\n"))
                current = []
            }
        }
        let rest = current.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        if !rest.isEmpty { statements.append(rest) }
        return statements
    }

    static let migrations: [Migration] = SchemaMigrations.all.map { Migration(id: $0.id, sql: $0.postgres) }
}
