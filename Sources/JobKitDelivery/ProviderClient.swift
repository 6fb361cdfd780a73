import Foundation
import JobKit
import Logging
import NIOCore
import NIOSSL

/// How hard a run tries before leaving a notification to the next run.
package struct RetryPolicy: Sendable, Hashable {
    /// Attempts per notification, the first included.
    package var maxAttempts = 4
    /// First backoff; it doubles each attempt, with jitter (50–100 %).
    package var baseDelay: Duration = .milliseconds(250)
    package var maxDelay: Duration = .seconds(30)
    /// Time the sender may spend on retries in one run: after it, transient failures are left for the next
    /// run (the claim becomes `retry`).
    package var budget: Duration = .seconds(ConfigKey.retryBudgetSeconds.number!.default)
    /// Streams in flight per connection (the server's SETTINGS_MAX_CONCURRENT_STREAMS may lower it).
    package var streamsPerConnection = 256
    /// How long requests may wait in a provider's queue before a connection keeps fewer in flight (its
    /// ``StreamWindow``): every request the provider has accepted and not yet answered is one that a process
    /// killed at that instant leaves unrecorded, to be sent again. `nil`: always `streamsPerConnection`.
    package var providerQueueing: Duration? = .milliseconds(2)
    /// A request unanswered this long makes its connection send a PING. A connection that answers it is
    /// alive: the request is waited for up to three times this, then left for a later run (never resent at
    /// once, as the provider may still process it). A PING unanswered for twice this means the connection is
    /// dead, and its requests are resent on a new one.
    package var requestTimeout: Duration = .seconds(10)

    package init() {}

    /// The wait before attempt `attempt + 1`: the server's Retry-After when it gave one, else the backoff
    /// times `jitter` (drawn from 0.5…1.0, so that senders that failed together do not retry together).
    func delay(attempt: Int, retryAfter: Int?, jitter: Double) -> Duration {
        if let retryAfter { return .seconds(max(0, retryAfter)) }
        var delay = baseDelay
        for _ in 1..<max(1, attempt) { delay *= 2 }
        return min(delay, maxDelay) * min(1, max(0.5, jitter))
    }
}

/// The requests and answers of one provider, plugged into ``ProviderClient``.
struct ProviderProtocol: Sendable {
    let provider: Provider
    var name: String { provider.rawValue }
    var channel: DeliveryChannel { DeliveryChannel(provider) }
    let endpoint: @Sendable (Device) -> Endpoint
    /// The `authorization` header's value for a credential: built once per pass, not once per request.
    let authorization: @Sendable (_ credential: String) -> String
    let request: @Sendable (OutgoingNotification, _ authorization: String, _ authority: String) -> HTTP2Request
    let classify: @Sendable (HTTP2Response) -> ProviderVerdict
}

/// Sends to one provider over long-lived HTTP/2 connections, one per endpoint, and turns answers into
/// delivery reports: retries transient failures with backoff and jitter (honouring Retry-After) within the
/// run's budget, resends at once what the server did not process (GOAWAY), and judges a refused credential
/// by the credential the request carried: a refusal of a credential that is no longer current (another page
/// refreshed it meanwhile) or of a cached one resends with the current credential; only a refusal of a
/// credential obtained in answer to a refusal stops sending to this provider for the rest of the run.
actor ProviderClient {
    let provider: ProviderProtocol
    private let credential: SharedCredential
    private let tls: NIOSSLContext
    private let policy: RetryPolicy
    /// The clock of the retry budget and backoff waits, and the source of their jitter.
    private let clock: any RetryClock
    private let jitter: @Sendable () -> Double
    private let logger: Logger
    /// The provider's rate, and its pause after a "too many requests", shared by every page sent.
    private let pacer: ProviderPacer
    /// When the current run began (the retry budget counts from here) and when its sends must be answered.
    private var runStarted: ContinuousClock.Instant
    private var finishBy: ContinuousClock.Instant?
    private var connections: [Endpoint: HTTP2Connection] = [:]
    private var connecting: [Endpoint: Task<HTTP2Connection, any Error>] = [:]
    private var retired: [HTTP2Connection] = []
    /// Set when credentials failed after a refresh: nothing more is sent to this provider in this run.
    private var stopped: ProviderVerdict?
    /// Credentials obtained in answer to a refusal in this run: a refusal of one of these is final.
    private var replacements: Set<String> = []
    /// When a request of any send last got an answer: a pass whose requests were all unprocessed (GOAWAY) is
    /// not a stalled server while other sends on this client are being answered.
    private var lastAnswer: ContinuousClock.Instant
    /// When a dead-token answer that can also mean a misconfiguration is believed, and the run's counts it judges
    /// by: the provider's deliveries and such answers so far, over every send of the run.
    private let deadTokenGuard: DeadTokenGuard
    private var runDelivered = 0
    private var runSuspect = 0
    /// Whether this run already said that it holds devices (one line a run, not one a send).
    private var saidHeld = false

    init(
        provider: ProviderProtocol, credential: SharedCredential, tls: NIOSSLContext, policy: RetryPolicy,
        rate: ProviderRate? = nil, deadTokenGuard: DeadTokenGuard = .default,
        clock: any RetryClock = SystemRetryClock(),
        jitter: @escaping @Sendable () -> Double = { Double.random(in: 0.5...1.0) }, logger: Logger
    ) {
        self.clock = clock
        self.deadTokenGuard = deadTokenGuard
        self.jitter = jitter
        self.runStarted = clock.now
        self.lastAnswer = clock.now
        self.pacer = ProviderPacer(rate: rate, clock: clock)
        self.provider = provider
        self.credential = credential
        self.tls = tls
        self.policy = policy
        self.logger = logger
    }

    /// Sends `items`; each report that is final is handed to `finished`: an answer that settles it as soon as it
    /// is read, any other at the end of the pass that made it so (before any wait for a retry). Every report is
    /// returned as well.
    func send(_ items: [OutgoingNotification], finished: FinishedReports? = nil) async -> [DeliveryReport] {
        var reports = [DeliveryReport?](repeating: nil, count: items.count)
        var attempts = [Int](repeating: 0, count: items.count)
        var lastVerdict = [ProviderVerdict?](repeating: nil, count: items.count)
        var latency = [Int?](repeating: nil, count: items.count)
        var ambiguous = [Int](repeating: 0, count: items.count)
        var pending = Array(items.indices)
        // Passes in a row in which the server processed nothing (every stream refused or unsent).
        var stalledPasses = 0
        // Dead-token answers that may mean a misconfiguration: judged once the batch is done (``DeadTokenGuard``).
        var suspects: [(index: Int, verdict: ProviderVerdict)] = []

        var newlyFinished: [Int] = []

        func finish(_ i: Int, _ verdict: ProviderVerdict) {
            newlyFinished.append(i)
            reports[i] = Self.report(
                provider.channel, verdict, attempts: attempts[i], latencyMs: latency[i],
                ambiguous: ambiguous[i])
        }

        while !pending.isEmpty {
            if let verdict = stopped {
                for i in pending { finish(i, verdict) }
                break
            }
            let token: String
            do {
                token = try await credential.get().token
            } catch {
                stop(Self.verdict(forCredentialFailure: error))
                continue
            }
            let authorization = provider.authorization(token)
            let passStarted = clock.now
            var retryNow: [Int] = []
            var retryLater: [Int] = []
            var wait: Duration = .zero
            var refusedCredential = false

            func transient(_ i: Int, _ verdict: ProviderVerdict) {
                lastVerdict[i] = verdict
                let delay = policy.delay(attempt: attempts[i], retryAfter: verdict.retryAfter, jitter: jitter())
                let now = clock.now
                let answeredInTime = finishBy.map { now + delay + policy.requestTimeout * 3 < $0 } ?? true
                if attempts[i] < policy.maxAttempts && now - runStarted + delay < policy.budget && answeredInTime {
                    retryLater.append(i)
                    wait = max(wait, delay)
                } else {
                    finish(i, ProviderVerdict(.retryLater, reason: verdict.reason, scope: verdict.scope))
                }
            }

            for (endpoint, indices) in Dictionary(grouping: pending, by: { provider.endpoint(items[$0].device) }) {
                let connection: HTTP2Connection
                do {
                    connection = try await self.connection(to: endpoint)
                } catch {
                    // The cause (refused, DNS, a certificate whose host does not match) is the reason recorded and
                    // reported: it is what an operator needs to act on.
                    let reason = "connect failed: " + ConnectionErrorText.describe(error)
                    logger.warning(
                        "cannot connect",
                        metadata: [
                            "provider": "\(provider.name)", "endpoint": "\(endpoint)",
                            "error": "\(reason)",
                        ])
                    for i in indices {
                        attempts[i] += 1
                        transient(i, ProviderVerdict(.retryLater, reason: reason))
                    }
                    continue
                }
                let requests = indices.map { provider.request(items[$0], authorization, endpoint.authority) }
                let results: [Result<HTTP2Response, HTTP2StreamFailure>]
                if let finished {
                    // The event loop only hands the answers over (it is the send path's bottleneck); a child task
                    // classifies them and passes the final ones on while the rest are still in flight.
                    let (answers, handOver) = AsyncStream.makeStream(of: [(index: Int, response: HTTP2Response)].self)
                    let (attemptsBefore, ambiguousBefore) = (
                        indices.map { attempts[$0] }, indices.map { ambiguous[$0] }
                    )
                    async let reported: Void = Self.reportFinalAnswers(
                        answers, of: indices, provider: provider, attempts: attemptsBefore, ambiguous: ambiguousBefore,
                        finished: finished, pacer: pacer, logger: logger)
                    results = await Self.send(requests, on: connection, pacer: pacer) { handOver.yield($0) }
                    handOver.finish()
                    await reported
                } else {
                    results = await Self.send(requests, on: connection, pacer: pacer, onAnswers: nil)
                }
                // Why the connection closed (a certificate that was not accepted): the reason of what it failed.
                let closeCause =
                    results.contains { if case .failure(let failure) = $0 { failure != .timeout } else { false } }
                    ? await connection.closeCause : nil
                for (i, result) in zip(indices, results) {
                    switch result {
                    case .failure(.notProcessed):
                        if let closeCause {
                            lastVerdict[i] = ProviderVerdict(.retryLater, reason: "not processed: \(closeCause)")
                        }
                        retryNow.append(i)
                    case .failure(.timeout):
                        // The connection answers PINGs but not this request: the provider may still process it.
                        // Left for a later run rather than sent again now.
                        attempts[i] += 1
                        ambiguous[i] += 1
                        finish(
                            i,
                            ProviderVerdict(.retryLater, reason: "no answer by the deadline (may have been delivered)"))
                    case .failure(.connectionLost):
                        // Known dead (closed, or no PING answer): resent on a new connection.
                        attempts[i] += 1
                        ambiguous[i] += 1
                        transient(
                            i,
                            ProviderVerdict(
                                .retryLater, reason: "connection lost" + (closeCause.map { ": \($0)" } ?? "")))
                    case .failure(let failure):
                        attempts[i] += 1
                        transient(i, ProviderVerdict(.retryLater, reason: "\(failure)"))
                    case .success(let response):
                        attempts[i] += 1
                        latency[i] = Int(response.latency.nanoseconds / 1_000_000)
                        let verdict = provider.classify(response)
                        switch verdict.outcome {
                        case .tokenDead where verdict.mayBeSendersMistake:
                            runSuspect += 1
                            suspects.append((i, verdict))
                        case .delivered:
                            runDelivered += 1
                            finish(i, verdict)
                        case .tokenDead, .rejected:
                            finish(i, verdict)
                        case .retryLater:
                            if verdict.pausesProvider {
                                await Self.pause(pacer, for: verdict, provider: provider.name, logger: logger)
                            }
                            transient(i, verdict)
                        case .credentials:
                            lastVerdict[i] = verdict
                            if replacements.contains(token) || verdict.reason == "TooManyProviderTokenUpdates" {
                                finish(i, verdict)
                                stop(ProviderVerdict(.credentials, reason: verdict.reason ?? "credentials refused"))
                            } else {
                                refusedCredential = true
                                retryNow.append(i)
                            }
                        }
                    }
                }
            }
            if refusedCredential && stopped == nil {
                // Another page may have replaced the refused credential already: then that one is used, and no
                // second credential is minted.
                do {
                    let replacement = try await credential.get(rejected: token)
                    if replacements.insert(replacement.token).inserted {
                        logger.warning(
                            "provider refused the credential: using a new one",
                            metadata: ["provider": "\(provider.name)"])
                    }
                } catch {
                    stop(Self.verdict(forCredentialFailure: error, refreshing: true))
                }
            }
            // Unprocessed requests (GOAWAY, refused streams) go again at once on a new connection, for as long
            // as each pass gets some answered; a server that answers nothing is left for the next run.
            let answered = pending.count - retryNow.count
            if answered > 0 { lastAnswer = clock.now }
            stalledPasses = answered > 0 || refusedCredential || lastAnswer > passStarted ? 0 : stalledPasses + 1
            if !retryNow.isEmpty && stalledPasses > 3 {
                for i in retryNow { finish(i, lastVerdict[i] ?? ProviderVerdict(.retryLater, reason: "not processed")) }
                retryNow = []
            }
            if let finished, !newlyFinished.isEmpty && !(retryNow.isEmpty && retryLater.isEmpty) {
                // The batch is not done: what is final goes out now, not after the retries.
                let indices = newlyFinished
                newlyFinished = []
                finished(indices, indices.map { reports[$0]! })
            }
            if !retryLater.isEmpty && wait > .zero {
                await clock.sleep(for: wait)
            }
            pending = retryNow + retryLater
        }
        if !suspects.isEmpty {
            // Believed when the provider is otherwise healthy in the run so far; else the devices are kept, held.
            let believed = deadTokenGuard.believes(suspect: runSuspect, delivered: runDelivered)
            for (i, verdict) in suspects {
                finish(
                    i, believed ? verdict : ProviderVerdict(.retryLater, reason: verdict.reason, scope: .sender))
            }
            if !believed && !saidHeld {
                saidHeld = true
                logger.error(
                    "provider calls tokens dead for a reason that can mean this sender is set up wrong: devices kept and held, none deactivated",
                    metadata: [
                        "provider": "\(provider.name)", "reason": "\(suspects[0].verdict.reason ?? "")",
                        "such_answers": "\(runSuspect)", "delivered": "\(runDelivered)",
                    ])
            }
        }
        return reports.map {
            $0 ?? DeliveryReport(channel: provider.channel, outcome: .retryLater, reason: "not attempted")
        }
    }

    /// The report of a notification whose last attempt (of `attempts`) got `verdict`.
    private static func report(
        _ channel: DeliveryChannel, _ verdict: ProviderVerdict, attempts: Int, latencyMs: Int?,
        ambiguous: Int
    ) -> DeliveryReport {
        DeliveryReport(
            channel: channel, outcome: verdict.outcome, reason: verdict.reason,
            providerMessageID: verdict.providerMessageID, attempts: max(1, attempts), latencyMs: latencyMs,
            tokenInvalidSince: verdict.tokenInvalidSince, ambiguousAttempts: ambiguous, scope: verdict.scope)
    }

    /// Hands each answer of a pass that is final whatever else happens (delivered, a dead token, a rejected
    /// request) to `finished` as soon as it is read: the report is the one the pass makes of it afterwards
    /// (`finished` takes each index once). Answers that may lead to a retry or to a credential refresh wait for
    /// the pass, which decides. Returns when `answers` ends.
    /// - Parameters: `attempts`, `ambiguous`: the counts of the pass's notifications before it, in its order.
    private nonisolated static func reportFinalAnswers(
        _ answers: AsyncStream<[(index: Int, response: HTTP2Response)]>, of indices: [Int], provider: ProviderProtocol,
        attempts: [Int], ambiguous: [Int], finished: FinishedReports, pacer: ProviderPacer, logger: Logger
    ) async {
        for await batch in answers {
            var finals: [Int] = []
            var reports: [DeliveryReport] = []
            for (k, response) in batch {
                let verdict = provider.classify(response)
                switch verdict.outcome {
                case .tokenDead where verdict.mayBeSendersMistake:
                    // Judged when the batch is done (``DeadTokenGuard``): held or believed, never final yet.
                    continue
                case .delivered, .tokenDead, .rejected:
                    finals.append(indices[k])
                    reports.append(
                        report(
                            provider.channel, verdict, attempts: attempts[k] + 1,
                            latencyMs: Int(response.latency.nanoseconds / 1_000_000),
                            ambiguous: ambiguous[k]))
                case .retryLater:
                    // The provider's quota: the pause starts as soon as it is read, not when the pass ends.
                    if verdict.pausesProvider {
                        await pause(pacer, for: verdict, provider: provider.name, logger: logger)
                    }
                case .credentials:
                    continue
                }
            }
            if !finals.isEmpty { finished(finals, reports) }
        }
    }

    /// Sends `requests` on `connection` as fast as `pacer` lets them go: at once when it allows them all (no
    /// rate, or a small batch), else in slices sent as the rate allows, whose answers are awaited together. A
    /// request left unsent because the task was cancelled is not processed.
    private static func send(
        _ requests: [HTTP2Request], on connection: HTTP2Connection, pacer: ProviderPacer,
        onAnswers: HTTP2Batch.Answers?
    ) async -> [Result<HTTP2Response, HTTP2StreamFailure>] {
        let first = await pacer.take(requests.count)
        if first >= requests.count { return await connection.send(requests, onAnswers: onAnswers) }
        return await withTaskGroup(of: PacedSlice.self) { group in
            var start = 0
            var granted = first
            while start < requests.count && granted > 0 {
                let offset = start
                let slice = Array(requests[offset..<min(requests.count, offset + granted)])
                let shifted = onAnswers.map { answers -> HTTP2Batch.Answers in
                    { batch in answers(batch.map { (index: $0.index + offset, response: $0.response) }) }
                }
                group.addTask { PacedSlice(offset: offset, results: await connection.send(slice, onAnswers: shifted)) }
                start += slice.count
                if start < requests.count { granted = await pacer.take(requests.count - start) }
            }
            var results = [Result<HTTP2Response, HTTP2StreamFailure>](
                repeating: .failure(.notProcessed), count: requests.count)
            for await slice in group {
                for (k, result) in slice.results.enumerated() { results[slice.offset + k] = result }
            }
            return results
        }
    }

    /// Nothing more goes to this provider for the verdict's Retry-After (60 s when it gave none).
    private static func pause(_ pacer: ProviderPacer, for verdict: ProviderVerdict, provider: String, logger: Logger)
        async
    {
        let seconds = verdict.retryAfter ?? 60
        // One line when a pause starts, not one per answer that asks for it.
        if await pacer.pause(for: .seconds(seconds)) {
            logger.warning(
                "provider asks to slow down: pausing every send to it",
                metadata: ["provider": "\(provider)", "reason": "\(verdict.reason ?? "")", "seconds": "\(seconds)"])
        }
    }

    /// A new run on this client: a fresh retry budget and rate ramp, and a credential refusal of an earlier run
    /// forgotten (connections and the cached credential are kept).
    func beginRun(finishBy: ContinuousClock.Instant?) async {
        await pacer.restart()
        runStarted = clock.now
        self.finishBy = finishBy
        stopped = nil
        replacements = []
        runDelivered = 0
        runSuspect = 0
        saidHeld = false
    }

    /// Credentials minted for this provider by this process.
    var mints: Int { get async { await credential.mints } }

    private func stop(_ verdict: ProviderVerdict) {
        if stopped == nil {
            logger.error(
                "stopped sending to this provider for the rest of the run",
                metadata: [
                    "provider": "\(provider.name)", "reason": "\(verdict.reason ?? "")",
                ])
        }
        stopped = verdict
    }

    /// What a credential that could not be obtained means for the devices waiting on it: a refusal (of the
    /// key, the account) is a credentials problem; an endpoint that could not be reached or failed is the
    /// provider being unavailable — never a reason to doubt the key.
    static func verdict(forCredentialFailure error: JobError, refreshing: Bool = false) -> ProviderVerdict {
        let prefix = refreshing ? "credential refresh failed" : "credentials unavailable"
        let outcome: DeliveryOutcome = error.isUnavailable || error.isTemporary ? .retryLater : .credentials
        return ProviderVerdict(outcome, reason: "\(prefix): \(error.message)")
    }

    /// The endpoint's connection, opened if there is none or it can take no more requests. Sends may run
    /// concurrently (the run delivers one page while the next is claimed): they share one connection and
    /// one connection attempt.
    private func connection(to endpoint: Endpoint) async throws -> HTTP2Connection {
        if let existing = connections[endpoint] {
            if await existing.isUsable { return existing }
            // Another send may have replaced it while we asked.
            if connections[endpoint] === existing {
                // Not closed here: another send's streams may still be answered on it (after a GOAWAY the
                // server finishes those). It closes itself once they are; closed ones are forgotten here.
                connections[endpoint] = nil
                retired.removeAll { !$0.isOpen }
                retired.append(existing)
            }
        }
        if let current = connections[endpoint] { return current }
        if let opening = connecting[endpoint] { return try await opening.value }
        var options = HTTP2Connection.Options()
        options.streamCap = policy.streamsPerConnection
        options.requestTimeout = TimeAmount(policy.requestTimeout)
        options.queueing = policy.providerQueueing.map { TimeAmount($0) }
        let tls = self.tls
        let opening = Task { try await HTTP2Connection.connect(to: endpoint, tls: tls, options: options) }
        connecting[endpoint] = opening
        defer { connecting[endpoint] = nil }
        let connection = try await opening.value
        connections[endpoint] = connection
        return connection
    }

    func shutdown() async {
        for connection in connections.values { await connection.close() }
        for connection in retired { await connection.close() }
        connections.removeAll()
        retired.removeAll()
    }
}

/// Answers of the requests `offset…` of a paced send.
private struct PacedSlice: Sendable {
    let offset: Int
    let results: [Result<HTTP2Response, HTTP2StreamFailure>]
}

extension TimeAmount {
    /// `duration` in nanoseconds.
    init(_ duration: Duration) {
        self = .nanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}
