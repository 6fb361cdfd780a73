import GRDB
import GRDBSQLite
import JobKit

/// A GRDB-prepared (and cached) statement bound, stepped and read through SQLite's C API: for the run's bulk
/// statements only, hundreds of values per statement and thousands of statements per run.
///
/// GRDB's own path costs about half as much again as SQLite's work on those statements (BENCHMARKS.md#sqlites-bulk-statements):
/// arguments go through `StatementArguments` (a generic map over every value), are checked against the
/// parameter names, then bound; every row becomes a `Row` whose columns are decoded through protocols.
/// Here values are bound straight from ``DatabaseValue`` and columns are read by type. Errors are GRDB's
/// `DatabaseError`, as from GRDB itself. A statement's SQL used here is used only here: GRDB would not know
/// of the bindings made behind its back.
struct RawStatement {
    let statement: Statement
    private var handle: OpaquePointer { statement.sqliteStatement }

    init(_ statement: Statement) {
        self.statement = statement
    }

    /// Resets the statement and binds `values` to its parameters, in order; their count must match.
    func bind(_ values: [DatabaseValue]) throws {
        // A reset reports the previous step's error, already thrown by `step`.
        sqlite3_reset(handle)
        guard Int(sqlite3_bind_parameter_count(handle)) == values.count else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE,
                message: "wrong number of statement arguments: \(values.count)", sql: statement.sql)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value.storage {
            case .null:
                code = sqlite3_bind_null(handle, index)
            case .int64(let number):
                code = sqlite3_bind_int64(handle, index, number)
            case .double(let number):
                code = sqlite3_bind_double(handle, index, number)
            case .string(var text):
                code = text.withUTF8 { bytes in
                    guard let start = bytes.baseAddress else {
                        return sqlite3_bind_text(handle, index, "", 0, Self.transient)
                    }
                    return start.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                        sqlite3_bind_text(handle, index, $0, Int32(bytes.count), Self.transient)
                    }
                }
            case .blob(let data):
                code = data.withUnsafeBytes { bytes in
                    sqlite3_bind_blob(
                        handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                        Self.transient)
                }
            }
            guard code == SQLITE_OK else { throw error(code) }
        }
    }

    /// Steps to the end, calling `row` on each result row.
    func step(_ row: (RawRow) throws -> Void = { _ in }) throws {
        while true {
            let code = sqlite3_step(handle)
            switch code {
            case SQLITE_ROW: try row(RawRow(handle: handle))
            case SQLITE_DONE: return
            default: throw error(code)
            }
        }
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: String(cString: sqlite3_errmsg(sqlite3_db_handle(handle))), sql: statement.sql)
    }

    /// SQLite copies the bytes before the bind call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// The current row of a ``RawStatement``, read by column type; valid only inside `step`'s callback.
struct RawRow {
    let handle: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }

    func optionalInt(_ column: Int32) -> Int? { isNull(column) ? nil : int(column) }

    func bool(_ column: Int32) -> Bool { sqlite3_column_int64(handle, column) != 0 }

    /// A text column; `""` for NULL, so for NOT NULL columns only (``optionalString(_:)`` otherwise).
    func string(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalString(_ column: Int32) -> String? { isNull(column) ? nil : string(column) }
}
