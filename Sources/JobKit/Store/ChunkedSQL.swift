/// One statement over a variable number of rows (a multi-row INSERT, a VALUES list, an `IN (…)` list),
/// prepared for a few sizes only, so that every execution can use a cached prepared statement.
///
/// Preparing a statement of hundreds of rows costs far more than running it: it was a third of the
/// selection's time when each page prepared its own. Here `count` rows are split into chunks of the largest
/// size, then of the powers of two below it (a remainder of 37 rows runs as 32 + 4 + 1): at most one statement
/// per size is ever prepared, and a chunk never needs a statement of its own.
package struct ChunkedSQL: Sendable {
    /// Descending: the largest size, then every power of two below it, down to 1.
    package let sizes: [Int]
    /// `sql[i]` is the statement for `sizes[i]` rows.
    package let sql: [String]

    package init(largest: Int, _ make: (Int) -> String) {
        precondition(largest >= 1, "a chunk holds at least one row")
        var sizes = [largest]
        var power = 1
        while power * 2 < largest { power *= 2 }
        while power >= 1 {
            if power < largest { sizes.append(power) }
            power /= 2
        }
        self.sizes = sizes
        self.sql = sizes.map(make)
    }

    /// The statement for a chunk of `rows` rows, one of ``sizes``: the counterpart, in a second set made with
    /// the same largest size, of a chunk ``forEachChunk(of:_:)`` handed over.
    package func sql(rows: Int) -> String {
        guard let index = sizes.firstIndex(of: rows) else { preconditionFailure("no statement of \(rows) rows") }
        return sql[index]
    }

    /// Calls `body` for consecutive ranges covering `0..<count`, in order, each with its statement's SQL.
    package func forEachChunk(of count: Int, _ body: (Range<Int>, String) throws -> Void) rethrows {
        var start = 0
        var index = 0
        while start < count {
            while sizes[index] > count - start { index += 1 }
            let end = start + sizes[index]
            try body(start..<end, sql[index])
            start = end
        }
    }
}
