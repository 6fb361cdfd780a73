/// One of N slices of the users, by a stable hash of the user id (FNV-1a, the same in every process and
/// on every host): N hosts run the same job with `--shard 1/N` … `--shard N/N` and split the work.
/// Shards are an optimisation only: the claim (the log row's unique key) decides who sends, so
/// overlapping or misconfigured shards never send twice, and a missing shard only leaves its users to
/// a later run (or to an unsharded one).
package struct Shard: Sendable, Hashable, CustomStringConvertible {
    /// 1-based.
    package let index: Int
    package let count: Int

    /// Every user: the default.
    package static let all = Shard(index: 1, count: 1)

    package init(index: Int, count: Int) {
        precondition(count >= 1 && (1...count).contains(index))
        self.index = index
        self.count = count
    }

    /// Parses `K/N` with 1 ≤ K ≤ N ≤ 1024.
    package static func parse(_ text: String, source: String = "--shard") throws(JobError) -> Shard {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]), (1...1024).contains(count),
            (1...count).contains(index)
        else {
            let message = "\(source): expected K/N with 1 ≤ K ≤ N ≤ 1024 (e.g. 2/4), got \(text)"
            throw source.hasPrefix("--") ? .usage(message) : .config(message)
        }
        return Shard(index: index, count: count)
    }

    package func contains(userID: String) -> Bool {
        count == 1 || Self.index(of: userID, count: count) == index
    }

    /// The one of `count` shards that holds `userID`.
    package static func holding(userID: String, count: Int) -> Shard {
        Shard(index: index(of: userID, count: count), count: count)
    }

    private static func index(of userID: String, count: Int) -> Int {
        Int(StableHash.fnv1a(userID) % UInt64(count)) + 1
    }

    package var description: String { "\(index)/\(count)" }
}
