import Foundation

/// Reminders sent with one message, and how many of their users wrote within 3 hours.
package struct MessageOutcome: Sendable, Hashable, Codable {
    package var sent: Int
    package var wrote: Int

    package init(sent: Int = 0, wrote: Int = 0) {
        self.sent = sent
        self.wrote = wrote
    }
}

/// One catalog message's counts: a row of ``DueSetSource/copyOutcomes(days:record:now:)``.
package struct CopyOutcomeRow: Sendable, Hashable {
    package let locale: String
    package let messageIndex: Int
    package let outcome: MessageOutcome

    package init(locale: String, messageIndex: Int, outcome: MessageOutcome) {
        self.locale = locale
        self.messageIndex = messageIndex
        self.outcome = outcome
    }
}

/// What a learned choice of one user's words needs: the counts by locale and message, and the user's recent
/// reminders (for the recency penalty).
package struct LearnedWords: Sendable {
    package let outcomes: [String: [Int: MessageOutcome]]
    package let history: ReminderHistory?

    package init(outcomes: [String: [Int: MessageOutcome]], history: ReminderHistory?) {
        self.outcomes = outcomes
        self.history = history
    }

    /// Message index → days since the user was last sent it, within ``CopyLearning/recentDays`` before `period`.
    package func recent(before period: String) -> [Int: Int] {
        guard let today = LocalDate(period), let history else { return [:] }
        var recent: [Int: Int] = [:]
        for reminder in history.reminders {
            guard let index = reminder.messageIndex, let date = LocalDate(reminder.period) else { continue }
            let days = today.daysSinceEpoch - date.daysSinceEpoch
            guard days >= 1 && days <= CopyLearning.recentDays else { continue }
            recent[index] = min(recent[index] ?? .max, days)
        }
        return recent
    }
}

/// Words that learn: which reminder message each user gets, chosen by Thompson sampling over each message's
/// "wrote within 3 hours" successes and failures. Free of I/O; the counts come from
/// ``DueSetSource/copyOutcomes(days:record:now:)``.
///
/// - A held-out share of users and days (``heldOutPercent``) keeps the uniform choice, so that the report's
///   comparison of the messages stays a randomised trial.
/// - The choice is a pure function of the seed, the user, the day and the counts, which are those of the UTC days
///   up to two days before the user's local day (``countedDays(for:)``): final before any zone's day begins, so a
///   run, a dry run and `--explain` on that day agree.
/// - Yesterday's message is never chosen; one sent in the week before is penalised, less the longer ago
///   (`1 − ½^(days − 1)`), as a "recovering" bandit does.
package struct CopyLearning: Sendable, Hashable {
    /// Percent of choices that stay uniform.
    package let heldOutPercent: Int
    package let seed: UInt64

    package static let defaultHeldOutPercent = 10
    /// The UTC days of counts a choice uses: a sliding window, so an old success fades and a run reads a bounded
    /// table.
    package static let windowDays = 28
    /// How far back the recency penalty looks.
    package static let recentDays = 7

    package init(heldOutPercent: Int = defaultHeldOutPercent, seed: UInt64 = 0) {
        self.heldOutPercent = heldOutPercent
        self.seed = seed
    }

    /// The UTC days whose counts the choice for local day `period` uses: the ``windowDays`` ending two days before.
    package static func countedDays(for period: String) -> [String] {
        guard let date = LocalDate(period) else { return [] }
        return (2..<(2 + windowDays)).map { date.adding(days: -$0).description }.reversed()
    }

    /// The counts of a period by locale (lower-cased, as the catalog keys them) and message.
    package static func byLocale(_ rows: [CopyOutcomeRow]) -> [String: [Int: MessageOutcome]] {
        var outcomes: [String: [Int: MessageOutcome]] = [:]
        for row in rows {
            outcomes[row.locale.lowercased(), default: [:]][row.messageIndex, default: MessageOutcome()].sent +=
                row.outcome.sent
            outcomes[row.locale.lowercased(), default: [:]][row.messageIndex, default: MessageOutcome()].wrote +=
                row.outcome.wrote
        }
        return outcomes
    }

    /// Whether this user's choice on this day is held out (uniform).
    package func isHeldOut(userID: String, period: String) -> Bool {
        // Mixed: FNV-1a's low bits follow the text's last bytes, which the uniform choice's hash shares, and 100 is a
        // multiple of 4; unmixed, the held-out users' uniform words were skewed (the chi-square test).
        var random = SplitMix64(seed: StableHash.fnv1a("held-out|\(seed)|\(userID)|\(period)"))
        return Int(random.next() % 100) < heldOutPercent
    }

    /// The learned choice among `count` messages: the largest of one draw from each message's Beta posterior,
    /// penalised for recent use; never `previous` (when there is another).
    /// - Parameter recent: message index → days since the user was last sent it (≥ 1).
    package func choose(
        count: Int, outcomes: [Int: MessageOutcome], previous: Int?, recent: [Int: Int], userID: String, period: String
    ) -> Int {
        var random = SplitMix64(seed: StableHash.fnv1a("learn|\(seed)|\(userID)|\(period)"))
        return Self.bestDraw(count: count, outcomes: outcomes, using: &random) { index in
            if index == previous && count > 1 { return nil }
            guard let days = recent[index], days >= 1 else { return 1 }
            return 1 - pow(0.5, Double(days - 1))
        }
    }

    /// One draw from each message's Beta posterior, times its `weight` (`nil`: drawn, then set aside, so that the
    /// others' draws do not depend on it); the index of the largest.
    static func bestDraw(
        count: Int, outcomes: [Int: MessageOutcome], using random: inout SplitMix64, weight: (Int) -> Double?
    ) -> Int {
        var best = 0
        var bestValue = -Double.infinity
        for index in 0..<count {
            let outcome = outcomes[index] ?? MessageOutcome()
            let draw = random.beta(Double(1 + outcome.wrote), Double(1 + max(0, outcome.sent - outcome.wrote)))
            guard let factor = weight(index) else { continue }
            if draw * factor > bestValue {
                bestValue = draw * factor
                best = index
            }
        }
        return best
    }

    /// Each message's chance of being chosen now, held-out share included (ignoring yesterday's and the recency
    /// penalty, which depend on the user): the share of `draws` posterior draws it wins, from a fixed seed.
    package func chances(count: Int, outcomes: [Int: MessageOutcome], draws: Int = 4000) -> [Double] {
        guard count > 0 else { return [] }
        var random = SplitMix64(seed: StableHash.fnv1a("chances|\(seed)"))
        var wins = Array(repeating: 0, count: count)
        for _ in 0..<draws {
            wins[Self.bestDraw(count: count, outcomes: outcomes, using: &random) { _ in 1 }] += 1
        }
        let held = Double(heldOutPercent) / 100
        return wins.map { held / Double(count) + (1 - held) * Double($0) / Double(draws) }
    }
}

/// The Beta draws Thompson sampling needs, on the seeder's deterministic generator.
extension SplitMix64 {
    /// Uniform in (0, 1).
    mutating func unit() -> Double { (Double(next() >> 11) + 0.5) / Double(1 << 53) }

    /// A standard normal draw (Box–Muller).
    mutating func normal() -> Double {
        sqrt(-2 * log(unit())) * cos(2 * .pi * unit())
    }

    /// A Gamma(shape, 1) draw (Marsaglia and Tsang; shape ≥ 1, as every Beta(1 + …, 1 + …) here has).
    mutating func gamma(_ shape: Double) -> Double {
        let d = shape - 1.0 / 3
        let c = 1 / sqrt(9 * d)
        while true {
            var x: Double
            var v: Double
            repeat {
                x = normal()
                v = 1 + c * x
            } while v <= 0
            v = v * v * v
            let u = unit()
            if u < 1 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1 - v + log(v)) { return d * v }
        }
    }

    /// A Beta(a, b) draw.
    mutating func beta(_ a: Double, _ b: Double) -> Double {
        let x = gamma(a)
        return x / (x + gamma(b))
    }
}
