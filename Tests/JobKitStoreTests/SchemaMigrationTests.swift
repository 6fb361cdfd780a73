import Crypto
import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit
@testable import JobKitSchema

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

    /// A migration, once released, is history: a database records it as applied by its id and never runs it
    /// again, so changing its text would give a new database a schema that the databases already migrated do
    /// not have. A change of schema is a new migration. (m009 repeats m001's log columns for this reason.)
    @Test func releasedMigrationsKeepTheirText() {
        let released: [String: String] = [
            "001_initial": "cfdd75c33fb12eb43a3c87bed41cb170b1e0ee22f8c152bfd6d57376f2d29ef2",
            "002_provider_credentials": "3a98d4b57920186707bd8227980d30c885d4cbed0b285d4a90956c6e140745fe",
            "003_quiet_hours_and_deferred": "99d28f5145d3070d0d2b171dbafa326eafb5c5db57ac7f33699cfd29d177f50f",
            "004_janitor_indexes": "e35bbf0752ac961133f7e3dd3eeb92e434de8c19fb59fb62d560938ecb20358d",
            "005_drop_unused_status_index": "461ee8076b20ec4b0c6df52c4993827df414866279507360e3ca0e5dc8382a17",
            "006_covering_due_index": "574f65088ed65d6c603eb506f93730260b98e8d3e8862f318f1172b56a8bf867",
            "007_device_token_shape": "2f456f0bf9054e6671190edfa1eaf6993ee5f1710eeeb5114f3034d627381f68",
            "008_history_references_by_trigger": "bddd30ae9bbfe143e463bc1ecbe180db3c77ff1bbdad415260b7f7bcf2a02cfc",
            "009_partitioned_history": "5fcab6f165043cb9bad8af9171bd4c4c424e93bbea0f3a33e14b573eb55396ab",
            "010_due_set_leases": "3b649d2e7a14862f8c6f2121ecf7b4e57770c5197fc2933a78a01391bc804f38",
            "011_heap_only_resolutions": "98adaf8ada2f117efab2911837ca35a44c1681bc633aff01109e1d760c530e79",
            "012_trigger_functions_in_their_schema": "91af29988bfa7644c8fd8ced0b63a32b4b4245fd778ca61c44b1e1f542a07a22",
            "013_device_token_kind": "31f5575c9b0a75859065e8219b250c57b2af0d130bbecb4168074315a3ad688a",
            "014_contract_guards": "98544146316ed38539f964b95e7e2cdc48cf7d4930d7435edeb0dfff8d2dcdb2",
            "015_http_api": "905fff79639b7897e367a1a05ef4aec5166862b5d8e6d3c8773da21a890c5d53",
            "016_reminder_pauses": "92f489b0c5a66dac772d806326f59439c231ff1c5e8aba42e0cd3f62521d7f3b",
            "017_copy_outcomes": "7ca81e921c61d03ddbfabed92e4af7e61ff379f3e989c73ec2623273667a0026",
            "018_device_holds": "65a4ab0298ece5278c550444014d84d1f591a1b968c8bb890d112ad3489848d7",
            "019_mirrored_devices": "02c8ec9282f3532bb28374b972dc039a10072fd9c30db02825d396314494c806",
            "020_support_key_scope": "d871bc19630c48d91978ceb2139706b781790133950776e8e8da7efe4f6ace8c",
        ]
        for migration in SchemaMigrations.all {
            let digest = SHA256.hash(data: Data((migration.sqlite + "\u{0}" + migration.postgres).utf8))
            let hex = digest.map { String(format: "%02x", $0) }.joined()
            guard let pinned = released[migration.id] else {
                Issue.record("\(migration.id) is new: pin it once released (\"\(migration.id)\": \"\(hex)\")")
                continue
            }
            #expect(
                pinned == hex, "\(migration.id) changed: a released migration is history; make the change a new one")
        }
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

    /// Migration 020 changes a CHECK, which SQLite does so by making the table again: the keys already made keep
    /// their rows (applied again here over a key of each earlier scope), and only the scopes it names are taken.
    @Test(arguments: Backend.allCases) func theSupportScopeKeepsTheKeysThereWere(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let hash = String(repeating: "a", count: 64)
        func insert(_ id: String, _ scope: String) async throws {
            let created = backend == .sqlite ? "1" : "now()"
            try await db.execute(
                "INSERT INTO api_keys (id, name, scope, secret_sha256, created_at) VALUES ('\(id)', 'k', '\(scope)', '\(hash)', \(created))"
            )
        }
        for scope in ["admin", "hook", "devices", "webhook"] { try await insert("before-\(scope)", scope) }
        let migration = backend == .sqlite ? SchemaMigrations.m020.sqlite : SchemaMigrations.m020.postgres
        for statement in migration.components(separatedBy: ";\n") {
            let text = statement.trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty { try await db.execute(text) }
        }
        #expect(
            try await db.strings("SELECT scope FROM api_keys ORDER BY scope") == [
                "admin", "devices", "hook", "webhook",
            ])
        try await insert("after-support", "support")
        await #expect(throws: (any Error).self) { try await insert("after-other", "read") }
        #expect(try await db.count("SELECT count(*) FROM api_keys") == 5)
    }
}
