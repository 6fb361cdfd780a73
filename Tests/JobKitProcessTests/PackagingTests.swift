import Foundation
import JobKitTestSupport
import LambdaRuntimeSimulator
import Testing

@testable import JobKit

/// What ships: the Debian package, the three Lambda zips and the in-process example, each built from the
/// release build that scripts/test makes (`--static-swift-stdlib`, as `scripts/install` builds it) and then
/// run from its own files.
@Suite(.serialized) struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A directory scripts/test names in an environment variable (a build these tests must not start
    /// themselves: a nested `swift build` would wait on the running one's lock).
    static func built(_ variable: String, _ what: String) throws -> URL {
        guard let path = ProcessInfo.processInfo.environment[variable], !path.isEmpty else {
            throw TestSetupError(
                message: "\(variable) is not set: run the suite with scripts/test, which builds \(what)")
        }
        return URL(fileURLWithPath: path)
    }

    static func temporaryDirectory(_ name: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func tool(
        _ path: String, _ arguments: [String], environment: [String: String] = [:],
        limit: Duration = .seconds(120)
    ) async throws -> Executables.Result {
        await Executables.finish(
            try Executables.start(executable: URL(fileURLWithPath: path), arguments, environment: environment),
            limit: limit)
    }

    @Test func theDebianPackagePassesLintianAndItsBinariesRunTheDemo() async throws {
        let release = try Self.built("PUSH_TEST_RELEASE_BUILD", "the release products")
        let out = try Self.temporaryDirectory("deb")
        defer { try? FileManager.default.removeItem(at: out) }
        let package = try await Self.tool(
            "/bin/bash",
            [
                Self.root.appendingPathComponent("scripts/package-deb").path,
                "--build-path", release.path, "--out", out.path,
            ], limit: .seconds(600))
        #expect(package.status == 0, "\(package.stderr)")
        let deb = try #require(package.stdout.split(separator: "\n").last.map(String.init))
        #expect(deb.hasSuffix("/diary-push_\(JobKitVersion.current)_amd64.deb"))

        // lintian: no errors (warnings and informational tags are listed in the failure message if any error shows).
        let lintian = try await Self.tool("/usr/bin/lintian", ["--tag-display-limit", "0", deb], limit: .seconds(600))
        let errors = lintian.stdout.split(separator: "\n").filter { $0.hasPrefix("E: ") }
        #expect(lintian.status == 0 && errors.isEmpty, "lintian: \(lintian.stdout) \(lintian.stderr)")

        let info = try await Self.tool("/usr/bin/dpkg-deb", ["--info", deb])
        #expect(
            info.stdout.contains("Package: diary-push") && info.stdout.contains("Version: \(JobKitVersion.current)"))
        #expect(
            info.stdout.contains("libsqlite3-0") && info.stdout.contains("adduser") && info.stdout.contains("tzdata"),
            "\(info.stdout)")
        let conffiles = try await Self.tool("/usr/bin/dpkg-deb", ["--info", deb, "conffiles"])
        #expect(conffiles.stdout == "/etc/diary-push/env\n")
        let postinst = try await Self.tool("/usr/bin/dpkg-deb", ["--info", deb, "postinst"])
        #expect(
            postinst.stdout.contains("adduser --system")
                && postinst.stdout.contains("chown diary-push:diary-push /var/lib/diary-push"))

        let listing = try await Self.tool("/usr/bin/dpkg-deb", ["--contents", deb])
        let lines = listing.stdout.split(separator: "\n").map(String.init)
        func entry(_ path: String) -> String? {
            lines.first { $0.hasSuffix(" ./" + path) || $0.contains(" ./" + path + " ") }
        }
        #expect(
            entry("etc/diary-push/env")?.hasPrefix("-rw------- root/root") == true,
            "\(entry("etc/diary-push/env") ?? "no env")")
        for path in [
            "usr/bin/diary-reminder", "usr/bin/content-limit-hook", "usr/bin/content-limit-hook-full",
            "usr/bin/token-janitor",
            "usr/bin/pushctl", "usr/bin/push-api", "usr/bin/push-simulator", "lib/systemd/system/diary-reminder.timer",
            "lib/systemd/system/push-api.service", "usr/share/man/man1/push-api.1.gz",
            "lib/systemd/system/token-janitor-report.timer", "usr/share/man/man1/diary-reminder.1.gz",
            "usr/share/doc/diary-push/copyright", "usr/share/doc/diary-push/changelog.gz",
        ] {
            #expect(entry(path) != nil, "missing \(path)")
        }

        // The packaged files, unpacked, run the demo against the bundled simulator.
        let tree = out.appendingPathComponent("tree")
        #expect(try await Self.tool("/usr/bin/dpkg-deb", ["-x", deb, tree.path]).status == 0)
        let service = try String(
            contentsOf: tree.appendingPathComponent("lib/systemd/system/diary-reminder.service"), encoding: .utf8)
        #expect(service.contains("ExecStart=/usr/bin/diary-reminder\n"))
        let api = try String(
            contentsOf: tree.appendingPathComponent("lib/systemd/system/push-api.service"), encoding: .utf8)
        #expect(api.contains("ExecStart=/usr/bin/push-api $API_ARGS\n"))
        let version = try await Executables.finish(
            Executables.start(executable: tree.appendingPathComponent("usr/bin/diary-reminder"), ["--version"]))
        #expect(ProcessTests.isVersion(version.stdout), "\(version.stdout)")
        let demo = try await Self.tool(
            "/bin/bash",
            [
                Self.root.appendingPathComponent("scripts/demo").path, "--bin",
                tree.appendingPathComponent("usr/bin").path,
            ],
            environment: ["PUSH_DEMO_DIR": out.appendingPathComponent("demo").path], limit: .seconds(300))
        #expect(demo.status == 0, "\(demo.stdout.suffix(800)) \(demo.stderr.suffix(800))")
        #expect(demo.stdout.contains("using the executables in \(tree.path)/usr/bin"))
    }

    /// What ships (the release binaries, not the debug build the other tests run): two runners of the same
    /// minute split a due set of several pages by leased buckets, each user read by one and reminded once.
    @Test func releaseRunnersSplitADueSetOfSeveralPagesByLeasedBuckets() async throws {
        let release = try Self.built("PUSH_TEST_RELEASE_BUILD", "the release products")
        let db = try await TemporaryDatabase(.sqlite)
        let bin = { (name: String) in release.appendingPathComponent(name).path }
        let seeded = try await Self.tool(
            bin("pushctl"),
            [
                "seed", "--database", db.path, "--users", "20000", "--due-at", "2026-11-21T20:00:00Z",
                "--due-count", "17000", "--random-seed", "4",
            ])
        #expect(seeded.status == 0, "\(seeded.stderr)")
        let runners = try (0..<2).map { index in
            try Executables.start(
                executable: URL(fileURLWithPath: bin("diary-reminder")),
                [
                    "--database", db.path, "--now", "2026-11-21T20:00:0\(index)Z", "--format", "json", "--outbox",
                    db.directory.appendingPathComponent("outbox-\(index).jsonl").path,
                ])
        }
        var summaries: [[String: Any]] = []
        for runner in runners {
            let result = await Executables.finish(runner)
            #expect(result.status == 0, "\(result.stderr)")
            summaries.append(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:])
        }
        let claimed = summaries.map { $0["claimed"] as? Int ?? 0 }
        let leased = summaries.map { $0["buckets_leased"] as? Int ?? 0 }
        #expect(claimed.reduce(0, +) == 17_000, "\(summaries)")
        #expect(summaries.allSatisfy { $0["buckets"] as? Int == 2 }, "\(summaries)")  // 17 pages of 1,000
        #expect(leased.reduce(0, +) == 2, "\(summaries)")
        #expect(summaries.map { $0["candidates"] as? Int ?? 0 }.reduce(0, +) == 17_000, "\(summaries)")
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 17_000)
    }

    @Test func eachLambdaZipsBootstrapServesAnInvocation() async throws {
        let release = try Self.built("PUSH_TEST_RELEASE_BUILD", "the release products")
        let out = try Self.temporaryDirectory("lambda")
        defer { try? FileManager.default.removeItem(at: out) }
        let package = try await Self.tool(
            "/bin/bash",
            [
                Self.root.appendingPathComponent("scripts/package-lambda").path,
                "--build-path", release.path, "--out", out.path,
            ], limit: .seconds(600))
        #expect(package.status == 0, "\(package.stderr)")

        let db = try await TemporaryDatabase(.sqlite)
        let now = Int64(Date().timeIntervalSince1970)
        try await db.store.upsertUser(
            UserProfile(id: "u-now", timezone: "UTC", reminderTime: LambdaProcessTests.slot(now)), now: 0)
        _ = try await db.store.register(
            DeviceRegistration(userID: "u-now", token: "token-now", provider: .fcm, platform: .android), now: 0)
        let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
        let invocations: [(job: String, event: String, expect: String)] = [
            ("diary-reminder", LambdaTests.scheduled(Timestamps.format(now)), #""claimed":1"#),
            ("content-limit-hook", #"{"user_id":"u-now","used":27,"limit":30}"#, #""action":"sent""#),
            (
                "token-janitor", LambdaTests.scheduled(Timestamps.format(now), detail: #"{"dry_run":true}"#),
                #""job":"token-janitor""#
            ),
            ("api", HTTPAPILambdaTests.request("GET", "/healthz"), #""statusCode":200"#),
        ]
        for (job, event, expected) in invocations {
            let task = out.appendingPathComponent(job)
            let unzip = try await Self.tool(
                "/usr/bin/unzip", ["-q", out.appendingPathComponent("\(job).zip").path, "-d", task.path])
            #expect(unzip.status == 0, "\(job): \(unzip.stderr)")
            let entries = try FileManager.default.contentsOfDirectory(atPath: task.path).sorted()
            #expect(entries == ["bootstrap", "lib"], "\(job): \(entries)")
            // They load on provided.al2023, whatever Linux built them (issue 79).
            for binary in ["bootstrap", "lib/libsqlite3.so.0"] {
                let path = task.appendingPathComponent(binary).path
                let symbols = try await Self.tool("/usr/bin/objdump", ["-T", path])
                let dynamic = try await Self.tool("/usr/bin/readelf", ["-d", path])
                #expect(symbols.status == 0 && dynamic.status == 0, "\(job)/\(binary): \(symbols.stderr)")
                let problems = LambdaBaseImage.problems(dynamicSymbols: symbols.stdout, dynamicSection: dynamic.stdout)
                #expect(problems.isEmpty, "\(job)/\(binary): \(problems)")
            }
            #expect(FileManager.default.isExecutableFile(atPath: task.appendingPathComponent("bootstrap").path))
            // As Lambda starts it: the task root as the working directory's place, its lib/ on the library path.
            let api = try await LambdaRuntimeSimulator.start()
            let process = try Executables.start(
                executable: task.appendingPathComponent("bootstrap"), [],
                environment: [
                    "AWS_LAMBDA_RUNTIME_API": api.address, "LAMBDA_TASK_ROOT": task.path,
                    "LD_LIBRARY_PATH": task.appendingPathComponent("lib").path,
                    "PUSH_DATABASE_URL": db.path, "PUSH_OUTBOX": outbox,
                ])
            let outcome = await api.invoke(event, deadlineMs: (now + 300) * 1000)
            await api.stop()
            let result = await Executables.finish(process)
            let response = try #require(outcome?.response, "\(job): \(String(describing: outcome)) \(result.stderr)")
            #expect(response.contains(expected), "\(job): \(response)")
            // The environment going away ends the process with "unavailable", as in Lambda's shutdown.
            #expect(result.status == 69, "\(job): \(result.stderr)")
        }
        #expect(try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n").count == 2)
    }

    @Test func theExamplePackageCallsTheHookInProcess() async throws {
        let example = try Self.built("PUSH_TEST_EXAMPLE_BIN", "Examples/InProcessHook")
        let db = try await TemporaryDatabase(.sqlite)
        try await db.store.upsertUser(UserProfile(id: "u1", timezone: "UTC"), now: 0)
        _ = try await db.store.register(
            DeviceRegistration(userID: "u1", token: "token-u1", provider: .fcm, platform: .android), now: 0)
        let outbox = db.directory.appendingPathComponent("outbox.jsonl").path
        let input = Pipe()
        let started = try Executables.start(
            executable: example, [], environment: ["PUSH_DATABASE_URL": db.path, "PUSH_OUTBOX": outbox],
            stdin: input)
        let events = [
            #"{"user_id":"u1","used":10,"limit":30}"#, #"{"user_id":"u1","used":27,"limit":30}"#,
            #"{"user_id":"u1","used":28,"limit":30}"#, #"{"user_id":"ghost","used":27,"limit":30}"#,
        ]
        input.fileHandleForWriting.write(Data((events.joined(separator: "\n") + "\n").utf8))
        try input.fileHandleForWriting.close()
        let result = await Executables.finish(started)
        let summaries = result.stdout.split(separator: "\n")
        #expect(summaries.count == 3, "\(result.stdout) \(result.stderr)")
        #expect(summaries.map { $0.contains(#""action":"sent""#) } == [false, true, false], "\(result.stdout)")
        #expect(result.stderr.contains("unknown user") && result.status == 65, "\(result.status) \(result.stderr)")
        #expect(try String(contentsOfFile: outbox, encoding: .utf8).split(separator: "\n").count == 1)

        // It links SQLite only: no postgres-nio code is in the binary (Swift's symbols carry their module's name).
        let binary = try Data(contentsOf: example)
        #expect(binary.range(of: Data("PostgresNIO".utf8)) == nil, "the SQLite-only example links postgres-nio")
        #expect(binary.range(of: Data("GRDB".utf8)) != nil, "the example's binary carries no module names to check")

        // Without settings it stops at start-up with the CLI's meaning.
        let unset = await Executables.finish(try Executables.start(executable: example, []))
        #expect(unset.status == 78 && unset.stderr.contains("PUSH_DATABASE_URL"), "\(unset.stderr)")
    }

    /// The modules depend one way: JobKit (the jobs and the store roles) links no database driver and no
    /// provider transport; JobKitDelivery (the transport) sits over it; each store module links its own driver;
    /// only the wiring module links both. As `swift package dump-package` reads the manifest.
    @Test func jobKitLinksNoDatabaseDriver() throws {
        let dump = try Self.built("PUSH_TEST_PACKAGE_DUMP", "the package's dump")
        let package = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dump)) as? [String: Any])
        let targets = try #require(package["targets"] as? [[String: Any]])
        func dependencies(_ name: String) throws -> Set<String> {
            let target = try #require(targets.first { $0["name"] as? String == name }, "no target \(name)")
            // Each dependency is {"byName": [name, …]} or {"product": [name, package, …]}.
            let entries = target["dependencies"] as? [[String: Any]] ?? []
            return Set(
                entries.compactMap { (($0["byName"] ?? $0["product"] ?? $0["target"]) as? [Any])?.first as? String })
        }
        let drivers: Set = ["GRDB", "GRDBSQLite", "PostgresNIO", "JobKitSQLite", "JobKitPostgres"]
        for name in ["JobKitCore", "JobKit", "JobKitDelivery", "JobKitSchema"] {
            let linked = try dependencies(name)
            #expect(linked.isDisjoint(with: drivers), "\(name): \(linked)")
        }
        // The model does not speak to providers: HTTP/2, JWTs and the senders are JobKitDelivery's, over JobKit.
        let transport: Set = ["NIOHTTP1", "NIOHTTP2", "NIOHPACK", "JWTKit", "_CryptoExtras", "JobKitDelivery"]
        let model = try dependencies("JobKit")
        #expect(model.isDisjoint(with: transport), "JobKit: \(model)")
        #expect(try dependencies("JobKitDelivery").isSuperset(of: ["JobKit", "NIOHTTP2", "JWTKit"]))
        #expect(try dependencies("JobKitSQLite").contains("GRDB"))
        #expect(try !dependencies("JobKitSQLite").contains("PostgresNIO"))
        #expect(try dependencies("JobKitPostgres").contains("PostgresNIO"))
        #expect(try !dependencies("JobKitPostgres").contains("GRDB"))
        #expect(try dependencies("JobKitWiring").isSuperset(of: ["JobKitSQLite", "JobKitPostgres"]))
    }

    /// Every module declares what it imports, and imports what it declares: a product reached only through another
    /// package's dependencies breaks when that package drops it, and a declared one never imported is link time and
    /// a false map of the modules. C modules linked without an import are named.
    @Test func everyModuleDeclaresWhatItImportsAndNothingElse() throws {
        let dump = try Self.built("PUSH_TEST_PACKAGE_DUMP", "the package's dump")
        let package = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: dump)) as? [String: Any])
        let targets = try #require(package["targets"] as? [[String: Any]])
        let system: Set = [
            "Foundation", "FoundationEssentials", "Dispatch", "Synchronization", "Glibc", "Musl", "Darwin",
        ]
        // Linked for their C code or their product, with no Swift import: the glibc floor (BuildVersion), SQLite's
        // build settings (CSQLiteSetup), the simulator the send benchmark starts (SendBench).
        let linkedWithoutImport: [String: Set<String>] = [
            "BuildVersion": ["LinuxSymbolFloor"], "CSQLiteSetup": ["GRDBSQLite"], "SendBench": ["PushSimulator"],
        ]
        let importLine = try Regex(
            #"^\s*(?:@testable\s+|@_exported\s+|package\s+|public\s+|internal\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?(\w+)"#
        )
        var checked = 0
        for target in targets {
            guard let name = target["name"] as? String, ["regular", "executable"].contains(target["type"] as? String)
            else { continue }
            let folder = Self.root.appendingPathComponent((target["path"] as? String) ?? "Sources/\(name)")
            guard let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
                continue
            }
            let entries = target["dependencies"] as? [[String: Any]] ?? []
            let declared = Set(
                entries.compactMap { (($0["byName"] ?? $0["product"] ?? $0["target"]) as? [Any])?.first as? String })
            var imported = Set<String>()
            for case let file as URL in files where file.pathExtension == "swift" {
                for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
                    if let match = try importLine.firstMatch(in: String(line)), let module = match.output[1].substring {
                        imported.insert(String(module))
                    }
                }
            }
            imported.subtract(system)
            #expect(
                imported.subtracting(declared).isEmpty,
                "\(name) imports undeclared \(imported.subtracting(declared).sorted())")
            let unused = declared.subtracting(imported).subtracting(linkedWithoutImport[name] ?? [])
            #expect(unused.isEmpty, "\(name) declares but never imports \(unused.sorted())")
            checked += 1
        }
        #expect(checked >= 20, "only \(checked) modules found under \(Self.root.path)")
    }

    /// The IAM documents DEPLOYMENT §3 tells operators to apply: valid policy JSON, each named there, each
    /// granting what the text says it grants.
    /// The floor itself: what a binary may need to load on provided.al2023.
    @Test func theBaseImageFloorRefusesWhatAmazonLinux2023Lacks() {
        let symbols = """
            0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.34) __libc_start_main
            0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.35) hypot
            0000000000000000      DF *UND*	0000000000000000 (GLIBCXX_3.4.30) _ZNSt18condition_variable4wait
            0000000000000000      DF *UND*	0000000000000000 (GLIBCXX_3.4.29) _ZSt28__throw_bad_array_new_lengthv
            0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.2.5) hypotf
            00000000022f3750 g    DF .text	0000000000000027  Base        hypotf
            """
        let dynamic = """
             0x0000000000000001 (NEEDED)             Shared library: [libsqlite3.so.0]
             0x0000000000000001 (NEEDED)             Shared library: [libstdc++.so.6]
             0x0000000000000001 (NEEDED)             Shared library: [libcurl.so.4]
            """
        #expect(
            LambdaBaseImage.problems(dynamicSymbols: symbols, dynamicSection: dynamic) == [
                "needs GLIBCXX_3.4.30 (_ZNSt18condition_variable4wait)", "needs GLIBC_2.35 (hypot)",
                "exports the floor's stand-in hypotf, which then answers its own call to the real one",
                "links libcurl.so.4, which is neither in the base image nor in the zip",
            ])
    }

    @Test func theLambdaPolicyDocumentsAreValidAndDocumented() throws {
        let folder = Self.root.appendingPathComponent("deploy/lambda")
        let deployment = try String(contentsOf: Self.root.appendingPathComponent("docs/DEPLOYMENT.md"), encoding: .utf8)
        var actions: [String: Set<String>] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasSuffix(".json") {
            let object =
                try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(name)))
                as? [String: Any]
            #expect(object?["Version"] as? String == "2012-10-17", "\(name)")
            let statements = try #require(object?["Statement"] as? [[String: Any]], "\(name)")
            for statement in statements {
                #expect(statement["Effect"] as? String == "Allow", "\(name)")
                let granted = (statement["Action"] as? [String]) ?? [(statement["Action"] as? String) ?? ""]
                actions[name, default: []].formUnion(granted)
            }
            #expect(
                deployment.contains("deploy/lambda/\(name)") || deployment.contains("`\(name)`"),
                "\(name) is not in DEPLOYMENT.md")
        }
        #expect(
            actions["function-policy.json"]?.isSuperset(of: [
                "secretsmanager:GetSecretValue", "ssm:GetParameter", "kms:Decrypt",
                "ec2:CreateNetworkInterface", "logs:PutLogEvents",
            ]) == true)
        #expect(actions["scheduler-policy.json"] == ["lambda:InvokeFunction"])
        #expect(actions["backend-invoke-policy.json"] == ["lambda:InvokeFunction"])
        #expect(
            actions["function-trust-policy.json"] == ["sts:AssumeRole"]
                && actions["scheduler-trust-policy.json"] == ["sts:AssumeRole"])
    }
}

/// What a binary may need of the system to load on AWS Lambda's provided.al2023: Amazon Linux 2023's glibc 2.34 and
/// GCC 11's runtime (the Amazon Linux 2023 User Guide, "Core toolchain packages glibc, gcc, binutils": glibc 2.34,
/// gcc 11), that is symbol versions up to GLIBC_2.34, GLIBCXX_3.4.29 and CXXABI_1.3.13, and shared libraries of those
/// packages only (glibc's, libgcc_s and libstdc++); anything else must be in the zip's lib/ (libsqlite3).
enum LambdaBaseImage {
    static let glibc = [2, 34]
    static let glibcxx = [3, 4, 29]
    static let cxxabi = [1, 3, 13]
    static let libraries: Set<String> = [
        "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
        "ld-linux-x86-64.so.2", "libgcc_s.so.1", "libstdc++.so.6",
    ]
    static let bundled: Set<String> = ["libsqlite3.so.0"]
    /// The floor's stand-ins (`Sources/LinuxSymbolFloor`): defined in the binary, never exported. Exported (these
    /// binaries link with --export-dynamic), the dynamic linker gave a stand-in's own call to the versioned function
    /// back to the stand-in, which recursed until the stack ran out.
    static let standIns: Set<String> = ["hypot", "hypotf", "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE"]

    /// Each symbol version above the floor (with one symbol that needs it) and each library outside it, from
    /// `objdump -T` and `readelf -d`.
    static func problems(dynamicSymbols: String, dynamicSection: String) -> [String] {
        var needs: [String: String] = [:]
        // The symbols a binary imports (`*UND*`), each with the version it needs, `(GLIBC_2.34)`.
        for line in dynamicSymbols.split(separator: "\n") where line.contains("*UND*") {
            let words = line.split(whereSeparator: \.isWhitespace)
            let name =
                words.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "()")) }
                .first { $0.hasPrefix("GLIBC") || $0.hasPrefix("CXXABI_") } ?? ""
            for (prefix, floor) in [("GLIBC_", glibc), ("GLIBCXX_", glibcxx), ("CXXABI_", cxxabi)]
            where name.hasPrefix(prefix) {
                let numbers = name.dropFirst(prefix.count).split(separator: ".").compactMap { Int($0) }
                if numbers.lexicographicallyPrecedes(floor) || numbers == floor { continue }
                if needs[name] == nil, let symbol = words.last { needs[name] = String(symbol) }
            }
        }
        var problems = needs.keys.sorted().map { "needs \($0) (\(needs[$0]!))" }
        for line in dynamicSymbols.split(separator: "\n") where !line.contains("*UND*") {
            if let symbol = line.split(whereSeparator: \.isWhitespace).last, standIns.contains(String(symbol)) {
                problems.append(
                    "exports the floor's stand-in \(symbol), which then answers its own call to the real one")
            }
        }
        for line in dynamicSection.split(separator: "\n") where line.contains("(NEEDED)") {
            guard let start = line.firstIndex(of: "["), let end = line.lastIndex(of: "]") else { continue }
            let library = String(line[line.index(after: start)..<end])
            if !libraries.contains(library) && !bundled.contains(library) {
                problems.append("links \(library), which is neither in the base image nor in the zip")
            }
        }
        return problems
    }
}
