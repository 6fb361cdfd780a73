import Foundation
import GRDB
import JobKitTestSupport
import JobKitWiring
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import PushSimulator
import Testing

@testable import JobKit
@testable import JobKitPostgres
@testable import JobKitSQLite
@testable import JobKitSchema

/// PostgreSQL only: the connection settings (URLs as libpq reads them, TLS, sockets, several servers), and the
/// statements its hot path runs.
@Suite struct PostgresStoreTests {
    @Test func theDueSelectionIsIndexDriven() async throws {
        let db = try await TemporaryDatabase(.postgres)
        var options = SeedOptions(users: 4_000, now: 0)
        // Its instants are 1970's (the plans are what is measured): no entries, which must be from 2000 on.
        options.wroteTodayShare = 0
        options.randomSeed = 7
        _ = try await Seeder().seed(options, into: db.store)
        try await db.execute("ANALYZE")
        let queries = [
            DueQuery(
                zone: "Asia/Tokyo", period: "1970-01-01", minutes: 1_200...1_215, day: 0..<86_400,
                type: .diaryReminder)
        ]
        let store = db.store as! PostgresStore
        func explain(_ query: PostgresQuery) async throws -> String {
            try await store.rows("explain", PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds))
                .map { try $0.decode(String.self) }.joined(separator: "\n")
        }
        let keysPlan = try await explain(PostgresStore.dueKeysQuery(queries))
        #expect(keysPlan.contains("notification_settings_due"), "\(keysPlan)")
        #expect(!keysPlan.contains("Seq Scan"), "\(keysPlan)")
        let keys = (0..<20).map { DueKey(userID: "user-\($0)", query: 0) }
        let plan = try await explain(PostgresStore.dueCandidatesQuery(keys, of: queries))
        #expect(plan.contains("Function Scan on k"), "\(plan)")  // the keys drive
        #expect(plan.contains("on notification_settings n") && plan.contains("users_pkey on users"), "\(plan)")
        #expect(!plan.contains("Seq Scan on notification_settings") && !plan.contains("Seq Scan on users"), "\(plan)")
    }

    /// A due candidate's two looks at the log (today's claim and the previous reminder's words) are one backward
    /// index scan in the common case, when the user has no row today: for 20 candidates reminded yesterday, at
    /// most 20 scans of the log (two per candidate before); a candidate with today's row costs one more.
    @Test func aCandidateReadsTheLogOnceUnlessItHasARowToday() async throws {
        let db = try await TemporaryDatabase(.postgres)
        try await db.store.prepareHistory(now: instant("2026-11-21T20:00:00Z"))
        let users = (0..<20).map { String(format: "u%02d", $0) }
        for user in users { try await db.store.addUser(user) }
        try await db.execute(
            """
            INSERT INTO notification_logs
                (user_id, notification_type, period_key, status, message_index, locale, run_id, claimed_at, updated_at)
            SELECT id, 'diary_reminder', '2026-11-20', 'sent', 1, 'en', 'r', now(), now() FROM users
            UNION ALL
            SELECT id, 'diary_reminder', '2026-11-21', 'retry', 0, 'en', 'r', now(), now() FROM users WHERE id < 'u05'
            """)
        try await db.execute("ANALYZE")
        let queries = [
            DueQuery(
                zone: "UTC", period: "2026-11-21", minutes: 1_200...1_214,
                day: instant("2026-11-21T00:00:00Z")..<instant("2026-11-22T00:00:00Z"), type: .diaryReminder)
        ]
        let keys = users.map { DueKey(userID: $0, query: 0) }
        let store = db.store as! PostgresStore
        let candidates = try await store.dueCandidates(keys, of: queries)
        #expect(candidates.map(\.previousMessageIndex) == Array(repeating: 1, count: 20))
        #expect(candidates.filter { $0.log != nil }.map(\.userID) == Array(users.prefix(5)))
        let query = PostgresStore.dueCandidatesQuery(keys, of: queries)
        let plan = try await store.rows(
            "explain", PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, COSTS OFF) " + query.sql, binds: query.binds)
        ).map { try $0.decode(String.self) }
        let logScans = plan.filter { $0.contains(" on notification_logs") }.compactMap { line in
            line.split(separator: "loops=").last.flatMap { Int($0.prefix { $0.isNumber }) }
        }.reduce(0, +)
        #expect(logScans > 0 && logScans <= 25, "\(plan.joined(separator: "\n"))")
    }

    /// The statements every page repeats are named prepared statements on the connection that ran them (one
    /// here: max_connections=1); with prepared_statements=off there are none, and the run is the same. A
    /// prepared statement that vanished from the server connection (as behind a pooler in transaction mode
    /// that does not carry them) fails the run with a message that names the fix.
    @Test func pageStatementsArePreparedUnlessTheURLSaysOff() async throws {
        for prepared in [true, false] {
            let db = try await TemporaryDatabase(.postgres)
            for i in 0..<5 { try await db.store.addUser("u\(i)", time: "20:00") }
            var location = try PostgresLocation.parse(db.path)
            location.maxConnections = 1
            location.preparedStatements = prepared
            let store = try await PostgresStore.open(location, mode: .readWrite, logger: quietLogger)
            func run(_ now: String) async throws -> RunSummary {
                try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger).run(
                    ReminderRunOptions(now: instant(now)))
            }
            #expect(try await run("2026-11-21T20:00:00Z").sent == 5)
            let names = try await store.rows("reading", "SELECT name FROM pg_prepared_statements ORDER BY name")
                .map { try $0.decode(String.self) }
            #expect(
                names
                    == (prepared
                        ? [
                            "diary_push_claim", "diary_push_deliveries", "diary_push_due_candidates",
                            "diary_push_resolution",
                        ]
                        : []))
            if prepared {
                _ = try await store.rows("forgetting", "DEALLOCATE diary_push_due_candidates")
                await #expect(
                    throws: JobError.config(
                        "selecting due users: PostgreSQL: prepared statement \"diary_push_due_candidates\" does not exist: a connection pooler in transaction mode that does not carry prepared statements sits in front of \(location.display); add prepared_statements=off to the database URL (or, on PgBouncer 1.21 or later, set max_prepared_statements)"
                    )
                ) { try await run("2026-11-22T20:00:00Z") }
            }
            await store.close()
        }
    }

    @Test func urlsAreParsedStrictlyAndPasswordsNeverShown() throws {
        let location = try PostgresLocation.parse(
            "postgresql://app:s%40cret@db.example:6543/diary?sslmode=require&max_connections=8&application_name=cron")
        #expect(location.host == "db.example")
        #expect(location.port == 6543)
        #expect(location.user == "app")
        #expect(location.database == "diary")
        #expect(location.tlsMode == .require)
        #expect(location.maxConnections == 8)
        #expect(location.password == "s@cret")
        #expect(location.display == "postgres://app@db.example:6543/diary")
        #expect(!location.display.contains("cret"))
        #expect(location.preparedStatements)
        #expect(try !PostgresLocation.parse("postgres://h/db?prepared_statements=off").preparedStatements)
        #expect(try PostgresLocation.parse("postgres://h/db?prepared_statements=on").preparedStatements)
        #expect(throws: JobError.config("PUSH_DATABASE_URL: prepared_statements must be on or off, got yes")) {
            try PostgresLocation.parse("postgres://h/db?prepared_statements=yes")
        }
        for bad in [
            "postgres://h/db?sslmode=sometimes", "postgres://h/db?pool=3",
            "postgres://h/db?max_connections=0",
        ] {
            #expect(throws: JobError.self, "\(bad)") { try PostgresLocation.parse(bad) }
        }
        // A parameter given twice is a mistake to name, not one to settle by taking the last.
        #expect(throws: JobError.config("PUSH_DATABASE_URL: sslmode is given twice")) {
            try PostgresLocation.parse("postgres://h/db?sslmode=require&sslmode=disable")
        }
        let secret = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)")
        try Data("from-file\n".utf8).write(to: secret)
        #expect(try PostgresLocation.parse("postgres://app@h/db", passwordFile: secret.path).password == "from-file")
        #expect(throws: JobError.self) {
            try PostgresLocation.parse("postgres://app:x@h/db", passwordFile: secret.path)
        }
        #expect(
            throws: JobError.noInput(
                "cannot read the database password file /nonexistent/pw: No such file or directory")
        ) {
            try PostgresLocation.parse("postgres://app@h/db?password_file=/nonexistent/pw")
        }
    }

    /// A Unix-domain socket, named as libpq names it: a host that is an absolute path is the socket's directory
    /// (in the URL's host, percent-encoded, or in `?host=`, which like `?port=` overrides the URL's), the socket
    /// is `<directory>/.s.PGSQL.<port>`, and a URL with no host at all means the default directory.
    @Test func unixSocketURLsAreParsedAsLibpqParsesThem() throws {
        let query = try PostgresLocation.parse("postgres://push@/diary?host=/var/run/postgresql")
        #expect(query.host == "/var/run/postgresql")
        #expect(query.port == 5432)
        #expect(query.user == "push")
        #expect(query.database == "diary")
        #expect(query.unixSocketPath == "/var/run/postgresql/.s.PGSQL.5432")
        #expect(query.display == "postgres://push@/diary?host=/var/run/postgresql&port=5432")
        let encoded = try PostgresLocation.parse("postgresql://push:pw@%2Frun%2Fpg:5433/diary?sslmode=prefer")
        #expect(encoded.unixSocketPath == "/run/pg/.s.PGSQL.5433")
        #expect(encoded.password == "pw")
        #expect(encoded.display == "postgres://push@/diary?host=/run/pg&port=5433")
        // The display is a URL that names the same socket.
        #expect(try PostgresLocation.parse(encoded.display).unixSocketPath == encoded.unixSocketPath)
        let odd = try PostgresLocation.parse("postgres://push@/diary?host=%2Fsrv%2Fpg%20%26%20co")
        #expect(odd.unixSocketPath == "/srv/pg & co/.s.PGSQL.5432")
        #expect(odd.display == "postgres://push@/diary?host=/srv/pg%20%26%20co&port=5432")
        #expect(try PostgresLocation.parse(odd.display).unixSocketPath == odd.unixSocketPath)
        let overridden = try PostgresLocation.parse("postgres://app@db.example/diary?host=other.example&port=6000")
        #expect(overridden.host == "other.example")
        #expect(overridden.port == 6000)
        #expect(overridden.unixSocketPath == nil)
        #expect(overridden.display == "postgres://app@other.example:6000/diary")
        // sslrootcert=system, as in libpq 16: the system's CAs, and verify-full unless sslmode says otherwise.
        let system = try PostgresLocation.parse("postgres://db.example/diary?sslrootcert=system")
        #expect(system.tlsMode == .verifyFull && system.rootCertificateFile == nil)
        #expect(
            try PostgresLocation.parse("postgres://db.example/diary?sslrootcert=system&sslmode=verify-ca").tlsMode
                == .verifyCA)
        let defaultDirectory =
            FileManager.default.fileExists(atPath: "/var/run/postgresql") ? "/var/run/postgresql" : "/tmp"
        #expect(try PostgresLocation.parse("postgres:///diary").unixSocketPath == "\(defaultDirectory)/.s.PGSQL.5432")
        #expect(try PostgresLocation.parse("postgres://app@/diary?host=").host == defaultDirectory)
        for (bad, message) in [
            (
                "postgres:///diary?host=/run/pg&sslmode=require",
                "PUSH_DATABASE_URL: sslmode=require asks for TLS, which a Unix-domain socket (/run/pg) does not carry; leave sslmode out, or name a TCP host"
            ),
            (
                "postgres://%2Frun%2Fpg/diary?sslmode=verify-full",
                "PUSH_DATABASE_URL: sslmode=verify-full asks for TLS, which a Unix-domain socket (/run/pg) does not carry; leave sslmode out, or name a TCP host"
            ),
            (
                "postgres://%2Frun%2Fpg/diary?sslcert=/c.pem&sslkey=/c.key",
                "PUSH_DATABASE_URL: sslcert asks for TLS, which a Unix-domain socket (/run/pg) does not carry; leave sslcert out, or name a TCP host"
            ),
            (
                "postgres://h/db?sslrootcert=/ca.pem",
                "PUSH_DATABASE_URL: sslrootcert is checked only with sslmode=verify-ca or verify-full (sslmode=prefer does not check the server's certificate)"
            ),
            (
                "postgres://h/db?sslmode=require&sslcert=/c.pem",
                "PUSH_DATABASE_URL: sslcert and sslkey go together (a client certificate and its key)"
            ),
            (
                "postgres://h/db?sslmode=disable&sslcert=/c.pem&sslkey=/c.key",
                "PUSH_DATABASE_URL: sslcert needs TLS, and sslmode=disable turns it off"
            ),
            (
                "postgres:///diary?host=/run/pg&sslrootcert=system",
                "PUSH_DATABASE_URL: sslrootcert asks for TLS, which a Unix-domain socket (/run/pg) does not carry; leave sslrootcert out, or name a TCP host"
            ),
            (
                "postgres://h/db?sslrootcert=system&sslmode=require",
                "PUSH_DATABASE_URL: sslrootcert is checked only with sslmode=verify-ca or verify-full (sslmode=require does not check the server's certificate)"
            ),
            ("postgres://h/db?port=0", "PUSH_DATABASE_URL: port must be within 1…65535, got 0"),
            ("postgres://h/db?port=x", "PUSH_DATABASE_URL: port must be within 1…65535, got x"),
        ] {
            #expect(throws: JobError.config(message), "\(bad)") { try PostgresLocation.parse(bad) }
        }
    }

    /// Several servers, written as libpq reads them: `host:port` pairs in the URL, or lists in `?host=` and `?port=`
    /// (which override the URL's), one port for all hosts or one per host, an empty host the default socket.
    @Test func severalServersAreParsedAsLibpqParsesThem() throws {
        typealias Server = PostgresLocation.Server
        let pair = try PostgresLocation.parse(
            "postgres://app:pw@db1.example:5433,db2.example/diary?target_session_attrs=read-write")
        #expect(pair.servers == [Server(host: "db1.example", port: 5433), Server(host: "db2.example", port: 5432)])
        #expect(pair.host == "db1.example" && pair.port == 5433)
        #expect(pair.user == "app" && pair.password == "pw" && pair.database == "diary")
        #expect(pair.targetSessionAttributes == .readWrite)
        #expect(pair.display == "postgres://app@db1.example:5433,db2.example:5432/diary")
        #expect(try PostgresLocation.parse(pair.display).servers == pair.servers)
        #expect(try PostgresLocation.parse("postgres://h/db").targetSessionAttributes == .any)
        #expect(
            try PostgresLocation.parse("postgres://h/db?target_session_attrs=primary").targetSessionAttributes
                == .primary)

        let addresses = try PostgresLocation.parse("postgres://app@[::1]:6000,10.0.0.2/diary")
        #expect(addresses.servers == [Server(host: "::1", port: 6000), Server(host: "10.0.0.2")])
        #expect(addresses.display == "postgres://app@[::1]:6000,10.0.0.2:5432/diary")
        // `?port=` with one port gives it to every host; with one per host, in order.
        #expect(
            try PostgresLocation.parse("postgres://app@a,b/diary?port=6000").servers == [
                Server(host: "a", port: 6000), Server(host: "b", port: 6000),
            ])
        let listed = try PostgresLocation.parse("postgres://app@/diary?host=a,/run/pg,&port=1,2,3")
        let defaultDirectory =
            FileManager.default.fileExists(atPath: "/var/run/postgresql") ? "/var/run/postgresql" : "/tmp"
        #expect(
            listed.servers == [
                Server(host: "a", port: 1), Server(host: "/run/pg", port: 2), Server(host: defaultDirectory, port: 3),
            ])
        // With a socket among them, the display lists them in the query, and names the same servers.
        #expect(listed.display == "postgres://app@/diary?host=a,/run/pg,\(defaultDirectory)&port=1,2,3")
        #expect(try PostgresLocation.parse(listed.display).servers == listed.servers)

        for (bad, message) in [
            (
                "postgres://app@/diary?host=a,b&port=1,2,3",
                "PUSH_DATABASE_URL: 3 ports for 2 hosts (give one port for all, or one per host)"
            ),
            (
                "postgres://app@a:1,b:2,c/diary?host=a,b",
                "PUSH_DATABASE_URL: 3 ports for 2 hosts (give one port for all, or one per host)"
            ),
            ("postgres://a:70000,b/diary", "PUSH_DATABASE_URL: port must be within 1…65535, got 70000"),
            ("postgres://a,b/diary?port=5432,x", "PUSH_DATABASE_URL: port must be within 1…65535, got x"),
            ("postgres://a,b c/diary", "PUSH_DATABASE_URL: not a valid postgres:// URL"),
            (
                "postgres://a,b/diary?target_session_attrs=standby",
                "PUSH_DATABASE_URL: target_session_attrs must be any, read-write, primary (the jobs write), got standby"
            ),
            (
                "postgres://db1,%2Frun%2Fpg/diary?sslmode=require",
                "PUSH_DATABASE_URL: sslmode=require asks for TLS, which a Unix-domain socket (/run/pg) does not carry; leave sslmode out, or name a TCP host"
            ),
        ] {
            #expect(throws: JobError.config(message), "\(bad)") { try PostgresLocation.parse(bad) }
        }
    }

    /// The same jobs over the test server's Unix-domain socket (trust authentication there, as on a host where
    /// the job's system user logs in by peer authentication with no password).
    @Test func theStoreConnectsOverAUnixDomainSocket() async throws {
        let directory = try Backend.postgresSocketDirectory
        let db = try await TemporaryDatabase(.postgres)
        try await db.store.addUser("u1", time: "20:00")
        let tcp = try PostgresLocation.parse(db.path)
        let url = "postgres://\(tcp.user)@/\(tcp.database)?host=\(directory)&port=\(tcp.port)"
        let store = try await PostgresStore.open(try PostgresLocation.parse(url), mode: .readWrite, logger: quietLogger)
        // No server address: the session came in over the socket, not TCP.
        let address = try await store.rows("reading", "SELECT coalesce(inet_server_addr()::text, 'socket')")
            .map { try $0.decode(String.self) }
        #expect(address == ["socket"])
        let summary = try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(summary.sent == 1)
        await store.close()
        let nowhere = try PostgresLocation.parse("postgres://\(tcp.user)@/\(tcp.database)?host=\(db.directory.path)")
        let error = await #expect(throws: JobError.self, "a socket that is not there") {
            _ = try await PostgresStore.open(nowhere, mode: .readWrite, logger: quietLogger)
        }
        #expect(error?.exitCode == 69, "\(error?.message ?? "")")
        #expect(
            error?.message.contains(
                "cannot reach PostgreSQL at \(nowhere.display) (socket \(db.directory.path)/.s.PGSQL.5432)") == true,
            "\(error?.message ?? "")")
    }

    /// Several servers in one URL, as libpq takes them (`host1:port1,host2:port2`, or lists in `?host=` and
    /// `?port=`): a job connects to the first that answers and, with `target_session_attrs=read-write` (or
    /// `primary`), takes writes, so that a URL naming a primary and its standby follows a failover. A server
    /// that cannot be reached or will not do is passed over, and each is named when none will do. Before, such a
    /// URL was "not a valid postgres:// URL".
    @Test func aURLOfSeveralServersConnectsToTheFirstThatWillDo() async throws {
        let db = try await TemporaryDatabase(.postgres)
        try await db.store.addUser("u1", time: "20:00")
        let tcp = try PostgresLocation.parse(db.path)
        func open(_ url: String, _ mode: StoreOpenMode = .readWrite) async throws -> PostgresStore {
            var location = try PostgresLocation.parse(url)
            location.password = tcp.password
            return try await PostgresStore.open(location, mode: mode, logger: quietLogger)
        }
        // Nothing listens on port 1: the second server is the one used.
        let store = try await open("postgres://\(tcp.user)@127.0.0.1:1,127.0.0.1:\(tcp.port)/\(tcp.database)")
        let summary = try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(summary.sent == 1)
        await store.close()
        // The same servers as lists in the query, and a primary asked for: the test server is one.
        try await open(
            "postgres://\(tcp.user)@/\(tcp.database)?host=127.0.0.1,localhost&port=1,\(tcp.port)&target_session_attrs=primary"
        ).close()

        // A read-only database (as a hot standby is): read-write passes it over, and with no server left, the
        // error names each server and why it would not do.
        _ = try await (db.store as! PostgresStore).rows(
            "read-only",
            PostgresQuery(unsafeSQL: "ALTER DATABASE \(tcp.database) SET default_transaction_read_only = on"))
        let readWrite =
            "postgres://\(tcp.user)@127.0.0.1:1,localhost:\(tcp.port)/\(tcp.database)?target_session_attrs=read-write"
        let error = await #expect(throws: JobError.self) { _ = try await open(readWrite) }
        #expect(error?.exitCode == 69, "\(error?.message ?? "")")
        #expect(
            error?.message
                == "connecting: no PostgreSQL server of postgres://\(tcp.user)@127.0.0.1:1,localhost:\(tcp.port)/\(tcp.database) will do: 127.0.0.1:1: Connection refused; localhost:\(tcp.port): read-only (target_session_attrs=read-write asks for one that takes writes)",
            "\(error?.message ?? "")")
        // Without target_session_attrs (any, as in libpq) the first server that answers is taken as it is.
        try await open("postgres://\(tcp.user)@127.0.0.1:1,localhost:\(tcp.port)/\(tcp.database)", .readOnly).close()
    }

    /// The first connection chooses the server (the first that will do); every later one goes to it, unchecked.
    /// Here the check passes over the test server's TCP address, so the connections come in over its socket.
    @Test func theServerTheFirstConnectionChoseServesEveryLaterOne() async throws {
        let db = try await TemporaryDatabase(.postgres)
        let tcp = try PostgresLocation.parse(db.path)
        var location = tcp
        location.servers = [
            PostgresLocation.Server(host: "127.0.0.1", port: tcp.port),
            PostgresLocation.Server(host: try Backend.postgresSocketDirectory, port: tcp.port),
        ]
        let checked = NIOLockedValueBox<[String]>([])
        let pool = PostgresConnectionPool(
            servers: Array(zip(location.servers, try location.connectionConfigurations(applicationName: "tests"))),
            maximum: 2, logger: quietLogger
        ) { _, server in
            checked.withLockedValue { $0.append(server.display) }
            return server.unixSocketPath != nil
        }
        let first = try await pool.lease()
        let second = try await pool.lease()
        for connection in [first, second] {
            let address = try await connection.query(
                "SELECT coalesce(inet_server_addr()::text, 'socket')", logger: quietLogger
            ).collect().map { try $0.decode(String.self) }
            #expect(address == ["socket"])
        }
        #expect(checked.withLockedValue { $0 } == [location.servers[0].display, location.servers[1].display])
        await pool.release(first)
        await pool.release(second)
        await pool.close()
    }

    /// A task waiting for a connection of a full pool stops waiting when it is cancelled, and leaves the queue: the
    /// connection given back next goes to the next task that asks.
    @Test func aCancelledWaitForAConnectionEndsAndTakesNone() async throws {
        let db = try await TemporaryDatabase(.postgres)
        let location = try PostgresLocation.parse(db.path)
        let pool = PostgresConnectionPool(
            servers: Array(zip(location.servers, try location.connectionConfigurations(applicationName: "tests"))),
            maximum: 1, logger: quietLogger
        ) { _, _ in true }
        let only = try await pool.lease()
        let waiting = Task { try await pool.lease() }
        try await Task.sleep(for: .milliseconds(100))  // let it queue; it ends the same way if it has not
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        await pool.release(only)
        let next = try await pool.lease()
        #expect(next === only)
        await pool.release(next)
        await pool.close()
    }

    /// The test server offers TLS, with a certificate its own CA signed for `localhost` only. Each `sslmode` does
    /// what libpq's does: `disable` stays in clear text, `prefer` and `require` encrypt without checking the
    /// certificate, `verify-ca` checks who signed it, `verify-full` that and the name.
    @Test func eachSSLModeDoesWhatLibpqsDoesAgainstAServerWithTLS() async throws {
        let ca = try Backend.postgresTLSFile("ca.pem")
        let db = try await TemporaryDatabase(.postgres)
        let tcp = try PostgresLocation.parse(db.path)
        func location(_ host: String, _ parameters: String) throws -> PostgresLocation {
            var location = try PostgresLocation.parse(
                "postgres://\(tcp.user)@\(host):\(tcp.port)/\(tcp.database)?\(parameters)")
            location.password = tcp.password
            return location
        }
        func encrypted(_ location: PostgresLocation) async throws -> Bool {
            let store = try await PostgresStore.open(location, mode: .readWrite, logger: quietLogger)
            let rows = try await store.rows("reading", "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .map { try $0.decode(Bool.self) }
            await store.close()
            return rows == [true]
        }
        #expect(try await !encrypted(location("127.0.0.1", "sslmode=disable")))
        #expect(try await encrypted(location("127.0.0.1", "sslmode=prefer")))
        #expect(try await encrypted(location("127.0.0.1", "sslmode=require")))
        #expect(try await encrypted(location("127.0.0.1", "sslmode=verify-ca&sslrootcert=\(ca)")))
        #expect(try await encrypted(location("localhost", "sslmode=verify-full&sslrootcert=\(ca)")))
        // Refused, with what the certificate lacks and what to do (it said "cannot reach PostgreSQL at …:
        // NIOSSLExtraError.failedToValidateHostname: Couldn't find <none> in certificate from peer" and
        // "handshakeFailed(NIOSSL.BoringSSLError.sslError([Error: 268435581 error:1000007d:…]))").
        let untrusted =
            "TLS: the server's certificate was not accepted (CERTIFICATE_VERIFY_FAILED); sslmode=%@ checks it against the system's trusted CAs: name the CA that signed it with sslrootcert=<PEM file>"
        for (host, parameters, words) in [
            (
                "127.0.0.1", "sslmode=verify-full&sslrootcert=\(ca)",
                "TLS: the server's certificate does not name the host; sslmode=verify-full checks that it names 127.0.0.1: connect by a name it holds, or use sslmode=verify-ca"
            ),
            ("localhost", "sslmode=verify-full", untrusted.replacingOccurrences(of: "%@", with: "verify-full")),
            ("localhost", "sslmode=verify-ca", untrusted.replacingOccurrences(of: "%@", with: "verify-ca")),
            (
                "localhost", "sslmode=verify-ca&sslrootcert=/etc/ssl/certs/ca-certificates.crt",
                "TLS: the server's certificate was not accepted (CERTIFICATE_VERIFY_FAILED); sslmode=verify-ca checks it against sslrootcert /etc/ssl/certs/ca-certificates.crt: is that the CA that signed it?"
            ),
        ] {
            let refused = try location(host, parameters)
            await #expect(
                throws: JobError.unavailable("connecting: cannot reach PostgreSQL at \(refused.display): \(words)"),
                "\(host) \(parameters)"
            ) {
                _ = try await PostgresStore.open(refused, mode: .readWrite, logger: quietLogger)
            }
        }
    }

    /// A client certificate where the server asks for one (`cert` in `pg_hba.conf`): the test server lets the
    /// role diary_cert in with its certificate only. Certificate and key files that cannot be used are named.
    @Test func aClientCertificateLogsInWhereTheServerAsksForOne() async throws {
        let (ca, certificate, key) = try (
            Backend.postgresTLSFile("ca.pem"), Backend.postgresTLSFile("client.pem"),
            Backend.postgresTLSFile("client.key")
        )
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let connection = try await PostgresConnection.connect(
            configuration: try admin.connectionConfiguration(applicationName: "tests"), id: 0, logger: quietLogger)
        for statement in [
            "DO $$ BEGIN CREATE ROLE diary_cert LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
            "CREATE DATABASE \(name) OWNER diary_cert",
        ] {
            _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: quietLogger).collect()
        }
        try await connection.close()
        func location(_ parameters: String) throws -> PostgresLocation {
            try PostgresLocation.parse("postgres://diary_cert@localhost:\(admin.port)/\(name)?\(parameters)")
        }
        let store = try await PostgresStore.open(
            try location("sslmode=verify-full&sslrootcert=\(ca)&sslcert=\(certificate)&sslkey=\(key)"), mode: .create,
            logger: quietLogger)
        let session = try await store.rows(
            "reading", "SELECT current_user || ' ' || client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
        ).map { try $0.decode(String.self) }
        #expect(session == ["diary_cert /CN=diary_cert"])
        #expect(try await store.appliedMigrations() == SchemaMigrations.all.map(\.id))
        await store.close()
        let refused = try location("sslmode=require")
        let error = await #expect(throws: JobError.self, "diary_cert without its certificate") {
            _ = try await PostgresStore.open(refused, mode: .readWrite, logger: quietLogger)
        }
        #expect(error?.exitCode == 78, "\(error?.message ?? "")")
        #expect(error?.message.contains("diary_cert") == true, "\(error?.message ?? "")")
        // A certificate the server does not trust (the simulator's, from another CA): the server ends the handshake,
        // which is not the server's certificate refused (it said "the server's certificate was not accepted
        // (TLSV1_ALERT_UNKNOWN_CA); sslmode=require checks it against the system's trusted CAs", which it does not).
        let stranger = try SimulatorCredentials.prepare(
            in: FileManager.default.temporaryDirectory.appendingPathComponent("stranger-\(UUID().uuidString)"))
        let untrusted = try location(
            "sslmode=require&sslcert=\(stranger.serverCertificateFile)&sslkey=\(stranger.serverKeyFile)")
        await #expect(
            throws: JobError.unavailable(
                "connecting: cannot reach PostgreSQL at \(untrusted.display): TLS: the server refused the handshake (TLSV1_ALERT_UNKNOWN_CA); does the server trust the CA that signed sslcert \(stranger.serverCertificateFile)?"
            )
        ) {
            _ = try await PostgresStore.open(untrusted, mode: .readWrite, logger: quietLogger)
        }
        for (parameters, status, message) in [
            (
                "sslmode=require&sslcert=\(certificate)&sslkey=\(ca.replacingOccurrences(of: "ca.pem", with: "ca.key"))",
                78,
                "sslkey \(ca.replacingOccurrences(of: "ca.pem", with: "ca.key")) is not the key of sslcert \(certificate) (they go together)"
            ),
            (
                "sslmode=require&sslcert=\(certificate)&sslkey=\(certificate)", 78,
                "sslkey \(certificate): not a PEM private key (unencrypted)"
            ),
            (
                "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", 66,
                "cannot read the sslrootcert file /nonexistent/ca.pem: No such file or directory"
            ),
            ("sslmode=verify-full&sslrootcert=\(key)", 78, "sslrootcert \(key): no PEM certificate in it"),
        ] {
            let given = try location(parameters)
            let error = await #expect(throws: JobError.self, "\(parameters)") {
                _ = try await PostgresStore.open(given, mode: .readWrite, logger: quietLogger)
            }
            #expect(error.map { Int($0.exitCode) } == status, "\(parameters): \(error?.message ?? "")")
            #expect(error?.message == message, "\(parameters)")
        }
    }

    /// The jobs' tables in a schema of their own, in the app's database beside the app's tables (here a `users`
    /// table of its own in `public`), found by the role's `search_path`. The backend writes to them by qualified
    /// name from its own `search_path`; the triggers on them must act on the jobs' tables, whatever the session's
    /// path. They named their tables unqualified: a timezone read from the app's `users`, a settings update and
    /// a user's deletion that failed ("relation … does not exist").
    @Test func tablesInASchemaOfTheirOwnServeABackendOnAnotherSearchPath() async throws {
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        var location = admin
        location.database = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        func session(_ location: PostgresLocation, _ statements: [String]) async throws -> [String] {
            let connection = try await PostgresConnection.connect(
                configuration: try location.connectionConfiguration(applicationName: "tests"), id: 0,
                logger: quietLogger)
            var last: [String] = []
            do {
                for statement in statements {
                    last = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: quietLogger)
                        .collect().map { try $0.decode(String.self) }
                }
            } catch {
                try? await connection.close()
                throw TestSetupError(message: String(reflecting: error))
            }
            try await connection.close()
            return last
        }
        _ = try await session(admin, ["CREATE DATABASE \(location.database)"])
        _ = try await session(
            location,
            [
                "CREATE SCHEMA push",
                "ALTER ROLE \(location.user) IN DATABASE \(location.database) SET search_path = push",
                "CREATE TABLE public.users (id text PRIMARY KEY, timezone text NOT NULL)",
                "INSERT INTO public.users VALUES ('u1', 'Pacific/Kiritimati'), ('u2', 'Pacific/Kiritimati')",
            ])
        let store = try await PostgresStore.open(location, mode: .create, logger: quietLogger)
        try await store.addUser("u1", time: "20:00")
        let summary = try await DiaryReminderRunner(store: store, sender: RecordingSender(), logger: quietLogger).run(
            ReminderRunOptions(now: instant("2026-11-21T20:00:00Z")))
        #expect(summary.sent == 1)
        await store.close()
        let tables = try await session(
            location,
            ["SELECT string_agg(schemaname || '.' || tablename, ' ') FROM pg_tables WHERE tablename = 'users'"])
        #expect(tables == ["public.users push.users"] || tables == ["push.users public.users"])
        // The backend, on its own path.
        func backend(_ statements: [String]) async throws -> [String] {
            try await session(location, ["SET search_path = public"] + statements)
        }
        #expect(
            try await backend([
                "UPDATE push.users SET timezone = 'Asia/Tokyo' WHERE id = 'u1'",
                "SELECT timezone FROM push.notification_settings WHERE user_id = 'u1'",
            ]) == ["Asia/Tokyo"])
        #expect(
            try await backend([
                "INSERT INTO push.users (id, timezone) VALUES ('u2', 'Europe/Berlin')",
                "INSERT INTO push.notification_settings (user_id) VALUES ('u2')",
                "SELECT timezone FROM push.notification_settings WHERE user_id = 'u2'",
            ]) == ["Europe/Berlin"])
        #expect(
            try await backend([
                "DELETE FROM push.users WHERE id = 'u1'",
                "SELECT (SELECT count(*) FROM push.notification_logs) || ' ' || (SELECT count(*) FROM push.notification_deliveries)",
            ]) == ["0 0"])
        #expect(try await backend(["SELECT count(*)::text FROM public.users"]) == ["2"])
        // A search_path that names no schema that exists: nowhere to migrate to, and the message says so.
        _ = try await session(
            location, ["ALTER ROLE \(location.user) IN DATABASE \(location.database) SET search_path = nowhere"])
        let error = await #expect(throws: JobError.self, "a search_path of no schema") {
            _ = try await PostgresStore.open(location, mode: .create, logger: quietLogger)
        }
        #expect(error?.exitCode == 78, "\(error?.message ?? "")")
        #expect(
            error?.message.hasSuffix(
                "no schema has been selected to create in at \(location.display): the search_path of \(location.user) names no schema that exists (CREATE SCHEMA it, or ALTER ROLE \(location.user) SET search_path)"
            ) == true, "\(error?.message ?? "")")
    }

    @Test func connectionFailuresAreClearAndCarryNoPassword() async throws {
        let admin = try PostgresLocation.parse(try Backend.postgresAdminURL)
        var wrong = admin
        wrong.password = "not-the-password"
        await #expect(
            throws: JobError.config(
                "connecting: PostgreSQL refused the login of postgres at \(admin.display): password authentication failed for user \"postgres\""
            )
        ) {
            _ = try await PostgresStore.open(wrong, mode: .readOnly, logger: quietLogger)
        }
        var missing = admin
        missing.database = "no_such_database"
        do {
            _ = try await PostgresStore.open(missing, mode: .readWrite, logger: quietLogger)
            Issue.record("opened a missing database")
        } catch {
            #expect(error.exitCode == 66, "\(error.message)")
            #expect(error.message.contains("no_such_database"))
        }
        var closed = admin
        closed.port = 1
        do {
            _ = try await PostgresStore.open(closed, mode: .readWrite, logger: quietLogger)
            Issue.record("connected to port 1")
        } catch {
            #expect(error.exitCode == 69, "\(error.message)")
            #expect(!error.message.contains(admin.password ?? "-"))
        }
        // A server that offers no TLS (it answers PostgreSQL's SSLRequest with "N"): `require` refuses to go on in
        // clear text. (The test server offers TLS: `eachSSLModeDoesWhatLibpqsDoesAgainstAServerWithTLS`.)
        let plain = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(NoTLSOffered()) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        var tls = admin
        tls.port = plain.localAddress?.port ?? 0
        tls.tlsMode = .require
        await #expect(
            throws: JobError.config("connecting: \(tls.display) does not offer TLS, and sslmode=require requires it")
        ) {
            _ = try await PostgresStore.open(tls, mode: .readOnly, logger: quietLogger)
        }
        try await plain.close()
        // A database nobody migrated: read-only use is refused with the fix, not an SQL error.
        let fresh = try await TemporaryDatabase(.postgres)
        _ = try await (fresh.store as! PostgresStore).rows("drop", "DROP TABLE schema_migrations")
        await #expect(throws: JobError.self) { _ = try await fresh.reopen(.readOnly) }
    }
}

@Suite struct PostgresWritePathTests {
    /// A page's resolutions used to join the log to a row set. Planned with the statistics of a log that was
    /// empty when last analysed (as at the start of a run), that join compared every row with every row, or
    /// scanned the log once per row: 143 ms for a page of 1,000 at 1,000,000 users, the longest phase of the run.
    @Test func resolvingAPageFindsItsRowsByIDWithoutAJoin() async throws {
        let db = try await TemporaryDatabase(.postgres)
        var options = SeedOptions(users: 3_000, now: 0)
        // Its instants are 1970's (the plans are what is measured): no entries, which must be from 2000 on.
        options.wroteTodayShare = 0
        options.randomSeed = 5
        _ = try await Seeder().seed(options, into: db.store)
        try await db.execute("ANALYZE")  // the log is empty now: its statistics say so from here on
        let store = db.store as! PostgresStore
        let users = try await store.rows("users", "SELECT id FROM users").map { try $0.decode(String.self) }
        for day in 3...9 {  // other days' rows: the page's rows are a seventh of the log
            _ = try await store.claim(
                users.map {
                    ClaimRequest(
                        userID: $0, type: .diaryReminder, period: "1970-01-0\(day)", messageIndex: 0, locale: "en")
                }, runID: "run-0", now: 50, staleBefore: 0)
        }
        let claims = try await store.claim(
            users.map {
                ClaimRequest(userID: $0, type: .diaryReminder, period: "1970-01-02", messageIndex: 0, locale: "en")
            }, runID: "run-1", now: 100, staleBefore: 0)
        #expect(claims.count == 3_000)
        let resolutions = claims.enumerated().map {
            ClaimResolution(
                logID: $1.logID, period: $1.period, status: $0 % 10 == 0 ? .retry : .sent,
                detail: $0 % 10 == 0 ? "waiting for the provider" : nil)
        }
        let queries = PostgresStore.resolutionQueries(resolutions, runID: "run-1", now: 200)
        #expect(queries.count == 2)  // one per (status, detail)
        for query in queries {
            let plan = try await store.rows(
                "explain", PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)
            ).map { try $0.decode(String.self) }.joined(separator: "\n")
            // Rows found by id alone: by the primary key, or by one scan where the log is this small.
            #expect(
                !plan.contains("Join") && !plan.contains("Nested Loop") && !plan.contains("Function Scan"), "\(plan)")
        }
        try await store.record([], resolutions: resolutions, runID: "run-1", now: 200)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 2_700)
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE status = 'retry' AND detail = 'waiting for the provider'")
                == 300)
        // A claim another run has taken over is not resolved by this one.
        try await store.record(
            [],
            resolutions: [
                ClaimResolution(logID: claims[1].logID, period: claims[1].period, status: .failed, detail: nil)
            ], runID: "run-2",
            now: 300)
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'failed'") == 0)
    }
}

/// A server that answers a PostgreSQL client's SSLRequest with "N": no TLS here.
private final class NoTLSOffered: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "N")), promise: nil)
    }
}
