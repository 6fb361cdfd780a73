import Foundation
import Testing

@testable import JobKit

/// One migration list for both stores: each reaches the same version with the same tables and columns.
@Suite struct SchemaMigrationTests {
    @Test func bothStoresReachTheSameVersionWithTheSameTablesAndColumns() async throws {
        let sqlite = try await TemporaryDatabase(.sqlite)
        let postgres = try await TemporaryDatabase(.postgres)
        let ids = SchemaMigrations.all.map(\.id)
        #expect(try await sqlite.store.appliedMigrations() == ids)
        #expect(try await postgres.store.appliedMigrations() == ids)
        let sqliteColumns = Set(
            try await sqlite.strings(
                """
                SELECT m.name || '.' || c.name FROM sqlite_master m, pragma_table_xinfo(m.name) c
                WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name NOT LIKE 'grdb_%'
                """))
        let postgresColumns = Set(
            try await postgres.strings(
                """
                SELECT c.table_name || '.' || c.column_name FROM information_schema.columns c
                JOIN pg_class t ON t.relname = c.table_name AND t.relnamespace = 'public'::regnamespace
                WHERE c.table_schema = 'public' AND c.table_name <> 'schema_migrations' AND NOT t.relispartition
                """))
        let sqliteOnly = SchemaMigrations.storeSpecificColumns["sqlite"] ?? []
        let postgresOnly = SchemaMigrations.storeSpecificColumns["postgres"] ?? []
        #expect(sqliteColumns.count > 50)
        #expect(sqliteColumns.subtracting(postgresColumns) == sqliteOnly)
        #expect(postgresColumns.subtracting(sqliteColumns) == postgresOnly)
    }

    @Test func migrationIdentifiersAreUniqueAndInOrder() {
        let ids = SchemaMigrations.all.map(\.id)
        #expect(Set(ids).count == ids.count)
        #expect(ids == ids.sorted())
    }

    /// A PostgreSQL database migrated by the earlier list (which ended at 005) is brought to the same version
    /// as SQLite by the job that opens it.
    @Test func aPostgresDatabaseFromTheEarlierListIsBroughtUpToDate() async throws {
        let db = try await TemporaryDatabase(.postgres)
        try await db.execute("DELETE FROM schema_migrations WHERE id = '006_covering_due_index'")
        let reopened = try await db.reopen(.readWrite)
        #expect(try await reopened.appliedMigrations() == SchemaMigrations.all.map(\.id))
        await reopened.close()
    }

    /// Issue 21, item 7: a database migrated by a newer release (a migration this version does not know) was
    /// used with exit 0. Every store refuses it (78), and so do the binaries, the hook's front included.
    @Test(arguments: Backend.allCases) func aDatabaseFromANewerReleaseIsRefused(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        try await db.store.addUser("w")
        try await db.execute(
            backend == .sqlite
                ? "INSERT INTO grdb_migrations (identifier) VALUES ('999_from_a_newer_release')"
                : "INSERT INTO schema_migrations (id) VALUES ('999_from_a_newer_release')")
        for mode in [StoreOpenMode.readWrite, .readOnly] {
            do {
                let store = try await db.reopen(mode)
                await store.close()
                Issue.record("opened a database from a newer release (\(mode))")
            } catch let error as JobError {
                #expect(error.exitCode == 78)
                #expect(error.message.contains("newer than this program"), "\(error.message)")
                #expect(error.message.contains("999_from_a_newer_release"))
            }
        }
        let binaries: [(String, [String])] = [
            ("diary-reminder", ["--dry-run"]),
            ("content-limit-hook", ["--user", "w", "--used", "1", "--limit", "30"]),
            ("token-janitor", ["--dry-run"]),
        ]
        for (binary, arguments) in binaries {
            let result = try await Executables.run(
                binary, ["--database", db.path, "--now", "2026-11-21T20:00:00Z"] + arguments)
            #expect(result.status == 78, "\(binary): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("newer than this program"), "\(binary): \(result.stderr)")
        }
    }
}
