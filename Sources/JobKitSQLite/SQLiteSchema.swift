import GRDB
import JobKit
import JobKitSchema

/// The SQLite store's migrator: ``SchemaMigrations`` in their SQLite form.
enum SQLiteSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in SchemaMigrations.all {
            let sql = migration.sqlite
            migrator.registerMigration(migration.id) { db in
                try db.execute(sql: sql)
            }
        }
        return migrator
    }
}
