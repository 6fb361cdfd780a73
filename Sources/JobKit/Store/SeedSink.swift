// What the demo seeder (`Seeder`, module JobKitWiring) writes into a store: synthetic users for demos, tests
// and benchmarks.

/// One generated user with everything that belongs to them.
package struct SeedUser: Sendable {
    package var profile: UserProfile
    package var devices: [DeviceRegistration]
    package var entries: [Int64]

    package init(profile: UserProfile, devices: [DeviceRegistration], entries: [Int64]) {
        self.profile = profile
        self.devices = devices
        self.entries = entries
    }
}

/// Where the seeder writes (a store), in batches, each in one transaction.
package protocol SeedSink: Sendable {
    func insertSeed(_ users: [SeedUser], now: Int64) async throws(JobError)
    /// Whether the database has any user.
    func hasUsers() async throws(JobError) -> Bool
}
