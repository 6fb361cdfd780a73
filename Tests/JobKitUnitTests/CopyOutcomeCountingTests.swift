import Testing

@testable import JobKit

/// The plan both stores run to count the learned words (``CopyOutcomeCounting``); the stores' own runs of it are in
/// `LearnedWordsTests`.
@Suite struct CopyOutcomeCountingTests {
    @Test func onlyTheDaysNotYetCountedCostAStepAndOnlyARecordingRunMarksThem() {
        let days = ["2026-11-19", "2026-11-20", "2026-11-21"]
        let dry = CopyOutcomeCounting(.sqlite, days: days, record: false, now: 1_000)
        let steps = dry.steps(counted: ["2026-11-20"])
        #expect(steps.count == 2)
        #expect(steps.allSatisfy { if case .read = $0 { true } else { false } })

        let recording = CopyOutcomeCounting(.postgres, days: days, record: true, now: 1_000)
        let marks = recording.steps(counted: ["2026-11-19"]).compactMap { step -> String? in
            if case .record(let mark, _) = step { mark } else { nil }
        }
        #expect(marks.count == 2)
        #expect(marks[0].contains("('2026-11-20', to_timestamp(1000))"))
        #expect(marks[1].contains("'2026-11-21'"))
        #expect(recording.steps(counted: Set(days)).isEmpty)
    }

    @Test func whatIsNotADayNeverReachesTheSQL() {
        let counting = CopyOutcomeCounting(
            .sqlite, days: ["2026-11-20", "x'); DROP TABLE users; --"], record: true, now: 0)
        #expect(counting.days.map(\.description) == ["2026-11-20"])
        #expect(counting.countedSQL == "SELECT day FROM copy_outcome_days WHERE day IN ('2026-11-20')")
        #expect(!(counting.totalsSQL ?? "").contains("DROP"))
        let none = CopyOutcomeCounting(.postgres, days: ["not a day"], record: false, now: 0)
        #expect(none.countedSQL == nil && none.totalsSQL == nil && none.steps(counted: []).isEmpty)
    }
}
