import Foundation
import JobCLI
import JobKitTestSupport
import LambdaRuntimeSimulator
import NIOCore
import NIOHTTP1
import NIOPosix
import PushSimulator
import Testing

@testable import JobKit

/// `PUSH_*_SECRET`: passwords and keys fetched at Lambda init through the AWS Parameters and Secrets Lambda
/// Extension (here a local server that answers as it does), written to 0600 files the jobs then read.
@Suite struct LambdaSecretsTests {
    static let token = "session-token-123"

    /// Answers as the extension does: the secret's or parameter's JSON, 403 without the session token, 400 for
    /// an unknown name.
    static func extensionServer(_ secrets: [String: String], parameters: [String: String]) async throws -> HTTPRecorder
    {
        try await HTTPRecorder { request in
            guard request.headers["x-aws-parameters-secrets-token"] == token else { return (.forbidden, "forbidden") }
            let components = URLComponents(string: request.path)
            let query = Dictionary(
                uniqueKeysWithValues: (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") })
            switch components?.path {
            case "/secretsmanager/get":
                guard let id = query["secretId"], let value = secrets[id] else { return (.badRequest, "not found") }
                let json = try! JSONSerialization.data(withJSONObject: [
                    "ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:\(id)",
                    "Name": id, "SecretString": value,
                ])
                return (.ok, String(decoding: json, as: UTF8.self))
            case "/systemsmanager/parameters/get":
                guard query["withDecryption"] == "true", let name = query["name"], let value = parameters[name] else {
                    return (.badRequest, "not found")
                }
                let json = try! JSONSerialization.data(withJSONObject: [
                    "Parameter": ["Name": name, "Type": "SecureString", "Value": value]
                ])
                return (.ok, String(decoding: json, as: UTF8.self))
            default:
                return (.notFound, "no such path")
            }
        }
    }

    @Test func secretsAreFetchedIntoPrivateFilesThatTheSettingsPointAt() async throws {
        let key = "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMG\n-----END PRIVATE KEY-----\n"
        let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:diary/apns key-AbCdEf"
        let server = try await Self.extensionServer([arn: key], parameters: ["/diary-push/db-password": "p@ss:w/rd"])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = [
            "PUSH_APNS_KEY_SECRET": "secretsmanager:" + arn,
            "PUSH_DATABASE_PASSWORD_SECRET": "ssm:/diary-push/db-password",
            "AWS_SESSION_TOKEN": Self.token, "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": "\(server.port)",
            "PUSH_APNS_KEY_ID": "ABC123DEFG",
        ]
        let resolved = try await LambdaSecrets.resolve(environment, directory: directory)
        let keyFile = try #require(resolved["PUSH_APNS_KEY_FILE"])
        let passwordFile = try #require(resolved["PUSH_DATABASE_PASSWORD_FILE"])
        #expect(try String(contentsOfFile: keyFile, encoding: .utf8) == key)
        #expect(try String(contentsOfFile: passwordFile, encoding: .utf8) == "p@ss:w/rd")
        for path in [keyFile, passwordFile] {
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(path)")
        }
        #expect(try FileManager.default.attributesOfItem(atPath: directory)[.posixPermissions] as? Int == 0o700)
        #expect(resolved["PUSH_APNS_KEY_ID"] == "ABC123DEFG" && resolved["PUSH_FCM_SERVICE_ACCOUNT_FILE"] == nil)
        #expect(server.requests.count == 2 && server.requests.allSatisfy { $0.method == "GET" })
        await server.stop()

        // Nothing asked, nothing fetched: the environment comes back as it was.
        #expect(
            try await LambdaSecrets.resolve(["PUSH_APNS_KEY_FILE": "/k.p8"], directory: directory) == [
                "PUSH_APNS_KEY_FILE": "/k.p8"
            ])
    }

    @Test func aSecretThatCannotBeFetchedFailsInitAndSaysWhy() async throws {
        let server = try await Self.extensionServer(["known": "v"], parameters: [:])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let base = ["AWS_SESSION_TOKEN": Self.token, "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": "\(server.port)"]
        let cases: [(String, [String: String], Int32, String)] = [
            (
                "unknown secret", base.merging(["PUSH_APNS_KEY_SECRET": "secretsmanager:missing"]) { $1 }, 69,
                "answered 400"
            ),
            (
                "refused token",
                base.merging(["PUSH_APNS_KEY_SECRET": "secretsmanager:known", "AWS_SESSION_TOKEN": "stale"]) { $1 }, 69,
                "answered 403"
            ),
            (
                "no token",
                base.merging(["PUSH_APNS_KEY_SECRET": "secretsmanager:known"]) { $1 }.filter {
                    $0.key != "AWS_SESSION_TOKEN"
                }, 78,
                "AWS_SESSION_TOKEN"
            ),
            (
                "no extension",
                base.merging([
                    "PUSH_APNS_KEY_SECRET": "secretsmanager:known", "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": "1",
                ]) { $1 },
                69, "not reachable"
            ),
            (
                "bad reference", base.merging(["PUSH_APNS_KEY_SECRET": "vault:known"]) { $1 }, 78,
                "secretsmanager:NAME-OR-ARN"
            ),
            (
                "both set",
                base.merging(["PUSH_APNS_KEY_SECRET": "secretsmanager:known", "PUSH_APNS_KEY_FILE": "/k.p8"]) { $1 },
                78, "both set"
            ),
        ]
        for (name, environment, code, mention) in cases {
            do {
                // The default timeout: the local extension answers within it even on a loaded machine.
                _ = try await LambdaSecrets.resolve(environment, directory: directory)
                Issue.record("\(name): resolved")
            } catch {
                #expect(error.exitCode == code, "\(name): \(error.message)")
                #expect(error.message.contains(mention), "\(name): \(error.message)")
                // It names the variable to fix (the missing token is the platform's, named by itself).
                #expect(
                    error.message.contains("PUSH_APNS_KEY_SECRET") || mention == "AWS_SESSION_TOKEN",
                    "\(name): \(error.message)")
                // The message names the secret, never its value or the session token.
                #expect(!error.message.contains(Self.token), "\(name)")
            }
        }
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        #expect(leftovers.isEmpty, "\(leftovers)")
        await server.stop()
    }

    /// An extension that takes the connection and never answers is a timeout, said as one (not "not reachable").
    @Test func anExtensionThatNeverAnswersIsATimeoutSaidAsOne() async throws {
        let mute = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(mute.localAddress?.port)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = [
            "PUSH_APNS_KEY_SECRET": "secretsmanager:known", "AWS_SESSION_TOKEN": Self.token,
            "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": "\(port)",
        ]
        do {
            _ = try await LambdaSecrets.resolve(environment, directory: directory, timeout: .seconds(1))
            Issue.record("resolved")
        } catch {
            #expect(error.exitCode == 69, "\(error.message)")
            #expect(error.message.contains("did not answer within 1 s"), "\(error.message)")
            #expect(error.message.contains("PUSH_APNS_KEY_SECRET"), "\(error.message)")
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).isEmpty)
        try await mute.close()
    }

    /// The real bootstrap: the APNs key comes from the (local) extension, and a reminder goes out signed with it.
    @Test func theBootstrapSignsWithAKeyFetchedAtInit() async throws {
        let harness = try await DeliveryHarness.start(.sqlite)
        let now = Int64(Date().timeIntervalSince1970)
        try await harness.addUser(
            "u-now", devices: [(hexToken("ab", 1), .apns, .ios)], time: LambdaProcessTests.slot(now))
        let credentials = harness.simulator.credentials
        let key = try String(contentsOfFile: credentials.apnsKeyFile, encoding: .utf8)
        let server = try await Self.extensionServer(["diary/apns": key], parameters: [:])
        let api = try await LambdaRuntimeSimulator.start()
        let live = "https://127.0.0.1:\(harness.simulator.port)"
        let process = try Executables.start(
            "diary-reminder", [],
            environment: [
                "AWS_LAMBDA_RUNTIME_API": api.address, "AWS_SESSION_TOKEN": Self.token,
                "PARAMETERS_SECRETS_EXTENSION_HTTP_PORT": "\(server.port)", "PUSH_DATABASE_URL": harness.db.path,
                "PUSH_APNS_KEY_SECRET": "secretsmanager:diary/apns", "PUSH_APNS_KEY_ID": SimulatorCredentials.keyID,
                "PUSH_APNS_TEAM_ID": SimulatorCredentials.teamID, "PUSH_APNS_TOPIC": SimulatorCredentials.topic,
                "PUSH_APNS_ENDPOINT": live, "PUSH_APNS_SANDBOX_ENDPOINT": live, "PUSH_CA_FILE": credentials.caFile,
            ])
        let outcome = await api.invoke(LambdaTests.scheduled(Timestamps.format(now)), deadlineMs: (now + 300) * 1000)
        await api.stop()
        let result = await Executables.finish(process)
        let fields = try LambdaTests.fields(outcome)
        #expect(fields.claimed == 1 && fields.notifications == 1, "\(result.stderr)")
        #expect(harness.simulator.accepted().count == 1)
        #expect(server.requests.count == 1)
        #expect(!result.stderr.contains("PRIVATE KEY"))
        await server.stop()
        await harness.stop()
    }
}
