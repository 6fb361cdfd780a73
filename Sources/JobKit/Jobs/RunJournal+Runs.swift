import Foundation
import Logging

extension RunJournal {
    /// Journals a run as `running` before it claims or changes anything. Its end replaces the row (the same id);
    /// a run killed outright (SIGKILL, out of memory, the host going down) cannot record its end, and this row is
    /// what the health report then shows of it.
    func recordRunStart(id: String, job: String, runAt: Int64, summary: some JobSummary) async throws(JobError) {
        try await recordRun(
            id: id, job: job, runAt: runAt, durationMs: nil, outcome: .running, summaryJSON: summary.json)
    }

    /// Ends as `failed` each earlier run of `job` that has recorded no end though its claims' lease
    /// (`leaseSeconds` after its instant) is out, and says so in an error line each: a run records its last answer
    /// before then (``Deadline/toRecord(claimLeaseSeconds:finishBy:on:)``), so such a run was killed or lost, and
    /// the process that ran it could tell nobody. Best effort, like the run's other upkeep: a failure is logged and
    /// the run goes on. Returns how many runs it ended.
    func failRunsWithoutEnd(job: String, now: Int64, leaseSeconds: Int64, logger: Logger) async -> Int {
        let error =
            "no end recorded within the claims' lease (\(leaseSeconds) s): the run was killed or lost (SIGKILL, out of "
            + "memory, the host going down); the runs after it take its claims over once their lease is out"
        do throws(JobError) {
            let ended = try await failRunsWithoutEnd(job: job, before: now - leaseSeconds, error: error)
            for run in ended {
                logger.error(
                    """
                    an earlier run recorded no end within the claims' lease: killed or lost (SIGKILL, out of memory, \
                    the host going down); recorded as failed
                    """,
                    metadata: ["earlier_run": "\(run.id)", "earlier_run_at": "\(Timestamps.format(run.runAt))"])
            }
            return ended.count
        } catch {
            logger.warning(
                "earlier runs without an end were not looked for", metadata: ["error": "\(error.message)"])
            return 0
        }
    }

    /// Records a run that an error ended as `failed`, with `summary` (what it did by then, and the error), so that
    /// `job_runs` and the health report show it: otherwise the run before stays its job's last run, as if this
    /// one had not happened. Best effort: the store that just failed may fail again, or still be locked when
    /// `recordDeadline` has passed (then no attempt is made, since waiting would outlast a Lambda's deadline or
    /// the claims' lease). Either is logged, never thrown over the run's own error.
    func recordFailedRun(
        id: String, job: String, runAt: Int64, summary: some JobSummary, recordDeadline: Deadline? = nil,
        logger: Logger
    ) async {
        guard recordDeadline?.hasPassed != true else {
            logger.warning("the failed run is not recorded in job_runs: no time left to record")
            return
        }
        do throws(JobError) {
            try await recordRun(
                id: id, job: job, runAt: runAt, durationMs: summary.durationMs, outcome: .failed,
                summaryJSON: summary.json)
        } catch {
            logger.warning(
                "the failed run could not be recorded in job_runs", metadata: ["error": "\(error.message)"])
        }
    }
}
