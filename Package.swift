// swift-tools-version:6.2
import PackageDescription

/// What the test targets that use both stores and the simulator depend on alike.
let bothStores: [Target.Dependency] = [
    "JobKit", "JobKitDelivery", "JobKitSchema", "JobKitSQLite", "JobKitPostgres", "JobKitWiring", "PushSimulator",
    .product(name: "PostgresNIO", package: "postgres-nio"),
    .product(name: "GRDB", package: "GRDB.swift"),
    .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "NIOSSL", package: "swift-nio-ssl"),
]

let package = Package(
    name: "diary-push",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "JobKit", targets: ["JobKit"]),
        .library(name: "JobKitDelivery", targets: ["JobKitDelivery"]),
        .library(name: "JobKitSchema", targets: ["JobKitSchema"]),
        .library(name: "JobKitSQLite", targets: ["JobKitSQLite"]),
        .library(name: "JobKitPostgres", targets: ["JobKitPostgres"]),
        .library(name: "JobKitWiring", targets: ["JobKitWiring"]),
        .executable(name: "diary-reminder", targets: ["DiaryReminderJob"]),
        .executable(name: "pushctl", targets: ["PushCtl"]),
        .executable(name: "content-limit-hook", targets: ["ContentLimitHook"]),
        .executable(name: "content-limit-hook-full", targets: ["ContentLimitHookFull"]),
        .executable(name: "token-janitor", targets: ["TokenJanitor"]),
        .executable(name: "push-api", targets: ["PushAPIServer"]),
        .executable(name: "push-simulator", targets: ["PushSimulatorCommand"]),
        .executable(name: "send-bench", targets: ["SendBench"]),
        .library(name: "PushSimulator", targets: ["PushSimulator"]),
        .library(name: "LambdaRuntimeSimulator", targets: ["LambdaRuntimeSimulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-openapi-generator", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird", from: "2.1.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `swift package generate-documentation --target JobKit` (scripts/test builds it, warnings as errors).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The Foundation-free rules and calendar types; JobKit re-exports them.
        .target(name: "JobKitCore"),
        // `--version`: the release and, in a development build, its commit (written before each build by the
        // plugin; only the executables depend on it, so a new commit recompiles none of the library).
        .target(name: "BuildVersion", dependencies: ["JobKitCore", "LinuxSymbolFloor"], plugins: ["BuildCommit"]),
        // Binds the few libc and libstdc++ symbols whose newest versions Amazon Linux 2023 (AWS Lambda's
        // provided.al2023) lacks to the versions it has: a build on a newer Linux loads there. Every executable
        // links it, through BuildVersion.
        .target(name: "LinuxSymbolFloor"),
        .plugin(name: "BuildCommit", capability: .buildTool()),
        // Process-wide SQLite settings that only C can make (sqlite3_config is variadic).
        .target(name: "CSQLiteSetup", dependencies: [.product(name: "GRDBSQLite", package: "GRDB.swift")]),
        .target(
            name: "JobKit",
            dependencies: [
                "JobKitCore",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            resources: [.embedInCode("Copy/default-copy-catalog.json")]
        ),
        // What leaves the process: the providers' settings, request writers and answer classifiers (APNs, FCM),
        // HTTP/2 and TLS, credentials, pacing, the senders, the HTTP/1 client of the heartbeat, the JWKS and the
        // Lambda secrets; and the factories that give each job its sender. Over JobKit's model (`Sender`,
        // `OutgoingNotification`, `DeliveryReport`, the provider descriptors).
        .target(
            name: "JobKitDelivery",
            dependencies: [
                "JobKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        // Every migration of both stores' schema, side by side: SQL text, no driver.
        .target(name: "JobKitSchema"),
        // The embedded store: SQLite through GRDB.
        .target(
            name: "JobKitSQLite",
            dependencies: [
                "JobKit", "JobKitSchema",
                "CSQLiteSetup",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The server store: PostgreSQL through postgres-nio.
        .target(
            name: "JobKitPostgres",
            dependencies: [
                "JobKit", "JobKitSchema",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            resources: [.embedInCode("Integration/integration-base.sql")]
        ),
        // Opens the store a database URL names (either kind) and builds a job: what the command-line tools,
        // the Lambda loop and a Swift program embedding a job use.
        .target(
            name: "JobKitWiring",
            dependencies: [
                "JobKit", "JobKitDelivery", "JobKitSQLite", "JobKitPostgres",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "PushSimulator",
            dependencies: [
                "JobKit", "JobKitDelivery",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .target(
            name: "LambdaRuntimeSimulator",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "PushSimulatorCommand",
            dependencies: [
                "PushSimulator", "JobKit", "JobKitDelivery", "BuildVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "JobCLI",
            dependencies: [
                "JobKit", "JobKitDelivery", "JobKitSQLite", "JobKitWiring",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "DiaryReminderJob",
            dependencies: [
                "JobKit", "JobCLI", "BuildVersion", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // content-limit-hook: the Foundation-free quiet path, statically linked so that it starts in about
        // a millisecond; everything else runs content-limit-hook-full.
        .target(
            name: "ContentLimitQuietPath",
            dependencies: ["JobKitCore", .product(name: "GRDBSQLite", package: "GRDB.swift")]
        ),
        .executableTarget(
            name: "ContentLimitHook",
            dependencies: ["ContentLimitQuietPath"],
            linkerSettings: [.unsafeFlags(["-static-stdlib"], .when(platforms: [.linux]))]
        ),
        .executableTarget(
            name: "ContentLimitHookFull",
            dependencies: [
                "JobKit", "JobCLI", "BuildVersion", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "TokenJanitor",
            dependencies: [
                "JobKit", "JobCLI", "BuildVersion", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // pushctl's command tree, a library so that tests parse and validate it in process; the executable runs it.
        .target(
            name: "PushCtlCommands",
            dependencies: [
                "JobKit", "JobKitCore", "JobCLI", "JobKitPostgres", "JobKitWiring", "BuildVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "PushCtl", dependencies: ["PushCtlCommands"]),
        // The HTTP API: handlers of the operations `openapi.yaml` declares (types and server stubs generated from it
        // by the build plugin), over the jobs' own rules and the wiring module's stores.
        .target(
            name: "PushAPI",
            dependencies: [
                "JobKit", "JobKitDelivery",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        .executableTarget(
            name: "PushAPIServer",
            dependencies: [
                "PushAPI", "JobKit", "JobKitWiring", "JobCLI", "BuildVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "SendBench",
            dependencies: [
                "JobKit", "JobKitDelivery", "JobKitSQLite", "PushSimulator",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/SendBench"
        ),
        // What the tests share: temporary stores on both backends, the simulator harness, the built executables,
        // test doubles. A test target (with no tests of its own), so that only test builds compile it: it imports
        // Testing and JobKit for testing, which a release build has neither of.
        .testTarget(
            name: "JobKitTestSupport",
            dependencies: bothStores + [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Tests/JobKitTestSupport"
        ),
        // The rules and codecs, with no database, server or process.
        .testTarget(
            name: "JobKitUnitTests",
            dependencies: [
                "JobKit", "JobKitDelivery", "JobKitTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ]
        ),
        // The stores' contract and the jobs over them, each on SQLite and PostgreSQL, delivering to the simulator.
        .testTarget(
            name: "JobKitStoreTests",
            dependencies: bothStores + [
                "JobCLI", "JobKitTestSupport",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The built executables as cron, a backend and Lambda run them, and what ships.
        .testTarget(
            name: "JobKitProcessTests",
            dependencies: bothStores + [
                "JobCLI", "LambdaRuntimeSimulator", "ContentLimitQuietPath", "JobKitTestSupport", "PushAPI",
                "PushCtlCommands",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
