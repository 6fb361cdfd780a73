import JobKit
import Logging

// The wiring of each job, in one place: the command-line executables, the Lambda runtime loop and a Swift
// backend that runs a job in-process all build their handlers here, from the same settings (the `PUSH_*`
// variables through a `ConfigResolver`, and for the CLI its flags on top).

extension DeliveryConfiguration {
    /// Fails unless something can deliver: a configured provider or an outbox file.
    package func requireDelivery(outbox: String?) throws(JobError) {
        if outbox == nil && !hasProvider {
            throw .config(
                "no provider configured: set the PUSH_APNS_* and/or PUSH_FCM_* variables (docs/CONFIGURATION.md), pass --outbox PATH, or use --dry-run"
            )
        }
    }

    /// Validation (FCM's `validate_only`) needs FCM.
    func requireFCMForValidation() throws(JobError) {
        guard fcm != nil else { throw .config("--validate-only needs FCM (PUSH_FCM_SERVICE_ACCOUNT_FILE)") }
    }

    /// The janitor's probes are FCM validation requests.
    package func requireFCMForProbes() throws(JobError) {
        guard fcm != nil else { throw .config("--probe needs FCM (PUSH_FCM_SERVICE_ACCOUNT_FILE)") }
    }

    /// The sender of a run that delivers: the outbox file when one is named, else the providers (a provider
    /// left unconfigured is logged once: its devices are skipped).
    package func sender(outbox: String?, credentials: any CredentialStore, logger: Logger) async throws(JobError)
        -> any Sender
    {
        if let outbox { return try OutboxSender(path: outbox) }
        let push = try await PushSender(configuration: self, credentials: credentials, logger: logger)
        for provider in Provider.allCases where !configuredProviders.contains(provider) {
            logger.warning(
                "provider not configured: its devices are skipped",
                metadata: ["provider": "\(provider.descriptor.name)"])
        }
        return push
    }
}

/// How a job's notifications leave: what the command line's `--dry-run`, `--explain`, `--validate-only` and
/// `--outbox` choose, and what a Swift backend passes to run a job the same way.
package enum DeliveryMode: Sendable {
    /// To the configured providers, or into the outbox file when one is named.
    case deliver(outbox: String?)
    /// Nothing is sent: each notification a run with `outbox` would send is printed to `sink`. Devices of a
    /// provider that run could not deliver to are skipped, as that run would.
    case dryRun(outbox: String?, sink: any LineSink, json: Bool)
    /// FCM's `validate_only`: FCM checks each token and payload and delivers nothing; each outcome is printed
    /// to `sink`. APNs devices are skipped (APNs has no such mode).
    case validateOnly(sink: any LineSink, json: Bool)
}

extension DeliveryConfiguration {
    /// The sender for `mode`: the one place that chooses among the providers, the outbox, the dry run and
    /// validation. The caller owns it and calls ``Sender/shutdown()``.
    package func sender(for mode: DeliveryMode, credentials: any CredentialStore, logger: Logger) async throws(JobError)
        -> any Sender
    {
        switch mode {
        case .deliver(let outbox):
            return try await sender(outbox: outbox, credentials: credentials, logger: logger)
        case .dryRun(let outbox, let sink, let json):
            return DryRunSender(sink: sink, json: json, providers: deliverableProviders(outbox: outbox, logger: logger))
        case .validateOnly(let sink, let json):
            try requireFCMForValidation()
            var fcmOnly = self
            fcmOnly.apns = nil
            let push = try await fcmOnly.sender(outbox: nil, credentials: credentials, logger: logger)
            return ReportingSender(inner: push, sink: sink, json: json)
        }
    }
}

extension DeliveryMode {
    /// The mode an invocation's flags choose: `--validate-only` asks FCM, `--dry-run` and `--explain` print,
    /// anything else delivers (into `outbox` when one is named).
    package static func chosen(
        dryRun: Bool, explain: Bool, validateOnly: Bool, outbox: String?, sink: any LineSink, json: Bool
    ) -> DeliveryMode {
        if validateOnly { return .validateOnly(sink: sink, json: json) }
        if dryRun || explain { return .dryRun(outbox: outbox, sink: sink, json: json) }
        return .deliver(outbox: outbox)
    }

    /// True for an operator's question (a dry run, `--explain`, `--validate-only`): it claims and delivers
    /// nothing, and neither pings the heartbeat nor replaces the scheduled run's metrics.
    package var isQuestion: Bool {
        if case .deliver = self { false } else { true }
    }

    /// How the store is opened: read-only for a preview; validation caches the FCM access token it mints, the
    /// only write it makes.
    package var storeMode: StoreOpenMode {
        if case .dryRun = self { .readOnly } else { .readWrite }
    }

    /// What must hold before the store is opened: something that can deliver, and readable key files (a
    /// preview needs neither; validation needs FCM).
    package func check(_ delivery: DeliveryConfiguration) async throws(JobError) {
        switch self {
        case .deliver(let outbox):
            try delivery.requireDelivery(outbox: outbox)
        case .validateOnly:
            try delivery.requireFCMForValidation()
        case .dryRun:
            return
        }
        try await delivery.checkFiles()
    }
}

extension DeliveryConfiguration {
    /// The providers a run with this configuration delivers to: all of them into an outbox, else the
    /// configured ones. A configuration with none (an operator's dry run on a machine without keys) is
    /// previewed as if both were configured, and says so.
    package func deliverableProviders(outbox: String?, logger: Logger) -> Set<Provider>? {
        if outbox != nil { return nil }
        guard hasProvider else {
            logger.notice(
                "no provider configured: --dry-run and --explain assume APNs and FCM both are (a real run needs one)")
            return nil
        }
        return configuredProviders
    }
}

extension CopyCatalog {
    /// The catalog `--copy-catalog`/`PUSH_COPY_CATALOG` names, checked; the built-in one otherwise.
    package static func resolve(_ config: ConfigResolver, flag: String? = nil) throws(JobError) -> CopyCatalog {
        try config.string(.copyCatalog, flag: flag).map { path throws(JobError) in try CopyCatalog.load(path: path) }
            ?? .builtIn
    }
}

extension DiaryReminderHandler.Settings {
    /// The run settings from flags (`nil`: not given) and the environment.
    package static func resolve(
        _ config: ConfigResolver, earlyMinutes: Int? = nil, catchUpMinutes: Int? = nil,
        claimLeaseMinutes: Int? = nil, pauseAfterIgnored: Int? = nil, shard: String? = nil
    ) throws(JobError) -> Self {
        var settings = Self()
        settings.rule = try DueRule(
            earlyMinutes: config.integer(.earlyMinutes, flag: earlyMinutes),
            catchUpMinutes: config.integer(.catchUpMinutes, flag: catchUpMinutes))
        settings.shard =
            try config.raw(.shard, flag: shard).map { raw throws(JobError) in
                try Shard.parse(raw.value, source: raw.source)
            } ?? .all
        settings.claimLeaseSeconds =
            Int64(try config.integer(.claimLeaseMinutes, flag: claimLeaseMinutes)) * 60
        settings.pause = try ReminderPause(afterIgnored: config.integer(.pauseAfterIgnored, flag: pauseAfterIgnored))
        return settings
    }
}

extension DiaryReminderHandler {
    /// The reminder job from its settings alone (no flags): the handler a Lambda execution environment or a
    /// Swift backend serves. Everything is checked now — settings, catalog, key files — so a mistake fails
    /// at start-up, not at the first scheduled run. The caller owns `store` and calls ``shutdown()``.
    package static func make(_ config: ConfigResolver, store: any JobStore, logger: Logger) async throws(JobError)
        -> DiaryReminderHandler
    {
        let settings = try Settings.resolve(config)
        let catalog = try CopyCatalog.resolve(config)
        let delivery = try DeliveryConfiguration.resolve(config, flags: DeliveryFlags()).sharing(settings.shard)
        let outbox = config.string(.outbox)
        try delivery.requireDelivery(outbox: outbox)
        try await delivery.checkFiles()
        let sender = try await delivery.sender(outbox: outbox, credentials: store, logger: logger)
        return DiaryReminderHandler(
            runner: DiaryReminderRunner(store: store, sender: sender, catalog: catalog, logger: logger),
            settings: settings)
    }
}

extension ContentLimitHookHandler {
    /// The hook with its delivery already resolved. The store is read first; the catalog and the sender are
    /// made only when a warning is sent (most writes send nothing and pay for neither).
    package static func make(
        _ config: ConfigResolver, delivery: DeliveryConfiguration, outbox: String?, store: any JobStore,
        logger: Logger, dryRun: Bool = false, explain: Bool = false
    ) -> ContentLimitHookHandler {
        let catalogPath = config.string(.copyCatalog)
        let senders = LazySender { () async throws(JobError) -> any Sender in
            if let outbox { return try OutboxSender(path: outbox) }
            // PushSender loads and checks the same keys and CA files (checkFiles() first would do it all twice).
            return try await PushSender(configuration: delivery, credentials: store, logger: logger)
        }
        let hook = ContentLimitHook(
            store: store, logger: logger,
            loadCatalog: { () throws(JobError) -> CopyCatalog in
                try catalogPath.map { path throws(JobError) in try CopyCatalog.load(path: path) } ?? .builtIn
            }, makeSender: { () async throws(JobError) -> any Sender in try await senders.get() })
        return ContentLimitHookHandler(hook: hook, senders: senders, dryRun: dryRun, explain: explain)
    }

    /// The hook from its settings alone (no flags): the handler a Lambda execution environment or a Swift
    /// backend serves, checked now (provider settings and key files, the catalog) so that a mistake fails at
    /// start-up rather than on the first write that warns. The caller owns `store` and calls ``shutdown()``.
    package static func make(_ config: ConfigResolver, store: any JobStore, logger: Logger) async throws(JobError)
        -> ContentLimitHookHandler
    {
        let delivery = try DeliveryConfiguration.resolve(config, flags: DeliveryFlags())
        let outbox = config.string(.outbox)
        if outbox == nil {
            guard delivery.hasProvider else {
                throw .config("no provider configured: set the PUSH_APNS_* and/or PUSH_FCM_* variables, or PUSH_OUTBOX")
            }
            try await delivery.checkFiles()
        }
        _ = try CopyCatalog.resolve(config)
        return make(config, delivery: delivery, outbox: outbox, store: store, logger: logger)
    }
}

extension TokenJanitorHandler {
    /// The janitor with its providers resolved (FCM only: probes are FCM validate-only sends). The sender is
    /// made on the first probe.
    package static func make(
        _ providers: DeliveryConfiguration, store: any JobStore, logger: Logger,
        base: JanitorOptions
    ) -> TokenJanitorHandler {
        let senders = LazySender { () async throws(JobError) -> any Sender in
            try providers.requireFCMForProbes()
            return try await PushSender(configuration: providers, credentials: store, logger: logger)
        }
        let janitor = TokenJanitor(store: store, logger: logger) { () async throws(JobError) -> any Sender in
            try await senders.get()
        }
        return TokenJanitorHandler(janitor: janitor, senders: senders, base: base)
    }

    /// The janitor from its settings alone: the documented defaults, `PUSH_SHARD`, and per run the
    /// scheduled event's `detail` (`{"probe": true}`, `{"stale_days": 60}`, …).
    package static func make(_ config: ConfigResolver, store: any JobStore, logger: Logger) async throws(JobError)
        -> TokenJanitorHandler
    {
        var flags = DeliveryFlags()
        flags.validateOnly = true
        var providers = try DeliveryConfiguration.resolve(config, flags: flags)
        providers.apns = nil
        if providers.fcm != nil { try await providers.checkFiles() }
        var base = JanitorOptions(now: 0)
        base.shard =
            try config.raw(.shard, flag: nil).map { raw throws(JobError) in
                try Shard.parse(raw.value, source: raw.source)
            } ?? .all
        return make(providers, store: store, logger: logger, base: base)
    }
}

/// A job handler that its settings alone build: what ``JobService`` serves in a Swift backend and the Lambda
/// runtime loop serves in an execution environment.
package protocol ServedJob: JobHandler {
    /// The job's name in logs, metrics and PostgreSQL's `application_name`.
    static var jobName: String { get }
    /// The handler from the `PUSH_*` settings, everything checked now; the caller owns `store`.
    static func make(_ config: ConfigResolver, store: any JobStore, logger: Logger) async throws(JobError) -> Self
}

extension DiaryReminderHandler: ServedJob {
    package static var jobName: String { DiaryReminderRunner.jobName }
}

extension ContentLimitHookHandler: ServedJob {
    package static var jobName: String { ContentLimitHook.jobName }
}

extension TokenJanitorHandler: ServedJob {
    package static var jobName: String { TokenJanitor.jobName }
}
