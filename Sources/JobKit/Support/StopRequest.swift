import Dispatch
import Foundation
import Logging
import Synchronization

/// A request from outside a run to end it early and cleanly: an operator's Ctrl-C, or systemd, a container
/// runtime or a deploy stopping the service (SIGTERM, then SIGKILL after a grace period). The run claims
/// nothing more, lets what is already on its way be answered and recorded, and ends as a run whose time ran
/// out (75: the next run reminds the rest). Ended by the signal instead, the process would leave the answers
/// of every notification in flight unrecorded, and the run that takes its claims over would send them again.
public final class StopRequest: Sendable {
    private let state = Mutex<String?>(nil)

    /// The process's request made by its signals, once ``signals(logger:)`` has installed the handlers.
    private static let installed = Mutex<StopRequest?>(nil)
    /// The signal handlers: they last as long as the process. Written only under `installed`'s lock.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    private static let queue = DispatchQueue(label: "diary-push.stop-signals")

    public init() {}

    /// Why the run was asked to stop (`SIGTERM`, `SIGINT`); `nil` while it was not.
    public var reason: String? { state.withLock { $0 } }

    /// Asks the run to stop; returns false when it had been asked already.
    @discardableResult
    public func request(_ reason: String) -> Bool {
        state.withLock { current in
            guard current == nil else { return false }
            current = reason
            return true
        }
    }

    /// The request SIGTERM and SIGINT make, from now on: the first one is a request; a second one ends the
    /// process at once, as the signal does by default (an operator's second Ctrl-C). The handlers are installed
    /// at the first call, and every call returns the same request: a process that runs one job. A program that
    /// embeds JobKit keeps its own signals, and makes a ``StopRequest`` of its own to request at shutdown.
    /// `effect` is what the job does about the first signal, for the warning it logs.
    public static func signals(
        logger: Logger, effect: String = "claiming no more; what is on its way is finished and recorded"
    ) -> StopRequest {
        installed.withLock { current in
            if let current { return current }
            let stop = StopRequest()
            stop.install([(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")], logger: logger, effect: effect)
            current = stop
            return stop
        }
    }

    /// Makes `signals` requests to stop this run (the first one) or end the process (a second one). Returns once
    /// Dispatch has registered the sources: it does so later, on a thread of its own, and a signal that came
    /// before then met the `SIG_IGN` below and was lost (the run went on as if nobody had asked).
    func install(_ signals: [(number: Int32, name: String)], logger: Logger, effect: String) {
        let registered = DispatchSemaphore(value: 0)
        for (number, name) in signals {
            signal(number, SIG_IGN)
            // A queue of its own (an overcommitting one), not a global one: Dispatch gives it a thread even while
            // every thread of the global pool, the one Swift concurrency runs on, is blocked (in a write to a
            // full pipe, say).
            let source = DispatchSource.makeSignalSource(signal: number, queue: StopRequest.queue)
            source.setEventHandler { [self, source] in
                // Two signals may arrive as one event (`data` counts them) when this handler waits for a thread.
                if source.data == 1 && request(name) {
                    // Logged on a thread of its own: a log write that blocks must not hold up a second signal.
                    Thread.detachNewThread {
                        logger.warning(
                            "\(name): \(effect) (a second SIGTERM or SIGINT ends the process at once)")
                    }
                } else {
                    // The default action, from this thread: Dispatch may keep the signal blocked in its threads.
                    signal(number, SIG_DFL)
                    var set = sigset_t()
                    sigemptyset(&set)
                    sigaddset(&set, number)
                    pthread_sigmask(SIG_UNBLOCK, &set, nil)
                    raise(number)
                }
            }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            StopRequest.sources.append(source)
        }
        // A few milliseconds at most; bounded, so that a process whose Dispatch threads are starved still runs its
        // job (with the window open, as before).
        let deadline = DispatchTime.now() + .seconds(2)
        if !signals.allSatisfy({ _ in registered.wait(timeout: deadline) == .success }) {
            let names = signals.map(\.name).joined(separator: " and ")
            logger.warning("the \(names) handlers were not ready after 2 s: a signal until then is lost")
        }
    }
}
