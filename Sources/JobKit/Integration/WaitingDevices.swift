import Foundation

/// Devices a database webhook brought before their user was a push user (a profile without a time zone yet):
/// kept, and registered when the user becomes one, as the SQL mirror brings a new push user's rows from the app's
/// device table (migration 019). The store keeps each as its registration's JSON (``WaitingRegistration``).
package protocol WaitingDevices: Sendable {
    /// Keeps `registration` (JSON) for `userID`'s device `token`, replacing what waited for that token.
    func keepWaitingDevice(token: String, userID: String, registration: String, now: Int64) async throws(JobError)
    /// Removes and returns what waits for `userID`: their devices (oldest first) and their latest entry.
    func takeWaiting(userID: String) async throws(JobError) -> WaitingForUser
    /// Keeps that a webhook brought `userID`'s profile without a time zone (`profileAt`, the latest), or an entry of
    /// theirs (`entryAt`: the latest is kept), until ``takeWaiting(userID:)``.
    func keepWaitingUser(userID: String, profileAt: Int64?, entryAt: Int64?) async throws(JobError)
    /// Removes what waits for `userID`'s device `token`; false when nothing did.
    func dropWaitingDevice(token: String, userID: String) async throws(JobError) -> Bool
}

/// What waited for a user who becomes a push user (``WaitingDevices/takeWaiting(userID:)``).
package struct WaitingForUser: Sendable, Hashable {
    /// Each device's registration as JSON (``WaitingRegistration``), oldest first.
    package var devices: [String]
    /// Their latest entry meanwhile.
    package var entryAt: Int64?
    /// Whether anything waited (a profile, a device, an entry).
    package var found: Bool

    package init(devices: [String], entryAt: Int64?, found: Bool) {
        self.devices = devices
        self.entryAt = entryAt
        self.found = found
    }
}

/// Why a user the push schema does not know may still be the app's (``ExplainSource/notPushUser(userID:)``).
package struct NotPushUser: Sendable, Hashable {
    /// When a webhook last brought their profile without a time zone; nil when none did.
    package var profileReceivedAt: Int64?
    /// How many of their devices wait for them.
    package var waitingDevices: Int
    /// Whether an entry of theirs waits.
    package var waitingEntry: Bool
    /// With the SQL mirror (`pushctl integrate postgres`): their row in the app's users table has this time zone
    /// (`""`: none); nil when the app's table has no such row, or nothing mirrors it.
    package var appRowZone: String?

    /// Nil when nothing says the app knows the user.
    package static func from(profileReceivedAt: Int64?, waitingDevices: Int, waitingEntry: Bool, appRowZone: String?)
        -> NotPushUser?
    {
        guard profileReceivedAt != nil || waitingDevices > 0 || waitingEntry || appRowZone != nil else { return nil }
        return NotPushUser(
            profileReceivedAt: profileReceivedAt, waitingDevices: waitingDevices, waitingEntry: waitingEntry,
            appRowZone: appRowZone)
    }

    /// Why they are not a push user, and what makes them one: the text `--explain` adds to "unknown user".
    package var why: String {
        var parts: [String] = []
        if let zone = appRowZone {
            parts.append(
                zone.isEmpty
                    ? "not a push user yet: their row in the app's users table has no time zone (they become one when it has)"
                    : "their row in the app's users table has the time zone \(LineText.quoted(zone)) but was not mirrored: see the rejects in `pushctl integrate check`, or run `pushctl integrate backfill`"
            )
        } else if let at = profileReceivedAt {
            parts.append(
                "not a push user yet: a database webhook brought their profile with no time zone at \(Timestamps.format(at)) (they become one when a change of that row brings one)"
            )
        } else {
            parts.append("not a push user yet: rows of theirs came before their profile had a time zone")
        }
        if waitingDevices > 0 {
            parts.append("\(waitingDevices) device(s) of theirs wait, registered when they become one")
        }
        if waitingEntry { parts.append("their latest entry waits, recorded when they become one") }
        return parts.joined(separator: "; ")
    }
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
        case entryWaiting = "entry_waiting"
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
                try await store.keepWaitingUser(userID: edit.id, profileAt: now, entryAt: nil)
                return AppChangeOutcome(
                    action: .none, userID: edit.id,
                    detail: "not a push user until the row has a time zone; its devices wait until then")
            }
            let result = try await store.apply(edit, now: now)
            var detail = result.summary
            if result.before == nil {
                // A new push user: what waited for them is theirs now.
                let waiting = try await store.takeWaiting(userID: edit.id)
                var registered = 0
                for json in waiting.devices {
                    guard let registration = WaitingRegistration.registration(json) else { continue }
                    _ = try await store.register(registration, now: now)
                    registered += 1
                }
                if registered > 0 { detail += ", \(registered) waiting device(s) registered" }
                if let at = waiting.entryAt {
                    try await store.recordEntry(userID: edit.id, at: at)
                    detail += ", the entry of \(Timestamps.format(at)) recorded"
                }
            }
            return AppChangeOutcome(action: .userSet, userID: edit.id, detail: detail)
        case .deleteUser(let id):
            let waited = try await store.takeWaiting(userID: id)
            let deleted = try await store.deleteUser(id: id)
            return AppChangeOutcome(
                action: deleted ? .userDeleted : .none, userID: id,
                detail: deleted ? nil : waited.found ? "not a push user; what waited for them removed" : "no such user"
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
            // An entry of someone who is no push user yet (a profile without a zone) waits: once they are one, it
            // still says they wrote that day.
            guard try await store.userExists(id: userID) else {
                try await store.keepWaitingUser(userID: userID, profileAt: nil, entryAt: at ?? now)
                return AppChangeOutcome(
                    action: .entryWaiting, userID: userID,
                    detail: "the user is not a push user yet (no time zone): recorded when they become one")
            }
            try await store.recordEntry(userID: userID, at: at ?? now)
            return AppChangeOutcome(action: .entryRecorded, userID: userID, detail: nil)
        case .nothing(let reason):
            return AppChangeOutcome(action: .none, userID: nil, detail: reason)
        }
    }
}
