import Foundation
import JobKit
import NIOSSL
import PostgresNIO

/// A parsed `postgres://user[:password]@host[:port]/database?…` URL.
///
/// As in libpq, a host that is an absolute path is the directory of the server's Unix-domain socket
/// (`<directory>/.s.PGSQL.<port>`): percent-encoded in the URL (`postgres://%2Fvar%2Frun%2Fpostgresql/diary`) or
/// given as `?host=` (`postgres://push@/diary?host=/var/run/postgresql`). A URL with no host at all
/// (`postgres:///diary`) means the socket in `/var/run/postgresql` where that directory exists (Debian's), else in
/// `/tmp` (libpq's own default).
///
/// Several servers, as libpq takes them: `postgres://user@host1:5432,host2:5433/database`, or lists in `?host=` and
/// `?port=` (one port for all, or one per host). A job connects to the first that answers and will do (see
/// `target_session_attrs`), so that a URL naming a primary and its standby follows a failover.
///
/// Query parameters (anything else, or one given twice, is a configuration error, so a typo never goes unnoticed):
/// - `host`, `port`: override the URL's (as in libpq); each may be a comma-separated list.
/// - `target_session_attrs`: `any` (default: the first server that answers), `read-write` (one whose sessions
///   take writes) or `primary` (one that is not a standby), as in libpq. The jobs write, so the others libpq
///   knows (`read-only`, `standby`, `prefer-standby`) are refused.
/// - `sslmode`: `disable`, `prefer` (default), `require` — as libpq: encrypted, certificate not checked —,
///   `verify-ca` or `verify-full` (certificate checked against the system roots or `sslrootcert`).
/// - `sslrootcert`: a PEM file of CA certificates for the verify modes (and only for them); `system`, as in libpq
///   16, names the system's trusted CAs and makes `verify-full` the default.
/// - `sslcert`, `sslkey`: a client certificate and its unencrypted key, PEM, for a server that asks for one.
/// - `password_file`: a file holding the password (also `PUSH_DATABASE_PASSWORD_FILE`).
/// - `max_connections`: connections this process may open (default 4).
/// - `connect_timeout`: seconds (default 10).
/// - `application_name`: shown in `pg_stat_activity` (default the job's name).
/// - `prepared_statements`: `on` (default) or `off`. On, the statements every page of a run repeats are named
///   prepared statements, parsed and planned once per connection; `off` sends every statement unnamed, for a
///   pooler in transaction mode that cannot carry named ones (PgBouncer before 1.21, or with
///   `max_prepared_statements = 0`).
package struct PostgresLocation: Sendable {
    package enum TLSMode: String, Sendable, CaseIterable {
        case disable, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// One server a location names: a TCP host and port, or (a host that is an absolute path, as libpq has it)
    /// the directory of the server's Unix-domain socket.
    package struct Server: Sendable, Hashable {
        package var host: String
        package var port: Int

        package init(host: String, port: Int = 5432) {
            self.host = host
            self.port = port
        }

        /// The Unix-domain socket to connect to, when ``host`` is a directory.
        package var unixSocketPath: String? {
            host.hasPrefix("/") ? "\(host)/.s.PGSQL.\(port)" : nil
        }

        /// `db.example:5432`, `[::1]:5432`, or the socket's path: the server in a message.
        package var display: String {
            unixSocketPath ?? "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        }
    }

    /// What a server must be for a job to use it: libpq's `target_session_attrs`, of the values that suit a job
    /// that writes.
    package enum SessionTarget: String, Sendable, CaseIterable {
        /// The first server that answers.
        case any
        /// A server whose sessions take writes (`SHOW transaction_read_only` is `off`).
        case readWrite = "read-write"
        /// A server that is not a standby (`pg_is_in_recovery()` is false).
        case primary
    }

    /// The servers to try, in order (at least one).
    package var servers: [Server]
    package var targetSessionAttributes = SessionTarget.any
    package var user: String
    package var database: String
    package var tlsMode: TLSMode = .prefer
    package var rootCertificateFile: String?
    /// A client certificate (PEM) and its key, for a server that asks for one (`cert` in `pg_hba.conf`).
    package var clientCertificateFile: String?
    package var clientKeyFile: String?
    package var maxConnections = 4
    package var connectTimeoutSeconds = 10
    package var applicationName: String?
    package var preparedStatements = true
    /// Never printed: ``display`` leaves it out.
    var password: String?

    /// The first server's host (the only one's, in a URL that names one).
    package var host: String {
        get { servers[0].host }
        set { servers[0].host = newValue }
    }

    /// The first server's port.
    package var port: Int {
        get { servers[0].port }
        set { servers[0].port = newValue }
    }

    /// The first server's Unix-domain socket, when its host is a directory.
    package var unixSocketPath: String? { servers[0].unixSocketPath }

    /// The location for messages and logs: no password. A URL that names the same servers.
    package var display: String {
        guard servers.contains(where: { $0.unixSocketPath != nil }) else {
            return "postgres://\(user)@\(servers.map(\.display).joined(separator: ","))/\(database)"
        }
        let hosts = servers.map {
            $0.host.addingPercentEncoding(withAllowedCharacters: Self.queryValueCharacters) ?? $0.host
        }
        let ports = servers.map { String($0.port) }
        return
            "postgres://\(user)@/\(database)?host=\(hosts.joined(separator: ","))&port=\(ports.joined(separator: ","))"
    }

    /// What a query value may hold unescaped.
    private static let queryValueCharacters = CharacterSet.urlQueryAllowed.subtracting(
        CharacterSet(charactersIn: "&+=#"))

    /// Parses `url`; `passwordFile` (from `PUSH_DATABASE_PASSWORD_FILE`) supplies the password when the URL has none.
    package static func parse(_ url: String, passwordFile: String? = nil, source: String = "PUSH_DATABASE_URL")
        throws(JobError) -> PostgresLocation
    {
        // Never echo the URL itself: it may hold a password.
        let invalid = JobError.config("\(source): not a valid postgres:// URL")
        // `URLComponents` takes one host: the host list is read here, one host at a time, and the rest of the URL
        // with a host in its place.
        guard let (oneHost, hostList) = splitHostList(url) else { throw invalid }
        guard let components = URLComponents(string: oneHost), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql"
        else {
            throw invalid
        }
        var hosts: [String] = []
        var ports: [Int?] = []
        for server in hostList.split(separator: ",", omittingEmptySubsequences: false) {
            guard let parts = URLComponents(string: "postgres://\(server)"), parts.path.isEmpty, parts.user == nil
            else { throw invalid }
            var host = parts.host ?? ""
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            hosts.append(host)
            ports.append(try parts.port.map { port throws(JobError) in try checkedPort(String(port), source: source) })
        }
        // No port given: one default port for every host.
        if ports.allSatisfy({ $0 == nil }) { ports = [nil] }
        let user = components.user?.removingPercentEncoding ?? components.user ?? currentUserName()
        var path = components.path
        if path.hasPrefix("/") { path.removeFirst() }
        let database = path.removingPercentEncoding ?? path
        var location = PostgresLocation(
            servers: [], user: user, database: database.isEmpty ? user : database)
        location.password = components.password?.removingPercentEncoding ?? components.password
        var passwordFile = passwordFile
        var seen: Set<String> = []
        var systemRoots = false
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            guard seen.insert(item.name).inserted else { throw .config("\(source): \(item.name) is given twice") }
            switch item.name {
            case "host":
                hosts = value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            case "port":
                ports = try value.split(separator: ",", omittingEmptySubsequences: false).map { port throws(JobError) in
                    port.isEmpty ? nil : try checkedPort(String(port), source: source)
                }
            case "target_session_attrs":
                guard let target = SessionTarget(rawValue: value) else {
                    throw .config(
                        "\(source): target_session_attrs must be \(SessionTarget.allCases.map(\.rawValue).joined(separator: ", ")) (the jobs write), got \(value)"
                    )
                }
                location.targetSessionAttributes = target
            case "sslmode":
                guard let mode = TLSMode(rawValue: value) else {
                    throw .config(
                        "\(source): sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", ")), got \(value)"
                    )
                }
                location.tlsMode = mode
            case "sslrootcert":
                // `system`, as in libpq 16: the system's trusted CAs, and verify-full unless sslmode says otherwise.
                if value == "system" {
                    systemRoots = true
                } else {
                    location.rootCertificateFile = value
                }
            case "sslcert":
                location.clientCertificateFile = value
            case "sslkey":
                location.clientKeyFile = value
            case "password_file":
                passwordFile = value
            case "max_connections":
                guard let number = Int(value), (1...100).contains(number) else {
                    throw .config("\(source): max_connections must be within 1…100, got \(value)")
                }
                location.maxConnections = number
            case "connect_timeout":
                guard let number = Int(value), (1...600).contains(number) else {
                    throw .config("\(source): connect_timeout must be within 1…600 seconds, got \(value)")
                }
                location.connectTimeoutSeconds = number
            case "application_name":
                location.applicationName = value
            case "prepared_statements":
                switch value {
                case "on": location.preparedStatements = true
                case "off": location.preparedStatements = false
                default: throw .config("\(source): prepared_statements must be on or off, got \(value)")
                }
            default:
                throw .config(
                    "\(source): unknown postgres:// parameter \(item.name) (known: host, port, target_session_attrs, sslmode, sslrootcert, sslcert, sslkey, password_file, max_connections, connect_timeout, application_name, prepared_statements)"
                )
            }
        }
        // As libpq: one port for every host, or one per host; an empty host is the default socket directory.
        if ports.count == 1 { ports = Array(repeating: ports[0], count: hosts.count) }
        guard ports.count == hosts.count else {
            throw .config(
                "\(source): \(ports.count) ports for \(hosts.count) hosts (give one port for all, or one per host)")
        }
        let socketDirectory =
            FileManager.default.fileExists(atPath: "/var/run/postgresql") ? "/var/run/postgresql" : "/tmp"
        location.servers = zip(hosts, ports).map { Server(host: $0.isEmpty ? socketDirectory : $0, port: $1 ?? 5432) }
        if systemRoots && !seen.contains("sslmode") && !location.servers.contains(where: { $0.unixSocketPath != nil }) {
            location.tlsMode = .verifyFull
        }
        try location.checkTLSParameters(source: source, systemRoots: systemRoots)
        if let passwordFile {
            guard location.password == nil else {
                throw .config("\(source): a password is in the URL and a password file is given too; use one")
            }
            let data = try readInputFile(passwordFile, what: "the database password file")
            location.password = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
        }
        return location
    }

    /// `url` with one host where its host list was (`URLComponents` takes one), and that host list: what lies
    /// between the user's `@` (or the scheme's `//`) and the path, the query or the fragment.
    private static func splitHostList(_ url: String) -> (url: String, hosts: Substring)? {
        guard let scheme = url.range(of: "://") else { return nil }
        let authority = url[scheme.upperBound...].prefix { !"/?#".contains($0) }
        let hosts = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        var oneHost = url
        oneHost.replaceSubrange(hosts.startIndex..<hosts.endIndex, with: "localhost")
        return (oneHost, hosts)
    }

    private static func checkedPort(_ text: String, source: String) throws(JobError) -> Int {
        guard let number = Int(text), (1...65535).contains(number) else {
            throw .config("\(source): port must be within 1…65535, got \(text)")
        }
        return number
    }

    /// The TLS parameters make sense together, and with the host: none over a Unix-domain socket (it carries no
    /// TLS), a CA only where it is checked, a client certificate with its key and TLS.
    private func checkTLSParameters(source: String, systemRoots: Bool) throws(JobError) {
        let rootsNamed = rootCertificateFile != nil || systemRoots
        let requirements: [(name: String, given: Bool)] = [
            ("sslmode=\(tlsMode.rawValue)", [.require, .verifyCA, .verifyFull].contains(tlsMode)),
            ("sslrootcert", rootsNamed), ("sslcert", clientCertificateFile != nil), ("sslkey", clientKeyFile != nil),
        ]
        if let socket = servers.first(where: { $0.unixSocketPath != nil }),
            let named = requirements.first(where: \.given)?.name
        {
            throw .config(
                "\(source): \(named) asks for TLS, which a Unix-domain socket (\(socket.host)) does not carry; leave \(named.prefix { $0 != "=" }) out, or name a TCP host"
            )
        }
        if rootsNamed, tlsMode != .verifyCA, tlsMode != .verifyFull {
            throw .config(
                "\(source): sslrootcert is checked only with sslmode=verify-ca or verify-full (sslmode=\(tlsMode.rawValue) does not check the server's certificate)"
            )
        }
        if (clientCertificateFile == nil) != (clientKeyFile == nil) {
            throw .config("\(source): sslcert and sslkey go together (a client certificate and its key)")
        }
        if clientCertificateFile != nil, tlsMode == .disable {
            throw .config("\(source): sslcert needs TLS, and sslmode=disable turns it off")
        }
    }

    /// What to do about a TLS handshake that failed: a server certificate that `verify-ca` or `verify-full`
    /// refused, or a client certificate the server refused. Nil where there is nothing to add.
    func hint(_ failure: ConnectionErrorText.TLSFailure, server: Server) -> String? {
        switch failure {
        case .hostname:
            return
                "sslmode=verify-full checks that it names \(server.host): connect by a name it holds, or use sslmode=verify-ca"
        case .notAccepted:
            guard tlsMode == .verifyCA || tlsMode == .verifyFull else { return nil }
            if let rootCertificateFile {
                return
                    "sslmode=\(tlsMode.rawValue) checks it against sslrootcert \(rootCertificateFile): is that the CA that signed it?"
            }
            return
                "sslmode=\(tlsMode.rawValue) checks it against the system's trusted CAs: name the CA that signed it with sslrootcert=<PEM file>"
        case .refusedByServer:
            return clientCertificateFile.map { "does the server trust the CA that signed sslcert \($0)?" }
        }
    }

    /// The postgres-nio configuration of a connection to the first server.
    func connectionConfiguration(applicationName fallback: String) throws(JobError) -> PostgresConnection.Configuration
    {
        try connectionConfigurations(applicationName: fallback)[0]
    }

    /// The postgres-nio configuration of a connection to each server, in order. Reads the certificate and key
    /// files the URL names.
    func connectionConfigurations(applicationName fallback: String) throws(JobError)
        -> [PostgresConnection.Configuration]
    {
        let tls = servers.allSatisfy { $0.unixSocketPath != nil } ? .disable : try tls()
        return servers.map { server in
            var configuration =
                if let unixSocketPath = server.unixSocketPath {
                    PostgresConnection.Configuration(
                        unixSocketPath: unixSocketPath, username: user, password: password, database: database)
                } else {
                    PostgresConnection.Configuration(
                        host: server.host, port: server.port, username: user, password: password, database: database,
                        tls: tls)
                }
            configuration.options.connectTimeout = .seconds(Int64(connectTimeoutSeconds))
            configuration.options.additionalStartupParameters = [("application_name", applicationName ?? fallback)]
            return configuration
        }
    }

    private func tls() throws(JobError) -> PostgresConnection.Configuration.TLS {
        guard tlsMode != .disable else { return .disable }
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch tlsMode {
        case .disable, .prefer, .require: configuration.certificateVerification = .none
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let rootCertificateFile {
            configuration.trustRoots = .certificates(
                try Self.certificates(rootCertificateFile, parameter: "sslrootcert"))
        }
        if let clientCertificateFile, let clientKeyFile {
            configuration.certificateChain = try Self.certificates(clientCertificateFile, parameter: "sslcert").map {
                .certificate($0)
            }
            let bytes = try readInputFile(clientKeyFile, what: "the sslkey file")
            do {
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(bytes), format: .pem))
            } catch {
                throw .config("sslkey \(clientKeyFile): not a PEM private key (unencrypted)")
            }
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            if case .failedToLoadPrivateKey? = error as? NIOSSLError, let clientCertificateFile, let clientKeyFile {
                throw .config(
                    "sslkey \(clientKeyFile) is not the key of sslcert \(clientCertificateFile) (they go together)")
            }
            // BoringSSL's reason where it gave one.
            let reason =
                if case .notAccepted(let reason)? = ConnectionErrorText.tlsFailure(error) { reason } else { "\(error)" }
            throw .config("PostgreSQL TLS (sslmode=\(tlsMode.rawValue)): \(reason)")
        }
        return tlsMode == .prefer ? .prefer(context) : .require(context)
    }

    /// The PEM certificates in the file a URL parameter names.
    private static func certificates(_ path: String, parameter: String) throws(JobError) -> [NIOSSLCertificate] {
        let bytes = try readInputFile(path, what: "the \(parameter) file")
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(bytes)), !certificates.isEmpty else {
            throw .config("\(parameter) \(path): no PEM certificate in it")
        }
        return certificates
    }
}

/// The name of the user this process runs as, libpq's default role name (a cron job or a systemd unit need not
/// set `USER`); `USER`, then `postgres`, where the system has no name for it.
private func currentUserName() -> String {
    if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name {
        return String(cString: name)
    }
    return ProcessInfo.processInfo.environment["USER"] ?? "postgres"
}
