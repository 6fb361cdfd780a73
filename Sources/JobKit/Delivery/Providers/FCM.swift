/// Firebase Cloud Messaging: what the model knows of it (its platforms, token kinds and shapes).
/// Its settings, message writer and answer classifier are in JobKitDelivery (`Providers/FCM.swift`).
package enum FCM {
    static let descriptor = ProviderDescriptor(
        channel: .fcm, platforms: Set(Platform.allCases), kinds: [.token, .fid], storesLowerCase: false,
        defaultEnvironment: nil, tokenProblem: DeviceToken.fcmTokenProblem,
        foreignShape: .init(
            matches: DeviceToken.isAPNsShaped, pattern: DeviceToken.apnsShapedPattern,
            problem: DeviceToken.apnsTokenAsFCM),
        claimsShape: { _ in true }, shapePattern: nil, probesQuietTokens: true)
}

extension DeliveryChannel {
    /// FCM's answers, and the advice its troubles get.
    package static let fcm = DeliveryChannel("fcm", displayName: "FCM") { cause, reasons, isThrottle in
        switch cause {
        case .credentials where reasons.contains("third_party_auth"):
            "the APNs key or certificate uploaded to the Firebase project is wrong: replace it in the Firebase console"
        case .credentials:
            "check the service account (PUSH_FCM_SERVICE_ACCOUNT_FILE): a deleted or disabled key, another project, or no Firebase Cloud Messaging permission; the OAuth endpoint's answer is in the reasons"
        case .misconfigured where reasons.contains("sender_id_mismatch"):
            "check PUSH_FCM_SERVICE_ACCOUNT_FILE: its project_id must be the Firebase project the app registers with (google-services.json, GoogleService-Info.plist), not a staging or older project"
        case .misconfigured: nil
        case .unavailable where isThrottle:
            "FCM's sending quota was exceeded (the project's rate, or too many messages to one device): lower PUSH_FCM_RATE, spread the shards' runs, or ask for a higher quota; the devices are retried by the next runs inside the catch-up window"
        case .unavailable: nil
        }
    }
}
