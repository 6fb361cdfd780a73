import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import JobKit

/// A read a signal interrupts is retried, not a crash (Foundation's `availableData` stopped a CI run so) nor an
/// error.
@Suite struct FileDescriptorReadTests {
    @Test func aSignalDuringAReadIsRetriedAndTheBytesStillArrive() throws {
        // A handler installed without SA_RESTART, so that the blocked read(2) returns EINTR.
        var action = sigaction()
        #if os(Linux)
            action.__sigaction_handler.sa_handler = { _ in }
        #else
            action.__sigaction_u.__sa_handler = { _ in }
        #endif
        action.sa_flags = 0
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        #expect(sigaction(SIGWINCH, &action, &previous) == 0)
        defer { sigaction(SIGWINCH, &previous, nil) }

        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { close(readEnd) }

        let reader = NIOLockedValueBox<pthread_t?>(nil)
        let outcome = NIOLockedValueBox<Result<Data, JobError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            // Threads started from the concurrency pool inherit its mask, which blocks the signal.
            var only = sigset_t()
            sigemptyset(&only)
            sigaddset(&only, SIGWINCH)
            pthread_sigmask(SIG_UNBLOCK, &only, nil)
            reader.withLockedValue { $0 = pthread_self() }
            outcome.withLockedValue { $0 = Result { () throws(JobError) in try FileDescriptorRead.toEnd(readEnd) } }
            done.signal()
        }
        while reader.withLockedValue({ $0 }) == nil { usleep(1_000) }
        let thread = reader.withLockedValue { $0! }
        // Interrupt the blocked read several times, then give it its bytes and the end.
        for _ in 0..<5 {
            usleep(20_000)
            #expect(pthread_kill(thread, SIGWINCH) == 0)
        }
        let bytes = Array("after the signals".utf8)
        #expect(write(writeEnd, bytes, bytes.count) == bytes.count)
        close(writeEnd)
        #expect(done.wait(timeout: .now() + 10) == .success)
        let data = try #require(outcome.withLockedValue { $0 }).get()
        #expect(String(decoding: data, as: UTF8.self) == "after the signals")
    }

    @Test func aClosedDescriptorIsAnInputErrorThatSaysWhy() {
        #expect(throws: JobError.self) { try FileDescriptorRead.some(-1) }
        do {
            _ = try FileDescriptorRead.some(-1)
        } catch {
            #expect(error.message == "Bad file descriptor")
            #expect(error.exitCode == 66)
        }
    }
}
