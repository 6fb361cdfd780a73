// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "diary-push",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "JobKit", targets: ["JobKit"]),
        .executable(name: "diary-reminder", targets: ["DiaryReminderJob"]),
        .executable(name: "pushctl", targets: ["PushCtl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .target(
            name: "JobKit",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "JobCLI",
            dependencies: [
                "JobKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "DiaryReminderJob",
            dependencies: ["JobKit", "JobCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "PushCtl",
            dependencies: ["JobKit", "JobCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .testTarget(
            name: "JobKitTests",
            dependencies: ["JobKit", "JobCLI"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
