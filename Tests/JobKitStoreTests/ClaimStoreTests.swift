import Foundation
import GRDB
import JobKitTestSupport
import Testing

@testable import JobKit
@testable import JobKitSQLite

/// The store's claim and record statements on their own, on both backends: many rows at once (several
/// multi-row chunks and a shorter last one), rows already in the log, a request named twice.
@Suite struct ClaimStoreTests {
    private let period = "2026-11-21"

    private func request(_ user: String, index: Int = 0) -> ClaimRequest {
        ClaimRequest(userID: user, type: .diaryReminder, period: period, messageIndex: index, locale: "en")
    }

    @Test(arguments: Backend.allCases)
    func claimsAndRecordsAreExactAcrossChunks(_ backend: Backend) async throws {
        let db = try await TemporaryDatabase(backend)
        let store = db.store
        let users = (0..<250).map { String(format: "u%03d", $0) }
        for user in users { try await store.addUser(user) }
        let devices = try await store.activeDevices(userIDs: users)
        func device(_ user: String) throws -> Int64 { try #require(devices[user]?.first).id }

        // Earlier runs left four users in the log: u000 to retry (one device already reached), u001 claimed
        // long ago (stale), u002 claimed by a run still going, u003 sent.
        let earlier = try await store.claim(
            ["u000", "u001", "u003"].map { request($0, index: 3) }, runID: "earlier",
            now: 1_000, staleBefore: 0)
        #expect(earlier.map(\.userID) == ["u000", "u001", "u003"])
        try await store.record(
            [
                DeliveryRecord(
                    logID: earlier[0].logID, deviceID: try device("u000"),
                    report: DeliveryReport(channel: .fcm, outcome: .delivered))
            ],
            resolutions: [
                ClaimResolution(logID: earlier[0].logID, period: earlier[0].period, status: .retry, detail: "later"),
                ClaimResolution(logID: earlier[2].logID, period: earlier[2].period, status: .sent, detail: nil),
            ],
            runID: "earlier", now: 1_100)
        let other = try await store.claim([request("u002")], runID: "other", now: 5_000, staleBefore: 0)
        #expect(other.count == 1)

        // This run: every user, u100 named twice.
        let claims = try await store.claim(
            users.map { request($0, index: 1) } + [request("u100", index: 2)],
            runID: "this", now: 6_000, staleBefore: 2_000)
        #expect(claims.map(\.userID) == users.filter { $0 != "u002" && $0 != "u003" })
        #expect(Set(claims.map(\.logID)).count == claims.count)
        let byUser = Dictionary(uniqueKeysWithValues: claims.map { ($0.userID, $0) })
        // Take-overs keep the first run's words and know which devices were reached.
        #expect(byUser["u000"]?.takenOver == true && byUser["u000"]?.messageIndex == 3)
        #expect(byUser["u000"]?.deliveredDeviceIDs == [try device("u000")])
        #expect(byUser["u001"]?.takenOver == true && byUser["u001"]?.deliveredDeviceIDs.isEmpty == true)
        #expect(byUser["u100"]?.takenOver == false && byUser["u100"]?.messageIndex == 1)
        #expect(claims.filter(\.takenOver).count == 2)
        #expect(try await db.count("SELECT count(*) FROM notification_logs") == 250)

        // Record: one delivery per claim (u050's token is dead), resolutions of three kinds, and one for the
        // other run's claim, which must stay as it is.
        var deliveries: [DeliveryRecord] = []
        var resolutions: [ClaimResolution] = []
        for (index, claim) in claims.enumerated() {
            let dead = claim.userID == "u050"
            deliveries.append(
                DeliveryRecord(
                    logID: claim.logID, deviceID: try device(claim.userID),
                    report: DeliveryReport(
                        channel: .fcm, outcome: dead ? .tokenDead : .delivered,
                        reason: dead ? "UNREGISTERED" : nil)))
            let status: ClaimStatus = index % 50 == 7 ? .retry : index % 50 == 8 ? .failed : .sent
            resolutions.append(
                ClaimResolution(
                    logID: claim.logID, period: claim.period, status: status, detail: status == .retry ? "later" : nil))
        }
        resolutions.append(ClaimResolution(logID: other[0].logID, period: other[0].period, status: .sent, detail: nil))
        try await store.record(deliveries, resolutions: resolutions, runID: "this", now: 6_100)

        #expect(try await db.count("SELECT count(*) FROM notification_deliveries WHERE run_id = 'this'") == 248)
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_deliveries WHERE run_id = 'this' AND outcome = 'token_dead'") == 1)
        #expect(try await db.count("SELECT count(*) FROM user_devices WHERE is_active = false") == 1)
        let retries = claims.indices.filter { $0 % 50 == 7 }.count
        let failures = claims.indices.filter { $0 % 50 == 8 }.count
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE status = 'retry' AND detail = 'later' AND run_id = 'this'"
            ) == retries)
        #expect(
            try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'failed' AND detail IS NULL")
                == failures)
        // u003 was sent by the earlier run; every claim of this run not retried or failed is sent.
        #expect(
            try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'sent'") == 1 + claims.count
                - retries - failures)
        #expect(
            try await db.count(
                "SELECT count(*) FROM notification_logs WHERE status = 'sent' AND \(db.epoch("finished_at")) = 6100")
                == claims.count - retries - failures)
        #expect(try await db.strings("SELECT status FROM notification_logs WHERE user_id = 'u002'") == ["claimed"])
        #expect(try await db.count("SELECT count(*) FROM notification_logs WHERE status = 'claimed'") == 1)
    }

    /// Rows are split into the largest chunk, then powers of two: every range in order, no gap, no overlap, and
    /// each with the statement written for its size.
    @Test func chunkedStatementsCoverEveryRowWithAFewSizes() {
        let chunks = ChunkedSQL(largest: 100) { "rows \($0)" }
        #expect(chunks.sizes == [100, 64, 32, 16, 8, 4, 2, 1])
        for count in [0, 1, 2, 37, 99, 100, 101, 237, 1_000] {
            var covered: [Range<Int>] = []
            chunks.forEachChunk(of: count) { range, sql in
                covered.append(range)
                #expect(sql == "rows \(range.count)")
            }
            #expect(
                covered.first?.lowerBound ?? 0 == 0 && covered.last?.upperBound ?? 0 == count, "\(count): \(covered)")
            #expect(
                zip(covered, covered.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound }, "\(count): \(covered)")
            #expect(covered.count == count / 100 + (count % 100).nonzeroBitCount, "\(count): \(covered)")
        }
        #expect(chunkSizes(ChunkedSQL(largest: 500) { _ in "" }, 737) == [500, 128, 64, 32, 8, 4, 1])
        #expect(ChunkedSQL(largest: 64) { _ in "" }.sizes == [64, 32, 16, 8, 4, 2, 1])
        #expect(ChunkedSQL(largest: 1) { _ in "" }.sizes == [1])
    }

    private func chunkSizes(_ chunks: ChunkedSQL, _ count: Int) -> [Int] {
        var sizes: [Int] = []
        chunks.forEachChunk(of: count) { range, _ in sizes.append(range.count) }
        return sizes
    }

    /// The bulk statements' C-level binding and reading: every storage class round-trips (text with non-ASCII
    /// characters and empty text included), a wrong number of values and a failing step throw GRDB's error.
    @Test func rawStatementsBindAndReadEveryKindOfValue() async throws {
        let db = try await TemporaryDatabase(.sqlite)
        try await db.sqlite.pool.write { db in
            try db.execute(sql: "CREATE TABLE t (a, b, c, d, e, f UNIQUE)")
            let insert = RawStatement(
                try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?) RETURNING a, b, c, d, e, f"))
            var rows: [[String]] = []
            let read = { (row: RawRow) in
                rows.append([
                    row.isNull(0) ? "null" : "?", String(row.int64(1)), row.string(2), row.string(3),
                    row.optionalString(4) ?? "nil", String(row.bool(5)),
                ])
            }
            try insert.bind([
                .null, 42.databaseValue, 2.5.databaseValue, "日記 ✓".databaseValue, "".databaseValue, 1.databaseValue,
            ])
            try insert.step(read)
            try insert.bind([
                .null, (-7).databaseValue, .null, Data([0x61, 0x62]).databaseValue, .null, 0.databaseValue,
            ])
            try insert.step(read)
            #expect(rows == [["null", "42", "2.5", "日記 ✓", "", "true"], ["null", "-7", "", "ab", "nil", "false"]])
            #expect(throws: DatabaseError.self) { try insert.bind([.null]) }
            try insert.bind([.null, 1.databaseValue, .null, .null, .null, 1.databaseValue])
            let failure = #expect(throws: DatabaseError.self) { try insert.step() }
            #expect(failure?.resultCode == .SQLITE_CONSTRAINT)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 2)
        }
    }
}
