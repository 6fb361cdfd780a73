import Foundation
import JobKit
import JobKitDelivery
import NIOCore

/// Secrets a Lambda execution environment fetches at init, so that no password or key is baked into the zip
/// or set in plain text as a variable: each `…_SECRET` variable names a Secrets Manager secret
/// (`secretsmanager:NAME-OR-ARN`) or a Parameter Store parameter (`ssm:/NAME`, decrypted), read through the
/// AWS Parameters and Secrets Lambda Extension (a layer serving `localhost:2773`). The value is written to a
/// file of its own under `/tmp` (a directory of mode 0700, files of mode 0600) and the matching `…_FILE`
/// setting points at it, so the jobs read it exactly as they read a file on a host.
package enum LambdaSecrets {
    /// The secret variables and the file settings they fill.
    package static let variables: [(secret: String, file: ConfigKey)] = [
        ("PUSH_DATABASE_PASSWORD_SECRET", .databasePasswordFile),
        ("PUSH_APNS_KEY_SECRET", .apnsKeyFile),
        ("PUSH_FCM_SERVICE_ACCOUNT_SECRET", .fcmServiceAccountFile),
    ]
    package static let portVariable = "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT"

    enum Source: Equatable {
        case secretsManager(String)
        case parameterStore(String)

        init(_ reference: String, variable: String) throws(JobError) {
            let parts = reference.split(separator: ":", maxSplits: 1).map(String.init)
            switch (parts.first, parts.count == 2 ? parts[1] : "") {
            case ("secretsmanager", let id) where !id.isEmpty: self = .secretsManager(id)
            case ("ssm", let name) where !name.isEmpty: self = .parameterStore(name)
            default:
                throw .config("\(variable): not secretsmanager:NAME-OR-ARN or ssm:/PARAMETER-NAME: \(reference)")
            }
        }

        /// The extension's path for this source.
        var path: String {
            func encoded(_ text: String) -> String {
                text.addingPercentEncoding(
                    withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
            }
            switch self {
            case .secretsManager(let id): return "/secretsmanager/get?secretId=\(encoded(id))"
            case .parameterStore(let name):
                return "/systemsmanager/parameters/get?name=\(encoded(name))&withDecryption=true"
            }
        }

        var name: String {
            switch self {
            case .secretsManager(let id): return "secret \(id)"
            case .parameterStore(let name): return "parameter \(name)"
            }
        }
    }

    /// The environment with every `…_SECRET` fetched into a file and its `…_FILE` set; unchanged when none is
    /// set. A secret that cannot be fetched fails init (69: the extension or the service is unreachable or
    /// refuses; 78: the setting is wrong), and no half-written file is left behind.
    package static func resolve(
        _ environment: [String: String], directory: String? = nil,
        timeout: TimeAmount = .seconds(10)
    ) async throws(JobError) -> [String: String] {
        let wanted = variables.compactMap { entry -> (String, ConfigKey, String)? in
            guard let value = environment[entry.secret], !value.isEmpty else { return nil }
            return (entry.secret, entry.file, value)
        }
        guard !wanted.isEmpty else { return environment }
        // Lambda's /tmp (TMPDIR when set), one directory per process.
        let directory =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("diary-push-secrets-\(getpid())").path
        var resolved = environment
        let portText = environment[portVariable].flatMap { $0.isEmpty ? nil : $0 } ?? "2773"
        guard let port = Int(portText), (1...65_535).contains(port) else {
            throw .config("\(portVariable): not a port: \(portText)")
        }
        guard let token = environment["AWS_SESSION_TOKEN"], !token.isEmpty else {
            throw .config(
                "AWS_SESSION_TOKEN is not set: the secrets extension needs it (PUSH_*_SECRET works inside Lambda only)")
        }
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw .cantCreate("cannot create \(directory) for the fetched secrets")
        }
        for (variable, file, reference) in wanted {
            if let set = environment[file.rawValue], !set.isEmpty {
                throw .config("\(variable) and \(file.rawValue) are both set: keep one")
            }
            let source = try Source(reference, variable: variable)
            let value = try await fetch(source, port: port, token: token, variable: variable, timeout: timeout)
            let path = directory + "/" + file.rawValue.lowercased()
            try write(value, to: path)
            resolved[file.rawValue] = path
        }
        return resolved
    }

    static func fetch(_ source: Source, port: Int, token: String, variable: String, timeout: TimeAmount)
        async throws(JobError) -> String
    {
        let response: HTTP1Response
        do {
            response = try await HTTP1OneShot.exchange(
                host: "127.0.0.1", port: port, method: .GET, path: source.path,
                headers: [("X-Aws-Parameters-Secrets-Token", token)], timeout: timeout)
        } catch ChannelError.connectTimeout {
            throw .unavailable(
                "\(variable): the AWS Parameters and Secrets Lambda Extension on port \(port) did not answer within \(timeout.nanoseconds / 1_000_000_000) s"
            )
        } catch {
            throw .unavailable(
                "\(variable): the AWS Parameters and Secrets Lambda Extension is not reachable on port \(port) (is its layer added to the function?)"
            )
        }
        guard response.status == .ok else {
            // The extension passes on the service's refusal (403: the role may not read it; 404/400: no such name).
            throw .unavailable(
                "\(variable): the secrets extension answered \(response.status.code) for the \(source.name) (check its name and the function role's secretsmanager:GetSecretValue / ssm:GetParameter and kms:Decrypt)"
            )
        }
        struct SecretValue: Decodable {
            let SecretString: String?
            let SecretBinary: String?
        }
        struct ParameterValue: Decodable {
            struct Parameter: Decodable { let Value: String }
            let Parameter: Parameter
        }
        let body = Data(response.body)
        switch source {
        case .secretsManager:
            guard let value = try? JSONDecoder().decode(SecretValue.self, from: body) else { break }
            if let text = value.SecretString { return text }
            if let binary = value.SecretBinary, let data = Data(base64Encoded: binary) {
                return String(decoding: data, as: UTF8.self)
            }
        case .parameterStore:
            if let value = try? JSONDecoder().decode(ParameterValue.self, from: body) { return value.Parameter.Value }
        }
        throw .unavailable("\(variable): the secrets extension's answer for the \(source.name) holds no value")
    }

    /// Writes `value` with mode 0600 (``AtomicFile``), so a failure leaves no partial file.
    static func write(_ value: String, to path: String) throws(JobError) {
        do { try AtomicFile.replace(path, with: Data(value.utf8), mode: 0o600) } catch {
            throw .cantCreate("cannot write a fetched secret to \(path): \(systemReason(error))")
        }
    }
}
