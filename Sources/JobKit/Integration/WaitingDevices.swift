import Foundation

/// Devices a database webhook brought before their user was a push user (a profile without a time zone yet):
/// kept, and registered when the user becomes one, as the SQL mirror brings a new push user's rows from the app's
/// device table (migration 019). The store keeps each as its registration's JSON (``WaitingRegistration``).
package protocol WaitingDevices: Sendable {
    /// Keeps `registration` (JSON) for `userID`'s device `token`, replacing what waited for that token.
    func keepWaitingDevice(token: String, userID: String, registration: String, now: Int64) async throws(JobError)
    /// Removes and returns what waits for `userID`, oldest first.
    func takeWaitingDevices(userID: String) async throws(JobError) -> [String]
    /// Removes what waits for `userID`'s device `token`; false when nothing did.
    func dropWaitingDevice(token: String, userID: String) async throws(JobError) -> Bool
}

/// A ``DeviceRegistration`` as a waiting device keeps it: checked again, as any registration is, when it is
/// registered.
package struct WaitingRegistration: Codable, Sendable, Hashable {
    let userID: String
    let token: String
    let provider: String
    let platform: String
    let environment: String?
    let appVersion: String?
    let kind: String
    let replaces: String?
    let mirrored: Bool
    let lastSeen: Int64?

    package init(_ registration: DeviceRegistration) {
        userID = registration.userID
        token = registration.token
        provider = registration.provider.rawValue
        platform = registration.platform.rawValue
        environment = registration.apnsEnvironment?.rawValue
        appVersion = registration.appVersion
        kind = registration.kind.rawValue
        replaces = registration.replaces
        mirrored = registration.mirrored
        lastSeen = registration.lastSeen
    }

    package var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// The registration again; nil for a row that is not one (written by hand, or by a later version).
    package static func registration(_ json: String) -> DeviceRegistration? {
        guard let kept = try? JSONDecoder().decode(WaitingRegistration.self, from: Data(json.utf8)),
            let provider = Provider(rawValue: kept.provider), let platform = Platform(rawValue: kept.platform),
            let kind = TokenKind(rawValue: kept.kind),
            var registration = try? DeviceRegistration(
                userID: kept.userID, token: kept.token, provider: provider, platform: platform,
                apnsEnvironment: kept.environment.flatMap(APNsEnvironment.init(rawValue:)),
                appVersion: kept.appVersion, kind: kind, replaces: kept.replaces)
        else { return nil }
        registration.mirrored = kept.mirrored
        registration.lastSeen = kept.lastSeen
        return registration
    }
}

/// What one app change did, for the webhook's answer.
package struct AppChangeOutcome: Sendable, Hashable {
    package enum Action: String, Sendable {
        case userSet = "user_set"
        case userDeleted = "user_deleted"
        case deviceRegistered = "device_registered"
        case deviceWaiting = "device_waiting"
        case deviceUnregistered = "device_unregistered"
        case entryRecorded = "entry_recorded"
        case none
    }
    package let action: Action
    package let userID: String?
    package let detail: String?
}

extension AppChange {
    /// Applies the change to `store`, as the SQL mirror's rules do: a device of a user who is not a push user yet
    /// waits (and is registered, with the others waiting, when the user becomes one); a profile without a time
    /// zone is no push user yet, which is no error; a user's deletion or a device's logout removes what waited.
    package func apply(to store: any JobStore, now: Int64) async throws(JobError) -> AppChangeOutcome {
        switch self {
        case .setUser(let edit):
            if edit.timezone == nil, !(try await store.userExists(id: edit.id)) {
                return AppChangeOutcome(
                    action: .none, userID: edit.id,
                    detail: "not a push user until the row has a time zone; its devices wait until then")
            }
            let result = try await store.apply(edit, now: now)
            var detail = result.summary
            if result.before == nil {
                var registered = 0
                for json in try await store.takeWaitingDevices(userID: edit.id) {
                    guard let registration = WaitingRegistration.registration(json) else { continue }
                    _ = try await store.register(registration, now: now)
                    registered += 1
                }
                if registered > 0 { detail += ", \(registered) waiting device(s) registered" }
            }
            return AppChangeOutcome(action: .userSet, userID: edit.id, detail: detail)
        case .deleteUser(let id):
            let waited = try await store.takeWaitingDevices(userID: id)
            let deleted = try await store.deleteUser(id: id)
            return AppChangeOutcome(
                action: deleted ? .userDeleted : .none, userID: id,
                detail: deleted ? nil : waited.isEmpty ? "no such user" : "not a push user; its waiting devices removed"
            )
        case .register(let registration):
            guard try await store.userExists(id: registration.userID) else {
                try await store.keepWaitingDevice(
                    token: registration.token, userID: registration.userID,
                    registration: WaitingRegistration(registration).json, now: now)
                return AppChangeOutcome(
                    action: .deviceWaiting, userID: registration.userID,
                    detail: "the user is not a push user yet (no time zone): registered when they become one")
            }
            let result = try await store.register(registration, now: now)
            return AppChangeOutcome(
                action: .deviceRegistered, userID: registration.userID,
                detail:
                    "device \(result.deviceID) \(result.change.rawValue)\(result.retiredReplaced ? ", replaced the old token" : "")"
            )
        case .unregister(let token, let userID):
            let waited = try await store.dropWaitingDevice(token: token, userID: userID)
            let done = try await store.unregister(token: token, userID: userID, reason: "logout", now: now)
            return AppChangeOutcome(
                action: done || waited ? .deviceUnregistered : .none, userID: userID,
                detail: done
                    ? nil : waited ? "the waiting device removed" : "no active device with that token of this user")
        case .recordEntry(let userID, let at):
            try await store.recordEntry(userID: userID, at: at ?? now)
            return AppChangeOutcome(action: .entryRecorded, userID: userID, detail: nil)
        case .nothing(let reason):
            return AppChangeOutcome(action: .none, userID: nil, detail: reason)
        }
    }
}
