/// Firebase Cloud Messaging: what the model knows of it (its platforms, token kinds and shapes).
/// Its settings, message writer and answer classifier are in JobKitDelivery (`Providers/FCM.swift`).
package enum FCM {
    static let descriptor = ProviderDescriptor(
        name: "FCM", channel: .fcm, platforms: Set(Platform.allCases), kinds: [.token, .fid], storesLowerCase: false,
        defaultEnvironment: nil, tokenProblem: DeviceToken.fcmTokenProblem,
        foreignShape: .init(
            matches: DeviceToken.isAPNsShaped, pattern: DeviceToken.apnsShapedPattern,
            problem: DeviceToken.apnsTokenAsFCM),
        claimsShape: { _ in true }, shapePattern: nil, probesQuietTokens: true)
}
