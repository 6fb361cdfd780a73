/// A push provider: a closed set, each described once by its `descriptor` (`ProviderDescriptor`). Adding one is
/// a case here and its line in `descriptor` below, its descriptor, and its settings, request writer and answer
/// classifier (docs/ARCHITECTURE.md, "Adding a provider").
public enum Provider: String, CaseIterable, Hashable, Sendable, Codable, CodingKeyRepresentable,
    CustomStringConvertible
{
    case apns, fcm
    /// Every provider this version sends to.
    public static var all: [Provider] { allCases }
    public var description: String { rawValue }
}

/// What the rules need to know of a push provider, said once per provider (``Provider/descriptor``): the values
/// and platforms it takes, its tokens' case and shape, whether its devices carry an APNs environment, and whether
/// the janitor may probe its quiet tokens. Registration, the send-time guard, the mapping's `by_shape`, the
/// sender's routing and the janitor read these; nothing else compares a provider's identity (a test greps for it).
package struct ProviderDescriptor: Sendable {
    /// Its name as people write it, in messages ("APNs"): its channel's.
    package var name: String { channel.displayName }
    /// The channel its answers are counted under.
    package let channel: DeliveryChannel
    /// The platforms of its devices.
    package let platforms: Set<Platform>
    /// The kinds of value it is sent (a token; FCM also installation ids).
    package let kinds: Set<TokenKind>
    /// Its tokens are hexadecimal in either case as apps print them, stored lower-case.
    package let storesLowerCase: Bool
    /// The environment of a device registered without one; `nil`: its devices have none.
    package let defaultEnvironment: APNsEnvironment?
    /// Why a value stored as its ``TokenKind/token`` is not one (nil: it is). The send-time guard and
    /// registration.
    package let tokenProblem: @Sendable (String) -> String?
    /// A shape of another provider's tokens it refuses in a new registration or mirrored row (not for rows
    /// already stored): what matches, the same as a PostgreSQL regular expression, and why it is refused.
    package struct ForeignShape: Sendable {
        package let matches: @Sendable (String) -> Bool
        package let pattern: String
        package let problem: String
    }
    package let foreignShape: ForeignShape?
    /// Whether an app's raw token of this shape is its own, for a mapping's `by_shape` (the first provider of
    /// ``Provider/allCases`` that claims a token gets it), and the same as a PostgreSQL regular expression for the
    /// SQL mirror (`nil`: it claims every token, as the last provider must).
    package let claimsShape: @Sendable (String) -> Bool
    package let shapePattern: String?
    /// The janitor may ask it whether a quiet token is still valid (a validate-only send).
    package let probesQuietTokens: Bool

    /// Why a new registration's token is another provider's (``foreignShape``), nil when it is not.
    package func foreignTokenProblem(_ token: String) -> String? {
        foreignShape.flatMap { $0.matches(token) ? $0.problem : nil }
    }
}

extension Provider {
    /// This provider's facts: the one `switch` on a provider.
    package var descriptor: ProviderDescriptor {
        switch self {
        case .apns: APNs.descriptor
        case .fcm: FCM.descriptor
        }
    }

    /// The provider an app's raw token's shape names (a mapping's `by_shape`).
    package static func byShape(_ token: String) -> Provider {
        allCases.first { $0.descriptor.claimsShape(token) } ?? allCases[allCases.count - 1]
    }

    /// The provider Firebase installation ids are sent to.
    package static var ofInstallationIDs: Provider { allCases.first { $0.takes(.fid) }! }

    /// Whether it is sent `kind` of value.
    package func takes(_ kind: TokenKind) -> Bool { descriptor.kinds.contains(kind) }

    /// SQL of the provider a token's shape names (``byShape(_:)``), `token` an SQL text expression.
    package static func sqlByShape(_ token: String) -> String {
        let claims = allCases.compactMap { provider in
            provider.descriptor.shapePattern.map { "WHEN \(token) ~ '\($0)' THEN '\(provider.rawValue)' " }
        }
        return "CASE " + claims.joined() + "ELSE '\(allCases[allCases.count - 1].rawValue)' END"
    }

    /// SQL of the environment a device of `provider` (an SQL expression) is stored with, given `environment` (an
    /// SQL expression, NULL for none): its provider's default when NULL, NULL for a provider without
    /// environments.
    package static func sqlEnvironment(provider: String, _ environment: String) -> String {
        let cases = allCases.compactMap { provider in
            provider.descriptor.defaultEnvironment.map {
                "WHEN '\(provider.rawValue)' THEN coalesce(\(environment), '\($0.rawValue)') "
            }
        }
        return "CASE \(provider) " + cases.joined() + "END"
    }

    /// The providers `filter` picks, as an SQL list of string literals (their raw values are constant letters).
    package static func sqlList(_ filter: (ProviderDescriptor) -> Bool) -> String {
        allCases.filter { filter($0.descriptor) }.map { "'\($0.rawValue)'" }.joined(separator: ", ")
    }
}
