/// When a provider's "this token is dead" is believed. Some dead answers also mean that this sender is set up
/// wrong, and then the provider gives them for every token: APNs `BadDeviceToken` (sandbox tokens sent to
/// production) and `DeviceTokenNotForTopic` (a topic of another app of the team), FCM `SENDER_ID_MISMATCH` (a
/// service account of another Firebase project) and an invalid token or installation id (tokens of another provider
/// or project). Deactivating on such answers would unsubscribe the whole fleet for one wrong setting, and a device
/// comes back only when its user opens the app.
///
/// So such an answer deactivates its device only when the provider is otherwise healthy in the run: it delivered
/// at least `minDelivered` notifications, and such answers are at most `sharePercent` % of those and them together.
/// Otherwise the device is kept active and held (``TransientScope/sender``), and the run fails with the setting to
/// check (78). A held device answered the same in a later, healthy run is deactivated then. Answers no setting can
/// cause (APNs `Unregistered`, FCM `UNREGISTERED`) are always believed.
public struct DeadTokenGuard: Sendable, Codable, Hashable {
    /// Percent of the provider's deliveries and such answers together (0–100).
    public var sharePercent: Int
    /// Deliveries of the provider in the run before such an answer is believed.
    public var minDelivered: Int

    public static let `default` = DeadTokenGuard(
        sharePercent: ConfigKey.deadGuardShare.number!.default,
        minDelivered: ConfigKey.deadGuardMinDelivered.number!.default)

    public init(sharePercent: Int, minDelivered: Int) {
        self.sharePercent = sharePercent
        self.minDelivered = minDelivered
    }

    /// Whether `suspect` such answers beside `delivered` deliveries, in one run of one provider, are believed.
    public func believes(suspect: Int, delivered: Int) -> Bool {
        delivered >= minDelivered && suspect * 100 <= sharePercent * (suspect + delivered)
    }
}
