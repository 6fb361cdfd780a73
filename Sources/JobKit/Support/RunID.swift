/// A run's id: a random (version 4) UUID in lower case, as `job_runs.id` and the logs carry it. Made from the
/// system's random generator (`getrandom`), not Foundation's `UUID()`, which on Linux opens and reads
/// `/dev/urandom` on every call: a system call per id that the API's hook paid on every request (BENCHMARKS.md#run-ids-and-api-keys,
/// "The HTTP API").
package enum RunID {
    package static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { text.append(UInt8(ascii: "-")) }
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
