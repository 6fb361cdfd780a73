// swift-tools-version:6.2
// A Swift backend that calls the content-limit hook in-process: one `JobService` for the process's
// lifetime, one call per write. It depends on this repository by path; an app outside it would write
//     .package(url: "https://…/diary-push.git", from: "0.9.0")
// and the products `JobKit`, `JobKitDelivery` and `JobKitSQLite` of "diary-push". It links SQLite only: no
// postgres-nio is built or linked (a test checks the binary). `JobKitWiring` in place of `JobKitSQLite` opens PostgreSQL too.
import Foundation
import PackageDescription

// A path dependency's identity is its folder's name (`diary-push` in a clone named so, anything else in CI).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
let identity = root.lastPathComponent.lowercased()

let package = Package(
    name: "InProcessHook",
    platforms: [.macOS(.v14)],
    dependencies: [.package(path: root.path)],
    targets: [
        .executableTarget(
            name: "InProcessHook",
            dependencies: [
                // JobKit: `JobService`, the hook, its event and summary; JobKitDelivery: `JobService.contentLimitHook`,
                // which gives the hook its senders (APNs, FCM); JobKitSQLite: `StoreOpener.sqliteOnly`, which opens the
                // SQLite database PUSH_DATABASE_URL names.
                .product(name: "JobKit", package: identity),
                .product(name: "JobKitDelivery", package: identity),
                .product(name: "JobKitSQLite", package: identity),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
