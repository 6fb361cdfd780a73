import Foundation
import JobKit
import Logging
import NIOCore
import PostgresNIO

/// The store for more than one machine: the same contract as ``SQLiteStore`` on PostgreSQL, through
/// postgres-nio with bind parameters only.
///
/// Every operation is one statement or one short transaction on a connection leased from a small pool,
/// and nothing is kept in the session between them (no `SET`, no session advisory locks), so PgBouncer in
/// transaction mode works. The statements every page repeats are named prepared statements (``PreparedQuery``),
/// which PgBouncer carries from 1.21 on (`prepared_statements=off` for older poolers). Claims rely on the
/// unique key (`INSERT … ON CONFLICT DO NOTHING RETURNING`); credential minting on a row lock.
package final class PostgresStore: Sendable {
    package let location: PostgresLocation
    let pool: PostgresConnectionPool
    let readOnly: Bool
    let logger: Logger

    private init(location: PostgresLocation, pool: PostgresConnectionPool, readOnly: Bool, logger: Logger) {
        self.location = location
        self.pool = pool
        self.readOnly = readOnly
        self.logger = logger
    }

    /// Connects (failing at once with a clear error when the server, the database or the credentials are
    /// wrong) and prepares the schema: `.create` and `.readWrite` apply pending migrations, `.readOnly`
    /// requires them applied. PostgreSQL databases are never created here (`createdb` does that).
    package static func open(
        _ location: PostgresLocation, mode: StoreOpenMode, applicationName: String = "diary-push",
        logger: Logger = Logger(label: "postgres")
    ) async throws(JobError) -> PostgresStore {
        let configurations = try location.connectionConfigurations(applicationName: applicationName)
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let (target, checkLogger) = (location.targetSessionAttributes, quiet)
        let pool = PostgresConnectionPool(
            servers: Array(zip(location.servers, configurations)), maximum: location.maxConnections, logger: quiet
        ) { connection, _ in try await target.isMet(by: connection, logger: checkLogger) }
        let store = PostgresStore(location: location, pool: pool, readOnly: mode == .readOnly, logger: quiet)
        do {
            // The first connection: a wrong host, database or password fails here, at once.
            await pool.release(try await store.lease("connecting"))
            try await store.prepareSchema(migrate: mode != .readOnly)
        } catch {
            await pool.close()
            throw error
        }
        return store
    }

    // MARK: Schema

    func readMigrations() async throws(JobError) -> [String] {
        try await read("reading migrations") { connection in
            try await Self.applied(connection, self.logger)
        }
    }

    private static func applied(_ connection: PostgresConnection, _ logger: Logger) async throws -> [String] {
        let exists =
            try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
            .collect().first?.decode(Bool.self) ?? false
        guard exists else { return [] }
        return try await connection.query("SELECT id FROM schema_migrations ORDER BY id", logger: logger)
            .collect().map { try $0.decode(String.self) }
    }

    /// Applies pending migrations in one transaction under a transaction-level advisory lock, so several
    /// processes starting at once apply each migration once (and PgBouncer's transaction mode is fine).
    private func prepareSchema(migrate: Bool) async throws(JobError) {
        let expected = PostgresSchema.migrations.map(\.id)
        let applied = try await readMigrations()
        if let newer = applied.first(where: { !expected.contains($0) }) {
            throw .config(
                "the database at \(location.display) is newer than this program (it has migration \(newer), which this version does not know): upgrade diary-push"
            )
        }
        if applied.starts(with: expected) { return }
        guard migrate else {
            throw .config(
                "the database at \(location.display) is not migrated to this version's schema (run: pushctl migrate --database URL)"
            )
        }
        try await transaction("migrating \(location.display)", allowedWhenReadOnly: false) { connection in
            _ = try await connection.query(
                "SELECT pg_advisory_xact_lock(\(PostgresSchema.migrationLockKey))", logger: self.logger
            ).collect()
            _ = try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: self.logger
            ).collect()
            let done = Set(try await Self.applied(connection, self.logger))
            for migration in PostgresSchema.migrations where !done.contains(migration.id) {
                for statement in PostgresSchema.statements(migration.sql) {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger).collect()
                }
                _ = try await connection.query(
                    "INSERT INTO schema_migrations (id) VALUES (\(migration.id))", logger: self.logger
                ).collect()
            }
        }
    }

    // MARK: Running statements

    /// One statement outside an explicit transaction.
    func rows(_ context: String, _ query: PostgresQuery) async throws(JobError) -> [PostgresRow] {
        try await read(context) { connection in
            try await connection.query(query, logger: self.logger).collect()
        }
    }

    /// One writing statement: its own transaction, without `BEGIN`/`COMMIT` round trips.
    func write(_ context: String, _ query: PostgresQuery) async throws(JobError) -> [PostgresRow] {
        try await transaction(context, explicit: false) { connection in
            try await connection.query(query, logger: self.logger).collect()
        }
    }

    /// One of the statements every page runs (``PreparedQuery``): prepared on the connection the first time it
    /// runs there, then only bound and executed; unnamed, like every other statement, with
    /// `prepared_statements=off`.
    func run<Kind>(_ statement: PreparedQuery<Kind>, on connection: PostgresConnection) async throws -> [PostgresRow] {
        guard location.preparedStatements else {
            return try await connection.query(statement.query, logger: logger).collect()
        }
        var rows: [PostgresRow] = []
        for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
        return rows
    }

    func read<T: Sendable>(_ context: String, _ body: (PostgresConnection) async throws -> T) async throws(JobError)
        -> T
    {
        let connection = try await lease(context)
        do {
            let result = try await body(connection)
            await pool.release(connection)
            return result
        } catch {
            await pool.release(connection, reusable: !Self.isConnectionError(error))
            throw Self.mapError(error, context, location: location)
        }
    }

    /// A transaction (`BEGIN … COMMIT`; with `explicit: false`, a body of one statement, which is a
    /// transaction by itself). A serialization failure or deadlock rolls it back and runs it again (up to 3
    /// times), so a body must not have effects outside the database.
    func transaction<T: Sendable>(
        _ context: String, allowedWhenReadOnly: Bool = false, explicit: Bool = true,
        _ body: (PostgresConnection) async throws -> T
    ) async throws(JobError) -> T {
        if readOnly && !allowedWhenReadOnly {
            throw .cantCreate("\(context): the store was opened read-only")
        }
        var attempt = 0
        while true {
            attempt += 1
            let connection = try await lease(context)
            do {
                if explicit { _ = try await connection.query("BEGIN", logger: logger).collect() }
                let result = try await body(connection)
                if explicit { _ = try await connection.query("COMMIT", logger: logger).collect() }
                await pool.release(connection)
                return result
            } catch {
                let broken = Self.isConnectionError(error)
                if explicit && !broken {
                    _ = try? await connection.query("ROLLBACK", logger: logger).collect()
                }
                await pool.release(connection, reusable: !broken)
                if attempt < 3, Self.isRetryable(error) {
                    logger.debug("transaction retried", metadata: ["context": "\(context)", "attempt": "\(attempt)"])
                    continue
                }
                throw Self.mapError(error, context, location: location)
            }
        }
    }

    private func lease(_ context: String) async throws(JobError) -> PostgresConnection {
        do {
            return try await pool.lease()
        } catch {
            throw Self.mapError(error, context, location: location)
        }
    }

    // MARK: Errors

    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    static func isRetryable(_ error: any Error) -> Bool {
        ["40001", "40P01"].contains(sqlState(error) ?? "")
    }

    static func isConnectionError(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        return [.connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown].contains(
            error.code)
    }

    /// Maps a postgres-nio error to the jobs' exit codes. Messages carry the server's text and the location
    /// without its password, never a bound value.
    static func mapError(_ error: any Error, _ context: String, location: PostgresLocation) -> JobError {
        if let error = error as? JobError { return error }
        if let passedOver = error as? ServersPassedOver { return describe(passedOver, context, location: location) }
        guard let error = error as? PSQLError else {
            if error is PostgresDecodingError { return .software("\(context): unexpected column type from PostgreSQL") }
            return .unavailable("\(context): \(location.display): \(error)")
        }
        let message = error.serverInfo?[.message] ?? ""
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            switch state {
            case "40001", "40P01", "55P03", "57014", "53300", "57P03", "08006":
                return .tempFailure("\(context): PostgreSQL: \(message) (\(state)); try again")
            case "28P01", "28000":
                return .config(
                    "\(context): PostgreSQL refused the login of \(location.user) at \(location.display): \(message)")
            case "3F000":
                // The search_path names no schema that exists: nowhere to create the tables.
                return .config(
                    "\(context): PostgreSQL: \(message) at \(location.display): the search_path of \(location.user) names no schema that exists (CREATE SCHEMA it, or ALTER ROLE \(location.user) SET search_path)"
                )
            case "3D000":
                return .noInput(
                    "\(context): \(message) at \(location.display) (create it with createdb, then run pushctl migrate)")
            case "26000", "42P05":
                // A named statement missing, or there already, on the server connection: a pooler in
                // transaction mode gave this connection's statements to another server connection.
                return .config(
                    "\(context): PostgreSQL: \(message): a connection pooler in transaction mode that does not carry prepared statements sits in front of \(location.display); add prepared_statements=off to the database URL (or, on PgBouncer 1.21 or later, set max_prepared_statements)"
                )
            case "42P01", "42703", "42883":
                return .config("\(context): \(message): is the database migrated? (pushctl migrate)")
            case "25006", "42501":
                return .cantCreate("\(context): PostgreSQL: \(message)")
            case "53100", "53200":
                return .ioError("\(context): PostgreSQL: \(message)")
            case let state where state.hasPrefix("23") || state.hasPrefix("22"):
                return .dataError("\(context): \(message)")
            default:
                return .unavailable("\(context): PostgreSQL: \(message) (\(state))")
            }
        case .sslUnsupported:
            return .config(
                "\(context): \(location.display) does not offer TLS, and sslmode=\(location.tlsMode.rawValue) requires it"
            )
        case .authMechanismRequiresPassword:
            return .config(
                "\(context): \(location.display) asks for a password and none was given (URL, password_file or PUSH_DATABASE_PASSWORD_FILE)"
            )
        case .unsupportedAuthMechanism, .saslError:
            return .config("\(context): cannot authenticate to \(location.display) (\(error.code))")
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown,
            .failedToAddSSLHandler:
            let socket = location.unixSocketPath.map { " (socket \($0))" } ?? ""
            return .unavailable(
                "\(context): cannot reach PostgreSQL at \(location.display)\(socket): \(unreachable(error, location.servers[0], location))"
            )
        default:
            return .unavailable("\(context): PostgreSQL (\(error.code)) \(message)")
        }
    }

    /// Why `server` could not be reached, with what to do about a TLS handshake that failed.
    private static func unreachable(_ error: PSQLError, _ server: PostgresLocation.Server, _ location: PostgresLocation)
        -> String
    {
        let detail = error.underlying.map(ConnectionErrorText.describe) ?? "\(error.code)"
        let hint = error.underlying.flatMap(ConnectionErrorText.tlsFailure).flatMap {
            location.hint($0, server: server)
        }
        return detail + (hint.map { "; " + $0 } ?? "")
    }

    /// The servers of a URL that names several, each passed over, as an error's text.
    private static func describe(_ passedOver: ServersPassedOver, _ context: String, location: PostgresLocation)
        -> JobError
    {
        let reasons = passedOver.servers.map { server, reason in
            let why =
                switch reason {
                case .target:
                    location.targetSessionAttributes == .primary
                        ? "a standby (target_session_attrs=primary asks for one that is not)"
                        : "read-only (target_session_attrs=read-write asks for one that takes writes)"
                case .failed(let error) where error.code == .server:
                    "\(error.serverInfo?[.message] ?? "") (\(error.serverInfo?[.sqlState] ?? ""))"
                case .failed(let error):
                    unreachable(error, server, location)
                }
            return "\(server.display): \(why)"
        }
        return .unavailable(
            "\(context): no PostgreSQL server of \(location.display) will do: \(reasons.joined(separator: "; "))")
    }

    // MARK: SQL helpers

    /// Unix seconds of a `timestamptz` expression.
    static func epoch(_ expression: String) -> String { SQLDialect.postgres.epoch(expression) }

    /// The string at `key` of the `jsonb` expression, or NULL for a value that is not a string.
    static func jsonString(_ expression: String, key: String) -> String {
        SQLDialect.postgres.jsonString(expression, key: key)
    }
}

extension PostgresStore: JobStore {
    package var backend: String { "postgres" }
    package var displayLocation: String { location.display }

    package func appliedMigrations() async throws(JobError) -> [String] {
        try await readMigrations()
    }

    package func close() async {
        await pool.close()
    }
}

/// Every server of a URL that names several was passed over: unreachable, or not what `target_session_attrs` asks.
struct ServersPassedOver: Error {
    enum Reason {
        case failed(PSQLError)
        case target
    }

    var servers: [(server: PostgresLocation.Server, reason: Reason)] = []
}

extension PostgresLocation.SessionTarget {
    /// Whether the server `connection` reached is one this target takes.
    func isMet(by connection: PostgresConnection, logger: Logger) async throws -> Bool {
        switch self {
        case .any:
            return true
        case .readWrite:
            let rows = try await connection.query("SHOW transaction_read_only", logger: logger).collect()
            return try rows.first?.decode(String.self) == "off"
        case .primary:
            let rows = try await connection.query("SELECT pg_is_in_recovery()", logger: logger).collect()
            return try rows.first?.decode(Bool.self) == false
        }
    }
}

/// A few connections, opened on demand and kept for the process's life (a warm serverless instance
/// reuses them). A connection that failed is dropped, never handed out again. A task waiting for a connection
/// that is cancelled stops waiting (`CancellationError`); the owner (``PostgresStore/close()``) closes it.
///
/// Not postgres-nio's `PostgresClient` (1.33.2), measured on 2026-11-28 against the test server: with the server
/// refusing connections, or refusing the password, its first query waited 67 s and then threw
/// `connectionCreationCircuitBreakerTripped`, without the server's reason (its circuit breaker trips after a fixed
/// 60 s that its configuration does not expose). This pool fails that query at once with the server's words,
/// which the jobs' exit codes and messages (and a wrong URL found at start-up) depend on.
///
/// Of several servers, the first connection goes to the first that answers and will do (`willDo`), as libpq
/// chooses; every later connection goes to the same one. A server is passed over when it cannot be reached or
/// is not ready for connections (starting up, shutting down, too many connections); a refused login or a
/// missing database stops at once, as every server would say the same.
actor PostgresConnectionPool {
    typealias Check = @Sendable (PostgresConnection, PostgresLocation.Server) async throws -> Bool

    private let servers: [(server: PostgresLocation.Server, configuration: PostgresConnection.Configuration)]
    private let willDo: Check
    /// The server every connection goes to, once one would do.
    private var chosen: Int?
    private let maximum: Int
    private let logger: Logger
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var nextID = 0
    /// Tasks waiting for a connection, in arrival order, by id (so that a cancelled one can leave the queue).
    private var waiters: [(id: Int, continuation: CheckedContinuation<PostgresConnection?, Never>)] = []
    private var nextWaiterID = 0
    private var closed = false

    init(
        servers: [(server: PostgresLocation.Server, configuration: PostgresConnection.Configuration)], maximum: Int,
        logger: Logger, willDo: @escaping Check
    ) {
        self.servers = servers
        self.maximum = maximum
        self.logger = logger
        self.willDo = willDo
    }

    func lease() async throws -> PostgresConnection {
        while true {
            if closed { throw JobError.unavailable("the PostgreSQL connection pool is closed") }
            while let connection = idle.popLast() {
                if !connection.isClosed { return connection }
                open -= 1
            }
            if open < maximum {
                open += 1
                nextID += 1
                do {
                    return try await connect(id: nextID)
                } catch {
                    open -= 1
                    wakeOne(with: nil)
                    throw error
                }
            }
            // Wait for a connection to come back (or for a slot to free up), unless cancelled.
            try Task.checkCancellation()
            nextWaiterID += 1
            let id = nextWaiterID
            let handed = await withTaskCancellationHandler {
                await withCheckedContinuation { waiters.append((id, $0)) }
            } onCancel: {
                Task { await self.cancelWaiter(id) }
            }
            if let handed {
                guard Task.isCancelled else { return handed }
                release(handed)
            }
            try Task.checkCancellation()
        }
    }

    /// Ends the wait of waiter `id` with nothing, if it is still waiting.
    private func cancelWaiter(_ id: Int) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(returning: nil)
    }

    private func connect(id: Int) async throws -> PostgresConnection {
        if let chosen {
            return try await PostgresConnection.connect(
                configuration: servers[chosen].configuration, id: id, logger: logger)
        }
        var passedOver = ServersPassedOver()
        for (index, candidate) in servers.enumerated() {
            let connection: PostgresConnection
            do {
                connection = try await PostgresConnection.connect(
                    configuration: candidate.configuration, id: id, logger: logger)
            } catch let error as PSQLError where servers.count > 1 && Self.passesOver(error) {
                passedOver.servers.append((candidate.server, .failed(error)))
                continue
            }
            let fits: Bool
            do {
                fits = try await willDo(connection, candidate.server)
            } catch {
                try? await connection.close()
                throw error
            }
            guard fits else {
                try? await connection.close()
                passedOver.servers.append((candidate.server, .target))
                continue
            }
            chosen = index
            return connection
        }
        throw passedOver
    }

    /// Whether a server that failed so is passed over for the next: it could not be reached, or is not ready.
    private static func passesOver(_ error: PSQLError) -> Bool {
        switch error.code {
        case .connectionError, .serverClosedConnection, .uncleanShutdown, .failedToAddSSLHandler, .sslUnsupported:
            return true
        case .server:
            // cannot_connect_now (starting up, shutting down, in recovery), too_many_connections.
            return ["57P03", "53300"].contains(error.serverInfo?[.sqlState] ?? "")
        default:
            return false
        }
    }

    func release(_ connection: PostgresConnection, reusable: Bool = true) {
        guard reusable, !closed, !connection.isClosed else {
            open -= 1
            connection.close().whenComplete { _ in }
            wakeOne(with: nil)
            return
        }
        if !waiters.isEmpty {
            waiters.removeFirst().continuation.resume(returning: connection)
        } else {
            idle.append(connection)
        }
    }

    private func wakeOne(with connection: PostgresConnection?) {
        if !waiters.isEmpty { waiters.removeFirst().continuation.resume(returning: connection) }
    }

    /// The owner closes the pool (``close()``); a pool dropped without that (a test's store left open) still
    /// closes its idle connections, as postgres-nio requires of a connection before it is freed.
    deinit {
        for connection in idle {
            connection.close().whenComplete { _ in _ = connection }
        }
    }

    func close() async {
        closed = true
        let connections = idle
        idle = []
        open -= connections.count
        for waiter in waiters { waiter.continuation.resume(returning: nil) }
        waiters = []
        for connection in connections {
            try? await connection.close()
        }
    }
}

/// A statement that every page runs, its text fixed (every value is a parameter): it is prepared once per
/// connection under its kind's name, so that the server parses and plans it once, not once a page.
struct PreparedQuery<Kind: PreparedQueryKind>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var name: String { Kind.statementName }
    static var sql: String { Kind.sql }

    let query: PostgresQuery

    init(_ query: PostgresQuery) {
        assert(query.sql == Kind.sql, "\(Kind.statementName): the text of a prepared statement changed with its values")
        self.query = query
    }

    func makeBindings() -> PostgresBindings { query.binds }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// A ``PreparedQuery``'s name on the server and its text (built from empty inputs).
protocol PreparedQueryKind {
    static var statementName: String { get }
    static var sql: String { get }
}
