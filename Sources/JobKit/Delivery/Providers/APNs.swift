/// Apple Push Notification service: what the model knows of it (its platforms, token shapes, case, environment).
/// Its settings, request writer and answer classifier are in JobKitDelivery (`Providers/APNs.swift`).
package enum APNs {
    static let descriptor = ProviderDescriptor(
        channel: .apns, platforms: [.ios], kinds: [.token], storesLowerCase: true,
        defaultEnvironment: .production, tokenProblem: DeviceToken.apnsTokenProblem,
        foreignShape: nil, claimsShape: DeviceToken.isAPNsShaped, shapePattern: DeviceToken.apnsShapedPattern,
        probesQuietTokens: false)
}

extension DeliveryChannel {
    /// APNs' answers, and the advice its troubles get.
    package static let apns = DeliveryChannel("apns", displayName: "APNs") { cause, reasons, isThrottle in
        switch cause {
        case .credentials:
            "check PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID and the .p8 key (a revoked key, or a key id that is not the key's, is refused) and PUSH_APNS_TOPIC"
        case .misconfigured where reasons.contains("devicetokennotfortopic"):
            "check PUSH_APNS_TOPIC: it must be the bundle id the app's devices registered with (not a watch app's, a staging build's or another app's of the team)"
        case .misconfigured:
            "check the devices' APNs environment and the endpoints: BadDeviceToken for most tokens means sandbox (development build) tokens sent to production, or the other way round (apns_environment, PUSH_APNS_ENDPOINT, PUSH_APNS_SANDBOX_ENDPOINT), or tokens that are not APNs tokens"
        case .unavailable where isThrottle:
            "APNs throttled notifications to the same device token (TooManyRequests: too many to one device in a short time, often from another sender too); the devices are retried by the next runs inside the catch-up window"
        case .unavailable: nil
        }
    }
}
