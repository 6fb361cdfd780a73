/// Apple Push Notification service: what the model knows of it (its platforms, token shapes, case, environment).
/// Its settings, request writer and answer classifier are in JobKitDelivery (`Providers/APNs.swift`).
package enum APNs {
    static let descriptor = ProviderDescriptor(
        name: "APNs", channel: .apns, platforms: [.ios], kinds: [.token], storesLowerCase: true,
        defaultEnvironment: .production, tokenProblem: DeviceToken.apnsTokenProblem,
        foreignShape: nil, claimsShape: DeviceToken.isAPNsShaped, shapePattern: DeviceToken.apnsShapedPattern,
        probesQuietTokens: false)
}
