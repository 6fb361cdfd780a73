import Crypto
import Foundation
import JobKitDelivery
import NIOSSL
import SwiftASN1
import X509
import _CryptoExtras

/// Test credentials matching a simulator: a CA and a server certificate for 127.0.0.1/localhost, an APNs
/// `.p8` signing key with its key and team ids, and a Google service account whose `token_uri` points at
/// the simulator. Written as files, exactly as production credentials are.
public struct SimulatorCredentials: Sendable {
    public let directory: URL
    public static let keyID = "SIMKEY0001"
    public static let teamID = "SIMTEAM001"
    public static let topic = "com.example.diary"
    public static let projectID = "diary-sim"
    public static let clientEmail = "push@diary-sim.iam.gserviceaccount.com"
    public static let privateKeyID = "sim-key-1"
    /// Other apps of the same team (a watch app, a staging build): the key may send to them, but the devices of
    /// ``topic`` are not theirs, so APNs answers every token `400 DeviceTokenNotForTopic`.
    public static let otherTopicsOfTheTeam = ["com.example.diary.watchkitapp", "com.example.diary.staging"]
    /// An app of the team that the key is not scoped for (APNs' topic-specific keys, 2025): `403 UnrelatedKeyIdInToken`.
    public static let topicOutsideTheKeysScope = "com.example.journal"
    /// Another Firebase project the service account's key is trusted in (staging credentials in production): every
    /// token of ``projectID`` answers `403 SENDER_ID_MISMATCH`.
    public static let otherProjectID = "diary-sim-staging"

    public var caFile: String { path("ca.pem") }
    public var serverCertificateFile: String { path("server.pem") }
    public var serverKeyFile: String { path("server-key.pem") }
    public var apnsKeyFile: String { path("apns-key.p8") }
    public var serviceAccountPrivateKeyFile: String { path("service-account-key.pem") }
    /// Written by ``writeServiceAccount(port:)`` once the simulator's port is known.
    public var serviceAccountFile: String { path("service-account.json") }
    /// The same, of ``otherProjectID``: a service account of another project.
    public var otherProjectServiceAccountFile: String { path("service-account-other-project.json") }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// A TLS server presenting the server certificate (which ``caFile`` signed) and its key.
    public func serverTLSConfiguration() throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(serverCertificateFile).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: serverKeyFile, format: .pem)))
    }

    /// Loads the credentials in `directory`, generating any that are missing.
    public static func prepare(in directory: URL) throws -> SimulatorCredentials {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let credentials = SimulatorCredentials(directory: directory)
        let files = [
            credentials.caFile, credentials.serverCertificateFile, credentials.serverKeyFile,
            credentials.apnsKeyFile, credentials.serviceAccountPrivateKeyFile,
        ]
        if files.allSatisfy({ FileManager.default.fileExists(atPath: $0) }) { return credentials }

        let now = Date()
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("push-simulator test CA") }
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(20 * 365 * 86_400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey))
        let serverKey = P256.Signing.PrivateKey()
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(20 * 365 * 86_400),
            issuer: caName, subject: try DistinguishedName { CommonName("localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                ])
            },
            issuerPrivateKey: .init(caKey))
        let serviceKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        try write(try ca.serializeAsPEM().pemString, to: credentials.caFile)
        try write(try server.serializeAsPEM().pemString, to: credentials.serverCertificateFile)
        try write(serverKey.pemRepresentation, to: credentials.serverKeyFile)
        try write(P256.Signing.PrivateKey().pemRepresentation, to: credentials.apnsKeyFile)
        try write(serviceKey.pemRepresentation, to: credentials.serviceAccountPrivateKeyFile)
        return credentials
    }

    /// Writes the service-account JSON with `token_uri` on this simulator, and the one of ``otherProjectID``.
    public func writeServiceAccount(port: Int) throws {
        try writeServiceAccount(port: port, project: Self.projectID, to: serviceAccountFile)
        try writeServiceAccount(port: port, project: Self.otherProjectID, to: otherProjectServiceAccountFile)
    }

    private func writeServiceAccount(port: Int, project: String, to file: String) throws {
        let object: [String: String] = [
            "type": "service_account", "project_id": project, "private_key_id": Self.privateKeyID,
            "private_key": try String(contentsOfFile: serviceAccountPrivateKeyFile, encoding: .utf8),
            "client_email": Self.clientEmail, "client_id": "0",
            "token_uri": "https://127.0.0.1:\(port)/token",
        ]
        let data = try JSONSerialization.data(
            withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        try Self.write(String(decoding: data, as: UTF8.self), to: file)
    }

    func apnsPublicKey() throws -> P256.Signing.PublicKey {
        try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: apnsKeyFile, encoding: .utf8)).publicKey
    }

    func serviceAccountPublicKey() throws -> _RSA.Signing.PublicKey {
        try _RSA.Signing.PrivateKey(
            pemRepresentation: String(contentsOfFile: serviceAccountPrivateKeyFile, encoding: .utf8)
        ).publicKey
    }

    private static func write(_ text: String, to path: String) throws {
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
    }
}
